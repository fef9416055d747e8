"""How much CortexDebate's results move with ``cortex_s_offset``, the smoothing our eq. 8 adds.

    .venv/bin/python scripts/cortex_s_offset.py [--backend auto|simulated|...] [--dataset PATH]
        [--limit N] [--agents N] [--rounds R] [--offsets 0,0.5,1,4] [--seeds K] [--out DIR]

The paper's ``S_d = (d-1)(n-1) - P_d`` is 0 in round 1 (eq. 9 divides by it); the engine adds an
offset (default 1, :mod:`topologies.cortex`). In round 1 every S is the offset, so the pruned graph
is the same for every positive offset; from round 2 on the offset is of the order of S itself
and decides how much an agent's missed participation lowers its weight. This script runs one
sweep (``grid: {cortex_s_offset: [...], seed: [...]}``, first answers shared across the cells)
and prints, per offset: accuracy (mean ± sd over seeds), tokens per question, and per debate
round the mean number of peers an agent kept (eq. 11) and how many edges differ from the
default offset's graph on the same question and round. Saves ``OUT/cortex_s_offset.json`` with
the commit and the machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.protocols.cortex import CORTEX_S_OFFSET
from scripts._bench_common import git_commit, machine_info  # noqa: E402

DEFAULT_OFFSET = 1.0


def fmt(x: float | None) -> str:
    """A spread, or "-" where there is none (one seed)."""
    return "-    " if x is None or x != x else f"{x:.3f}"


def kept_edges(graphs: Any) -> dict[tuple[str, int, int], frozenset[int]]:
    """(question, round, reader) -> the sources the reader kept, from a run's graphs rows."""
    out = {}
    for row in graphs.itertuples(index=False):
        if row.dst < 0:
            continue
        srcs = list(row.srcs)
        pruned = list(row.pruned) if row.pruned is not None else [False] * len(srcs)
        out[(row.question_id, int(row.round), int(row.dst))] = frozenset(s for s, p in zip(srcs, pruned) if not p)
    return out


def summarise(results: Any, runs: dict[float, list[str]], rounds: int) -> list[dict[str, Any]]:
    """Per offset: accuracy over its runs (one per seed), tokens per question, per debate round the
    mean kept in-degree and the share of (question, reader) pairs whose kept peers differ from the
    default offset's run of the same seed."""
    from engine.accounting import mean_sd

    q, g = results.questions, results.graphs
    reference = {}
    for offset, ids in runs.items():
        if offset == DEFAULT_OFFSET:
            reference = {rid_seed: kept_edges(g[g["run_id"] == rid]) for rid_seed, rid in enumerate(ids)}
    rows = []
    for offset, ids in runs.items():
        acc, tok = [], []
        degree: dict[int, list[int]] = {d: [] for d in range(1, rounds)}
        differ: dict[int, list[bool]] = {d: [] for d in range(1, rounds)}
        for k, rid in enumerate(ids):
            qr = q[q["run_id"] == rid]
            acc.append(float(qr["correct"].fillna(False).astype(bool).mean()))
            tok.append(float((qr["prompt_tokens"] + qr["completion_tokens"]).sum()) / max(1, len(qr)))
            kept = kept_edges(g[g["run_id"] == rid])
            for (qid, d, reader), peers in kept.items():
                if d in degree:
                    degree[d].append(len(peers))
                    ref = reference.get(k, {}).get((qid, d, reader))
                    if ref is not None:
                        differ[d].append(ref != peers)
        a, a_sd = mean_sd(acc)
        rows.append(
            {
                "cortex_s_offset": offset,
                "runs": ids,
                "accuracy": a,
                "accuracy_sd": a_sd,
                "tokens_per_q": mean_sd(tok)[0],
                "kept_in_degree_by_round": {d: (sum(v) / len(v) if v else None) for d, v in degree.items()},
                "differs_from_default_by_round": {d: (sum(v) / len(v) if v else None) for d, v in differ.items()},
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="auto", help="auto (the real default model) | simulated | vllm | ...")
    ap.add_argument("--dataset", default="arithmetic", help="path, hf:NAME or arithmetic (default)")
    ap.add_argument("--task", default=None, help="the dataset's task when it cannot be told from the file")
    ap.add_argument("--limit", type=int, default=6, help="questions (default 6)")
    ap.add_argument("--agents", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=4, help="engine rounds, first answers included (default 4)")
    ap.add_argument("--offsets", default="0,0.5,1,4", help="comma list of cortex_s_offset values (default 0,0.5,1,4)")
    ap.add_argument("--seeds", type=int, default=1, help="runs per offset (default 1)")
    ap.add_argument("--out", default="runs/cortex_s_offset")
    args = ap.parse_args(argv)
    try:
        offsets = [float(x) for x in args.offsets.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"cortex_s_offset: --offsets {args.offsets!r}: give numbers, e.g. 0,0.5,1,4") from None
    if DEFAULT_OFFSET not in offsets:
        offsets.append(DEFAULT_OFFSET)  # the reference the graphs are compared with

    from app.sweep import parse_sweep, run_sweep
    from engine.results import load

    out = Path(args.out)
    data: dict[str, Any] = {
        "protocol": "cortex",
        "agents": args.agents,
        "rounds": args.rounds,
        "backend": args.backend,
        "dataset": args.dataset,
        "limit": args.limit,
        "progress": False,
        "grid": {"cortex_s_offset": offsets, "seed": list(range(args.seeds))},
    }
    if args.task:
        data["task"] = args.task
    start = time.perf_counter()
    cells = run_sweep(parse_sweep(data, "cortex_s_offset.py"), out / "sweep", echo=print, progress=False)
    wall = time.perf_counter() - start
    failed = [c for c in cells if c.status != "finished"]
    if failed:
        raise SystemExit(
            f"cortex_s_offset: {len(failed)} cell(s) did not finish: {failed[0].error or failed[0].status}"
        )
    runs: dict[float, list[str]] = {}
    for c in cells:
        runs.setdefault(float(c.config.option(CORTEX_S_OFFSET)), []).append(c.run_id)
    results = load(out / "sweep")
    simulated = bool(results.runs["simulated"].any()) if "simulated" in results.runs else args.backend == "simulated"
    rows = summarise(results, runs, args.rounds)
    print(
        f"\nCortexDebate, {args.agents} agents, {args.rounds} rounds, {args.limit} questions of {args.dataset}, "
        f"{args.seeds} seed(s)" + ("  [SIMULATED model]" if simulated else "")
    )
    debate_rounds = list(range(1, args.rounds))
    print(
        f"{'s_offset':>8} {'accuracy':>15} {'tokens/q':>9}  " + "  ".join(f"r{d} kept/differs" for d in debate_rounds)
    )
    for r in rows:
        cols = []
        for d in debate_rounds:
            k, x = r["kept_in_degree_by_round"][d], r["differs_from_default_by_round"][d]
            cols.append(f"{'-' if k is None else f'{k:.2f}':>7}/{'-' if x is None else f'{x:.0%}':>6}")
        print(
            f"{r['cortex_s_offset']:>8g} {r['accuracy']:>7.3f} ± {fmt(r['accuracy_sd'])} {r['tokens_per_q']:>9,.0f}  "
            + "  ".join(f"{c:>15}" for c in cols)
        )
    print(
        "kept: mean peers an agent read in that round (of n-1); differs: readers whose kept peers differ from offset 1"
    )
    report = {
        "args": vars(args),
        "commit": git_commit(),
        "machine": machine_info(),
        "simulated": simulated,
        "backend": str(results.runs["backend"].iloc[0]) if "backend" in results.runs else args.backend,
        "wall_s": wall,
        "rows": rows,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "cortex_s_offset.json").write_text(json.dumps(report, indent=2, default=str))
    print(f"saved {out / 'cortex_s_offset.json'}  ({wall:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
