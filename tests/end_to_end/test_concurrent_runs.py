"""Two ``debate run`` processes on one ``--out``: the run lock (engine/run_lock.py) as users meet it.

Before the lock, two processes with the same configuration and ``--out`` both debated every
question and ``load`` counted each twice (a job array pointed at one folder does this). Now the
second is refused in one line naming the first, before it starts Ray; with ``--wait`` it starts
when the first ends and resumes what is left (nothing), and the folder holds each question once.
"""

from __future__ import annotations

import subprocess
import time

import pytest

from engine.results import load, read_table
from engine.run_lock import lock_path
from tests.support.processes import DEBATE, _env

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(600)]  # a minute: CI runs it

LIMIT = 30


def argv(out, *more: str) -> list[str]:
    return [
        *DEBATE,
        "run",
        "--backend",
        "simulated",
        "--protocol",
        "mad",
        "--agents",
        "3",
        "--rounds",
        "3",
        "--limit",
        str(LIMIT),
        "--sim-latency-s",
        "0.1",
        "--max-concurrent-questions",
        "2",
        "--no-progress",
        "--out",
        str(out),
        *more,
    ]


def test_a_second_run_of_the_same_id_is_refused_or_waits_and_nothing_counts_twice(tmp_path):
    out = tmp_path / "out"
    first = subprocess.Popen(argv(out), cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while not list((out / "runs").glob("*.lock")):
            assert first.poll() is None and time.monotonic() < deadline, "the first run never took its lock"
            time.sleep(0.1)
        t0 = time.monotonic()
        second = subprocess.run(argv(out), cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
        refused_s = time.monotonic() - t0
        assert first.poll() is None, "the first run ended before the second was tried: make it longer"
        assert second.returncode == 2, second.stderr
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and f"pid {first.pid}" in lines[0] and "already running" in lines[0], lines
        assert refused_s < 30, f"refused after {refused_s:.1f} s: the lock must be taken before Ray starts"
        third = subprocess.run(
            argv(out, "--wait"), cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=400
        )
        assert third.returncode == 0, third.stderr[-2000:]
        assert "waiting for it to end" in third.stderr
        assert first.wait(timeout=60) == 0
    finally:
        first.kill()
    assert not list((out / "runs").glob("*.lock"))  # released by both
    results = load(out)
    assert len(results.questions) == LIMIT and results.questions.question_id.is_unique
    assert len(results.calls) == LIMIT * 3 * 3
    assert not results.calls.duplicated(["question_id", "round", "agent_id"]).any()
    on_disk = read_table(out, "questions", ["question_id", "attempt"]).to_pylist()
    assert len(on_disk) == LIMIT, "the waiting run debated questions the first one had finished"
    assert results.runs.status.tolist() == ["finished"]
    assert lock_path(out, results.runs.run_id[0]).parent == out / "runs"
