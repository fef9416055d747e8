"""A model engine that dies under a run, simulated: the fast counterpart of the real-vLLM test
(tests/backends/test_engine_death.py).

:class:`DyingBackend` (registered here, shipped to the Ray workers by value) answers like a tiny
deterministic model, and on its ``DIE_AT``-th request raises ``BackendDead`` once (a marker file
remembers it across the replica's restart), as vLLM's backend does when its engine core dies. The
replica must exit, Ray restart it, and the agents resend every call it had not answered: the run's
calls are then exactly those of an undisturbed run.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from backends.base import Backend
from backends.registry import BackendSpec, register, unregister
from engine.config import RunConfig
from engine.messages import message_text
from engine.records import BackendDead, GenRequest, GenResult

pytestmark = pytest.mark.ray

NAME = "dying"


class DyingBackend(Backend):
    """Replies with its prompt's word count after a short wait; dies once, at request ``DIE_AT``,
    unless ``MARKER`` exists (then it is the restarted replica, or a run meant to be undisturbed)."""

    mode = "async"
    MARKER = ""  # set by the test before the run; travels with the class to the workers
    DIE_AT = 5

    def __init__(self, model: str) -> None:
        self.model = model
        self.settings = {"model": model}
        self.seen = 0
        self.dead = False

    def check_alive(self) -> None:
        if self.dead:
            raise BackendDead("dying backend: engine gone")

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        """Unused (an async backend is awaited request by request); required by the base class."""
        raise NotImplementedError

    async def agenerate(self, req: GenRequest) -> GenResult:
        self.seen += 1
        await asyncio.sleep(0.02)  # other requests are in flight when it dies
        if self.seen >= self.DIE_AT and not os.path.exists(self.MARKER):
            Path(self.MARKER).write_text(str(os.getpid()))
            self.dead = True
        self.check_alive()
        words = sum(len(message_text(m).split()) for m in req.messages)
        text = f"I read {words} words. The answer is {words % 7}."
        return GenResult(text, words, len(text.split()), 0.02)


@pytest.fixture
def dying(tmp_path):
    DyingBackend.MARKER = str(tmp_path / "died.marker")
    register(BackendSpec(NAME, DyingBackend, summary="dies once mid-run"))
    yield Path(DyingBackend.MARKER)
    unregister(NAME)


def _calls(out) -> list[tuple]:
    from engine.results import read_table

    rows = read_table(out, "calls").to_pylist()
    return sorted((r["question_id"], r["round"], r["agent_id"], r["text"], r["error"]) for r in rows)


def test_a_replica_whose_engine_dies_restarts_and_the_agents_resend(ray_local, dying, tmp_path):
    from actors.driver import DebateRunner

    base = dict(backend=NAME, protocol="mad", agents=3, rounds=2, limit=4, progress=False, max_batch=4)
    with DebateRunner() as runner:
        res = runner.run(RunConfig.flat(out=str(tmp_path / "died"), **base))
        assert dying.exists(), "the backend never died: the test did not exercise the restart"
        died_in = int(dying.read_text())
        (handle,) = runner._replicas.values()
        import ray

        assert ray.get(handle.info.remote())["pid"] != died_in  # a restarted replica answers now
        clean = runner.run(RunConfig.flat(out=str(tmp_path / "clean"), seed=0, **base))  # marker exists: no death
    assert res.summary["n_errors"] == 0 and not any(q["errored"] for q in res.questions)
    assert len(_calls(res.out_dir)) == 4 * 3 * 2
    assert _calls(res.out_dir) == _calls(clean.out_dir)  # every unanswered call resent, none lost or doubled
