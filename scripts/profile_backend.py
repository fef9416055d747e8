"""Where the transformers backend spends a batch: cProfile of ``TransformersBackend.generate``.

Runs ``--batch`` copies of a long debate-like prompt (about 890 tokens with the chat template),
each forced to generate exactly ``--max-tokens`` tokens (end-of-turn disabled on this instance),
greedy, and reports wall time, this process's CPU time (user + system, all threads) and its
ratio (how many cores were busy), and the share of wall time of the top operations by own time.
Prints a table and saves ``bench/profile_backend.json``.

Usage:
  .venv/bin/python scripts/profile_backend.py                  # batch 16, 64 tokens, 2 threads
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.config import DEFAULT_MODEL  # noqa: E402
from engine.records import GenRequest  # noqa: E402
from scripts._bench_common import finish, loadavg, machine_info  # noqa: E402


def measure(
    batch: int = 16, max_tokens: int = 64, threads: int = 2, model: str = DEFAULT_MODEL, top: int = 8, log=print
) -> dict:
    from backends.transformers_backend import TransformersBackend

    backend = TransformersBackend(model, threads=threads, max_batch=batch)
    text = "Agent answers: " + "The result is 42 because 6 times 7 is 42. " * 50
    reqs = [
        GenRequest(messages=[{"role": "user", "content": f"{text} q{i}"}], temperature=0, max_tokens=max_tokens, seed=i)
        for i in range(batch)
    ]
    backend.eos_ids = {-1}  # every row generates exactly max_tokens tokens
    backend.generate(reqs[:2])  # warm-up
    load = loadavg()
    t, c = time.perf_counter(), time.process_time()
    prof = cProfile.Profile()
    prof.enable()
    backend.generate(reqs)
    prof.disable()
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    stats = pstats.Stats(prof).stats  # {(file, line, name): (calls, prim calls, own time, cumulative, callers)}
    rows = sorted(
        (
            (own, calls, name if file == "~" else f"{Path(file).name}:{line}({name})")
            for (file, line, name), (_, calls, own, _cum, _callers) in stats.items()
        ),
        reverse=True,
    )[:top]
    res = {
        "benchmark": "profile_backend",
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": machine_info(),
        "params": {"batch": batch, "max_tokens": max_tokens, "threads": threads, "model": model},
        "prompt_tokens": len(backend.encode(reqs[0].messages)),
        "wall_s": round(wall, 3),
        "process_cpu_s": round(cpu, 3),
        "cores_busy": round(cpu / wall, 3),
        "top_own_time": [
            {"op": name, "calls": calls, "own_s": round(own, 3), "share_of_wall": round(own / wall, 3)}
            for own, calls, name in rows
        ],
        "loadavg_before": load,
        "loadavg_after": loadavg(),
        "pid": os.getpid(),
    }
    log(f"{batch} rows x {max_tokens} tokens: wall {wall:.2f} s, cpu {cpu:.2f} s, cores busy {cpu / wall:.2f}")
    return res


def print_table(res: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    p = res["params"]
    table = Table(
        title=f"TransformersBackend.generate: {p['batch']} rows x {res['prompt_tokens']}-token prompt x "
        f"{p['max_tokens']} tokens, {p['threads']} threads — {res['cores_busy']:.2f} cores busy"
    )
    for col in ("operation", "calls", "own s", "share of wall"):
        table.add_column(col, justify="left" if col == "operation" else "right")
    for r in res["top_own_time"]:
        table.add_row(r["op"], str(r["calls"]), f"{r['own_s']:.2f}", f"{100 * r['share_of_wall']:.0f}%")
    Console().print(table)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--out", default="bench/profile_backend.json")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    res = measure(
        args.batch, args.max_tokens, args.threads, args.model, log=print if not args.quiet else (lambda *a: None)
    )
    return finish(res, args.out, argv, args.quiet, print_table)


if __name__ == "__main__":
    sys.exit(main())
