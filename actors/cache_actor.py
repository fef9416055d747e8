"""First-round reply cache: one reply per identical first-round request, shared by runs.

Li et al. (sparse topology), sec. 4.5 "Variance Reduction": "most of the variance arises from
the first round of individual responses, we first generate a set of initial agent responses and
then fix them in all subsequent debate processes across various communication topology
designs" (conditional variance reduction, Ross 2002). A sweep's cells (``debate sweep``) or
``debate run --reuse-first-round`` do this with one :class:`CacheActor` per
:class:`actors.driver.DebateRunner`: an agent asks the cache before it sends a round-0 request to its
replica; the first asker generates, everyone else with the same key gets that reply.

The key (:func:`first_round_key`) is the sha256 of the JSON of everything that decides the
reply: the chat messages (question text, system prompt and first-round prompt are in them), the
sampling parameters (temperature, top_p, max_tokens), the per-request seed, the agent's model and
a *namespace* naming the serving replica (backend and backend options, e.g. the simulated
model's accuracy), plus ``GenRequest.meta`` (only the simulated backend reads it). Our backends
seed every request, so a cache hit returns exactly the text the replica would have produced:
reuse saves compute and gives identical results.

Paper is vague on how fixed first rounds are accounted; we choose: a reused call is recorded
like a generated one (same text, the original's prompt/completion token counts and latency)
with ``reused=True``, so every run's cost is the cost it would have had on its own, and the
flag says which calls were not sent to a model. Its ``cached_prompt_tokens`` is null (unknown),
not the original's: no request was made, so no prefix cache served it, and how much the
original's cache held depended on that run's other calls. Run totals of cached prompt tokens
therefore count only the calls that were sent. Failed generations (``error`` set) are never
cached, so a transient failure is not replayed into other runs.

In-flight dedup: :meth:`ReplyCache.acquire` returns a cached reply, or ``None`` to the first
caller of a key, who then owns it and must :meth:`~ReplyCache.put` a result (or ``None`` on
failure); callers arriving meanwhile wait for that ``put``. If the owner fails, the next waiter
becomes the owner; if it never answers (its process died), a waiter takes over after
``takeover_s``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

from actors.remote import actor
from engine.records import GenRequest, GenResult


def first_round_key(req: GenRequest, model: str, namespace: str = "") -> str:
    """sha256 (hex) of the JSON of the request's messages, sampling parameters, seed, model,
    replica namespace and simulator meta (see the module docstring)."""
    payload = {
        "namespace": namespace,
        "model": model,
        "messages": req.messages,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "max_tokens": req.max_tokens,
        "seed": req.seed,
        "meta": req.meta,
    }
    blob = json.dumps(payload, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ReplyCache:
    """The cache without Ray: a dict key -> GenResult plus one asyncio.Event per key in flight.

    All methods must run on one event loop (the actor's)."""

    def __init__(self, takeover_s: float = 600.0):
        self.takeover_s = takeover_s
        self._store: dict[str, GenResult] = {}
        self._inflight: dict[str, asyncio.Event] = {}
        self.stats = {"hits": 0, "misses": 0, "waits": 0, "puts": 0, "failed": 0, "takeovers": 0}

    def __len__(self) -> int:
        return len(self._store)

    def get(self, key: str) -> GenResult | None:
        """The cached reply, or None (never waits, never claims the key)."""
        return self._store.get(key)

    def put(self, key: str, result: GenResult | None) -> None:
        """Store ``result`` (unless it is None or an error) and wake everyone waiting on ``key``."""
        if result is not None and result.error is None:
            self._store[key] = result
            self.stats["puts"] += 1
        else:
            self.stats["failed"] += 1
        event = self._inflight.pop(key, None)
        if event is not None:
            event.set()

    async def acquire(self, key: str) -> GenResult | None:
        """A cached reply; or None, and the caller now owns ``key`` and must ``put`` it."""
        while True:
            hit = self._store.get(key)
            if hit is not None:
                self.stats["hits"] += 1
                return hit
            event = self._inflight.get(key)
            if event is None:
                self._inflight[key] = asyncio.Event()
                self.stats["misses"] += 1
                return None
            self.stats["waits"] += 1
            try:
                await asyncio.wait_for(event.wait(), timeout=self.takeover_s)
            except TimeoutError:  # the owner never answered: take the key over
                if self._inflight.get(key) is event:
                    self._inflight[key] = asyncio.Event()
                    self.stats["takeovers"] += 1
                    event.set()  # other waiters loop and wait on the new event
                    return None


@actor(num_cpus=0, max_concurrency=10_000)
class CacheActor:
    """Ray wrapper of :class:`ReplyCache` (async actor: one event loop, no CPU reserved)."""

    def __init__(self, takeover_s: float = 600.0):
        self.core = ReplyCache(takeover_s)

    async def get(self, key: str) -> GenResult | None:
        return self.core.get(key)

    async def put(self, key: str, result: GenResult | None) -> None:
        self.core.put(key, result)

    async def acquire(self, key: str) -> GenResult | None:
        return await self.core.acquire(key)

    async def stats(self) -> dict[str, Any]:
        return {**self.core.stats, "size": len(self.core)}
