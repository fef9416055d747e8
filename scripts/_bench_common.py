"""Helpers shared by the benchmark scripts: machine facts, load, scratch folders, process CPU time."""

from __future__ import annotations

import os
import platform
import tempfile
from pathlib import Path
from typing import Any


def machine_info() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}


def scratch_dir() -> tempfile.TemporaryDirectory:
    """Run folders go under the engine's cache dir, not /tmp (which other jobs on a shared machine may clean)."""
    from actors.model_store import cache_dir

    root = cache_dir() / "bench-work"
    root.mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryDirectory(dir=root)


def loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover - not on Linux/macOS
        return []


def procs_running() -> int | None:
    """Runnable processes right now (4th field of /proc/loadavg), a snapshot of CPU contention."""
    try:
        return int(Path("/proc/loadavg").read_text().split()[3].split("/")[0])
    except (OSError, IndexError, ValueError):  # pragma: no cover - not Linux
        return None


def proc_cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system, all threads) a local process has used so far."""
    try:
        import psutil

        t = psutil.Process(pid).cpu_times()
        return t.user + t.system
    except Exception:  # pragma: no cover - psutil missing or the process is on another node
        return None
