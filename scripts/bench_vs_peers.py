"""The engine against the ways other debate code runs the same work, all on one vLLM engine.

Workload (defaults = the issue's): fully connected MAD, 10 arithmetic questions x 6 agents x 3
rounds = 180 calls, replies capped at 64 tokens, greedy decoding, the default backend (vLLM) and
dtype (``auto``: bfloat16 on this CPU), the packaged SmolLM2-135M-Instruct.

(a) *engine*: ``DebateRunner.run`` (Ray: coordinator, one actor per agent, one vLLM replica), timed on
    an engine already warmed by a one-question run (Ray start and model load are paid once per
    session, not per run; reported separately as ``engine_start_s``).
(b) *offline limit*: the same requests handed to one in-process vLLM engine with the same
    settings (started once, beside the Ray engine) as whole rounds (every question's round-r
    requests at once, rounds in order): what no scheduler can beat, since it already knows every reply.
(c) *sequential*: one call at a time, question by question, round by round, agent by agent (the
    loop most debate code runs).
(d) *thread pool*: one thread per question (pool size = number of questions), each running its
    question's calls one after another (the execution model of the multi-agent benchmark suites).

Identical work on all four. (b)-(d) send exactly the requests the engine sent: prompts are
rebuilt by replaying the protocol in-process (:func:`actors.local_run.run_local`, the same
``AgentCore`` prompt code the agent actors use) with a replay backend that answers each request
with the reply the engine recorded for it (found by its per-call seed, unique per agent, question
and round); each request keeps its seed, and generates exactly the number of tokens the engine's
call generated (``min_tokens = max_tokens = recorded``), so prompt and completion token counts
match call by call (checked, and reported as ``identical_prompts`` / ``identical_tokens``). The
replies (b)-(d) generate are discarded: with bf16, batch company changes texts, and feeding them
back would make the four workloads differ.

  speedup_vs_sequential = sequential_s / engine_s     (target >= 6)
  speedup_vs_threadpool = threadpool_s / engine_s     (target >= 1.5)
  efficiency_vs_offline = offline_s / engine_s        (target >= 0.9)

Repetitions (``--repeat``, default 3): run-to-run noise on a small shared machine is larger than
the margins measured, so each repetition is one engine run, then (b) and (d) replaying that same
run on the peer engine (kept alive beside the Ray engine, so every approach sees the same
background); (c) only in the first. The ratios reported are the medians of the repetitions' own
ratios (never a ratio of times from different repetitions); every repetition is in the JSON.

Run alone on the machine (2 cores: anything else running skews every figure).

Usage:
  .venv/bin/python scripts/bench_vs_peers.py                                   # full size, ~20 min here
  .venv/bin/python scripts/bench_vs_peers.py --questions 2 --agents 3 --rounds 2 --max-tokens 16
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.config import DEFAULT_MODEL, RunConfig  # noqa: E402
from engine.records import GenRequest, GenResult  # noqa: E402
from scripts._bench_common import add_workload_args, finish, loadavg, log_for, machine_info, scratch_dir  # noqa: E402

TARGETS = {"speedup_vs_sequential": 6.0, "speedup_vs_threadpool": 1.5, "efficiency_vs_offline": 0.9}


class ReplayBackend:
    """Answers each request with the reply the engine recorded for it (found by its seed);
    ``captured`` lists (request, recorded row) in the order the protocol asked for them."""

    simulated = False

    def __init__(self, rows: list[dict[str, Any]]):
        self.by_seed: dict[int, dict[str, Any]] = {}
        for r in rows:
            if r["seed"] in self.by_seed:
                raise ValueError(f"two recorded calls share seed {r['seed']}: cannot replay by seed")
            self.by_seed[r["seed"]] = r
        self.captured: list[tuple[GenRequest, dict[str, Any]]] = []

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        out = []
        for req in requests:
            row = self.by_seed[req.seed]
            self.captured.append((req, row))
            out.append(
                GenResult(
                    row["text"], row["prompt_tokens"], row["completion_tokens"], 0.0, row["finish_reason"], row["error"]
                )
            )
        return out


def recorded_requests(cfg: RunConfig, questions, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The engine's calls as requests: question, round, agent, messages, seed and the number of
    tokens to generate, in the protocol's own order (question, round, agent)."""
    from actors.local_run import run_local

    replay = ReplayBackend(calls)
    run_local(cfg, questions, replay)
    if len(replay.captured) != len(calls):
        raise RuntimeError(f"replay asked for {len(replay.captured)} calls, the engine recorded {len(calls)}")
    return [
        {
            "question": row["question_id"],
            "round": int(row["round"]),
            "agent": int(row["agent_id"]),
            "messages": req.messages,
            "seed": req.seed,
            "tokens": max(1, int(row["completion_tokens"])),
            "prompt_tokens": int(row["prompt_tokens"]),
        }
        for req, row in replay.captured
    ]


class ExactGenerator:
    """Generates exactly ``tokens`` tokens for a request on an in-process VLLMBackend's engine
    (greedy, the request's seed), and counts what it did."""

    def __init__(self, backend):
        self.backend = backend
        self._ids = itertools.count()

    async def __call__(self, item: dict[str, Any]) -> tuple[int, int]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        ids = self.backend.encode(item["messages"])
        params = SamplingParams(
            temperature=0.0,
            max_tokens=item["tokens"],
            min_tokens=item["tokens"],
            seed=int(item["seed"]) & 0x7FFFFFFF,
            output_kind=RequestOutputKind.FINAL_ONLY,
        )
        final = None
        async for out in self.backend.engine.generate(
            TokensPrompt(prompt_token_ids=ids), params, f"peer-{next(self._ids)}"
        ):
            final = out
        return len(final.prompt_token_ids), len(final.outputs[0].token_ids)


async def offline(gen: ExactGenerator, items: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """(b) whole rounds: every question's round-r requests at once, rounds one after another."""
    by_round: dict[int, list[int]] = defaultdict(list)
    for k, it in enumerate(items):
        by_round[it["round"]].append(k)
    out: list[Any] = [None] * len(items)
    for rnd in sorted(by_round):
        ks = by_round[rnd]
        for k, res in zip(ks, await asyncio.gather(*(gen(items[k]) for k in ks))):
            out[k] = res
    return out


async def sequential(gen: ExactGenerator, items: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """(c) one call at a time, in the protocol's order (question, round, agent)."""
    return [await gen(it) for it in items]


async def threadpool(gen: ExactGenerator, items: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """(d) a pool of one thread per question; each thread makes its question's calls one by one
    (blocking on each, as a synchronous client would), all questions at once."""
    loop = asyncio.get_running_loop()
    by_question: dict[str, list[int]] = defaultdict(list)
    for k, it in enumerate(items):
        by_question[it["question"]].append(k)
    out: list[Any] = [None] * len(items)

    def worker(ks: list[int]) -> None:
        for k in ks:
            out[k] = asyncio.run_coroutine_threadsafe(gen(items[k]), loop).result()

    with ThreadPoolExecutor(max_workers=len(by_question)) as pool:
        await asyncio.gather(*(loop.run_in_executor(pool, worker, ks) for ks in by_question.values()))
    return out


class PeerEngine:
    """One in-process vLLM engine with the engine run's settings, on an event loop of its own
    (a daemon thread), alive beside the Ray engine so every repetition times the engine and its
    peers side by side on the same requests."""

    def __init__(self, cfg: RunConfig):
        import threading

        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="peer-engine", daemon=True).start()
        t = time.perf_counter()
        self.backend = self.call(self._start(cfg))
        self.start_s = round(time.perf_counter() - t, 3)
        self.settings = self.backend.settings
        self.gen = ExactGenerator(self.backend)

    @staticmethod
    async def _start(cfg: RunConfig):
        from backends.registry import backend_spec, engine_settings
        from backends.vllm_backend import VLLMBackend

        return VLLMBackend(cfg.sampling.model, **engine_settings(cfg, backend_spec("vllm")))  # the replica's settings

    def call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def time(self, fn, items: list[dict[str, Any]]) -> dict[str, Any]:
        """Time one approach on ``items``; count what it generated against what the engine did."""
        t = time.perf_counter()
        res = self.call(fn(self.gen, items))
        dt = time.perf_counter() - t
        return {
            "seconds": round(dt, 3),
            "prompt_tokens": sum(p for p, _ in res),
            "completion_tokens": sum(c for _, c in res),
            "identical_prompts": all(p == it["prompt_tokens"] for (p, _), it in zip(res, items)),
            "identical_tokens": all(c == it["tokens"] for (_, c), it in zip(res, items)),
        }

    def shutdown(self) -> None:
        async def stop():  # on the engine's own loop, as its output handler expects
            self.backend.shutdown()

        self.call(stop())
        self.loop.call_soon_threadsafe(self.loop.stop)


def engine_run(runner, cfg: RunConfig, questions, work: Path, name: str) -> dict[str, Any]:
    """(a): one timed ``DebateRunner.run`` on an engine already warm; returns its figures and calls."""

    from engine.results import read_table

    res = runner.run(cfg.replace(out=str(work / name)), questions)
    calls = read_table(res.out_dir, "calls").to_pylist()
    return {
        "seconds": round(res.wall_s, 3),
        "backend": res.backend,
        "engine": res.engine,
        "calls": calls,
        "prompt_tokens": res.summary["prompt_tokens"],
        "completion_tokens": res.summary["completion_tokens"],
        "errors": res.summary["n_errors"],
    }


def ratios(rep: dict[str, Any]) -> dict[str, float | None]:
    e = rep["engine_s"]
    return {
        "efficiency_vs_offline": round(rep["offline"]["seconds"] / e, 3),
        "speedup_vs_threadpool": round(rep["threadpool"]["seconds"] / e, 3),
        "speedup_vs_sequential": round(rep["sequential"]["seconds"] / e, 3) if "sequential" in rep else None,
    }


def measure(
    questions: int,
    agents: int,
    rounds: int,
    max_tokens: int,
    dtype: str = "auto",
    skip_sequential: bool = False,
    repeat: int = 3,
    log=print,
) -> dict[str, Any]:
    """``repeat`` repetitions, each: one engine run, then (b) and (d) replaying that run's calls on
    the peer engine; (c), the slowest, in the first repetition only. Run-to-run noise on a small
    shared machine is larger than the margins being measured, so the headline ratios are the
    medians of the per-repetition ratios (every repetition is in the JSON)."""
    import statistics

    from actors.driver import DebateRunner
    from engine.dataset_routing import load_questions

    if repeat < 1:
        raise SystemExit("bench_vs_peers: --repeat must be at least 1")
    cfg = RunConfig.flat(
        protocol="mad",
        agents=agents,
        rounds=rounds,
        limit=questions,
        max_tokens=max_tokens,
        temperature=0.0,
        model=DEFAULT_MODEL,
        dtype=dtype,
        progress=False,
    ).validate()
    if cfg.sampling.backend != "vllm":
        raise SystemExit("bench_vs_peers: vLLM is not installed here (run scripts/setup.sh); it compares on vLLM")
    qs = load_questions(cfg.experiment.dataset, cfg.experiment.task, cfg.experiment.limit, cfg.experiment.seed)
    load_before = loadavg()
    reps: list[dict[str, Any]] = []
    with scratch_dir() as work_dir, DebateRunner() as runner:
        work = Path(work_dir)
        t = time.perf_counter()
        runner.run(cfg.replace(out=str(work / "warm"), limit=1, seed=cfg.experiment.seed + 1), qs[:1])
        engine_start_s = round(time.perf_counter() - t, 3)
        log(f"engine warm in {engine_start_s:.1f} s")
        peer = PeerEngine(cfg)
        try:
            for k in range(repeat):
                eng = engine_run(runner, cfg, qs, work, f"run{k}")
                if eng["errors"]:
                    raise SystemExit(
                        f"bench_vs_peers: engine run {k + 1} had {eng['errors']} error calls; not comparable"
                    )
                items = recorded_requests(cfg, qs, eng.pop("calls"))
                if k == 0:
                    peer.call(offline(peer.gen, items[: min(len(items), 4)]))  # warm-up (first-call allocations)
                rep: dict[str, Any] = {
                    "engine_s": eng["seconds"],
                    "prompt_tokens": eng["prompt_tokens"],
                    "completion_tokens": eng["completion_tokens"],
                    "calls": len(items),
                    "loadavg_before": loadavg(),
                }
                order = [("offline", offline), ("threadpool", threadpool)]
                if k == 0 and not skip_sequential:
                    order.append(("sequential", sequential))
                for name, fn in order:
                    rep[name] = peer.time(fn, items)
                rep.update(ratios(rep))
                log(
                    f"repetition {k + 1}/{repeat}: engine {rep['engine_s']:.1f} s, "
                    + ", ".join(f"{n} {rep[n]['seconds']:.1f} s" for n, _ in order)
                )
                reps.append(rep)
        finally:
            peer.shutdown()
    first = reps[0]
    med = lambda key: round(statistics.median(r[key] for r in reps), 3)  # noqa: E731
    res: dict[str, Any] = {
        "workload": {
            "protocol": "mad",
            "questions": questions,
            "agents": agents,
            "rounds": rounds,
            "max_tokens": max_tokens,
            "temperature": 0.0,
            "model": DEFAULT_MODEL,
            "calls": first["calls"],
        },
        "repeat": repeat,
        "engine_s": med("engine_s"),
        "engine_start_s": engine_start_s,
        "backend": eng["backend"],
        "engine_settings": eng["engine"],
        "peer_settings": peer.settings,
        "peer_start_s": peer.start_s,
        "prompt_tokens": first["prompt_tokens"],
        "completion_tokens": first["completion_tokens"],
        "offline_s": round(statistics.median(r["offline"]["seconds"] for r in reps), 3),
        "threadpool_s": round(statistics.median(r["threadpool"]["seconds"] for r in reps), 3),
        "sequential_s": first["sequential"]["seconds"] if "sequential" in first else None,
        "efficiency_vs_offline": med("efficiency_vs_offline"),
        "speedup_vs_threadpool": med("speedup_vs_threadpool"),
        "speedup_vs_sequential": first["speedup_vs_sequential"],
        "peers": {k: first[k] for k in ("offline", "threadpool", "sequential") if k in first},
        "repetitions": reps,
        "targets": TARGETS,
        "machine": machine_info(),
        "loadavg_before": load_before,
        "loadavg_after": loadavg(),
    }
    res["identical_work"] = all(
        p["prompt_tokens"] == r["prompt_tokens"]
        and p["completion_tokens"] == r["completion_tokens"]
        and p["identical_prompts"]
        and p["identical_tokens"]
        for r in reps
        for p in (r[n] for n in ("offline", "threadpool", "sequential") if n in r)
    )
    res["targets_met"] = {k: (res[k] is not None and res[k] >= v) for k, v in TARGETS.items()}
    return res


def print_table(res: dict[str, Any]) -> None:
    w, reps = res["workload"], res["repetitions"]
    print(
        f"\nMAD {w['questions']} q x {w['agents']} agents x {w['rounds']} rounds, {w['max_tokens']} tokens, greedy, "
        f"{res['backend']} ({res['engine_settings'][0].get('dtype')}); each repetition's peers replay its engine "
        f"run call by call (identical work: {res['identical_work']}); medians of {len(reps)} repetition(s)"
    )
    print(f"{'approach':<36}{'seconds':>10}{'engine is':>14}{'target':>10}   per repetition")
    rows = [
        ("(a) engine", "engine_s", None, None),
        ("(b) offline limit (whole rounds)", "offline", "efficiency_vs_offline", "{:.2f} of it"),
        ("(c) sequential loop", "sequential", "speedup_vs_sequential", "{:.2f}x faster"),
        ("(d) thread pool over questions", "threadpool", "speedup_vs_threadpool", "{:.2f}x faster"),
    ]
    for name, part, key, fmt in rows:
        secs = res["engine_s"] if key is None else res[f"{part}_s"]
        if secs is None:
            print(f"{name:<36}{'skipped':>10}")
            continue
        ratio = fmt.format(res[key]) if key else ""
        target = f">= {TARGETS[key]}" if key else ""
        each = ", ".join(
            f"{r['engine_s']:.1f}" if key is None else f"{r[part]['seconds']:.1f} ({r[key]:.2f})"
            for r in reps
            if key is None or part in r
        )
        print(f"{name:<36}{secs:>10.1f}{ratio:>14}{target:>10}   {each}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_workload_args(p)
    p.add_argument("--dtype", default="auto", choices=("auto", "bfloat16", "float32"))
    p.add_argument("--skip-sequential", action="store_true", help="leave out (c), the slowest")
    p.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="repetitions (engine run + its peers, side by side); the ratios reported are their medians",
    )
    p.add_argument("--out", default="bench/vs_peers.json")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    res = measure(
        args.questions,
        args.agents,
        args.rounds,
        args.max_tokens,
        args.dtype,
        args.skip_sequential,
        args.repeat,
        log=log_for(args.quiet),
    )
    return finish(res, args.out, argv, args.quiet, print_table)


if __name__ == "__main__":
    sys.exit(main())
