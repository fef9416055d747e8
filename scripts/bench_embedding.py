"""Embedding throughput: sentences/s for a batch of 256 short texts through EmbeddingBackend.

Each timed run uses 256 new, distinct texts (nothing cached), after one warm-up batch; the
reported number is the median of the runs. Also times re-asking for a batch that is fully
cached. Prints the numbers and saves them to bench/embedding.json.

Usage: .venv/bin/python scripts/bench_embedding.py [--model all-minilm-l6-v2] [--n 256] [--runs 3]
       [--threads N] [--batch-size 64] [--out bench/embedding.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backends.embedding import DEFAULT_EMBEDDING_MODEL, EmbeddingBackend  # noqa: E402

TEMPLATES = [
    "The answer is {a}.",
    "So the final answer is {a}, since {b} plus {c} makes it.",
    "I agree with agent {b}: the result is {a}.",
    "First compute {b} times {c}, then add {a}; the total is {d}.",
    "My previous answer of {d} was wrong; it should be {a}.",
    "Paris is the capital of France and has about {a} districts.",
    "Step {b}: subtract {c} from {d} to get {a}.",
    "Therefore \\boxed{{{a}}} is correct.",
]


def texts(n: int, salt: int) -> list[str]:
    out = []
    for i in range(n):
        k = salt * 100_003 + i
        out.append(TEMPLATES[i % len(TEMPLATES)].format(a=k % 997, b=k % 13, c=k % 29, d=k))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=DEFAULT_EMBEDDING_MODEL)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--out", default="bench/embedding.json")
    args = ap.parse_args()

    t0 = time.perf_counter()
    emb = EmbeddingBackend(model=args.model, threads=args.threads, batch_size=args.batch_size)
    load_s = time.perf_counter() - t0
    emb.similarity(texts(args.batch_size, salt=10_000))  # warm-up

    times = []
    for r in range(args.runs):
        batch = texts(args.n, salt=r + 1)
        assert len(set(batch)) == args.n
        start = time.perf_counter()
        sim = emb.similarity(batch)
        times.append(time.perf_counter() - start)
        assert len(sim) == args.n
    median = statistics.median(times)
    start = time.perf_counter()
    emb.similarity(texts(args.n, salt=1))  # fully cached now
    cached_s = time.perf_counter() - start

    info = emb.info()
    result = {
        "model": args.model,
        "device": info["device"],
        "threads": info["threads"],
        "batch_size": args.batch_size,
        "n_texts": args.n,
        "runs": args.runs,
        "load_s": round(load_s, 3),
        "seconds_per_run": [round(t, 4) for t in times],
        "sentences_per_s": round(args.n / median, 1),
        "cached_similarity_s": round(cached_s, 4),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
    }
    print(
        f"{args.model} on {info['device']} ({info['threads']} threads, batch {args.batch_size}): "
        f"{result['sentences_per_s']} sentences/s for {args.n} short texts "
        f"(runs {result['seconds_per_run']} s; fully cached re-ask {cached_s * 1000:.1f} ms; load {load_s:.1f} s)"
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"saved {out}")


if __name__ == "__main__":
    main()
