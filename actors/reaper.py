"""No Ray process outlives the engine process that started a local Ray.

Ray ties its GCS server and raylet to the driver (the kernel ends them when it dies), but the
dashboard and runtime-env agents the raylet starts are not tied to anything: when the driver is
SIGKILLed (the OOM killer, ``kill -9``, a job scheduler's hard stop), they find their raylet gone,
try to report it to a GCS that is gone too, and stay, each ~100 MB, one pair per killed run.

:func:`watch` starts a small reaper process beside a driver that started its own local Ray. The
reaper reads a pipe whose only writer is the driver: it sees the end of the pipe the moment the
driver ends, however it ends. Until then it notes, every :data:`SNAPSHOT_S` seconds, the Ray
processes below the driver (pid and start time); then it stops those still alive (SIGTERM, then
SIGKILL after :data:`GRACE_S` seconds) and exits. After a normal exit Ray has stopped them all
already and the reaper finds nothing to do. A Ray the engine joined (``--ray-address``, a cluster)
is never touched.

Run as ``python -m actors.reaper DRIVER_PID``; Linux and macOS (psutil).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from typing import Any

import psutil

SNAPSHOT_S = 1.0  # how often the reaper notes the driver's Ray processes
GRACE_S = 3.0  # SIGTERM to SIGKILL

_watcher: subprocess.Popen | None = None  # kept: its pipe must stay open as long as this process lives


def watch() -> None:
    """Start the reaper for this process (once per process; see the module docstring)."""
    global _watcher
    if _watcher is not None and _watcher.poll() is None:
        return
    _watcher = subprocess.Popen(
        [sys.executable, "-m", "actors.reaper", str(os.getpid())],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # Ctrl-C in the terminal does not reach it; it outlives the driver
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    )


def is_ray_process(cmdline: list[str]) -> bool:
    """Whether a command line is one of Ray's processes (its binaries, agents, workers)."""
    first = cmdline[0] if cmdline else ""
    return first.startswith("ray::") or any(f"{os.sep}ray{os.sep}" in arg for arg in cmdline[:3])


def ray_below(driver: int) -> dict[int, float]:
    """The Ray processes below ``driver``: pid -> start time."""
    try:
        children = psutil.Process(driver).children(recursive=True)
    except psutil.Error:
        return {}
    found = {}
    for child in children:
        try:
            if is_ray_process(child.cmdline()):
                found[child.pid] = child.create_time()
        except psutil.Error:
            continue
    return found


def alive(known: dict[int, float]) -> dict[int, float]:
    """The processes of ``known`` that still run (same pid, same start time, not a zombie)."""
    out = {}
    for pid, started in known.items():
        try:
            proc = psutil.Process(pid)
            if abs(proc.create_time() - started) < 1.0 and proc.status() != psutil.STATUS_ZOMBIE:
                out[pid] = started
        except psutil.Error:
            continue
    return out


def stop_all(known: dict[int, float], grace_s: float = GRACE_S) -> list[int]:
    """SIGTERM every process of ``known`` still alive (same pid, same start time), SIGKILL those
    left after ``grace_s``; returns the pids it signalled."""
    procs: list[Any] = []
    for pid in alive(known):
        try:
            procs.append(psutil.Process(pid))
        except psutil.Error:
            continue
    for proc in procs:
        try:
            proc.send_signal(signal.SIGTERM)
        except psutil.Error:
            pass
    _, left = psutil.wait_procs(procs, timeout=grace_s)
    for proc in left:
        try:
            proc.kill()
        except psutil.Error:
            pass
    return [p.pid for p in procs]


def main(argv: list[str]) -> int:
    """Watch the driver named in ``argv`` until its pipe ends, then stop its Ray processes."""
    driver = int(argv[0])
    known: dict[int, float] = {}
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], SNAPSHOT_S)
        if ready and not os.read(sys.stdin.fileno(), 4096):
            break  # the driver is gone
        # kept once seen: a raylet stopped before the driver leaves its agents to init, no longer below it
        known = {**alive(known), **ray_below(driver)}
    time.sleep(0.5)  # a driver that exited normally has had Ray stop its processes
    stop_all(known)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
