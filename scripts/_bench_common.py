"""Helpers shared by the benchmark scripts: machine facts, the commit, load, scratch folders, process CPU time."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def machine_info() -> dict[str, Any]:
    """Cores, Python, platform and the CPU model with its bf16 features (bf16 speed, hence every
    real-model figure, depends on AMX / AVX512-BF16)."""
    from backends.model_store import FAST_BF16_FLAGS, cpu_flags

    cpu = ""
    try:
        cpu = next(
            (
                ln.split(":", 1)[1].strip()
                for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")
            ),
            "",
        )
    except OSError:  # not Linux
        pass
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu or platform.processor(),
        "bf16_features": sorted(cpu_flags() & FAST_BF16_FLAGS),
    }


def git_commit() -> str | None:
    """The checkout's commit (with ``+`` when the working tree has changes), or None outside git."""
    root = Path(__file__).resolve().parents[1]
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return rev + ("+" if dirty else "")


def debate_argv() -> list[str]:
    """The ``debate`` command of this interpreter's environment, else the one on PATH, else
    ``python -m app`` (a checkout on PYTHONPATH that was never installed, as on a machine the
    checkout was carried to)."""
    here = Path(sys.executable).with_name("debate")
    if here.exists():
        return [str(here)]
    on_path = shutil.which("debate")
    return [on_path] if on_path else [sys.executable, "-m", "app"]


def scratch_dir() -> tempfile.TemporaryDirectory:
    """Run folders go under the engine's cache dir, not /tmp (which other jobs on a shared machine may clean)."""
    from backends.model_store import cache_dir

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


def add_workload_args(p) -> None:
    """The debate workload flags of the real-model engine benchmarks; defaults = MAD 10 questions
    x 6 agents x 3 rounds, 64-token replies (the workload of bench_vs_peers' targets)."""
    p.add_argument("--questions", type=int, default=10)
    p.add_argument("--agents", type=int, default=6)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=64)


def rich_table(title: str, columns) -> tuple[Any, Any]:
    """(console, table) for a benchmark's result table: rich, 200 columns wide, no markup, every
    column right-justified."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for col in columns:
        table.add_column(col, justify="right")
    return Console(width=200, markup=False, highlight=False), table


def log_for(quiet: bool):
    """The progress printer a benchmark's ``measure`` gets: ``print``, or nothing with --quiet."""
    return (lambda *a, **k: None) if quiet else print


def finish(res: dict[str, Any], out: str, argv: list[str] | None, quiet: bool, print_table) -> int:
    """Record the command line in the result, print its table, save it as JSON at ``out``."""
    res["command"] = " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])])
    if not quiet:
        print_table(res)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(res, indent=2))
    if not quiet:
        print(f"saved {out}")
    return 0


def agents_axis(ax, ticks, ylabel: str, legend_size: int = 8, log_y: bool = False) -> None:
    """Format a figure panel drawn against the agent count: log x with plain numbers at
    ``ticks`` only, y from 0 (or log y), a light grid and the legend."""
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(ticks)
    ax.set_xlabel("agents N (log)")
    ax.set_ylabel(ylabel)
    if log_y:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=legend_size)


def save_figure(fig, title: str, path: Path) -> Path:
    """Title ``fig``, lay it out and save it at ``path`` (its folder made); returns ``path``."""
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path
