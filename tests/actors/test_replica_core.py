"""The replica loop without Ray: batching, and errors that become results instead of hangs."""

import asyncio

from actors.replica_actor import ReplicaCore
from backends.base import Backend
from backends.simulated_backend import SimulatedBackend
from engine.records import GenRequest


class CountingBackend(SimulatedBackend):
    def __init__(self):
        super().__init__(reply_tokens=10)
        self.batch_sizes = []

    def generate(self, requests):
        self.batch_sizes.append(len(requests))
        return super().generate(requests)


class Exploding(Backend):
    def generate(self, requests):
        raise RuntimeError("CUDA out of memory (pretend)")


def req(i):
    return GenRequest(messages=[{"role": "user", "content": f"q{i}"}], seed=i, meta={"gold": "1"})


def test_concurrent_requests_are_batched_up_to_max_batch():
    backend = CountingBackend()
    core = ReplicaCore(backend, max_batch=4)

    async def go():
        return await asyncio.gather(*(core.generate(req(i)) for i in range(10)))

    results = asyncio.run(go())
    assert len(results) == 10 and all(r.completion_tokens == 10 for r in results)
    assert max(backend.batch_sizes) == 4 and sum(backend.batch_sizes) == 10
    assert len(backend.batch_sizes) <= 4  # batched, not one call per request


def test_backend_exception_becomes_error_results():
    core = ReplicaCore(Exploding(), max_batch=8)

    async def go():
        return await asyncio.gather(*(core.generate(req(i)) for i in range(3)))

    results = asyncio.run(asyncio.wait_for(go(), 10))
    assert all(r.error and "out of memory" in r.error and r.finish_reason == "error" for r in results)
    assert core.stats["errors"] == 3


def test_a_backend_declares_its_mode():
    import pytest

    with pytest.raises(TypeError, match="mode must be one of"):
        type("Odd", (Backend,), {"mode": "streaming", "generate": lambda self, r: []})
    with pytest.raises(TypeError):  # generate is required
        type("Empty", (Backend,), {})()
    assert [ReplicaCore(b).continuous for b in (Exploding(), SimulatedBackend())] == [False, False]
