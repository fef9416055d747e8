"""The ``debate`` CLI as a killable subprocess: its command, its environment (its own local Ray),
and SIGKILL of its whole session (tests/end_to_end: the kill-at-random-points runs)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from scripts._bench_common import debate_argv
from tests.support.paths import ROOT

# the installed entry point, or `python -m app` where this checkout was never installed
DEBATE: list[str] = debate_argv()


def _session_procs(sid: int) -> list[tuple[int, str]]:
    """(pid, state) of the processes whose session id is ``sid``."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state ppid pgrp session ...
        if int(fields[3]) == sid:
            out.append((int(d.name), fields[0]))
    return out


def _kill_session(proc: subprocess.Popen) -> None:
    """SIGKILL the sweep's process group and every other process of its session (Ray workers set
    their own process group); wait until none is left alive (zombies do not count)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)
    deadline = time.monotonic() + 60
    while True:
        alive = [pid for pid, state in _session_procs(proc.pid) if state != "Z"]
        if not alive:
            return
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        assert time.monotonic() < deadline, f"processes of the killed sweep survive: {alive}"
        time.sleep(0.2)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)  # its own local Ray, not the test session's
    if DEBATE[1:] == ["-m", "app"]:  # not installed: the subprocess finds this checkout's packages
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env
