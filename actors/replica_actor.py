"""The replica actor: one model instance serving every agent bound to it.

Agents call ``generate(request)`` concurrently. Requests go to a pending list and one loop feeds
the backend, in a worker thread so the actor keeps accepting requests meanwhile:

* a *continuous-batching* backend (``add``/``step``, e.g. transformers) gets new requests between
  decode steps; they join the running batch (at most ``max_batch`` rows, the rest wait in the
  backend's queue) and every finished request is answered at once;
* a *batch* backend (``generate(list)``, e.g. the simulated model) gets up to ``max_batch``
  pending requests at a time;
* an *async* backend (``agenerate``: vLLM, an OpenAI-compatible server) has each request
  awaited directly.

The backend declares its mode (:class:`backends.base.Backend`).

A backend exception neither kills the actor nor hangs callers: every request in flight gets a
``GenResult`` with ``error`` set, which the engine records as an error row.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from typing import Any, NoReturn, Protocol

import ray

from actors.batching import serve_stream
from actors.cluster import gpu_start_lock, here
from actors.remote import actor, by_value
from backends.base import Backend
from backends.registry import BackendSpec, backend_spec
from engine.records import BackendDead, GenRequest, GenResult

log = logging.getLogger(__name__)

STEPS_PER_HOP = 4  # decode steps per thread hop: new requests wait at most this many steps to join


class BackendClass(Protocol):
    """What a replica needs of a :class:`~backends.base.Backend` subclass: ``prepare(model)`` (a
    classmethod) and the constructor, which takes the model and the backend's options by keyword
    (the base class declares no constructor, so ``type[Backend]`` cannot say so)."""

    def __call__(self, *, model: str, **options: Any) -> Backend: ...

    def prepare(self, model: str) -> None: ...


def backend_class(backend: str | BackendSpec) -> BackendClass:
    """The :class:`~backends.base.Backend` class of ``--backend`` (a name in
    :mod:`backends.registry`, or an entry shipped by :func:`shipped_backend`). Importing a
    backend's module loads no model: vLLM, torch and transformers are imported when one is made."""
    spec = backend if isinstance(backend, BackendSpec) else backend_spec(backend)
    return spec.load()  # type: ignore[return-value]  # the registry types it Callable[..., Backend]


def make_backend(backend: str | BackendSpec, model: str, options: dict[str, Any]) -> Backend:
    return backend_class(backend)(model=model, **options)


def shipped_backend(spec: BackendSpec) -> str | BackendSpec:
    """What the driver hands a replica actor to name its backend: a built-in by name (every node
    imports :mod:`backends`), any other registered backend as its registry entry, its module
    pickled by value, so a backend registered in the driver (a plug-in module, a test) reaches
    replicas in other processes and on other nodes without being installed or registered there."""
    if spec.builtin:
        return spec.name
    by_value(spec.factory)
    return spec


class ReplicaCore:
    """The loop logic of a replica, without Ray (tested directly).

    Three modes, as the backend declares (:attr:`backends.base.Backend.mode`): continuous
    batching (``add``/``step``), batch (``generate(list)``), and *async* (``agenerate``, e.g.
    vLLM or an OpenAI-compatible server): each request is awaited directly in the caller's event
    loop, the backend bounding its own requests in flight; ``busy_s`` is then the time with at
    least one request in flight and ``hops`` stays 0.
    """

    def __init__(self, backend, max_batch: int | None = 16):
        self.backend = backend
        self.max_batch = max_batch or 16
        self.asynchronous = backend.mode == "async"
        self.continuous = backend.mode == "continuous"
        self._ids = itertools.count()
        self._pending: list[tuple[int, GenRequest]] = []
        self._futures: dict[int, asyncio.Future] = {}
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._in_flight = 0
        self._busy_since = 0.0
        self.stats = {"requests": 0, "hops": 0, "busy_s": 0.0, "prompt_tokens": 0, "completion_tokens": 0, "errors": 0}
        if self.asynchronous:  # the backend's own retry/timeout counters, mirrored after each request
            self.stats.update(retries=0, timeouts=0)

    def _count(self, res: GenResult) -> None:
        self.stats["requests"] += 1
        self.stats["prompt_tokens"] += res.prompt_tokens
        self.stats["completion_tokens"] += res.completion_tokens
        self.stats["errors"] += res.error is not None

    async def _agenerate(self, request: GenRequest) -> GenResult:
        if self._in_flight == 0:
            self._busy_since = time.perf_counter()
        self._in_flight += 1
        start = time.perf_counter()
        try:
            res = await self.backend.agenerate(request)
        except (asyncio.CancelledError, BackendDead):
            raise
        except Exception as exc:  # a backend bug still becomes an error row, never a hang
            res = GenResult("", 0, 0, time.perf_counter() - start, "error", f"{type(exc).__name__}: {exc}"[:2000])
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self.stats["busy_s"] += time.perf_counter() - self._busy_since
        self._count(res)
        for k in ("retries", "timeouts"):
            self.stats[k] = int(self.backend.stats.get(k, 0))
        return res

    async def generate(self, request: GenRequest) -> GenResult:
        if self.asynchronous:
            return await self._agenerate(request)
        loop = asyncio.get_running_loop()
        wake = self._wake
        if wake is None:  # the first request starts the loop
            wake = self._wake = asyncio.Event()
            self._task = loop.create_task(self._loop())
        rid = next(self._ids)
        fut = loop.create_future()
        self._futures[rid] = fut
        self._pending.append((rid, request))
        wake.set()
        return await fut

    def _hop(self, new: list[tuple[int, GenRequest]]) -> list[tuple[int, GenResult]]:
        """Runs in a worker thread: hand new requests to the backend and advance it."""
        try:
            if not self.continuous:
                results = self.backend.generate([r for _, r in new])
                return [(rid, res) for (rid, _), res in zip(new, results)]
            for rid, req in new:
                self.backend.add(rid, req)
            done: list[tuple[int, GenResult]] = []
            for _ in range(STEPS_PER_HOP):
                done += self.backend.step()
                if done or not self.backend.has_work():
                    break
            return done
        except Exception as exc:  # every request in flight gets the error, nothing hangs
            msg = f"{type(exc).__name__}: {exc}"
            if self.continuous:
                return self.backend.abort_all(msg)
            return [(rid, GenResult("", 0, 0, 0.0, "error", msg)) for rid, _ in new]

    def _busy(self) -> bool:
        return bool(self._pending) or (self.continuous and self.backend.has_work())

    async def _loop(self) -> None:
        assert self._wake is not None
        while True:
            if not self._busy():
                self._wake.clear()
                await self._wake.wait()
            if self.continuous:
                new, self._pending = self._pending, []
            else:
                new, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch :]
            start = time.perf_counter()
            done = await asyncio.to_thread(self._hop, new)
            self.stats["busy_s"] += time.perf_counter() - start
            self.stats["hops"] += 1
            for rid, res in done:
                self._count(res)
                fut = self._futures.pop(rid, None)
                if fut is not None and not fut.done():
                    fut.set_result(res)


@actor(num_cpus=0, max_concurrency=10_000)
class ReplicaActor:
    def __init__(
        self,
        backend: str | BackendSpec,
        model: str,
        options: dict[str, Any] | None = None,
        max_batch: int | None = None,
        served: dict[str, Any] | None = None,
    ):
        """``served``: the setup of a replica that ``debate serve`` started (:mod:`actors.served`),
        reported by :meth:`info` so that a run can check it before using the replica."""
        options = dict(options or {})
        self.served = served
        # the model backends carry their own max_batch among their engine settings (per model)
        max_batch = options.get("max_batch", max_batch)
        self.backend_name = backend if isinstance(backend, str) else backend.name
        self.model = model
        self.load_error: str | None = None
        self.stream_calls = 0  # Ray calls that carried requests (each with one or more of them)
        self.loaded: dict[str, float] = {}
        self.core: ReplicaCore | None = None  # None: the model did not load (load_error says why)
        try:
            backend_class(backend).prepare(model)  # fetched first: a download never holds a GPU's turn
            with gpu_start_lock():  # replicas sharing a GPU load one after another
                self.loaded["start"] = time.time()
                self.core = ReplicaCore(make_backend(backend, model, options), max_batch=max_batch)
                self.loaded["end"] = time.time()
        except Exception as exc:  # reported by info() as one line; the driver stops the run with it
            name = (
                type(exc).__name__
                if type(exc).__module__ == "builtins"
                else f"{type(exc).__module__}.{type(exc).__name__}"
            )
            self.load_error = f"{name}: {exc}".splitlines()[0][:500]
            if ray.get_runtime_context().was_current_actor_reconstructed:
                # a restart that cannot load must not stay up answering every call with an error:
                # end the process, so Ray counts the restart, tries again (--max-restarts) and then
                # reports the replica dead, which the agents turn into resends or error rows
                self._exit(f"the model did not load again after a restart ({self.load_error})")

    async def info(self) -> dict[str, Any]:
        served = {"served": self.served} if self.served is not None else {}
        if self.core is None:
            return {"backend": self.backend_name, "model": self.model, "error": self.load_error, **served}
        b = self.core.backend
        try:
            b.check_alive()  # a dead engine is not reported as a live replica
        except BackendDead as exc:
            self._exit(str(exc))
        return {
            "backend": self.backend_name,
            "model": self.model,
            "simulated": b.simulated,
            "accepts_images": bool(b.accepts_images),  # for vLLM: whether the loaded model is multimodal
            "continuous_batching": self.core.continuous,
            "settings": dict(b.settings),  # resolved engine settings (dtype, context, ...)
            "threads": _torch_threads(),
            "pid": os.getpid(),
            "loaded": dict(self.loaded),  # when the model load started and ended (epoch seconds)
            "node": ray.get_runtime_context().get_node_id(),
            **here(),
            **served,
        }

    async def generate(self, request: GenRequest) -> GenResult:
        if self.core is None:
            return GenResult("", 0, 0, 0.0, "error", f"model {self.model} did not load: {self.load_error}")
        try:
            return await self.core.generate(request)
        except BackendDead as exc:
            self._exit(str(exc))

    def _exit(self, reason: str) -> NoReturn:
        """The engine died for good: kill its processes and end this one (a process exit, not
        ``ray.actor.exit_actor()``, which would tell Ray not to restart it). Ray restarts the
        replica with a fresh engine; the agents resend every call it did not answer."""
        log.error("replica of %s: %s; exiting so that Ray restarts it", self.model, reason)
        if self.core is not None:
            try:
                self.core.backend.kill_engine_processes()
            except Exception:  # noqa: BLE001 - exiting anyway
                log.exception("replica of %s: could not kill the engine's processes", self.model)
        logging.shutdown()
        os._exit(1)

    @ray.method(max_task_retries=0)  # the agent resends what a dead replica did not answer
    async def generate_stream(self, requests: list[GenRequest]):
        """Several requests in one Ray call (an agent's micro-batch); yields lists of (index, GenResult)
        as they finish, so the early ones are not held back by the late ones."""
        self.stream_calls += 1
        async for chunk in serve_stream(requests, self.generate):
            yield chunk

    async def get_stats(self) -> dict[str, Any]:
        return {**(self.core.stats if self.core is not None else {}), "stream_calls": self.stream_calls}


def _torch_threads() -> int | None:
    try:
        # function-level: importing torch here keeps it off start-up
        import torch

        return torch.get_num_threads()
    except Exception:  # pragma: no cover - torch is a default dependency
        return None
