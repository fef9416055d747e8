"""Does vLLM compute a shared prefix once when the requests sharing it arrive in one batch?

A group of ``--group`` prompts (about ``--prefix`` + ``--suffix`` tokens each) that begin with the
same ``--prefix`` tokens is sent to the real vLLM engine (the packaged SmolLM2 on this machine's
CPU, as a replica runs it: :class:`backends.vllm_backend.VLLMBackend`) in two ways:

* ``together``: all at once, as the coordinator sends one question's round under
  ``--prompt-layout shared`` (:mod:`actors.scheduling`);
* ``first_ahead``: the first request alone, the others as soon as its first token is out (its
  prefill done, so its prefix blocks are in the cache).

Each trial uses a prefix of its own (and the prefix cache is reset before it), so no trial hits
another's blocks. Reported per way: wall time of the group (median of ``--repeats`` trials) and
the summed ``num_cached_tokens`` of the group's requests (vLLM's prefix-cache hits), next to the
most that could hit: ``group - 1`` times the prefix rounded down to whole KV blocks. Greedy,
``--max-tokens`` generated tokens per request (end-of-sequence ignored), so both ways do the same
work. ``--max-num-batched-tokens`` (default: room for the whole group in one engine step; 0 for
the replica's own default) sets how many prompt tokens one engine step may take. Prints a table
and saves ``bench/prefix_batch.json``; docs/backends.md reports the numbers.

Usage:
  .venv/bin/python scripts/bench_prefix_batch.py                # 12 x (600 + 100) tokens, 3 repeats
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts._bench_common import finish, git_commit, loadavg, machine_info, rich_table  # noqa: E402

MODEL = "smollm2-135m-instruct"
WAYS = ("together", "first_ahead")
_WORDS = "the agents compare their answers and each explains the steps of its reasoning again".split()


def token_ids(tokenizer: Any, seed: str, n: int) -> list[int]:
    """``n`` token ids of a text that begins with ``seed`` (prompts of different seeds part at once)."""
    words = [seed] + [_WORDS[i % len(_WORDS)] for i in range(n)]
    ids = tokenizer.encode(" ".join(words), add_special_tokens=False)
    return list(ids[:n])


def group_prompts(tokenizer: Any, trial: int, group: int, prefix: int, suffix: int) -> list[list[int]]:
    """``group`` prompts: one prefix of ``prefix`` tokens (its own per trial) and a suffix each."""
    head = token_ids(tokenizer, f"Trial{trial}:", prefix)
    return [head + token_ids(tokenizer, f"Reader{trial}x{i}:", suffix) for i in range(group)]


async def _one(engine: Any, ids: list[int], params: Any, rid: str, first_token: asyncio.Event | None) -> int:
    """Run one request to its end; returns its ``num_cached_tokens``. ``first_token`` is set when
    its first output arrives (its prefill is done)."""
    cached = 0
    async for out in engine.generate({"prompt_token_ids": ids}, params, rid):
        if first_token is not None:
            first_token.set()
        cached = int(out.num_cached_tokens or 0)
    return cached


async def trial(engine: Any, prompts: list[list[int]], params: Any, way: str, tag: str) -> dict[str, Any]:
    """One group sent ``way``; its wall time, summed cached tokens and (first_ahead) the time to
    the first request's first token."""
    if not await engine.reset_prefix_cache():
        raise RuntimeError("vLLM did not reset its prefix cache (requests still running?)")
    start = time.perf_counter()
    first: float | None = None
    if way == "together":
        cached = await asyncio.gather(*(_one(engine, p, params, f"{tag}-{i}", None) for i, p in enumerate(prompts)))
    else:
        ready = asyncio.Event()
        lead = asyncio.ensure_future(_one(engine, prompts[0], params, f"{tag}-0", ready))
        await ready.wait()
        first = time.perf_counter() - start
        rest = await asyncio.gather(
            *(_one(engine, p, params, f"{tag}-{i}", None) for i, p in enumerate(prompts[1:], 1))
        )
        cached = [await lead, *rest]
    out: dict[str, Any] = {"wall_s": round(time.perf_counter() - start, 3), "cached_tokens": sum(cached)}
    if first is not None:
        out["first_token_s"] = round(first, 3)
    return out


async def _measure(args: argparse.Namespace, log) -> dict[str, Any]:
    from vllm import SamplingParams

    from backends.vllm_backend import VLLMBackend

    budget = args.max_num_batched_tokens
    if budget is None:
        budget = args.group * (args.prefix + args.suffix)
    backend = VLLMBackend(MODEL, dtype="float32", max_batch=args.group, max_num_batched_tokens=budget or None, seed=0)
    params = SamplingParams(temperature=0.0, max_tokens=args.max_tokens, ignore_eos=True)
    engine, tok = backend.engine, backend.tokenizer
    await trial(engine, group_prompts(tok, -1, 2, args.prefix, args.suffix), params, "together", "warm")
    block = int(backend.settings["block_size"])
    runs: dict[str, list[dict[str, Any]]] = {w: [] for w in WAYS}
    load = loadavg()
    for r in range(args.repeats):
        for w in WAYS if r % 2 == 0 else WAYS[::-1]:  # alternate the order: drift hits both ways alike
            prompts = group_prompts(tok, 2 * r + WAYS.index(w), args.group, args.prefix, args.suffix)
            runs[w].append(await trial(engine, prompts, params, w, f"{w}-{r}"))
            log(f"repeat {r} {w}: {runs[w][-1]}")
    backend.shutdown()
    return {
        "benchmark": "prefix_batch",
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "commit": git_commit(),
        "machine": machine_info(),
        "params": {
            "model": MODEL,
            "group": args.group,
            "prefix_tokens": args.prefix,
            "suffix_tokens": args.suffix,
            "max_tokens": args.max_tokens,
            "repeats": args.repeats,
        },
        "settings": backend.settings,
        "cacheable_tokens": (args.group - 1) * (args.prefix // block) * block,
        "ways": {
            w: {
                "wall_s_median": round(statistics.median(t["wall_s"] for t in ts), 3),
                "cached_tokens_median": statistics.median(t["cached_tokens"] for t in ts),
                "trials": ts,
            }
            for w, ts in runs.items()
        },
        "loadavg_before": load,
        "loadavg_after": loadavg(),
    }


def print_table(res: dict[str, Any]) -> None:
    p = res["params"]
    console, table = rich_table(
        f"{p['group']} prompts sharing a {p['prefix_tokens']}-token prefix (+{p['suffix_tokens']} each), "
        f"max_num_batched_tokens {res['settings']['max_num_batched_tokens']}; "
        f"cacheable {res['cacheable_tokens']} tokens",
        ("way", "wall s (median)", "cached tokens (median)", "trials' wall s"),
    )
    for way, r in res["ways"].items():
        trials = ", ".join(f"{t['wall_s']:.2f}" for t in r["trials"])
        table.add_row(way, f"{r['wall_s_median']:.2f}", f"{r['cached_tokens_median']:.0f}", trials)
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--group", type=int, default=12, help="prompts sharing the prefix (default 12)")
    ap.add_argument("--prefix", type=int, default=600, help="tokens of the shared prefix (default 600)")
    ap.add_argument("--suffix", type=int, default=100, help="tokens of each prompt's own part (default 100)")
    ap.add_argument("--max-tokens", type=int, default=8, help="tokens generated per request (default 8)")
    ap.add_argument("--repeats", type=int, default=3, help="trials of each way (default 3)")
    ap.add_argument(
        "--max-num-batched-tokens",
        type=int,
        default=None,
        help="prompt tokens one engine step takes (default: the whole group; 0: the replica's default)",
    )
    ap.add_argument("--out", default="bench/prefix_batch.json")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    res = asyncio.run(_measure(args, print if not args.quiet else (lambda *a: None)))
    return finish(res, args.out, argv, args.quiet, print_table)


if __name__ == "__main__":
    sys.exit(main())
