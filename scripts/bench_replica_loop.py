"""Event-loop stalls and throughput of a vLLM replica: prompts fitted on the loop (old) vs in a tokenizer thread.

A replica awaits ``VLLMBackend.agenerate`` for every agent call on one asyncio loop, the loop that
also runs vLLM ``AsyncLLM``'s output handling. Each request's prompt is fitted first: chat
template and tokenisation, and under ``--context-overflow truncate`` one more tokenisation per
candidate prompt as the oldest turns are dropped. This script sends bursts of concurrent requests
whose prompts are long debate transcripts to one ``VLLMBackend`` on the default model and measures

* the loop's stalls: a heartbeat coroutine sleeps ``--period-ms`` (5 ms) over and over and records
  how late it wakes; max, p99 and total lateness over the burst. While the loop is stalled, no
  request's output is handled and no new request reaches the engine;
* the burst's wall time and requests per second.

Modes (``--modes``), run alternately on the same engine (the order flips every repetition),
several repetitions, medians (and the median of each repetition's own loop/mode ratio):

* ``loop``: the old path, every prompt fitted on the event loop (the script replaces this
  instance's ``_off_loop`` with a plain call, which is the code before the change);
* ``thread``: the backend as shipped, prompts fitted in its one tokenizer thread;
* ``thread2``: a two-thread pool in place of the backend's thread (vLLM's tokenizer is a
  thread-safe pool of copies, so this is safe here), to see whether more threads would help;
* ``prefitted``: no fitting at all, every request's prompt as fitted in its previous run: what
  is left is vLLM's own work on the loop (adding the burst's requests at once, handling their
  outputs) and the CPU the engine takes.

Workloads (``--cases``), each a burst of concurrent requests on agent 0's prompt at the last round
of a MAD debate of 3 agents whose every reply is ``--words`` words (seeded text), each request with
its own last line and seed:

* ``fits``: ``--fit-requests`` requests on a transcript of ``--fit-rounds`` rounds (about 4,000
  tokens), which fits the model's context (8,192 for SmolLM2);
* ``truncate``: ``--trunc-requests`` requests on a transcript of ``--trunc-rounds`` rounds (about
  13,000 tokens) with ``--context-overflow truncate``: turns are dropped until the prompt fits,
  re-tokenising the whole prompt each time.

The tokenizer does every request's whole transcript, as it would for distinct transcripts; the
shared part lets vLLM's prefix cache hold the prompts once. Each case is sent once, untimed, before
the timed runs (one request, then the burst), so the timed runs prefill a few tokens per request and
generate ``--max-tokens`` each: the engine's compute is small and the request path shows (distinct
cold prompts would add minutes of prefill on a small CPU, the same in every mode). Every mode sends
the same token ids (checked: the same prompt tokens and dropped messages in every run).

Usage:
  .venv/bin/python scripts/bench_replica_loop.py                         # ~4 min on 2 cores
  .venv/bin/python scripts/bench_replica_loop.py --repeats 1 --cases fits --fit-requests 4
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.config import DEFAULT_MODEL  # noqa: E402
from engine.records import GenRequest  # noqa: E402
from scripts._bench_common import finish, git_commit, loadavg, log_for, machine_info, rich_table  # noqa: E402

MODES = ("loop", "thread", "thread2", "prefitted")
WORDS = (
    "the answer is because we add multiply then divide the result step first second so therefore total each "
    "agent checks numbers carry digit sum product remainder again which gives"
).split()


def transcript(seed: int, rounds: int, words: int, agents: int = 3) -> list[dict[str, str]]:
    """Agent 0's prompt at round ``rounds`` (0 = the first answer) of a MAD debate of ``agents``
    agents whose every reply is ``words`` seeded words: the question, its own replies, and the
    other agents' replies of each earlier round, as the engine's prompts build them."""
    from engine.prompts import PromptSet, build_messages

    rng = random.Random(seed)
    prompts = PromptSet.for_task("numeric")
    question = f"What is {rng.randint(100, 999)} * {rng.randint(10, 99)}?"
    history: list[list[dict[str, str]]] = [[] for _ in range(agents)]
    last: list[str] = []
    for r in range(rounds + 1):
        replies = []
        for a in range(agents):
            peers = [(b, last[b]) for b in range(agents) if b != a] if r else []
            msgs, user = build_messages(prompts, question, "debate" if r else "first", history[a], peers)
            if r == rounds and a == 0:
                return msgs
            replies.append(" ".join(rng.choice(WORDS) for _ in range(words)) + f" The answer is {rng.randint(1, 99)}.")
            history[a] += [user, {"role": "assistant", "content": replies[-1]}]
        last = replies
    raise AssertionError("unreachable")


def case_requests(name: str, n: int, rounds: int, words: int, overflow: str, max_tokens: int) -> list[GenRequest]:
    """A burst of ``n`` requests on one debate transcript, each with its own last line (and seed):
    the tokenizer does the whole transcript's work for every request, while vLLM's prefix cache
    holds their shared part once, so their prefill is a few tokens each once the cache is warm."""
    base = transcript(1000 * (1 + ("fits", "truncate").index(name)), rounds, words)
    reqs = []
    for i in range(n):
        msgs = base[:-1] + [{**base[-1], "content": base[-1]["content"] + f"\n(Call {i + 1} of {n}.)"}]
        reqs.append(
            GenRequest(messages=msgs, temperature=0.7, max_tokens=max_tokens, seed=i, context_overflow=overflow)
        )
    return reqs


class Modes:
    """Runs one backend instance's prompt fitting (its ``_off_loop``) the way a mode asks, and
    records the seconds each fitting took:

    * ``loop``: a plain call on the event loop (the code before the change);
    * ``thread``: the backend's own ``_off_loop``, its one tokenizer thread (the code as shipped);
    * ``thread2``: a two-thread pool of this script's in place of the backend's thread;
    * ``prefitted``: no fitting, each request's prompt as fitted in its previous run (the loop's
      lateness from vLLM's own work, with no tokenisation at all).
    """

    def __init__(self, backend):
        self.backend = backend
        self.two = ThreadPoolExecutor(max_workers=2, thread_name_prefix="bench-tokenize")
        self.fitted: dict[int, Any] = {}  # id(request) -> its prompt as last fitted
        self.fit_s: list[float] = []  # one entry per fitting (list.append is atomic across threads)
        self.set("thread")

    def _fit(self, fn, args: tuple) -> Any:
        t = time.perf_counter()
        out = fn(*args)
        self.fit_s.append(time.perf_counter() - t)
        self.fitted[id(_request(args))] = out
        return out

    def set(self, mode: str) -> None:
        b, fit, two = self.backend, self._fit, self.two
        shipped = type(b)._off_loop

        async def off_loop(fn, *args):
            if mode == "loop":
                return fit(fn, args)
            if mode == "prefitted":
                return self.fitted[id(_request(args))]
            if mode == "thread2":
                return await asyncio.get_running_loop().run_in_executor(two, fit, fn, args)
            return await shipped(b, fit, fn, args)

        b._off_loop = off_loop

    def close(self) -> None:
        self.backend.__dict__.pop("_off_loop", None)
        self.two.shutdown(wait=True)


def _request(args: tuple) -> GenRequest:
    return next(a for a in args if isinstance(a, GenRequest))


class Heartbeat:
    """A coroutine that sleeps ``period`` seconds over and over on the running loop and records how
    late each wake-up was (seconds past the period)."""

    def __init__(self, period: float):
        self.period = period
        self.late: list[float] = []
        self._task: asyncio.Task | None = None

    async def _beat(self) -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(self.period)
            self.late.append(time.perf_counter() - t - self.period)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._beat())

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass


def percentile(xs: list[float], q: float) -> float:
    """The ``q``-quantile of ``xs`` (nearest rank), 0.0 for none."""
    if not xs:
        return 0.0
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(round(q * len(s))) - 1))]


async def burst(backend, reqs: list[GenRequest], period: float) -> dict[str, Any]:
    """All ``reqs`` at once with the heartbeat ticking; wall time, lateness and what came back."""
    beat = Heartbeat(period)
    beat.start()
    await asyncio.sleep(period * 2)  # the heartbeat's first ticks on an idle loop
    t = time.perf_counter()
    results = await asyncio.gather(*(backend.agenerate(r) for r in reqs))
    wall = time.perf_counter() - t
    await beat.stop()
    lat = [r.latency_s for r in results]
    return {
        "wall_s": round(wall, 4),
        "requests_per_s": round(len(reqs) / wall, 2),
        "late_max_ms": round(1000 * max(beat.late, default=0.0), 2),
        "late_p99_ms": round(1000 * percentile(beat.late, 0.99), 2),
        "late_p50_ms": round(1000 * percentile(beat.late, 0.50), 2),
        "late_total_ms": round(1000 * sum(beat.late), 1),
        "ticks": len(beat.late),
        "latency_p50_s": round(statistics.median(lat), 4),
        "latency_max_s": round(max(lat), 4),
        "prompt_tokens": sum(r.prompt_tokens for r in results),
        "completion_tokens": sum(r.completion_tokens for r in results),
        "truncated_messages": sum(r.truncated_messages for r in results),
        "errors": [r.error for r in results if r.error],
    }


def fit_cost_ms(backend, req: GenRequest) -> float:
    """Milliseconds to fit one request's prompt on its own (``fit_prompt`` with the backend's
    tokenizer, in this thread, best of 3): the work each request puts on the loop in the old path."""
    from backends.model_store import fit_prompt

    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        fit_prompt(backend.encode, req, backend.max_model_len)
        best = min(best, time.perf_counter() - t)
    return round(1000 * best, 2)


def summarise(runs: list[dict[str, Any]], modes: tuple[str, ...]) -> dict[str, Any]:
    """Medians per mode over the repetitions, and the median of each repetition's old/new ratios."""
    keys = (
        "wall_s",
        "requests_per_s",
        "late_max_ms",
        "late_p99_ms",
        "late_p50_ms",
        "late_total_ms",
        "latency_p50_s",
        "latency_max_s",
        "fit_s",
    )
    out: dict[str, Any] = {}
    for m in modes:
        rs = [r for r in runs if r["mode"] == m]
        out[m] = {k: round(statistics.median(r[k] for r in rs), 4) for k in keys}
    for m in modes:
        if m == "loop":
            continue
        reps = sorted({r["repeat"] for r in runs})
        pair = [({r["mode"]: r for r in runs if r["repeat"] == k}) for k in reps]
        out[f"loop_over_{m}"] = {
            k: round(statistics.median(p["loop"][k] / p[m][k] for p in pair if p[m][k] > 0), 3)
            for k in ("wall_s", "late_max_ms", "late_p99_ms")
        }
    return out


def measure(
    cases: tuple[str, ...] = ("fits", "truncate"),
    modes: tuple[str, ...] = ("loop", "thread", "thread2", "prefitted"),
    repeats: int = 5,
    fit_requests: int = 32,
    fit_rounds: int = 3,
    trunc_requests: int = 16,
    trunc_rounds: int = 10,
    words: int = 400,
    max_tokens: int = 8,
    period_ms: float = 5.0,
    model: str = DEFAULT_MODEL,
    log=print,
) -> dict[str, Any]:
    from backends.vllm_backend import VLLMBackend

    params = {
        "cases": list(cases),
        "modes": list(modes),
        "repeats": repeats,
        "fit_requests": fit_requests,
        "fit_rounds": fit_rounds,
        "trunc_requests": trunc_requests,
        "trunc_rounds": trunc_rounds,
        "words": words,
        "agents": 3,
        "max_tokens": max_tokens,
        "period_ms": period_ms,
        "model": model,
    }
    res: dict[str, Any] = {
        "benchmark": "replica_loop",
        "machine": machine_info(),
        "commit": git_commit(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "params": params,
        "loadavg_before": loadavg(),
    }
    specs = {"fits": (fit_requests, fit_rounds, "error"), "truncate": (trunc_requests, trunc_rounds, "truncate")}
    bursts = {c: case_requests(c, specs[c][0], specs[c][1], words, specs[c][2], max_tokens) for c in cases}
    t = time.perf_counter()
    backend = VLLMBackend(model)
    res["engine_start_s"] = round(time.perf_counter() - t, 1)
    res["settings"] = backend.settings
    log(f"engine up in {res['engine_start_s']} s")

    modes_of = Modes(backend)

    async def run() -> None:
        res["cases"] = {}
        for c in cases:
            reqs = bursts[c]
            t = time.perf_counter()
            await backend.agenerate(reqs[0])  # the shared prefix into vLLM's cache, once
            warm = await burst(backend, reqs, period_ms / 1000)  # and every request's own tail; untimed
            ids = [len(backend.encode(r.messages)) for r in reqs]
            res["cases"][c] = {
                "requests": len(reqs),
                "context_overflow": reqs[0].context_overflow,
                "transcript_tokens_mean": round(statistics.mean(ids)),
                "transcript_tokens_max": max(ids),
                "fit_ms_per_request": fit_cost_ms(backend, reqs[0]),
                "warmup_s": round(time.perf_counter() - t, 2),
                "warmup_errors": warm["errors"],
                "runs": [],
            }
            log(
                f"{c}: {len(reqs)} requests of ~{res['cases'][c]['transcript_tokens_mean']} tokens, fit "
                f"{res['cases'][c]['fit_ms_per_request']} ms each, warm-up {res['cases'][c]['warmup_s']} s"
            )
        for k in range(repeats):
            order = modes if k % 2 == 0 else tuple(reversed(modes))
            for c in cases:
                for m in order:
                    modes_of.set(m)
                    n0 = len(modes_of.fit_s)
                    r = {"repeat": k, "mode": m, **await burst(backend, bursts[c], period_ms / 1000)}
                    r["fit_s"] = round(sum(modes_of.fit_s[n0:]), 4)  # seconds spent fitting prompts, all threads
                    res["cases"][c]["runs"].append(r)
                    log(
                        f"  rep {k} {c:8s} {m:7s}: wall {r['wall_s']:.3f} s, loop late max {r['late_max_ms']:.1f} ms "
                        f"p99 {r['late_p99_ms']:.1f} ms, fitting {r['fit_s']:.2f} s, {r['prompt_tokens']} prompt tokens"
                    )

    try:
        asyncio.run(run())
    finally:
        modes_of.close()
        backend.shutdown()
    for d in res["cases"].values():
        d["summary"] = summarise(d["runs"], modes)
        seen = {(r["prompt_tokens"], r["truncated_messages"]) for r in d["runs"]}
        d["same_prompts_every_run"] = len(seen) == 1  # the modes send the same token ids
        d["errors"] = sum(len(r["errors"]) for r in d["runs"])
    res["loadavg_after"] = loadavg()
    return res


def print_table(res: dict[str, Any]) -> None:
    p = res["params"]
    c, t = rich_table(
        f"vLLM replica event loop during a burst of long debate transcripts ({p['model']}, "
        f"{p['repeats']} repetitions, medians; heartbeat every {p['period_ms']:g} ms)",
        (
            "case",
            "requests x tokens",
            "fit ms/request",
            "mode",
            "fitting s",
            "wall s",
            "requests/s",
            "loop late max ms",
            "late p99 ms",
            "late total ms",
            "request latency p50 / max s",
            "loop/mode wall",
            "loop/mode late max",
        ),
    )
    for name, d in res["cases"].items():
        s = d["summary"]
        for m in p["modes"]:
            x = s[m]
            ratio = s.get(f"loop_over_{m}")
            t.add_row(
                name,
                f"{d['requests']} x {d['transcript_tokens_mean']}",
                f"{d['fit_ms_per_request']:.1f}",
                m,
                f"{x['fit_s']:.2f}",
                f"{x['wall_s']:.3f}",
                f"{x['requests_per_s']:.1f}",
                f"{x['late_max_ms']:.1f}",
                f"{x['late_p99_ms']:.1f}",
                f"{x['late_total_ms']:.0f}",
                f"{x['latency_p50_s']:.2f} / {x['latency_max_s']:.2f}",
                f"{ratio['wall_s']:.2f}" if ratio else "",
                f"{ratio['late_max_ms']:.1f}" if ratio else "",
            )
    c.print(t)
    same = all(d["same_prompts_every_run"] for d in res["cases"].values())
    c.print(
        f"loop = tokenised on the event loop (the old path); thread = the backend's tokenizer thread (as shipped); "
        f"thread2 = a two-thread pool; prefitted = no fitting (prompts fitted in an earlier run). fitting s = "
        f"seconds inside prompt fitting, all threads; late total = the heartbeat's lateness added up. Same prompt "
        f"tokens and dropped messages in every run: {'yes' if same else 'NO'}; errors: "
        f"{sum(d['errors'] for d in res['cases'].values())}. Engine start {res['engine_start_s']} s, commit "
        f"{res['commit']}, load average {res['loadavg_before']} -> {res['loadavg_after']} on "
        f"{res['machine']['cpus']} CPUs"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="fits,truncate", help="comma-separated: fits, truncate")
    ap.add_argument(
        "--modes", default="loop,thread,thread2,prefitted", help=f"comma-separated, from {', '.join(MODES)}"
    )
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--fit-requests", type=int, default=32)
    ap.add_argument("--fit-rounds", type=int, default=3)
    ap.add_argument("--trunc-requests", type=int, default=16)
    ap.add_argument("--trunc-rounds", type=int, default=10)
    ap.add_argument("--words", type=int, default=400, help="words per agent reply")
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--period-ms", type=float, default=5.0, help="heartbeat sleep")
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--out", default="bench/replica_loop.json")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    modes = tuple(m for m in args.modes.split(",") if m)
    if "loop" not in modes or any(m not in MODES for m in modes) or len(modes) < 2:
        ap.error(f"--modes: 'loop' and at least one of {', '.join(MODES[1:])}")
    res = measure(
        cases=tuple(c for c in args.cases.split(",") if c),
        modes=modes,
        repeats=args.repeats,
        fit_requests=args.fit_requests,
        fit_rounds=args.fit_rounds,
        trunc_requests=args.trunc_requests,
        trunc_rounds=args.trunc_rounds,
        words=args.words,
        max_tokens=args.max_tokens,
        period_ms=args.period_ms,
        model=args.model,
        log=log_for(args.quiet),
    )
    return finish(res, args.out, argv, args.quiet, print_table)


if __name__ == "__main__":
    sys.exit(main())
