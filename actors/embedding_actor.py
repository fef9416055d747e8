"""The embedding actor: one sentence-transformers model serving every question's similarity requests.

Coordinators call ``similarity(texts)`` (or ``encode(texts)``) concurrently, one call per
question per round. Requests go to a pending list and one loop serves them: it takes every
pending request (up to ``max_texts`` texts; a request is never split), encodes all their texts
in **one** model call in a worker thread (``asyncio.to_thread``, so the actor keeps accepting
requests meanwhile), then answers each request with its own slice. Texts already in the
backend's cache (earlier rounds) are not encoded again.

A backend exception neither kills the loop nor hangs callers: every request of that batch
gets the exception (the caller's ``await actor.similarity.remote(...)`` raises it).

A similarity matrix is answered as a float64 numpy array (``[]`` for no texts): Ray sends it as
one buffer, where the 10^6 Python floats of a 1,000-text matrix as lists are far slower to
pickle and unpickle (measured: docs/scaling.md). The protocols read either form
(:class:`engine.protocols.base.Similarity`).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import numpy as np
import ray

from actors.cluster import here
from actors.remote import actor
from backends.embedding import DEFAULT_CACHE_SIZE, DEFAULT_EMBEDDING_MODEL, EmbeddingBackend, cosine_matrix

MAX_TEXTS = 512  # texts per model call (requests are taken whole until this is reached)


class EmbeddingCore:
    """The batching loop of the embedding actor, without Ray (tested directly).

    ``backend`` needs ``encode_array(texts) -> np.ndarray`` (rows = texts, unit vectors).
    """

    def __init__(self, backend, max_texts: int = MAX_TEXTS):
        self.backend = backend
        self.max_texts = max(1, int(max_texts))
        self._pending: list[tuple[str, list[str], asyncio.Future]] = []
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self.stats: dict[str, Any] = {"requests": 0, "batches": 0, "batch_texts": 0, "busy_s": 0.0, "errors": 0}

    async def similarity(self, texts: list[str]) -> np.ndarray | list:
        return await self._submit("similarity", texts)

    async def encode(self, texts: list[str]) -> list[list[float]]:
        return await self._submit("encode", texts)

    async def _submit(self, kind: str, texts: list[str]) -> Any:
        texts = [str(t) for t in texts]
        if not texts:
            return []
        loop = asyncio.get_running_loop()
        wake = self._wake
        if wake is None:  # the first request starts the loop
            wake = self._wake = asyncio.Event()
            self._task = loop.create_task(self._loop())
        fut = loop.create_future()
        self._pending.append((kind, texts, fut))
        wake.set()
        return await fut

    def _take(self) -> list[tuple[str, list[str], asyncio.Future]]:
        n, total = 0, 0
        while n < len(self._pending) and (n == 0 or total + len(self._pending[n][1]) <= self.max_texts):
            total += len(self._pending[n][1])
            n += 1
        batch, self._pending = self._pending[:n], self._pending[n:]
        return batch

    def _serve(self, batch: list[tuple[str, list[str], asyncio.Future]]) -> list[Any]:
        """Runs in a worker thread: one encode call for the whole batch, then each request's answer
        (a similarity: an ``n x n`` float64 array; an encoding: lists)."""
        emb = self.backend.encode_array([t for _, texts, _ in batch for t in texts])
        out, i = [], 0
        for kind, texts, _ in batch:
            part = emb[i : i + len(texts)]
            i += len(texts)
            out.append(cosine_matrix(part) if kind == "similarity" else part.astype(np.float64).tolist())
        return out

    async def _loop(self) -> None:
        assert self._wake is not None
        while True:
            if not self._pending:
                self._wake.clear()
                await self._wake.wait()
                continue
            batch = self._take()
            start = time.perf_counter()
            try:
                results = await asyncio.to_thread(self._serve, batch)
            except Exception as exc:  # every request of the batch gets the error, nothing hangs
                self.stats["errors"] += len(batch)
                for _, _, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)
                continue
            finally:
                self.stats["busy_s"] += time.perf_counter() - start
                self.stats["batches"] += 1
                self.stats["batch_texts"] += sum(len(t) for _, t, _ in batch)
            for (_, _, fut), res in zip(batch, results):
                self.stats["requests"] += 1
                if not fut.done():
                    fut.set_result(res)


@actor(num_cpus=0, max_concurrency=10_000)
class EmbeddingActor:
    """Ray wrapper of :class:`EmbeddingBackend` + :class:`EmbeddingCore`.

    The driver decides the CPUs or GPU share it reserves (``.options(...)``) and passes the
    matching ``threads`` (Ray sets ``OMP_NUM_THREADS=1`` inside actors) and ``device``.
    """

    def __init__(
        self,
        model: str = DEFAULT_EMBEDDING_MODEL,
        threads: int | None = None,
        device: str | None = None,
        batch_size: int = 64,
        cache_size: int = DEFAULT_CACHE_SIZE,
        max_texts: int = MAX_TEXTS,
    ):
        self.backend = EmbeddingBackend(
            model=model, device=device, threads=threads, batch_size=batch_size, cache_size=cache_size
        )
        self.core = EmbeddingCore(self.backend, max_texts=max_texts)

    async def similarity(self, texts: list[str]) -> np.ndarray | list:
        """``n x n`` cosine similarity of ``texts`` as a float64 array (``[]`` for none)."""
        return await self.core.similarity(texts)

    async def encode(self, texts: list[str]) -> list[list[float]]:
        """Unit embedding of each text."""
        return await self.core.encode(texts)

    async def info(self) -> dict[str, Any]:
        return {**self.backend.info(), "pid": os.getpid(), "node": ray.get_runtime_context().get_node_id(), **here()}

    async def get_stats(self) -> dict[str, Any]:
        return {
            **self.backend.stats,
            **{f"loop_{k}": v for k, v in self.core.stats.items()},
            "cached": self.backend.cache_len(),
        }
