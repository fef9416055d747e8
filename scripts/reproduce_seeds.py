"""Run the seed papers' main comparisons on one dataset and print them in the papers' table layout.

    .venv/bin/python scripts/reproduce_seeds.py --dataset ../shared/data/gsm8k_test.jsonl --task numeric \
        --limit 50 [--backend auto|vllm|transformers|openai|simulated] [--out runs/reproduce]

Tables (each a set of runs on the same questions, same prompts, same seeds; one Engine, so the
model is loaded once and the first round is reused across runs that share it):
  1. Li et al. 2024, Table 1 layout: CoT, CoT-SC(6), MAD (D=1), sparse D=4/5, 3/5, 2/5, ProbMAD D=2/5 at
     N=6 agents, 3 rounds: accuracy and input-token cost saving vs D=1.
  2. GroupDebate / S2-MAD layout at (5 agents, 4 rounds): MAD, GD (groups 2+3, R=2), S2-MAD
     (answer similarity and embedding similarity): accuracy, total tokens, saving vs MAD.
  3. CortexDebate at (4 agents, 4 rounds) vs MAD(4,4): accuracy, total tokens, mean effective rounds.
Results go to --out (one folder per run, resumable: re-run the command after an interruption) and
a JSON summary to --out/reproduce.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from actors.driver import Engine  # noqa: E402
from engine.config import RunConfig  # noqa: E402

TABLES = {
    "sparse (Li et al. 2024, N=6, 3 rounds)": [
        ("CoT", dict(protocol="cot", agents=1, rounds=1)),
        ("CoT-SC(6)", dict(protocol="sc", agents=6, rounds=1)),
        ("MAD D=1", dict(protocol="mad", agents=6, rounds=3)),
        ("sparse D=4/5", dict(protocol="sparse", agents=6, rounds=3, density=0.8)),
        ("sparse D=3/5", dict(protocol="sparse", agents=6, rounds=3, density=0.6)),
        ("sparse D=2/5", dict(protocol="sparse", agents=6, rounds=3, density=0.4)),
        ("ProbMAD D=2/5", dict(protocol="probmad", agents=6, rounds=3, density=0.4)),
    ],
    "GroupDebate / S2-MAD (5 agents, 4 rounds)": [
        ("MAD(5,4)", dict(protocol="mad", agents=5, rounds=4)),
        ("GD(5,4) 2+3", dict(protocol="group", agents=5, rounds=4, groups="2+3", stage_rounds=2)),
        ("S2-MAD(5,4) answer", dict(protocol="s2mad", agents=5, rounds=4, groups="2+3", similarity="answer")),
        ("S2-MAD(5,4) embedding", dict(protocol="s2mad", agents=5, rounds=4, groups="2+3", similarity="embedding")),
    ],
    "CortexDebate (4 agents, 4 rounds)": [
        ("MAD(4,4)", dict(protocol="mad", agents=4, rounds=4)),
        ("Cortex(4,4)", dict(protocol="cortex", agents=4, rounds=4)),
    ],
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="arithmetic")
    ap.add_argument("--task", default=None)
    ap.add_argument("--limit", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backend", default="auto", help="auto (vllm where installed, else transformers) | vllm | "
                    "transformers | openai | simulated")
    ap.add_argument("--model", default=None)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--tables", default="", help="comma list of table numbers to run (default all)")
    ap.add_argument("--out", default="runs/reproduce")
    args = ap.parse_args(argv)
    out = Path(args.out)
    wanted = {int(x) for x in args.tables.split(",") if x.strip()} or set(range(1, len(TABLES) + 1))
    report = {}
    with Engine() as engine:
        for t, (title, rows) in enumerate(TABLES.items(), start=1):
            if t not in wanted:
                continue
            results = []
            for label, opts in rows:
                cfg = RunConfig(dataset=args.dataset, task=args.task, limit=args.limit, seed=args.seed,
                                backend=args.backend, max_tokens=args.max_tokens, progress=False,
                                reuse_first_round=True, **({"model": args.model} if args.model else {}), **opts)
                cfg.out = str(out / cfg.run_id())
                r = engine.run(cfg)
                s = r.summary
                results.append({"label": label, "run_id": r.run_id, "accuracy": s["accuracy"],
                                "prompt_tokens": s["prompt_tokens"], "completion_tokens": s["completion_tokens"],
                                "calls": s["n_calls"], "effective_rounds": s["effective_rounds"],
                                "simulated": r.simulated, "n": s["n_questions"]})
            base = next((x for x in results if x["label"].startswith("MAD")), None)
            print(f"\n{title}  ({args.dataset}, {args.limit} questions, backend {args.backend}"
                  f"{', SIMULATED' if results and results[0]['simulated'] else ''})")
            print(f"{'method':24s} {'accuracy':>9s} {'input tok':>10s} {'input saving':>13s} {'total tok':>10s} "
                  f"{'total saving':>13s} {'calls':>6s} {'eff.rnd':>7s}")
            for x in results:
                tot = x["prompt_tokens"] + x["completion_tokens"]
                if base:
                    bt = base["prompt_tokens"] + base["completion_tokens"]
                    x["input_saving"] = 1 - x["prompt_tokens"] / base["prompt_tokens"]
                    x["total_saving"] = 1 - tot / bt
                isv = "base" if x is base else (f"{-x['input_saving']:+.1%}" if base else "-")
                tsv = "base" if x is base else (f"{-x['total_saving']:+.1%}" if base else "-")
                print(f"{x['label']:24s} {x['accuracy']*100:8.1f}% {x['prompt_tokens']:10d} {isv:>13s} {tot:10d} "
                      f"{tsv:>13s} {x['calls']:6d} {x['effective_rounds']:7.2f}")
            report[title] = results
    out.mkdir(parents=True, exist_ok=True)
    (out / "reproduce.json").write_text(json.dumps({"args": vars(args), "tables": report}, indent=2))
    print(f"\nsaved {out / 'reproduce.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
