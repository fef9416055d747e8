"""The engine against the ways other debate code runs the same work, all on one vLLM engine.

Workload (defaults = the issue's): fully connected MAD, 10 arithmetic questions x 6 agents x 3
rounds = 180 calls, replies capped at 64 tokens, greedy decoding, the default backend (vLLM) and
dtype (``auto``: bfloat16 on this CPU), the packaged SmolLM2-135M-Instruct.

(a) *engine*: ``Engine.run`` (Ray: coordinator, one actor per agent, one vLLM replica), timed on
    an engine already warmed by a one-question run (Ray start and model load are paid once per
    session, not per run; reported separately as ``engine_start_s``).
(b) *offline limit*: the same requests handed to one in-process vLLM engine with the same
    settings as whole rounds (every question's round-r requests at once, rounds in order): what no
    scheduler can beat, since it already knows every reply.
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

Run alone on the machine (2 cores: anything else running skews every figure).

Usage:
  .venv/bin/python scripts/bench_vs_peers.py                                   # full size, ~15 min here
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

from scripts._bench_common import add_workload_args, finish, loadavg, log_for, machine_info, scratch_dir  # noqa: E402
from engine.config import DEFAULT_MODEL, RunConfig  # noqa: E402
from engine.records import GenRequest, GenResult  # noqa: E402

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
            out.append(GenResult(row["text"], row["prompt_tokens"], row["completion_tokens"], 0.0,
                                 row["finish_reason"], row["error"]))
        return out


def recorded_requests(cfg: RunConfig, questions, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The engine's calls as requests: question, round, agent, messages, seed and the number of
    tokens to generate, in the protocol's own order (question, round, agent)."""
    from actors.local_run import run_local

    replay = ReplayBackend(calls)
    run_local(cfg, questions, replay)
    if len(replay.captured) != len(calls):
        raise RuntimeError(f"replay asked for {len(replay.captured)} calls, the engine recorded {len(calls)}")
    return [{"question": row["question_id"], "round": int(row["round"]), "agent": int(row["agent_id"]),
             "messages": req.messages, "seed": req.seed, "tokens": max(1, int(row["completion_tokens"])),
             "prompt_tokens": int(row["prompt_tokens"])} for req, row in replay.captured]


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
        params = SamplingParams(temperature=0.0, max_tokens=item["tokens"], min_tokens=item["tokens"],
                                seed=int(item["seed"]) & 0x7FFFFFFF, output_kind=RequestOutputKind.FINAL_ONLY)
        final = None
        async for out in self.backend.engine.generate(TokensPrompt(prompt_token_ids=ids), params,
                                                      f"peer-{next(self._ids)}"):
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


def peers(cfg: RunConfig, items: list[dict[str, Any]], skip_sequential: bool, log) -> dict[str, Any]:
    """Time (b), (d) and (c) on one in-process vLLM engine with the engine run's settings."""
    from actors.backend_vllm import VLLMBackend
    from actors.driver import engine_settings

    async def main() -> dict[str, Any]:
        t = time.perf_counter()
        backend = VLLMBackend(cfg.model, **engine_settings(cfg, "vllm"))  # the replica's settings
        out: dict[str, Any] = {"start_s": round(time.perf_counter() - t, 3), "settings": backend.settings}
        gen = ExactGenerator(backend)
        await offline(gen, items[: min(len(items), 4)])  # warm-up (first-call allocations), not timed
        order = [("offline", offline), ("threadpool", threadpool)]
        if not skip_sequential:
            order.append(("sequential", sequential))
        for name, fn in order:
            log(f"{name}: {len(items)} requests ...")
            t = time.perf_counter()
            res = await fn(gen, items)
            dt = time.perf_counter() - t
            out[name] = {
                "seconds": round(dt, 3),
                "prompt_tokens": sum(p for p, _ in res), "completion_tokens": sum(c for _, c in res),
                "identical_prompts": all(p == it["prompt_tokens"] for (p, _), it in zip(res, items)),
                "identical_tokens": all(c == it["tokens"] for (_, c), it in zip(res, items)),
            }
            log(f"{name}: {dt:.1f} s")
        backend.shutdown()
        return out

    return asyncio.run(main())


def engine_side(cfg: RunConfig, questions, log) -> dict[str, Any]:
    """(a): warm an Engine with a one-question run, then time the whole run; return its calls."""
    import dataclasses

    from actors.driver import Engine
    from engine.results import read_table

    with scratch_dir() as work:
        t = time.perf_counter()
        with Engine() as engine:
            warm = dataclasses.replace(cfg, out=str(Path(work) / "warm"), limit=1, seed=cfg.seed + 1)
            engine.run(warm, questions[:1])
            start_s = time.perf_counter() - t
            log(f"engine warm in {start_s:.1f} s; timed run ...")
            res = engine.run(dataclasses.replace(cfg, out=str(Path(work) / "run")), questions)
        calls = read_table(res.out_dir, "calls").to_pylist()
    log(f"engine: {res.wall_s:.1f} s ({res.backend}, {res.dtype})")
    return {"seconds": round(res.wall_s, 3), "start_s": round(start_s, 3), "backend": res.backend,
            "engine": res.engine, "calls": calls,
            "prompt_tokens": res.summary["prompt_tokens"], "completion_tokens": res.summary["completion_tokens"],
            "errors": res.summary["n_errors"]}


def measure(questions: int, agents: int, rounds: int, max_tokens: int, dtype: str = "auto",
            skip_sequential: bool = False, log=print) -> dict[str, Any]:
    from engine.tasks import load_questions

    cfg = RunConfig(protocol="mad", agents=agents, rounds=rounds, limit=questions, max_tokens=max_tokens,
                    temperature=0.0, model=DEFAULT_MODEL, dtype=dtype, progress=False).validate()
    if cfg.backend != "vllm":
        raise SystemExit("bench_vs_peers: vLLM is not installed here (run scripts/setup.sh); it compares on vLLM")
    qs = load_questions(cfg.dataset, cfg.task, cfg.limit, cfg.seed)
    load_before = loadavg()
    eng = engine_side(cfg, qs, log)
    items = recorded_requests(cfg, qs, eng.pop("calls"))
    if eng["errors"]:
        raise SystemExit(f"bench_vs_peers: the engine run had {eng['errors']} error calls; not comparable")
    other = peers(cfg, items, skip_sequential, log)
    res: dict[str, Any] = {
        "workload": {"protocol": "mad", "questions": questions, "agents": agents, "rounds": rounds,
                     "max_tokens": max_tokens, "temperature": 0.0, "model": DEFAULT_MODEL, "calls": len(items)},
        "engine_s": eng["seconds"], "engine_start_s": eng["start_s"], "backend": eng["backend"],
        "engine_settings": eng["engine"], "peer_settings": other["settings"], "peer_start_s": other["start_s"],
        "prompt_tokens": eng["prompt_tokens"], "completion_tokens": eng["completion_tokens"],
        "offline_s": other["offline"]["seconds"], "threadpool_s": other["threadpool"]["seconds"],
        "sequential_s": other["sequential"]["seconds"] if "sequential" in other else None,
        "peers": {k: other[k] for k in ("offline", "threadpool", "sequential") if k in other},
        "targets": TARGETS, "machine": machine_info(), "loadavg_before": load_before, "loadavg_after": loadavg(),
    }
    res["efficiency_vs_offline"] = round(res["offline_s"] / res["engine_s"], 3)
    res["speedup_vs_threadpool"] = round(res["threadpool_s"] / res["engine_s"], 3)
    res["speedup_vs_sequential"] = round(res["sequential_s"] / res["engine_s"], 3) if res["sequential_s"] else None
    same = all(p["prompt_tokens"] == res["prompt_tokens"] and p["completion_tokens"] == res["completion_tokens"]
               and p["identical_prompts"] and p["identical_tokens"] for p in res["peers"].values())
    res["identical_work"] = same
    return res


def print_table(res: dict[str, Any]) -> None:
    w = res["workload"]
    print(f"\nMAD {w['questions']} q x {w['agents']} agents x {w['rounds']} rounds, {w['max_tokens']} tokens, greedy, "
          f"{res['backend']} ({res['engine_settings'][0].get('dtype')}); {res['prompt_tokens']:,} prompt + "
          f"{res['completion_tokens']:,} completion tokens on every side (identical: {res['identical_work']})")
    print(f"{'approach':<36}{'seconds':>10}{'engine is':>14}{'target':>10}")
    rows = [("(a) engine", res["engine_s"], None, None),
            ("(b) offline limit (whole rounds)", res["offline_s"], "efficiency_vs_offline", "{:.2f} of it"),
            ("(c) sequential loop", res["sequential_s"], "speedup_vs_sequential", "{:.2f}x faster"),
            ("(d) thread pool over questions", res["threadpool_s"], "speedup_vs_threadpool", "{:.2f}x faster")]
    for name, secs, key, fmt in rows:
        if secs is None:
            print(f"{name:<36}{'skipped':>10}")
            continue
        ratio = fmt.format(res[key]) if key else ""
        target = f">= {TARGETS[key]}" if key else ""
        print(f"{name:<36}{secs:>10.1f}{ratio:>14}{target:>10}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_workload_args(p)
    p.add_argument("--dtype", default="auto", choices=("auto", "bfloat16", "float32"))
    p.add_argument("--skip-sequential", action="store_true", help="leave out (c), the slowest")
    p.add_argument("--out", default="bench/vs_peers.json")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    res = measure(args.questions, args.agents, args.rounds, args.max_tokens, args.dtype, args.skip_sequential,
                  log=log_for(args.quiet))
    return finish(res, args.out, argv, args.quiet, print_table)


if __name__ == "__main__":
    sys.exit(main())
