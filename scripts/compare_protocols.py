"""Compare protocols' token cost and calls on the same questions (issue check and README numbers).

Default: the SIMULATED backend (seeded; cost planning only: its accuracy is not a model's),
20 arithmetic questions, 6 agents, 4 rounds, every protocol through the real Ray engine. Prints a
table and saves bench/protocols_<backend>.json.

    .venv/bin/python scripts/compare_protocols.py [--backend transformers --limit 5 --max-tokens 160]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from actors.driver import run  # noqa: E402
from engine.config import RunConfig  # noqa: E402

PROTOCOLS = {
    "mad": {},
    "sparse D=0.4": {"protocol": "sparse", "density": 0.4},
    "group 3+3": {"protocol": "group", "groups": "3+3"},
    "s2mad 3+3 (answer)": {"protocol": "s2mad", "groups": "3+3"},
    "s2mad 3+3 (embedding)": {"protocol": "s2mad", "groups": "3+3", "similarity": "embedding"},
    "cortex": {"protocol": "cortex"},
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="simulated")
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--agents", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--only", default="", help="comma list of row names to run")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for name, extra in PROTOCOLS.items():
            if args.only and name not in args.only.split(","):
                continue
            cfg = RunConfig.flat(
                **{"protocol": "mad", **extra},
                backend=args.backend,
                agents=args.agents,
                rounds=args.rounds,
                limit=args.limit,
                max_tokens=args.max_tokens,
                progress=False,
                out=str(Path(d) / name.replace(" ", "_")),
            )
            r = run(cfg)
            s = r.summary
            rows.append(
                {
                    "protocol": name,
                    "accuracy": s["accuracy"],
                    "prompt_tokens": s["prompt_tokens"],
                    "completion_tokens": s["completion_tokens"],
                    "total_tokens": s["prompt_tokens"] + s["completion_tokens"],
                    "calls": s["n_calls"],
                    "summary_calls": s["n_summary_calls"],
                    "skipped_turns": s["n_skipped"],
                    "effective_rounds": round(s["effective_rounds"], 2),
                    "wall_s": round(r.wall_s, 1),
                    "simulated": r.simulated,
                }
            )
    base = next((x["total_tokens"] for x in rows if x["protocol"] == "mad"), None)
    print(
        f"{'protocol':24s} {'acc':>6s} {'total tok':>10s} {'vs MAD':>8s} {'calls':>6s} "
        f"{'summ':>5s} {'skip':>5s} {'eff.rnd':>7s} {'wall s':>7s}"
    )
    for x in rows:
        x["saving_vs_mad"] = round(1 - x["total_tokens"] / base, 4) if base else None
        sv = f"{-x['saving_vs_mad']:+.1%}" if base else "-"
        print(
            f"{x['protocol']:24s} {x['accuracy']:6.3f} {x['total_tokens']:10d} {sv:>8s} {x['calls']:6d} "
            f"{x['summary_calls']:5d} {x['skipped_turns']:5d} {x['effective_rounds']:7.2f} {x['wall_s']:7.1f}"
        )
    if rows and rows[0]["simulated"]:
        print("(SIMULATED backend: token structure is real, accuracy is the simulator's, not a model's)")
    out = Path(args.out or f"bench/protocols_{args.backend}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"args": vars(args), "rows": rows}, indent=2))
    print(f"saved {out}")


if __name__ == "__main__":
    main()
