"""The engine vs the sequential per-call loop that other debate code uses.

Workload (defaults): fully connected MAD, 10 arithmetic questions x 6 agents x 3 rounds = 180
calls, replies capped at 64 tokens, greedy decoding (``temperature 0``) on both sides so outputs
can be compared, the real CPU model (SmolLM2-135M-Instruct).

* *Sequential*: :func:`actors.local_run.run_local` with an in-process ``TransformersBackend``:
  for each question, each round, each agent it builds the prompt (the same ``AgentCore`` and
  protocol generator the engine's actors use) and calls ``backend.generate([request])`` — one
  call at a time, no Ray. That is the loop most debate code runs.
* *Engine*: ``Engine.run`` (:mod:`actors.driver`): all questions concurrently, every agent an
  actor, one replica doing continuous batching (``--max-batch`` rows). Timed with an Engine
  already warmed by a 1-question run (Ray started, model loaded); the end-to-end figure adds
  Ray start + replica/model load (measured when the Engine starts) to the timed run. The
  sequential end-to-end figure likewise adds its in-process model load.

  speedup = sequential_s / engine_s     (target >= 4x on this 2-core CPU)

Outputs: texts are matched per call by the per-call seed (unique per agent, question and
round). Greedy decoding of a row is mathematically independent of its batch, but batched,
left-padded matmuls round differently from batch-1 ones, so a near-tie can flip a token and the
text diverges from there (and every later round of that question reads the diverged text). We
report the identical fraction overall and per round honestly.

Backend batch scaling (why the speedup is what it is): the same in-process backend generates
exactly 64 tokens per row (end-of-turn disabled on the benchmark's own backend instance, so
every row does the same work) for batches of 1, 2, 4, ... 32 copies of a typical debate prompt
(the median-length prompt of the sequential run). On a CPU, decoding a small model is bound by
memory traffic and per-step Python/kernel overhead, so a batch of B rows costs much less than B
single steps: tok/s(B)/tok/s(1) is the most the engine can gain at batch B. The engine keeps
about ``--max-batch`` rows running while a round has that many calls waiting (here 60 calls per
round across questions), so its speedup should land near tok/s(max_batch)/tok/s(1), minus
prefill of longer later-round prompts, padding, and batch tails. The JSON also gives the
engine's own tok/s over the replica's busy time and the batch size that matches it on the
scaling curve.

CPU time: the sequential loop's process CPU seconds and the engine replica's (psutil) are
reported too; ``speedup_cpu`` = sequential CPU / replica CPU compares the model work with much
less sensitivity to other load (multi-threaded torch slows down sharply when other processes
take its cores), but leaves out the engine's agent/coordinator/writer processes.

``os.getloadavg()`` is recorded before and after: on a shared machine other load slows both
sides, not necessarily equally.

The sequential part (about 20 minutes at full size here) is saved to ``--checkpoint`` (default
``bench/vs_sequential.sequential.json``) as soon as it is measured; after an interrupted run,
``--reuse-sequential`` uses it if its parameters match (its own date and load are kept).

Usage:
  .venv/bin/python scripts/bench_vs_sequential.py                          # full size, ~30 minutes
  .venv/bin/python scripts/bench_vs_sequential.py --questions 2 --agents 3 --rounds 2 --sizes 1,2,4
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts._bench_common import finish, loadavg, log_for, machine_info, proc_cpu_s, scratch_dir  # noqa: E402
from engine.config import DEFAULT_MODEL, RunConfig  # noqa: E402
from engine.records import GenRequest, GenResult  # noqa: E402

TARGET = 4.0






class Recording:
    """Wraps a backend; records every request it is given (to pick a typical prompt)."""

    def __init__(self, backend):
        self.backend = backend
        self.simulated = bool(getattr(backend, "simulated", False))
        self.requests: list[tuple[GenRequest, GenResult]] = []

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        results = self.backend.generate(requests)
        self.requests.extend(zip(requests, results))
        return results


def make_local_backend(cfg: RunConfig, max_batch: int):
    """The in-process backend for the sequential loop and the scaling curve (same options as a replica)."""
    from actors.driver import replica_options
    from actors.replica_actor import make_backend

    _, opts = replica_options(cfg)
    if cfg.backend == "transformers":
        opts = {**opts, "threads": os.cpu_count() or 1, "max_batch": max_batch}
    return make_backend(cfg.backend, cfg.model, opts)


def run_sequential(cfg: RunConfig, questions, backend) -> dict[str, Any]:
    from actors.local_run import run_local

    rec = Recording(backend)
    cpu = time.process_time()
    t = time.perf_counter()
    out = run_local(cfg, questions, rec)
    seconds = time.perf_counter() - t
    cpu = time.process_time() - cpu
    calls = [r for _, log in out for r in log.records]
    return {
        "seconds": seconds,
        "cpu_s": cpu,
        "calls": {c.seed: {"round": c.round, "text": c.text, "answer": c.answer, "prompt_tokens": c.prompt_tokens,
                           "completion_tokens": c.completion_tokens} for c in calls},
        "n_calls": len(calls),
        "prompt_tokens": sum(c.prompt_tokens for c in calls),
        "completion_tokens": sum(c.completion_tokens for c in calls),
        "requests": rec.requests,
    }


def typical_request(requests: list[tuple[GenRequest, GenResult]]) -> tuple[GenRequest, int]:
    """The request of median prompt length (ties: the first such) and its prompt tokens."""
    ranked = sorted(requests, key=lambda rr: rr[1].prompt_tokens)
    req, res = ranked[(len(ranked) - 1) // 2]
    return req, res.prompt_tokens


def batch_scaling(backend, request: GenRequest, sizes: list[int], max_tokens: int, repeats: int = 1
                  ) -> list[dict[str, Any]]:
    """tok/s of ``generate`` on B copies of one prompt, every row generating exactly ``max_tokens``.

    End-of-turn is switched off on this backend instance while measuring (restored afterwards),
    so that every row does the same amount of work whatever the model writes.
    """
    saved = getattr(backend, "eos_ids", None)
    if saved is not None:
        backend.eos_ids = set()
    rows = []
    try:
        for b in sizes:
            reqs = [GenRequest(messages=request.messages, temperature=0.0, max_tokens=max_tokens, seed=k,
                               meta=request.meta) for k in range(b)]
            best = None
            tokens = 0
            for _ in range(repeats):
                t = time.perf_counter()
                res = backend.generate(reqs)
                dt = time.perf_counter() - t
                tokens = sum(r.completion_tokens for r in res)
                best = dt if best is None else min(best, dt)
            rows.append({"batch": b, "seconds": round(best, 6), "completion_tokens": tokens,
                         "tok_per_s": round(tokens / max(best, 1e-9), 2)})
    finally:
        if saved is not None:
            backend.eos_ids = saved
    base = rows[0]["tok_per_s"] if rows else 1.0
    for r in rows:
        r["vs_batch_1"] = round(r["tok_per_s"] / base, 3) if rows[0]["batch"] == 1 else None
    return rows


def matching_batch(scaling: list[dict[str, Any]], tok_per_s: float) -> float | None:
    """The batch size at which the scaling curve reaches ``tok_per_s`` (log-linear interpolation)."""
    import math

    pts = [(r["batch"], r["tok_per_s"]) for r in scaling]
    if not pts:
        return None
    if tok_per_s <= pts[0][1]:
        return float(pts[0][0])
    for (b0, v0), (b1, v1) in zip(pts, pts[1:]):
        if v0 <= tok_per_s <= v1 and v1 > v0:
            f = (tok_per_s - v0) / (v1 - v0)
            return round(math.exp(math.log(b0) + f * (math.log(b1) - math.log(b0))), 2)
    return float(pts[-1][0]) if tok_per_s >= max(v for _, v in pts) else None


def compare(seq: dict[int, dict[str, Any]], eng: dict[int, dict[str, Any]]) -> dict[str, Any]:
    seeds = sorted(set(seq) & set(eng))
    by_round: dict[int, list[int]] = {}
    for s in seeds:
        by_round.setdefault(seq[s]["round"], []).append(s)

    def frac(keys, field):
        return round(sum(seq[k][field] == eng[k][field] for k in keys) / len(keys), 4) if keys else None

    return {
        "matched_calls": len(seeds),
        "unmatched_calls": len(set(seq) ^ set(eng)),
        "identical_text": frac(seeds, "text"),
        "identical_answer": frac(seeds, "answer"),
        "identical_prompt_tokens": frac(seeds, "prompt_tokens"),
        "identical_text_by_round": {str(r): frac(k, "text") for r, k in sorted(by_round.items())},
    }


def sequential_phase(cfg: RunConfig, questions, sizes: list[int], max_tokens: int, max_batch: int,
                     scaling_repeats: int, log=print) -> dict[str, Any]:
    """In-process model load, the sequential loop, then the batch-scaling curve (JSON-ready)."""
    out: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "loadavg_before": loadavg()}
    t = time.perf_counter()
    local = make_local_backend(cfg, max(max(sizes), max_batch))
    out["model_load_s"] = time.perf_counter() - t
    log(f"in-process model loaded in {out['model_load_s']:.1f} s; sequential loop over {len(questions)} questions ...")
    seq = run_sequential(cfg, questions, local)
    log(f"sequential: {seq['seconds']:.1f} s, {seq['completion_tokens']} generated tokens")
    out["loadavg_after_loop"] = loadavg()
    typical, out["typical_prompt_tokens"] = typical_request(seq.pop("requests"))
    log(f"batch scaling on a {out['typical_prompt_tokens']}-token prompt, {max_tokens} tokens per row: sizes {sizes} ...")
    out["scaling"] = batch_scaling(local, typical, sizes, max_tokens, scaling_repeats)
    for r in out["scaling"]:
        log(f"  batch {r['batch']:3d}: {r['tok_per_s']:8.1f} tok/s")
    out["loadavg_after"] = loadavg()
    del local
    gc.collect()
    return {**out, **seq}


def measure(questions: int = 10, agents: int = 6, rounds: int = 3, max_tokens: int = 64,
            backend: str = "transformers", model: str = DEFAULT_MODEL, max_batch: int = 16,
            sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32), scaling_repeats: int = 1, seed: int = 0,
            protocol: str = "mad", checkpoint: str | None = None, reuse_sequential: bool = False,
            workdir: str | None = None, log=print) -> dict[str, Any]:
    """Run the benchmark. ``checkpoint``: a JSON file where the sequential part (the slow one) is
    saved as soon as it is measured; with ``reuse_sequential`` an existing checkpoint of the same
    parameters is used instead of measuring it again (its own date is kept in the result)."""
    import ray

    from actors.driver import Engine, prepare
    from engine.results import read_table

    sizes = sorted(set(int(s) for s in sizes))
    params = {"questions": questions, "agents": agents, "rounds": rounds, "max_tokens": max_tokens,
              "backend": backend, "model": model, "max_batch": max_batch, "scaling_sizes": sizes,
              "scaling_repeats": scaling_repeats, "seed": seed, "protocol": protocol, "temperature": 0.0}
    sequential_params = {k: params[k] for k in ("questions", "agents", "rounds", "max_tokens", "backend", "model",
                                                "scaling_sizes", "scaling_repeats", "seed", "protocol")}
    result: dict[str, Any] = {"benchmark": "vs_sequential", "machine": machine_info(),
                              "date": time.strftime("%Y-%m-%d %H:%M:%S"), "params": params,
                              "simulated": backend == "simulated", "loadavg_before": loadavg()}
    tmpdir = scratch_dir() if workdir is None else None
    base = Path(workdir or tmpdir.name)

    def config(out: str, limit: int) -> RunConfig:
        return RunConfig(protocol=protocol, agents=agents, rounds=rounds, limit=limit, seed=seed, backend=backend,
                         model=model, temperature=0.0, max_tokens=max_tokens, max_batch=max_batch, progress=False,
                         out=str(base / out))

    try:
        cfg = config("engine", questions)
        qs, _ = prepare(cfg)
        # ---- sequential loop, in process (no Ray involved); checkpointed, it is the long part
        seq = None
        if checkpoint and reuse_sequential and Path(checkpoint).is_file():
            saved = json.loads(Path(checkpoint).read_text())
            if saved.get("params") == sequential_params:
                seq = saved
                log(f"reusing the sequential part measured {saved['date']} from {checkpoint}")
            else:
                log(f"{checkpoint} was measured with other parameters: measuring again")
        if seq is None:
            seq = sequential_phase(cfg, qs, sizes, max_tokens, max_batch, scaling_repeats, log)
            seq["params"] = sequential_params
            if checkpoint:
                Path(checkpoint).parent.mkdir(parents=True, exist_ok=True)
                Path(checkpoint).write_text(json.dumps(seq, indent=1))
        seq["calls"] = {int(k): v for k, v in seq["calls"].items()}
        scaling, typical_len, load_s = seq["scaling"], seq["typical_prompt_tokens"], seq["model_load_s"]
        # ---- engine
        t = time.perf_counter()
        engine = Engine()
        replica = engine.replicas_for(cfg, [model])[model][0]
        pid = ray.get(replica.info.remote())["pid"]
        startup_s = time.perf_counter() - t
        log(f"Ray + replica ready in {startup_s:.1f} s; warm-up run (1 question) ...")
        with engine:
            warm_cfg = config("warmup", 1)
            warm = engine.run(warm_cfg, qs[:1])
            busy0 = sum(s["busy_s"] for s in warm.replica_stats)
            cpu0 = proc_cpu_s(pid)
            res = engine.run(cfg, qs)
            cpu1 = proc_cpu_s(pid)
            busy1 = sum(s["busy_s"] for s in res.replica_stats)
        calls = [r for r in read_table(cfg.out, "calls").to_pylist() if r["run_id"] == res.run_id]
        eng = {c["seed"]: {"round": c["round"], "text": c["text"], "answer": c["answer"],
                           "prompt_tokens": c["prompt_tokens"], "completion_tokens": c["completion_tokens"]}
               for c in calls}
        log(f"engine: {res.wall_s:.1f} s")
    finally:
        if tmpdir is not None:
            tmpdir.cleanup()

    speedup = seq["seconds"] / res.wall_s
    busy = busy1 - busy0
    eng_tok = res.summary["completion_tokens"]
    tps = {r["batch"]: r["tok_per_s"] for r in scaling}
    cap = max((b for b in tps if b <= max_batch), default=None)
    predicted = round(tps[cap] / tps[1], 6) if cap is not None and 1 in tps else None
    engine_busy_tps = eng_tok / busy if busy > 0 else None
    seq_tps = seq["completion_tokens"] / seq["seconds"]
    replica_cpu = (cpu1 - cpu0) if cpu0 is not None and cpu1 is not None else None
    result.update(
        sequential={"date": seq["date"], "loadavg_before": seq["loadavg_before"],
                    "loadavg_after_loop": seq["loadavg_after_loop"], "loadavg_after_scaling": seq["loadavg_after"],
                    "seconds": round(seq["seconds"], 6), "model_load_s": round(load_s, 6),
                    "end_to_end_s": round(load_s + seq["seconds"], 6), "calls": seq["n_calls"],
                    "prompt_tokens": seq["prompt_tokens"], "completion_tokens": seq["completion_tokens"],
                    "tok_per_s": round(seq_tps, 2), "cpu_s": round(seq["cpu_s"], 3),
                    "cpu_utilisation": round(seq["cpu_s"] / seq["seconds"], 3)},
        engine={"seconds": round(res.wall_s, 6), "debate_s": round(max(q["wall_s"] for q in res.questions), 6),
                "startup_s": round(startup_s, 6), "warmup_s": round(warm.wall_s, 6),
                "end_to_end_s": round(startup_s + res.wall_s, 6), "calls": len(calls),
                "prompt_tokens": res.summary["prompt_tokens"], "completion_tokens": eng_tok,
                "tok_per_s": round(eng_tok / res.wall_s, 2), "replica_busy_s": round(busy, 3),
                "tok_per_s_busy": round(engine_busy_tps, 2) if engine_busy_tps else None,
                "replica_cpu_s": round(replica_cpu, 3) if replica_cpu is not None else None,
                "replica_cpu_utilisation": round(replica_cpu / res.wall_s, 3) if replica_cpu is not None else None,
                "matching_batch_on_scaling_curve": matching_batch(scaling, engine_busy_tps) if engine_busy_tps else None},
        outputs=compare(seq["calls"], eng),
        scaling={"prompt_tokens": typical_len, "tokens_per_row": max_tokens, "rows": scaling},
        speedup=round(speedup, 6),
        # contention-robust view: CPU seconds of the model work (sequential process vs the replica process)
        speedup_cpu=round(seq["cpu_s"] / replica_cpu, 6) if replica_cpu else None,
        speedup_end_to_end=round((load_s + seq["seconds"]) / (startup_s + res.wall_s), 6),
        predicted_speedup_from_scaling=predicted,
        target={"speedup_at_least": TARGET, "met": speedup >= TARGET},
        run_config=cfg.to_dict(),
        loadavg_after=loadavg(),
    )
    analyse(result)
    return result


def analyse(r: dict[str, Any]) -> None:
    """Add the speedup decomposition and the explanation to a result (also usable on a saved JSON).

    With the same generated tokens on both sides, speedup = engine tok/s / sequential tok/s, which
    factors exactly into

        (curve tok/s at max_batch / curve tok/s at batch 1)        the backend's batching gain
      x (engine tok/s / curve tok/s at max_batch)                  how close the engine came to it
      / (sequential tok/s / curve tok/s at batch 1)                how close the loop came to batch 1
    """
    p, e, sq = r["params"], r["engine"], r["sequential"]
    tps = {x["batch"]: x["tok_per_s"] for x in r["scaling"]["rows"]}
    cap = max((b for b in tps if b <= p["max_batch"]), default=None)
    d: dict[str, Any] = {}
    if cap is not None and 1 in tps:
        eng_tps = e["completion_tokens"] / e["seconds"]
        seq_tps = sq["completion_tokens"] / sq["seconds"]
        d = {"batching_gain": round(tps[cap] / tps[1], 4), "curve_batch": cap,
             "engine_vs_curve": round(eng_tps / tps[cap], 4), "sequential_vs_curve": round(seq_tps / tps[1], 4)}
        d["product"] = round(d["batching_gain"] * d["engine_vs_curve"] / d["sequential_vs_curve"], 4)
    r["speedup_decomposition"] = d
    parts = [f"The engine ran the {e['calls']} calls {r['speedup']:.2f}x faster than the one-call-at-a-time loop "
             f"({e['tok_per_s']:.1f} vs {sq['tok_per_s']:.1f} generated tok/s over wall time)."]
    if d:
        parts.append(
            f"Decomposition: the backend alone decodes {tps[1]:.1f} tok/s at batch 1 and {tps[cap]:.1f} tok/s at batch "
            f"{cap} on a {r['scaling']['prompt_tokens']}-token prompt, a batching gain of x{d['batching_gain']:.2f} — the "
            f"ceiling with --max-batch {p['max_batch']} (the engine had {p['questions'] * p['agents']} calls per round to "
            f"batch). The engine reached {d['engine_vs_curve']:.2f} of the batch-{cap} rate (prefill of longer "
            f"later-round prompts, rows that finish and wait for new ones, shrinking batches at round tails, "
            f"engine overhead). The sequential loop reached {d['sequential_vs_curve']:.2f} of the batch-1 rate. "
            f"x{d['batching_gain']:.2f} x {d['engine_vs_curve']:.2f} / {d['sequential_vs_curve']:.2f} = "
            f"x{d['product']:.2f}.")
        bigger = [b for b in tps if b > p["max_batch"]]
        if bigger:
            b = max(bigger)
            parts.append(f"A larger --max-batch would not help much: batch {b} decodes {tps[b]:.1f} tok/s "
                         f"(x{tps[b] / tps[1]:.2f}).")
        if d["sequential_vs_curve"] < 0.8:
            parts.append(
                f"The sequential loop ran well below the backend's own batch-1 rate although it does the same kind "
                f"of work (its prompts average {sq['prompt_tokens'] / max(sq['calls'], 1):.0f} tokens, the curve's "
                f"{r['scaling']['prompt_tokens']}); its CPU utilisation was {sq.get('cpu_utilisation', float('nan')):.2f} "
                f"of {r['machine']['cpus']} cores over {sq['seconds'] / 60:.0f} minutes (load average "
                f"{sq.get('loadavg_before')} -> {sq.get('loadavg_after_loop')}), so other jobs on the machine most "
                f"likely slowed it (multi-threaded torch degrades sharply when another process takes a core), which "
                f"inflates the speedup by up to 1/{d['sequential_vs_curve']:.2f}: on an idle machine expect between "
                f"x{d['batching_gain'] * d['engine_vs_curve']:.2f} and the batching gain x{d['batching_gain']:.2f}.")
    r["explanation"] = " ".join(parts)


def print_table(res: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    c = Console(width=200, markup=False, highlight=False)
    p, s, e, o = res["params"], res["sequential"], res["engine"], res["outputs"]
    t = Table(title=f"Sequential loop vs engine: {p['protocol']} {p['questions']} q x {p['agents']} agents x "
                    f"{p['rounds']} rounds, max {p['max_tokens']} tok, greedy, {p['backend']}"
                    f"{' (SIMULATED)' if res['simulated'] else ''}")
    for col in ("side", "wall s", "end-to-end s", "calls", "prompt tok", "gen tok", "gen tok/s"):
        t.add_column(col, justify="right")
    t.add_row("sequential", f"{s['seconds']:.1f}", f"{s['end_to_end_s']:.1f}", str(s["calls"]), str(s["prompt_tokens"]),
              str(s["completion_tokens"]), f"{s['tok_per_s']:.1f}")
    t.add_row("engine", f"{e['seconds']:.1f}", f"{e['end_to_end_s']:.1f}", str(e["calls"]), str(e["prompt_tokens"]),
              str(e["completion_tokens"]), f"{e['tok_per_s']:.1f}")
    c.print(t)
    st = Table(title=f"Backend batch scaling: {res['scaling']['prompt_tokens']}-token prompt, "
                     f"{res['scaling']['tokens_per_row']} tokens per row")
    for col in ("batch", "seconds", "gen tok", "tok/s", "vs batch 1"):
        st.add_column(col, justify="right")
    for r in res["scaling"]["rows"]:
        st.add_row(str(r["batch"]), f"{r['seconds']:.2f}", str(r["completion_tokens"]), f"{r['tok_per_s']:.1f}",
                   "" if r["vs_batch_1"] is None else f"x{r['vs_batch_1']:.2f}")
    c.print(st)
    met = "MET" if res["target"]["met"] else "NOT MET"
    c.print(f"speedup {res['speedup']:.2f}x [target >= {res['target']['speedup_at_least']}x: {met}]; "
            f"end-to-end incl. startup {res['speedup_end_to_end']:.2f}x (engine startup {e['startup_s']:.1f} s, "
            f"in-process model load {s['model_load_s']:.1f} s)")
    if res.get("speedup_cpu") is not None:
        c.print(f"CPU seconds of model work: sequential {s['cpu_s']:.1f} s (utilisation {s['cpu_utilisation']:.2f} of "
                f"{res['machine']['cpus']} cores), engine replica {e['replica_cpu_s']:.1f} s (utilisation "
                f"{e['replica_cpu_utilisation']:.2f}); CPU-time speedup {res['speedup_cpu']:.2f}x (less sensitive to other load)")
    c.print(f"identical texts {o['identical_text']:.1%} of {o['matched_calls']} calls (by round: "
            f"{o['identical_text_by_round']}), identical answers {o['identical_answer']:.1%}")
    c.print(res["explanation"])
    c.print(f"load average before {res['loadavg_before']} after {res['loadavg_after']} on {res['machine']['cpus']} CPUs")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--questions", type=int, default=10)
    ap.add_argument("--agents", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--backend", default="transformers", choices=("transformers", "simulated"))
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--max-batch", type=int, default=16, help="the engine's --max-batch (its default)")
    ap.add_argument("--sizes", default="1,2,4,8,16,32", help="batch sizes of the scaling curve")
    ap.add_argument("--scaling-repeats", type=int, default=1, help="runs per batch size; the fastest is kept")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="bench/vs_sequential.json")
    ap.add_argument("--checkpoint", default=None,
                    help="where the sequential part is saved once measured (default: OUT with .sequential.json)")
    ap.add_argument("--reuse-sequential", action="store_true",
                    help="use the checkpoint's sequential part if it has the same parameters (after an interrupted run)")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    res = measure(questions=args.questions, agents=args.agents, rounds=args.rounds, max_tokens=args.max_tokens,
                  backend=args.backend, model=args.model, max_batch=args.max_batch,
                  sizes=tuple(int(x) for x in args.sizes.split(",") if x.strip()),
                  scaling_repeats=args.scaling_repeats, seed=args.seed,
                  checkpoint=args.checkpoint or str(Path(args.out).with_suffix(".sequential.json")),
                  reuse_sequential=args.reuse_sequential,
                  log=log_for(args.quiet))
    return finish(res, args.out, argv, args.quiet, print_table)


if __name__ == "__main__":
    sys.exit(main())
