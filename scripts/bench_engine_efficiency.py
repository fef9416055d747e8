"""Engine efficiency: the same generations through the whole engine vs straight to the backend in batches.

Question: how much does the engine (coordinator, agent actors, replica queue, continuous batching,
Parquet writer) add over a backend that is simply handed the same work as plain batches?

Method (the same requests on both sides, exactly):

1. Start an :class:`actors.driver.Engine` (Ray + the replica with the model loaded) and run the
   debate once to warm up (first-call imports, allocator, thread pools). Not timed.
2. *Engine side*: run the same debate again into a fresh ``--out`` (greedy decoding,
   ``temperature 0``) and take ``RunResult.wall_s``: the whole ``Engine.run`` — reading the out
   folder, writer and agent actors, coordinator, every call, Parquet writing — but not Ray start
   or model load, which the engine pays once per session, not per run.
3. *Reconstruct the exact requests* that run sent. Prompts are deterministic given the replies,
   so we replay the protocol in-process (:func:`actors.local_run.run_local`, the same
   ``AgentCore`` prompt code the agent actors use) with a *replay backend* that answers every
   request with the reply the engine recorded for it (looked up by its per-call seed, which is
   unique per agent, question and round and stored in the calls table). This yields the very
   messages each agent actor sent, round by round; the direct run's ``prompt_tokens`` are checked
   against the recorded ones, request by request.
4. *Direct side*: for each debate round, all of that round's requests (every question at once)
   go as ONE list to the same replica's ``generate_batch`` — the backend's own ``generate(list)``
   on the same model object, same process and torch threads, bypassing the replica queue, the
   agents and the coordinator. Each request's ``max_tokens`` is set to the completion length the
   engine recorded for it and decoding is greedy, so both sides generate the same number of
   tokens (reported; it can only differ if batched float math flips a greedy token into an
   early end-of-turn). Rounds are run one after another, since round t's prompts need round
   t−1's replies.

   efficiency = direct_time / engine_time   (target >= 0.9: the engine adds < 10%)

The direct side is an *oracle*: it already knows every reply, so it needs no agent/coordinator
round trips and its batches are as full as possible (whole rounds). The engine instead starts a
question's next round as soon as that question's round is done (no barrier across questions),
which can make it faster than round-synchronous batches. We also report ``debate_s``, the
longest question's wall time inside the coordinator (questions start together), i.e. the engine
time without per-run actor setup.

Both sides run their model work in the same replica process, so we also report that process's
CPU seconds on each side (psutil): ``efficiency_replica_cpu = direct CPU / engine CPU`` is much
less sensitive to other load on the machine than wall time (it leaves out the agent,
coordinator and writer processes, which the wall-time figure includes).

Repeats alternate engine and direct runs (``--repeats``); the headline uses the fastest of each
side (least disturbed by other load on a shared machine). ``os.getloadavg()`` is recorded before
and after.

Usage:
  .venv/bin/python scripts/bench_engine_efficiency.py                      # 4 q x 3 agents x 2 rounds, 64 tokens
  .venv/bin/python scripts/bench_engine_efficiency.py --backend simulated  # plumbing check, SIMULATED
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts._bench_common import finish, loadavg, log_for, machine_info, proc_cpu_s, scratch_dir  # noqa: E402
from engine.config import DEFAULT_MODEL, RunConfig  # noqa: E402
from engine.records import GenRequest, GenResult  # noqa: E402

TARGET = 0.9






class ReplayBackend:
    """Answers each request with the reply the engine recorded for it (found by its seed).

    ``captured`` lists (request, recorded row) in the order the protocol asked for them.
    """

    def __init__(self, rows: list[dict[str, Any]], simulated: bool):
        self.simulated = simulated
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


def reconstruct_rounds(cfg: RunConfig, questions, calls: list[dict[str, Any]], simulated: bool
                       ) -> dict[int, list[tuple[GenRequest, dict[str, Any]]]]:
    """The exact requests of a finished run, grouped by debate round (see module docstring, step 3)."""
    from actors.local_run import run_local

    replay = ReplayBackend(calls, simulated)
    run_local(cfg, questions, replay)
    if len(replay.captured) != len(calls):
        raise RuntimeError(f"replay asked for {len(replay.captured)} calls, the engine recorded {len(calls)}")
    rounds: dict[int, list] = defaultdict(list)
    for req, row in replay.captured:
        rounds[int(row["round"])].append((req, row))
    return dict(sorted(rounds.items()))


def direct_replay(generate_batch: Callable[[list[GenRequest]], list[GenResult]], rounds: dict[int, list]
                  ) -> dict[str, Any]:
    """Each round's requests as one batch (``generate_batch(list)``); greedy, recorded lengths."""
    total = 0.0
    per_round = []
    prompt_match = 0
    n = 0
    gen_tokens = prompt_tokens = 0
    same_text = 0
    for rnd, items in rounds.items():
        reqs = [GenRequest(messages=req.messages, temperature=0.0, top_p=1.0,
                           max_tokens=max(1, int(row["completion_tokens"])), seed=req.seed, meta=req.meta)
                for req, row in items]
        t = time.perf_counter()
        results = generate_batch(reqs)
        dt = time.perf_counter() - t
        total += dt
        per_round.append({"round": rnd, "requests": len(reqs), "seconds": round(dt, 6),
                          "completion_tokens": sum(r.completion_tokens for r in results)})
        for (req, row), res in zip(items, results):
            n += 1
            prompt_match += res.prompt_tokens == row["prompt_tokens"]
            same_text += res.text == row["text"]
            gen_tokens += res.completion_tokens
            prompt_tokens += res.prompt_tokens
    return {"seconds": total, "per_round": per_round, "requests": n, "prompt_tokens": prompt_tokens,
            "completion_tokens": gen_tokens, "prompt_tokens_match": prompt_match, "same_text": same_text}


def measure(questions: int = 4, agents: int = 3, rounds: int = 2, max_tokens: int = 64, repeats: int = 2,
            backend: str = "transformers", model: str = DEFAULT_MODEL, max_batch: int = 16, seed: int = 0,
            protocol: str = "mad", warmup: bool = True, workdir: str | None = None, log=print) -> dict[str, Any]:
    """Run the benchmark; returns the JSON-ready result (Ray is started if needed, actors are stopped)."""
    import ray

    from actors.driver import Engine, prepare
    from engine.results import read_table

    params = {"questions": questions, "agents": agents, "rounds": rounds, "max_tokens": max_tokens,
              "repeats": repeats, "backend": backend, "model": model, "max_batch": max_batch, "seed": seed,
              "protocol": protocol, "temperature": 0.0, "warmup": warmup}
    result: dict[str, Any] = {"benchmark": "engine_efficiency", "machine": machine_info(),
                              "date": time.strftime("%Y-%m-%d %H:%M:%S"), "params": params,
                              "loadavg_before": loadavg()}
    tmpdir = scratch_dir() if workdir is None else None
    base = Path(workdir or tmpdir.name)

    def config(out: str) -> RunConfig:
        return RunConfig(protocol=protocol, agents=agents, rounds=rounds, limit=questions, seed=seed,
                         backend=backend, model=model, temperature=0.0, max_tokens=max_tokens, max_batch=max_batch,
                         progress=False, out=str(base / out))

    try:
        cfg0 = config("warmup")
        qs, _ = prepare(cfg0)
        t = time.perf_counter()
        engine = Engine()
        replica = engine.replicas_for(cfg0, [model])[model][0]
        info = ray.get(replica.info.remote())
        result["startup_s"] = round(time.perf_counter() - t, 6)
        log(f"Ray + replica ready in {result['startup_s']:.1f} s (threads={info.get('threads')}); warming up ...")
        with engine:
            if warmup:
                result["warmup_wall_s"] = round(engine.run(cfg0, qs).wall_s, 6)
            reps = []
            for k in range(repeats):
                cfg = config(f"run{k}")
                cpu0 = proc_cpu_s(info["pid"])
                res = engine.run(cfg, qs)
                cpu1 = proc_cpu_s(info["pid"])
                if engine.replicas_for(cfg, [model])[model][0] is not replica:  # pragma: no cover - engine changed
                    raise RuntimeError("the engine replaced its replica between runs")
                calls = [r for r in read_table(cfg.out, "calls").to_pylist() if r["run_id"] == res.run_id]
                by_round = reconstruct_rounds(cfg, qs, calls, res.simulated)
                direct = direct_replay(lambda reqs: ray.get(replica.generate_batch.remote(reqs)), by_round)
                cpu2 = proc_cpu_s(info["pid"])
                debate_s = max(q["wall_s"] for q in res.questions)
                rep = {
                    "engine_s": round(res.wall_s, 6),
                    "engine_debate_s": round(debate_s, 6),
                    "engine_setup_s": round(res.wall_s - debate_s, 6),  # actor creation, table reads, teardown
                    "engine_calls": len(calls),
                    "engine_prompt_tokens": res.summary["prompt_tokens"],
                    "engine_completion_tokens": res.summary["completion_tokens"],
                    "direct_s": round(direct["seconds"], 6),
                    "direct_requests": direct["requests"],
                    "direct_prompt_tokens": direct["prompt_tokens"],
                    "direct_completion_tokens": direct["completion_tokens"],
                    "prompt_tokens_match": direct["prompt_tokens_match"],
                    "same_text": direct["same_text"],
                    "direct_rounds": direct["per_round"],
                    "efficiency": round(direct["seconds"] / res.wall_s, 6),
                    "efficiency_debate_only": round(direct["seconds"] / debate_s, 6),
                }
                if None not in (cpu0, cpu1, cpu2):  # the replica process's CPU time on each side
                    rep.update(engine_replica_cpu_s=round(cpu1 - cpu0, 3), direct_replica_cpu_s=round(cpu2 - cpu1, 3),
                               efficiency_replica_cpu=round((cpu2 - cpu1) / max(cpu1 - cpu0, 1e-9), 6))
                reps.append(rep)
                result["run_config"] = cfg.to_dict()
                log(f"repeat {k + 1}/{repeats}: engine {rep['engine_s']:.2f} s (debate {rep['engine_debate_s']:.2f} s), "
                    f"direct {rep['direct_s']:.2f} s, efficiency {rep['efficiency']:.3f}")
    finally:
        if tmpdir is not None:
            tmpdir.cleanup()

    best_engine = min(r["engine_s"] for r in reps)
    best_debate = min(r["engine_debate_s"] for r in reps)
    best_direct = min(r["direct_s"] for r in reps)
    efficiency = best_direct / best_engine
    result.update(
        repeats=reps,
        simulated=backend == "simulated",
        engine_s=best_engine,
        engine_debate_s=best_debate,
        direct_s=best_direct,
        efficiency=round(efficiency, 6),
        efficiency_debate_only=round(best_direct / best_debate, 6),
        efficiency_median_of_pairs=round(statistics.median(r["efficiency"] for r in reps), 6),
        engine_overhead_pct=round(100 * (best_engine / best_direct - 1), 2),
        same_work=all(r["prompt_tokens_match"] == r["direct_requests"] == r["engine_calls"]
                      and r["direct_completion_tokens"] == r["engine_completion_tokens"] for r in reps),
        target={"efficiency_at_least": TARGET, "met": efficiency >= TARGET},
        efficiency_replica_cpu=(round(min(r["direct_replica_cpu_s"] for r in reps)
                                      / max(min(r["engine_replica_cpu_s"] for r in reps), 1e-9), 6)
                                if all("engine_replica_cpu_s" in r for r in reps) else None),
        loadavg_after=loadavg(),
    )
    return result


def print_table(res: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    p = res["params"]
    title = (f"Engine vs direct batches: {p['protocol']} {p['questions']} q x {p['agents']} agents x {p['rounds']} rounds, "
             f"max {p['max_tokens']} tok, {p['backend']}{' (SIMULATED)' if res['simulated'] else ''}")
    t = Table(title=title)
    for col in ("repeat", "engine s", "engine debate s", "engine setup s", "direct s", "calls", "prompt tok eng/dir",
                "gen tok eng/dir", "same prompts", "same texts", "efficiency"):
        t.add_column(col, justify="right")
    for k, r in enumerate(res["repeats"]):
        t.add_row(str(k + 1), f"{r['engine_s']:.2f}", f"{r['engine_debate_s']:.2f}", f"{r['engine_setup_s']:.2f}", f"{r['direct_s']:.2f}",
                  str(r["engine_calls"]), f"{r['engine_prompt_tokens']}/{r['direct_prompt_tokens']}",
                  f"{r['engine_completion_tokens']}/{r['direct_completion_tokens']}",
                  f"{r['prompt_tokens_match']}/{r['direct_requests']}", f"{r['same_text']}/{r['direct_requests']}",
                  f"{r['efficiency']:.3f}")
    c = Console(width=200, markup=False, highlight=False)
    c.print(t)
    met = "MET" if res["target"]["met"] else "NOT MET"
    c.print(f"efficiency (fastest direct / fastest engine) = {res['efficiency']:.3f}  "
            f"[target >= {res['target']['efficiency_at_least']}: {met}]; engine overhead {res['engine_overhead_pct']:+.1f}%; "
            f"debate-only (no per-run actor setup) {res['efficiency_debate_only']:.3f}; same work on both sides: {res['same_work']}")
    if res.get("efficiency_replica_cpu") is not None:
        c.print(f"replica CPU seconds, direct / engine = {res['efficiency_replica_cpu']:.3f} "
                f"(engine {[r['engine_replica_cpu_s'] for r in res['repeats']]} s, direct "
                f"{[r['direct_replica_cpu_s'] for r in res['repeats']]} s; less sensitive to other load)")
    c.print(f"startup (Ray + model load, not in either time) {res['startup_s']:.1f} s; "
            f"load average before {res['loadavg_before']} after {res['loadavg_after']} on {res['machine']['cpus']} CPUs")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--questions", type=int, default=4)
    ap.add_argument("--agents", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2, help="engine/direct pairs (alternating); fastest of each is used")
    ap.add_argument("--backend", default="transformers", choices=("transformers", "simulated"))
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--max-batch", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-warmup", action="store_true", help="skip the untimed warm-up run")
    ap.add_argument("--out", default="bench/engine_efficiency.json")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    res = measure(questions=args.questions, agents=args.agents, rounds=args.rounds, max_tokens=args.max_tokens,
                  repeats=args.repeats, backend=args.backend, model=args.model, max_batch=args.max_batch,
                  seed=args.seed, warmup=not args.no_warmup, log=log_for(args.quiet))
    return finish(res, args.out, argv, args.quiet, print_table)


if __name__ == "__main__":
    sys.exit(main())
