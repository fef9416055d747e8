"""Where the CPU goes during an engine run: CPU seconds per process (psutil) over one timed
``DebateRunner.run`` of bench_vs_peers' workload (MAD, 10 questions x 6 agents x 3 rounds, 64 tokens,
greedy, the default backend), on an engine warmed by a one-question run.

It separates the model's compute (vLLM's worker process) from everything else the engine runs on
the same cores (replica, coordinator, agent and writer actors, Ray's daemons, vLLM's scheduler),
which is what bench_vs_peers' offline peer does not pay. Prints a table and saves the JSON.

Usage: .venv/bin/python scripts/profile_engine_cpu.py [--questions 10 --agents 6 --rounds 3 --max-tokens 64]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.config import RunConfig  # noqa: E402
from scripts._bench_common import add_workload_args, finish, loadavg, log_for, machine_info, scratch_dir  # noqa: E402


def cpu_by_process() -> dict[int, tuple[float, str]]:
    """CPU seconds (user + system) so far and a short name, for every process we may read."""
    import psutil

    out = {}
    for p in psutil.process_iter(["name", "cmdline"]):
        try:
            t = p.cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied):  # gone or not ours: not part of the run
            continue
        cmd = p.info["cmdline"] or [p.info["name"] or "?"]
        name = cmd[0] if cmd[0].startswith(("ray::", "VLLM::")) else Path(cmd[0]).name
        if name.startswith("python") and len(cmd) > 1:
            name = f"{name} {Path(cmd[1]).name}"
        out[p.pid] = (t.user + t.system, name)
    return out


def measure(questions: int, agents: int, rounds: int, max_tokens: int, log=print) -> dict[str, Any]:
    from actors.driver import DebateRunner
    from engine.dataset_routing import load_questions

    cfg = RunConfig.flat(
        protocol="mad",
        agents=agents,
        rounds=rounds,
        limit=questions,
        max_tokens=max_tokens,
        temperature=0.0,
        progress=False,
    ).validate()
    qs = load_questions(cfg.experiment.dataset, cfg.experiment.task, cfg.experiment.limit, cfg.experiment.seed)
    load_before = loadavg()
    with scratch_dir() as work, DebateRunner() as runner:
        runner.run(cfg.replace(out=str(Path(work) / "warm"), limit=1, seed=cfg.experiment.seed + 1), qs[:1])
        log("engine warm; timed run ...")
        before = cpu_by_process()
        t = time.perf_counter()
        res = runner.run(cfg.replace(out=str(Path(work) / "run")), qs)
        wall = time.perf_counter() - t
        after = cpu_by_process()
    by_name: dict[str, float] = defaultdict(float)
    for pid, (cpu, name) in after.items():
        by_name[name] += cpu - before.get(pid, (0.0, name))[0]
    rows = sorted(
        ({"process": k, "cpu_s": round(v, 2)} for k, v in by_name.items() if v >= 0.05), key=lambda r: -r["cpu_s"]
    )
    model = sum(r["cpu_s"] for r in rows if r["process"] == "VLLM::Worker")
    total = sum(r["cpu_s"] for r in rows)
    return {
        "workload": {
            "protocol": "mad",
            "questions": questions,
            "agents": agents,
            "rounds": rounds,
            "max_tokens": max_tokens,
            "temperature": 0.0,
            "model": cfg.sampling.model,
        },
        "backend": res.backend,
        "dtype": res.dtype,
        "engine_s": round(wall, 3),
        "cpu_s_total": round(total, 2),
        "cpu_s_model_worker": round(model, 2),
        "cpu_s_everything_else": round(total - model, 2),
        "processes": rows,
        "machine": machine_info(),
        "loadavg_before": load_before,
        "loadavg_after": loadavg(),
    }


def print_table(res: dict[str, Any]) -> None:
    print(
        f"\nengine run {res['engine_s']:.1f} s ({res['backend']}, {res['dtype']}): {res['cpu_s_total']:.1f} CPU-s, "
        f"model worker {res['cpu_s_model_worker']:.1f}, everything else {res['cpu_s_everything_else']:.1f}"
    )
    for r in res["processes"]:
        print(f"{r['cpu_s']:8.2f}  {r['process']}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_workload_args(p)
    p.add_argument("--out", default="bench/profile_engine_cpu.json")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    res = measure(args.questions, args.agents, args.rounds, args.max_tokens, log=log_for(args.quiet))
    return finish(res, args.out, argv, args.quiet, print_table)


if __name__ == "__main__":
    sys.exit(main())
