"""Run as a subprocess by tests/backends/test_engine_death.py, which owns the Ray instance and the vLLM
processes it starts: starts Ray the engine's way (``init_ray``) and one vLLM replica of the
default model (``DebateRunner``), SIGKILLs the replica actor's process (not its engine) and prints one
JSON line: its vLLM processes (``VLLM::EngineCore`` and workers) and those still alive after the
wait (which are then killed here, so that nothing outlives the check)."""

import json
import os
import signal
import sys
import time

import psutil

from actors.driver import DebateRunner
from engine.config import RunConfig


def _alive(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _title(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())
    except psutil.Error:
        return ""


def main(wait_s: float) -> dict:
    import ray

    cfg = RunConfig.flat(backend="vllm", progress=False, max_restarts=0)  # no restart loading meanwhile
    try:
        with DebateRunner() as runner:
            (info,) = runner.replicas_for(cfg, [cfg.sampling.model]).infos
            replica = psutil.Process(info["pid"])
            engine_procs = [p for p in replica.children(recursive=True) if _title(p).startswith("VLLM::")]
            titles = {p.pid: _title(p).split()[0] for p in engine_procs}
            os.kill(replica.pid, signal.SIGKILL)
            killed = time.monotonic()
            while time.monotonic() - killed < wait_s and any(_alive(p) for p in engine_procs):
                time.sleep(0.2)
            waited = round(time.monotonic() - killed, 1)
            left = [p for p in engine_procs if _alive(p)]
            for p in left:
                p.kill()
    finally:
        ray.shutdown()
    return {"engine": titles, "alive": [titles[p.pid] for p in left], "waited_s": waited}


if __name__ == "__main__":
    print(json.dumps(main(float(sys.argv[1]) if len(sys.argv) > 1 else 20.0)))
