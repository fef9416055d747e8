"""Foundation measurements: the numbers the README quotes, printed and saved to bench/foundation.json.

  1. Token cost of fully connected MAD vs a sparse regular graph (D = 0.4, the ring) on the
     SIMULATED backend (6 agents, 3 rounds, 20 arithmetic questions), for two reply lengths.
  2. A small real debate with the default backend (vLLM where installed) and the packaged model
     (SmolLM2-135M-Instruct) on local Ray: wall time, tokens, generated tokens per second.

Batching against one-call-at-a-time on the same engine is measured by scripts/bench_vs_peers.py.

Usage: .venv/bin/python scripts/bench_foundation.py [--skip-real] [--out bench/foundation.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from actors.driver import run  # noqa: E402
from engine.config import RunConfig  # noqa: E402


def sparse_savings(tmp: Path) -> list[dict]:
    rows = []
    for reply in (60, 150):
        res = {}
        for proto, extra in (("mad", {}), ("sparse", {"density": 0.4})):
            cfg = RunConfig.flat(
                protocol=proto,
                backend="simulated",
                agents=6,
                rounds=3,
                limit=20,
                progress=False,
                sim_reply_tokens=reply,
                out=str(tmp / f"{proto}-{reply}"),
                **extra,
            )
            res[proto] = run(cfg).summary
        saving = 1 - res["sparse"]["prompt_tokens"] / res["mad"]["prompt_tokens"]
        rows.append(
            {
                "backend": "simulated",
                "reply_tokens": reply,
                "mad_calls": res["mad"]["n_calls"],
                "mad_prompt_tokens": res["mad"]["prompt_tokens"],
                "sparse_calls": res["sparse"]["n_calls"],
                "sparse_prompt_tokens": res["sparse"]["prompt_tokens"],
                "prompt_token_saving": round(saving, 4),
            }
        )
        print(
            f"[simulated] reply={reply:4d} tok  MAD prompt={res['mad']['prompt_tokens']:7d}  "
            f"sparse D=0.4 prompt={res['sparse']['prompt_tokens']:7d}  saving={saving:.1%}  "
            f"calls {res['mad']['n_calls']}/{res['sparse']['n_calls']}"
        )
    return rows


def real_debate(tmp: Path) -> dict:
    cfg = RunConfig.flat(protocol="mad", agents=3, rounds=2, limit=3, progress=False, out=str(tmp / "real"))
    r = run(cfg)
    s = r.summary
    out = {
        "protocol": "mad",
        "agents": 3,
        "rounds": 2,
        "questions": 3,
        "model": cfg.sampling.model,
        "backend": r.backend,
        "dtype": r.dtype,
        "wall_s": round(r.wall_s, 1),
        "prompt_tokens": s["prompt_tokens"],
        "completion_tokens": s["completion_tokens"],
        "calls": s["n_calls"],
        "accuracy": s["accuracy"],
        "invalid": s["n_invalid"],
        "generated_tok_per_s_wall": round(s["completion_tokens"] / r.wall_s, 1),
        "replica_busy_s": round(sum(x["busy_s"] for x in r.replica_stats), 1),
    }
    out["generated_tok_per_s_busy"] = round(s["completion_tokens"] / max(out["replica_busy_s"], 1e-9), 1)
    print(
        f"[real] {r.backend} ({r.dtype}) mad 3 agents x 2 rounds x 3 questions: "
        f"wall {out['wall_s']} s (incl. Ray start + model load), "
        f"{s['prompt_tokens']} prompt + {s['completion_tokens']} completion tokens, "
        f"{out['generated_tok_per_s_wall']} gen tok/s over wall, "
        f"{out['generated_tok_per_s_busy']} over replica busy time"
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-real", action="store_true")
    ap.add_argument("--out", default="bench/foundation.json")
    args = ap.parse_args()
    result = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        result["sparse_vs_mad"] = sparse_savings(tmp)
        if not args.skip_real:
            result["real_debate"] = real_debate(tmp)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
