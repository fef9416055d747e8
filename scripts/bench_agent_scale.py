"""Agent scale: time and memory of a whole ``debate run`` command as the agent count grows, per agent layout.

For each agent count N (default 6, 32, 128, 512, 1000) and each layout mode, one command

    debate run -q --backend simulated --protocol sparse --topology ring --agents N --rounds 3 --limit Q --out <tmp>

runs alone, one after another (Q = ``--questions``, 4, or the size's own: ``--agents 1000:2``). Modes
(:data:`MODES`): ``per-agent`` (``--agents-per-actor 1``: one Ray actor process per agent) and
``packed`` (the flag left at its default, 0 = auto: several agents per actor process). On an engine
whose ``debate run`` has no ``--agents-per-actor`` yet, one actor per agent is its only layout:
``per-agent`` runs without the flag and ``packed`` is skipped (:data:`WITHOUT_FLAG`).

Per command:

* *whole s*: wall seconds from starting the subprocess to its exit (Python imports, Ray start,
  replicas, agent actors, the debate, writing, Ray shutdown);
* *start-up s*: ``replicas_s + agents_s`` from the runs table's ``timings`` JSON column;
  *debate s*: its ``debate_s`` (without that column: the runs row's ``wall_s``, which is
  ``DebateRunner.run``'s time and so also holds the replicas' and agents' start-up);
  *overhead s* = whole - debate: everything outside the debate itself;
* *calls*: rows of the calls table (else ``runs.n_calls``); *calls/s* = calls / debate s;
* *peak memory*: every ``--interval-s`` (0.2 s; longer when a sample itself takes long, so the
  sampler uses at most a third of a core) the script walks the process tree rooted at the
  command and sums each process's PSS from ``/proc/<pid>/smaps_rollup``; the peak of that sum over
  the run is *peak GB*. PSS splits every shared page among the processes that map it, so the
  Python interpreter, Ray's libraries and the object store's shared memory are counted once in
  the sum, where RSS would count them once per process (``peak_rss_gb`` shows how much that
  overstates; ``peak_uss_gb``, private pages only, is the floor). The command is started with
  ``RAY_ADDRESS=local``, so it starts its own Ray (it never joins a cluster ``ray start`` left on
  the machine) and Ray's gcs_server and raylet are its children and every worker the raylet's
  child: the whole Ray instance is in the tree (checked per run: ``ray_in_tree``, and
  ``ray_outside_tree`` counts Ray processes that started during the run outside the tree, from
  another job or an escape; those are not summed). This peak is the command's *extra memory*,
  the figure the targets check; the machine's used memory (total - available) at its peak minus
  before the command is recorded too (``system_extra_gb``), but on a shared machine it moves
  with other jobs;
* *MB/agent*: (peak - the peak of the same mode's smallest N) / (N - that N), the memory one
  more agent costs in that layout; ``agent_pss_mb_each``: the mean PSS of one agent actor
  process at the peak sample;
* *agent procs*: the most processes seen at once whose Ray title (``ray::ClassName``) names an
  agent actor class (``AgentActor``, ``AgentGroupActor``); ``process_titles`` has every title's peak;
* after the command exits, the script waits for every process it saw to end (``exit_lag_s``) and
  kills, by pid, any still running 10 s later (``leftover_killed``), so no run overlaps the next.

Then, unless ``--sweep ""``, one ``debate sweep -q`` over ``agents: [4, 16, 64, 256, 1000]``
(``--sweep``; same protocol, ``--sweep-questions`` 2 questions, the default layout) runs alone
the same way: its whole seconds and peak memory (one engine serves every cell, so the peak
shows whether memory stays bounded as the cells grow) and each cell's seconds and calls from
its runs row (``sweep`` in the JSON).

``per-agent`` skips an N above ``--max-per-agent`` (128) or whose agent processes, at
``--agent-process-mb`` (80 MB) each, would not fit in the available memory less
``--memory-margin-gb``; the row says why. The targets (:data:`TARGETS`) are checked on the rows
of the engine's default layout (``packed``), and shown for every mode.

Usage:
  .venv/bin/python scripts/bench_agent_scale.py                       # every size, both modes
  .venv/bin/python scripts/bench_agent_scale.py --agents 6,32 --modes per-agent --sweep ""
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts._bench_common import (  # noqa: E402
    agents_axis,
    debate_argv,
    finish,
    git_commit,
    loadavg,
    log_for,
    machine_info,
    rich_table,
    save_figure,
    scratch_dir,
)

LAYOUT_FLAG = "--agents-per-actor"
MODES: dict[str, tuple[str, ...]] = {"per-agent": (LAYOUT_FLAG, "1"), "packed": ()}
# What a mode runs as on an engine without LAYOUT_FLAG (None: skipped): one actor per agent is its only layout.
WITHOUT_FLAG: dict[str, tuple[str, ...] | None] = {"per-agent": (), "packed": None}
PER_PROCESS_MODES = ("per-agent",)  # the modes with one process per agent (sized against the memory)
TARGET_MODE = "packed"
TARGETS = (
    {"agents": 1000, "questions": 2, "whole_s_max": 60.0, "extra_gb_max": 3.0, "calls": 6000, "calls_per_s_min": 500.0},
    {"agents": 128, "questions": 4, "whole_s_max": 20.0, "extra_gb_max": 1.5},
)
DEFAULT_AGENTS = "6,32,128,512,1000:2"
DEFAULT_SWEEP = "4,16,64,256,1000"
AGENT_TITLE = re.compile(r"^Agent\w*Actor$")
GB = 1024**3
MB = 1024**2


def parse_sizes(spec: str, questions: int) -> list[tuple[int, int]]:
    """``"6,32,1000:2"`` -> [(6, questions), (32, questions), (1000, 2)]: agent counts, each with
    its question count (its own after a colon)."""
    sizes = []
    for part in (p.strip() for p in spec.split(",")):
        if part:
            n, _, q = part.partition(":")
            sizes.append((int(n), int(q) if q else questions))
    if not sizes or any(n < 1 or q < 1 for n, q in sizes):
        raise ValueError(f"--agents {spec!r}: agent counts (N or N:questions), each >= 1")
    return sizes


def has_layout_flag(debate: list[str]) -> bool:
    """Whether this engine's ``debate run`` takes :data:`LAYOUT_FLAG`."""
    help_text = subprocess.run([*debate, "run", "--help"], capture_output=True, text=True, check=True).stdout
    return LAYOUT_FLAG in help_text


def debate_command(
    debate: list[str], agents: int, questions: int, rounds: int, layout: tuple[str, ...], out: str
) -> list[str]:
    """The measured command: a simulated sparse-ring debate of ``agents`` agents in ``layout``."""
    return [
        *debate,
        "run",
        "-q",
        "--backend",
        "simulated",
        "--protocol",
        "sparse",
        "--topology",
        "ring",
        "--agents",
        str(agents),
        "--rounds",
        str(rounds),
        "--limit",
        str(questions),
        *layout,
        "--out",
        out,
    ]


def skip_reason(mode: str, agents: int, max_per_agent: int, agent_mb: float, available: int, margin: int) -> str | None:
    """Why a one-process-per-agent mode cannot run ``agents`` agents here (None: it can)."""
    if mode not in PER_PROCESS_MODES:
        return None
    if agents > max_per_agent:
        return f"N={agents} > --max-per-agent {max_per_agent}"
    need = agents * agent_mb * MB
    if need > available - margin:
        return (
            f"~{need / GB:.1f} GB for {agents} agent processes ({agent_mb:g} MB each) > "
            f"{available / GB:.1f} GB available - {margin / GB:g} GB margin"
        )
    return None


# ----------------------------------------------------------------------------- memory of a process tree
ROLLUP_KEYS = {"Rss": "rss", "Pss": "pss", "Private_Clean": "uss", "Private_Dirty": "uss"}


def process_memory(pid: int) -> dict[str, int] | None:
    """RSS, PSS and USS bytes of one process from ``/proc/<pid>/smaps_rollup`` (psutil's figures
    where that file is missing); None when the process has gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except FileNotFoundError:
        if Path(f"/proc/{pid}").exists():  # a kernel without smaps_rollup
            import psutil

            try:
                m = psutil.Process(pid).memory_full_info()
            except psutil.Error:
                return None
            return {"rss": m.rss, "pss": getattr(m, "pss", m.rss), "uss": m.uss}
        return None
    except OSError:
        return None
    mem = {"rss": 0, "pss": 0, "uss": 0}
    for line in text.splitlines()[1:]:
        key, _, value = line.partition(":")
        if key in ROLLUP_KEYS:
            mem[ROLLUP_KEYS[key]] += int(value.split()[0]) * 1024
    return mem


def process_title(cmdline: list[str], name: str) -> str:
    """A short name for a process: the class of a Ray worker (``ray::AgentActor.run`` ->
    ``AgentActor``, ``ray::IDLE`` -> ``IDLE``), a Python process's script (``log_monitor.py``),
    else the executable's name (``raylet``, ``gcs_server``)."""
    line = " ".join(cmdline)
    m = re.match(r"ray::(\w+)", line)
    if m:
        return m.group(1)
    script = next((Path(a).name for a in cmdline[1:] if a.endswith(".py")), None)
    return script or name


class TreeSampler:
    """Samples the memory of a process and all its descendants in a thread until stopped, keeping
    the peaks: total PSS/USS/RSS, process counts by title, and every process it saw."""

    def __init__(self, root_pid: int, interval_s: float = 0.2, outside_every_s: float = 2.0):
        import psutil

        try:
            self.root = psutil.Process(root_pid)
            self.start_time = self.root.create_time()
        except psutil.Error:  # gone already: nothing to sample
            self.root, self.start_time = None, time.time()
        self.interval_s, self.outside_every_s = interval_s, outside_every_s
        self.seen: dict[int, tuple[float, str]] = {}  # pid -> (create time, title)
        self.peak = {"pss": 0, "uss": 0, "rss": 0, "procs": 0, "agent_procs": 0, "system_used": 0}
        self.at_peak: dict[str, Any] = {}
        self.titles: Counter = Counter()
        self.outside = 0
        self.samples, self.sample_s = 0, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tree-sampler", daemon=True)

    def start(self) -> TreeSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        last_outside = 0.0
        while not self._stop.is_set():
            t = time.perf_counter()
            self.sample()
            if t - last_outside >= self.outside_every_s:
                self.outside = max(self.outside, self.count_outside())
                last_outside = t
            cost = time.perf_counter() - t
            self.samples += 1
            self.sample_s += cost
            self._stop.wait(max(self.interval_s - cost, 2 * cost))  # at most a third of a core

    def sample(self) -> None:
        import psutil

        try:
            procs = [self.root, *self.root.children(recursive=True)] if self.root else []
        except psutil.Error:
            return
        total = {"pss": 0, "uss": 0, "rss": 0}
        titles: Counter = Counter()
        agent_pss = 0
        for p in procs:
            mem = process_memory(p.pid)
            if mem is None:
                continue
            try:
                title = process_title(p.cmdline(), p.name())
                if p.pid not in self.seen:
                    self.seen[p.pid] = (p.create_time(), title)
            except psutil.Error:
                continue
            for k in total:
                total[k] += mem[k]
            titles[title] += 1
            if AGENT_TITLE.match(title):
                agent_pss += mem["pss"]
        vm = psutil.virtual_memory()
        agents = sum(c for t, c in titles.items() if AGENT_TITLE.match(t))
        if total["pss"] > self.peak["pss"]:
            self.at_peak = {
                "t_s": round(time.time() - self.start_time, 2),
                "processes": sum(titles.values()),
                "agent_processes": agents,
                "agent_pss_mb_each": round(agent_pss / agents / MB, 1) if agents else None,
            }
        for k, v in (
            *total.items(),
            ("procs", sum(titles.values())),
            ("agent_procs", agents),
            ("system_used", vm.total - vm.available),
        ):
            self.peak[k] = max(self.peak[k], v)
        for t, c in titles.items():
            self.titles[t] = max(self.titles[t], c)

    def count_outside(self) -> int:
        """Ray processes started since the command that are not in its tree (not summed)."""
        import psutil

        mine = set(self.seen)
        n = 0
        for p in psutil.process_iter(["pid", "name", "cmdline", "create_time"]):
            info = p.info
            if info["pid"] in mine or (info["create_time"] or 0) < self.start_time:
                continue
            line = " ".join(info["cmdline"] or [])
            if info["name"] in ("raylet", "gcs_server") or line.startswith("ray::"):
                n += 1
        return n

    def ray_in_tree(self) -> bool:
        titles = {t for _, t in self.seen.values()}
        return {"raylet", "gcs_server"} <= titles


def reap(seen: dict[int, tuple[float, str]], grace_s: float = 10.0) -> tuple[float, list[str]]:
    """Wait up to ``grace_s`` for the command's processes to end (a zombie has ended); kill (by
    pid, the same process: same create time) any still running. Returns the seconds the wait took
    and the titles of those killed."""
    import psutil

    def running(p: psutil.Process) -> bool:
        try:
            return p.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    t = time.perf_counter()
    alive = []
    for pid, (created, title) in seen.items():
        try:
            p = psutil.Process(pid)
            if p.create_time() == created:
                alive.append((p, title))
        except psutil.Error:
            pass
    while True:
        alive = [(p, title) for p, title in alive if running(p)]
        if not alive or time.perf_counter() - t > grace_s:
            break
        time.sleep(0.1)
    waited = round(time.perf_counter() - t, 2)
    killed = []
    for p, title in alive:
        try:
            p.kill()
            killed.append(title)
        except psutil.Error:
            pass
    return waited, killed


# ----------------------------------------------------------------------------- one command
def run_facts(runs: list[dict[str, Any]], call_rows: int) -> dict[str, Any]:
    """The phases' seconds and the calls of a run from its runs row and its calls table's row count.
    A missing or empty ``timings`` column leaves the phases None; debate seconds then fall back to
    the row's ``wall_s`` (``DebateRunner.run``'s time: it includes the replicas' and agents' start-up)."""
    row = runs[-1] if runs else {}
    timings = row.get("timings")
    if isinstance(timings, str):
        try:
            timings = json.loads(timings)
        except ValueError:
            timings = None
    timings = timings if isinstance(timings, dict) else {}
    phases = {k: timings.get(k) for k in ("replicas_s", "agents_s", "debate_s")}
    debate_s, source = phases["debate_s"], "timings.debate_s"
    if debate_s is None:
        debate_s, source = row.get("wall_s"), "runs.wall_s (includes replica and agent start-up)"
    calls = call_rows or row.get("n_calls")
    return {
        **phases,
        "timings_column": bool(timings),
        "startup_s": phases["replicas_s"] + phases["agents_s"]
        if phases["replicas_s"] is not None and phases["agents_s"] is not None
        else None,
        "debate_s": debate_s,
        "debate_s_source": source if debate_s is not None else None,
        "runs_wall_s": row.get("wall_s"),
        "runs_n_calls": row.get("n_calls"),
        "calls": calls,
        "calls_per_s": round(calls / debate_s, 1) if calls and debate_s else None,
    }


def read_run(out: Path) -> dict[str, Any]:
    from engine.results import read_table

    return run_facts(read_table(out, "runs").to_pylist(), read_table(out, "calls", ["run_id"]).num_rows)


def sweep_command(debate: list[str], agents: list[int], questions: int, rounds: int, out: Path) -> list[str]:
    """``debate sweep`` over ``agents`` (a simulated sparse-ring debate per cell, default layout);
    writes its YAML next to ``out``."""
    spec = out.parent / f"{out.name}.yaml"
    spec.write_text(
        json.dumps(
            {
                "backend": "simulated",
                "protocol": "sparse",
                "topology": "ring",
                "rounds": rounds,
                "limit": questions,
                "progress": False,
                "grid": {"agents": agents},
            }
        )
    )  # JSON is YAML
    return [*debate, "sweep", "-q", str(spec), "--out", str(out)]


def read_sweep(out: Path) -> dict[str, Any]:
    """Each cell of a sweep folder (agents, its runs row's phases and calls), by agent count."""
    from engine.results import read_table

    cells = []
    for runs_dir in sorted(out.glob("*/runs")):
        runs = read_table(runs_dir.parent, "runs").to_pylist()
        agents = json.loads(runs[-1]["config"])["agents"] if runs else None
        cells.append({"agents": agents, **run_facts(runs, read_table(runs_dir.parent, "calls", ["run_id"]).num_rows)})
    cells.sort(key=lambda c: c["agents"] or 0)
    return {"cells": cells, "calls": sum(c["calls"] or 0 for c in cells)}


def run_one(cmd: list[str], out: Path, interval_s: float, timeout_s: float, facts=None) -> dict[str, Any]:
    """Run one command alone, sampling its process tree; its times, calls and memory peaks
    (``facts(out)``: what its output says, default :func:`read_run`)."""
    import psutil

    env = {**os.environ, "RAY_ADDRESS": "local"}  # its own Ray, never a cluster left on the machine
    vm = psutil.virtual_memory()
    used_before = vm.total - vm.available
    row: dict[str, Any] = {"loadavg_before": loadavg(), "system_used_before_gb": round(used_before / GB, 3)}
    cpu0 = time.process_time()
    with open(out.parent / f"{out.name}.log", "w+") as log:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        sampler = TreeSampler(proc.pid, interval_s).start()
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.terminate()  # the driver shuts its Ray down; reap() ends what is left
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            rc = None
        whole = time.perf_counter() - t
        sampler.stop()
        log.seek(0)
        tail = log.read()[-2000:]
    exit_lag, killed = reap(sampler.seen)
    row.update(returncode=rc, whole_s=round(whole, 3), exit_lag_s=exit_lag, leftover_killed=killed)
    p = sampler.peak
    row.update(
        peak_pss_gb=round(p["pss"] / GB, 3),
        peak_uss_gb=round(p["uss"] / GB, 3),
        peak_rss_gb=round(p["rss"] / GB, 3),
        system_extra_gb=round((p["system_used"] - used_before) / GB, 3),
        peak_processes=p["procs"],
        agent_processes=p["agent_procs"],
        at_peak=sampler.at_peak,
        process_titles=dict(sorted(sampler.titles.items())),
        ray_in_tree=sampler.ray_in_tree(),
        ray_outside_tree=sampler.outside,
        samples=sampler.samples,
        sample_interval_s=round(whole / sampler.samples, 3) if sampler.samples else None,
        sampler_cpu_s=round(time.process_time() - cpu0, 2),
    )
    if rc != 0:
        row.update(status="failed" if rc is not None else f"timed out after {timeout_s:g} s", output_tail=tail)
        return row
    facts = (facts or read_run)(out)
    row.update(status="ok", **facts)
    if facts.get("debate_s") is not None:
        row["overhead_s"] = round(whole - facts["debate_s"], 3)
    return row


# ----------------------------------------------------------------------------- all sizes
def per_agent_memory(rows: list[dict[str, Any]]) -> None:
    """Set each ok row's ``memory_per_agent_mb``: (its peak - the peak of its mode's smallest N) /
    (N - that N); None for that smallest row."""
    for mode in {r["mode"] for r in rows}:
        ok = sorted((r for r in rows if r["mode"] == mode and r.get("status") == "ok"), key=lambda r: r["agents"])
        for r in ok:
            base = ok[0]
            r["memory_per_agent_mb"] = (
                round((r["peak_pss_gb"] - base["peak_pss_gb"]) * GB / MB / (r["agents"] - base["agents"]), 2)
                if r["agents"] > base["agents"]
                else None
            )


def check_targets(rows: list[dict[str, Any]], modes: list[str]) -> list[dict[str, Any]]:
    """Each target with its checks on every mode's row of that size (None where no such ok row);
    ``met`` is the :data:`TARGET_MODE` row's verdict."""
    out = []
    for target in TARGETS:
        by_mode: dict[str, Any] = {}
        for mode in modes:
            row = next(
                (
                    r
                    for r in rows
                    if r["mode"] == mode
                    and r.get("status") == "ok"
                    and (r["agents"], r["questions"]) == (target["agents"], target["questions"])
                ),
                None,
            )
            if row is None:
                by_mode[mode] = None
                continue
            checks = {
                "whole_s": row["whole_s"] <= target["whole_s_max"],
                "extra_gb": row["peak_pss_gb"] <= target["extra_gb_max"],
            }
            if "calls" in target:
                checks["calls"] = row["calls"] == target["calls"]
            if "calls_per_s_min" in target:
                checks["calls_per_s"] = (row["calls_per_s"] or 0) >= target["calls_per_s_min"]
            by_mode[mode] = {"checks": checks, "met": all(checks.values())}
        verdict = by_mode.get(TARGET_MODE)
        out.append({**target, "mode": TARGET_MODE, "by_mode": by_mode, "met": verdict["met"] if verdict else None})
    return out


def measure(
    sizes: list[tuple[int, int]],
    modes: list[str],
    rounds: int = 3,
    max_per_agent: int = 128,
    agent_mb: float = 80.0,
    margin_gb: float = 2.0,
    interval_s: float = 0.2,
    timeout_s: float = 900.0,
    settle_s: float = 2.0,
    sweep: list[int] | None = None,
    sweep_questions: int = 2,
    log=print,
) -> dict[str, Any]:
    import psutil

    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise ValueError(f"unknown modes {unknown}; known: {list(MODES)}")
    debate = debate_argv()
    flag = has_layout_flag(debate)
    vm = psutil.virtual_memory()
    res: dict[str, Any] = {
        "benchmark": "agent_scale",
        "commit": git_commit(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": {
            **machine_info(),
            "memory_total_gb": round(vm.total / GB, 2),
            "memory_available_gb": round(vm.available / GB, 2),
        },
        "loadavg_before": loadavg(),
        "simulated": True,
        "layout_flag": flag,
        "params": {
            "sizes": [list(s) for s in sizes],
            "modes": {m: list(MODES[m]) for m in modes},
            "rounds": rounds,
            "max_per_agent": max_per_agent,
            "agent_process_mb": agent_mb,
            "memory_margin_gb": margin_gb,
            "interval_s": interval_s,
            "timeout_s": timeout_s,
            "settle_s": settle_s,
            "sweep": sweep or [],
            "sweep_questions": sweep_questions,
        },
        "memory": "peak over the run of the summed PSS (/proc/<pid>/smaps_rollup) of the command's whole process "
        "tree (driver, gcs_server, raylet, every Ray worker); extra memory = that peak (the tree's own); "
        "system_extra_gb = the machine's used memory at its peak minus before the command",
        "targets_note": f"checked on the {TARGET_MODE} rows (the engine's default layout); extra_gb = peak_pss_gb; "
        "calls_per_s = calls / debate_s",
    }
    if not flag:
        res["layout_note"] = (
            f"debate run has no {LAYOUT_FLAG}: one actor per agent is its only layout, so "
            "per-agent runs without the flag and packed is skipped"
        )
    rows: list[dict[str, Any]] = []
    tmp = scratch_dir()
    try:
        for n, q in sizes:
            for mode in modes:
                layout = MODES[mode] if flag else WITHOUT_FLAG.get(mode)
                out = Path(tmp.name) / f"{mode}-{n}-{q}"
                row: dict[str, Any] = {
                    "mode": mode,
                    "agents": n,
                    "questions": q,
                    "rounds": rounds,
                    "layout_args": list(layout) if layout is not None else None,
                }
                rows.append(row)
                if layout is None:
                    row["status"] = f"skipped: debate run has no {LAYOUT_FLAG}"
                    log(f"{mode:9s} N={n:4d}: {row['status']}")
                    continue
                why = skip_reason(
                    mode, n, max_per_agent, agent_mb, psutil.virtual_memory().available, int(margin_gb * GB)
                )
                if why:
                    row["status"] = f"skipped: {why}"
                    log(f"{mode:9s} N={n:4d}: {row['status']}")
                    continue
                cmd = debate_command(debate, n, q, rounds, layout, str(out))
                row["command"] = shlex.join(cmd)
                row.update(run_one(cmd, out, interval_s, timeout_s))
                shutil.rmtree(out, ignore_errors=True)
                log(
                    f"{mode:9s} N={n:4d} Q={q}: {row['status']}, whole {row['whole_s']:.1f} s, "
                    f"peak {row['peak_pss_gb']:.2f} GB PSS ({row['peak_rss_gb']:.2f} GB RSS), "
                    f"{row.get('calls')} calls, {row['peak_processes']} processes"
                )
                time.sleep(settle_s)
        if sweep:
            out = Path(tmp.name) / "sweep"
            cmd = sweep_command(debate, sweep, sweep_questions, rounds, out)
            res["sweep"] = {
                "agents": sweep,
                "questions": sweep_questions,
                "command": shlex.join(cmd),
                **run_one(cmd, out, interval_s, timeout_s, facts=read_sweep),
            }
            sw = res["sweep"]
            log(
                f"sweep over agents {sweep}: {sw['status']}, whole {sw['whole_s']:.1f} s, "
                f"peak {sw['peak_pss_gb']:.2f} GB PSS, {sw.get('calls')} calls"
            )
    finally:
        tmp.cleanup()
    per_agent_memory(rows)
    res.update(rows=rows, targets=check_targets(rows, modes), loadavg_after=loadavg())
    return res


# ----------------------------------------------------------------------------- output
def _num(v: Any, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def print_table(res: dict[str, Any]) -> None:
    c, t = rich_table(
        f"debate run at scale (SIMULATED backend): sparse ring, {res['params']['rounds']} rounds, "
        f"commit {res['commit']}",
        (
            "mode",
            "N",
            "Q",
            "whole s",
            "start-up s",
            "debate s",
            "overhead s",
            "calls",
            "calls/s",
            "peak GB (PSS)",
            "MB/agent",
            "system +GB",
            "procs",
            "agent procs",
            "status",
        ),
    )
    for r in res["rows"]:
        ok = r.get("status") == "ok"
        t.add_row(
            r["mode"],
            str(r["agents"]),
            str(r["questions"]),
            _num(r.get("whole_s"), ".1f"),
            _num(r.get("startup_s"), ".1f"),
            _num(r.get("debate_s"), ".2f"),
            _num(r.get("overhead_s"), ".1f"),
            _num(r.get("calls"), "d"),
            _num(r.get("calls_per_s"), ".0f"),
            _num(r.get("peak_pss_gb"), ".2f"),
            _num(r.get("memory_per_agent_mb"), ".1f"),
            _num(r.get("system_extra_gb"), ".2f"),
            _num(r.get("peak_processes"), "d"),
            _num(r.get("agent_processes"), "d"),
            "ok" if ok else str(r.get("status")),
        )
    c.print(t)
    c.print(
        "peak GB: the peak summed PSS of the command's whole process tree (Ray included); MB/agent: its growth "
        "per agent over the mode's smallest N; debate s from the runs table's timings (else runs.wall_s, "
        "which includes start-up); overhead = whole - debate."
    )
    for tg in res["targets"]:
        verdict = {None: "no row", True: "MET", False: "NOT MET"}[tg["met"]]
        c.print(
            f"target N={tg['agents']} Q={tg['questions']} ({tg['mode']}): whole <= {tg['whole_s_max']:g} s, "
            f"peak <= {tg['extra_gb_max']:g} GB"
            + (f", {tg['calls']} calls" if "calls" in tg else "")
            + (f", >= {tg['calls_per_s_min']:g} calls/s" if "calls_per_s_min" in tg else "")
            + f": {verdict}"
        )
    sw = res.get("sweep")
    if sw:
        cells = ", ".join(f"N={c['agents']} {_num(c.get('debate_s'), '.1f')} s" for c in sw.get("cells", []))
        c.print(
            f"sweep over agents {sw['agents']} (Q={sw['questions']}, one engine): {sw['status']}, whole "
            f"{sw['whole_s']:.1f} s, peak {sw['peak_pss_gb']:.2f} GB PSS, {sw.get('calls')} calls; debate per "
            f"cell: {cells}"
        )
    c.print(
        f"load average {res['loadavg_before']} -> {res['loadavg_after']} on {res['machine']['cpus']} CPUs, "
        f"{res['machine']['memory_total_gb']} GB memory"
    )


def plot(res: dict[str, Any], path: Path) -> Path:
    """Two panels, one line per mode, log x: whole command seconds and peak memory vs N."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.5), dpi=110)
    FigureCanvasAgg(fig)
    panels = fig.subplots(1, 2)
    default_q = max(Counter(q for _, q in res["params"]["sizes"]).items(), key=lambda kv: kv[1])[0]
    for ax, key, label, target_key in (
        (panels[0], "whole_s", "whole command (s)", "whole_s_max"),
        (panels[1], "peak_pss_gb", "peak memory, PSS of all processes (GB)", "extra_gb_max"),
    ):
        for mode in res["params"]["modes"]:
            pts = sorted(
                (r["agents"], r[key], r["questions"])
                for r in res["rows"]
                if r["mode"] == mode and r.get("status") == "ok"
            )
            if pts:
                (line,) = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=mode)
                for x, y, q in pts:
                    if q != default_q:
                        ax.annotate(
                            f"Q={q}",
                            (x, y),
                            textcoords="offset points",
                            xytext=(4, 4),
                            fontsize=8,
                            color=line.get_color(),
                        )
        for i, tg in enumerate(res["targets"]):
            ax.plot(
                [tg["agents"]],
                [tg[target_key]],
                marker="v",
                color="red",
                linestyle="none",
                label="target (at most)" if i == 0 else None,
            )
        agents_axis(ax, sorted({n for n, _ in res["params"]["sizes"]} | {tg["agents"] for tg in res["targets"]}), label)
    title = (
        f"debate run, SIMULATED backend, sparse ring, {res['params']['rounds']} rounds, "
        f"Q={default_q} questions unless marked; commit {res['commit']}"
    )
    return save_figure(fig, title, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--agents",
        default=DEFAULT_AGENTS,
        help="comma-separated agent counts, each N or N:questions (default %(default)s)",
    )
    ap.add_argument("--questions", type=int, default=4, help="questions per command where --agents gives none")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    ap.add_argument("--max-per-agent", type=int, default=128, help="largest N the per-agent mode runs")
    ap.add_argument(
        "--agent-process-mb",
        type=float,
        default=80.0,
        help="memory one agent process is assumed to take, to skip per-agent sizes that cannot fit",
    )
    ap.add_argument("--memory-margin-gb", type=float, default=2.0, help="memory left free in that estimate")
    ap.add_argument("--interval-s", type=float, default=0.2, help="memory sampling period")
    ap.add_argument("--timeout-s", type=float, default=900.0, help="a command running longer is stopped")
    ap.add_argument("--settle-s", type=float, default=2.0, help="pause after each command")
    ap.add_argument(
        "--sweep",
        default=DEFAULT_SWEEP,
        help="agent counts of the one debate sweep run after the sizes (default %(default)s; '' skips it)",
    )
    ap.add_argument("--sweep-questions", type=int, default=2, help="questions per sweep cell")
    ap.add_argument("--out", default="bench/agent_scale.json")
    ap.add_argument("--png", default=None, help="the plot (default: --out with .png)")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    res = measure(
        parse_sizes(args.agents, args.questions),
        [m.strip() for m in args.modes.split(",") if m.strip()],
        rounds=args.rounds,
        max_per_agent=args.max_per_agent,
        agent_mb=args.agent_process_mb,
        margin_gb=args.memory_margin_gb,
        interval_s=args.interval_s,
        timeout_s=args.timeout_s,
        settle_s=args.settle_s,
        sweep=[int(n) for n in args.sweep.split(",") if n.strip()],
        sweep_questions=args.sweep_questions,
        log=log_for(args.quiet),
    )
    png = Path(args.png or Path(args.out).with_suffix(".png"))
    res["png"] = str(plot(res, png))
    return finish(res, args.out, argv, args.quiet, print_table)


if __name__ == "__main__":
    sys.exit(main())
