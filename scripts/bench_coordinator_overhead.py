"""Coordinator overhead per agent turn, on the SIMULATED backend (no model time to hide behind).

For each agent count (default 6, 16, 64) we run a debate of many questions on Ray with
``sim_latency_s = 0`` and measure

    per-turn overhead = (coordinator wall - replica busy) / agent turns      (target < 2 ms)

* *coordinator wall*: the time of ``CoordinatorActor.run(questions)`` only — from handing it the
  questions to its return, which includes the final writer flush. Ray start, the replica, the
  agent/writer/coordinator actors' process start-up are all outside it: the script builds the
  same actors ``DebateRunner.run`` builds (a writer, one agent actor per agent bound to the DebateRunner's
  warm replica, a coordinator), waits until the agents are up, warms every actor with a short
  untimed run on other questions, pauses ``--settle-s`` seconds, and then times ``--repeats``
  runs on disjoint question sets (the fastest is the headline; all are in the JSON).
* *replica busy*: the growth of the replica's ``busy_s`` over the measured run (time spent
  inside the simulated backend's ``generate``, thread hop included). With ``sim_latency_s = 0``
  it is small; it is reported separately and subtracted. ``busy_s`` is timed around the
  replica's ``asyncio.to_thread`` hop, so it also holds the thread hand-off and any delay before
  the replica's event loop resumes (which grows when thousands of requests are queued) — engine
  machinery rather than model time. So we also time the *pure* simulated-model work: the same
  questions replayed in-process (:func:`actors.local_run.run_local`; the simulated model is
  seeded, so the requests are the engine's), adding up only the time inside ``generate``, and
  report ``overhead_strict = (wall - pure model time) / turns`` next to the brief's figure.
* *agent turns*: every agent call of the run (``n_calls``).

What the overhead includes, per turn: the coordinator's protocol step (generator, ``DebateLog``,
building call/graph rows), the Ray calls coordinator -> agent actor -> replica actor -> agent ->
coordinator (serialization of the call, the question, peers' texts and the record), the agent's
prompt building and answer parsing, the replica's queueing, and the writer actor turning rows
into Parquet files. All of these run concurrently in several processes, so the figure is wall
time per turn at full throughput (turns overlap), not the latency of one turn. On a 2-core
machine the agents, coordinator, replica and writer processes share the two cores, so the
figure is also a CPU cost.

Default protocol: the sparse *ring* (each agent reads its two neighbours), 2 rounds, so a
prompt's size does not grow with the number of agents and the numbers isolate the cost of
more actors and more calls; ``--protocol mad`` measures fully connected MAD instead (its
prompts grow with N, so per-turn costs grow too).

Usage:
  .venv/bin/python scripts/bench_coordinator_overhead.py                  # 6, 16, 64 agents
  .venv/bin/python scripts/bench_coordinator_overhead.py --agents 6,16 --questions 20 --protocol mad
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.config import RunConfig  # noqa: E402
from scripts._bench_common import (
    finish,
    loadavg,
    log_for,
    machine_info,
    procs_running,  # noqa: E402
    rich_table,
    scratch_dir,
)

TARGET_MS = 2.0


def per_turn(wall_s: float, busy_s: float, turns: int) -> dict[str, float]:
    """Milliseconds per agent turn: all wall time, the backend's share, and the rest (the overhead)."""
    if turns <= 0:
        raise ValueError("no agent turns to divide by")
    return {
        "wall_ms_per_turn": 1000.0 * wall_s / turns,
        "backend_ms_per_turn": 1000.0 * busy_s / turns,
        "overhead_ms_per_turn": 1000.0 * (wall_s - busy_s) / turns,
    }


class TimedBackend:
    """Wraps a backend and adds up the time spent inside its ``generate``."""

    def __init__(self, backend):
        self.backend = backend
        self.simulated = bool(getattr(backend, "simulated", False))
        self.seconds = 0.0
        self.calls = 0

    def generate(self, requests):
        t = time.perf_counter()
        out = self.backend.generate(requests)
        self.seconds += time.perf_counter() - t
        self.calls += len(requests)
        return out


def backend_compute_s(cfg: RunConfig, questions) -> tuple[float, int]:
    """Pure simulated-model time for these questions: the same requests (the simulated backend is
    seeded, so the replies and hence the prompts are the engine's) generated in this process,
    one at a time, timing only ``generate``."""
    from actors.layout import replica_options
    from actors.local_run import run_local
    from actors.replica_actor import make_backend

    timed = TimedBackend(make_backend(cfg.sampling.backend, cfg.sampling.model, replica_options(cfg)[1]))
    run_local(cfg, questions, timed)
    return timed.seconds, timed.calls


def run_size(
    runner,
    n_agents: int,
    questions: int,
    warmup_questions: int,
    rounds: int,
    protocol: str,
    seed: int,
    max_batch: int,
    base: Path,
    repeats: int = 1,
    settle_s: float = 0.0,
) -> dict[str, Any]:
    """One agent count: build the actors DebateRunner.run builds, warm them, time CoordinatorActor.run
    on ``repeats`` disjoint sets of ``questions`` questions; the fastest repeat is reported."""
    import ray

    from actors.agent_actor import AgentGroupActor, AgentSetup
    from actors.coordinator_actor import CoordinatorActor
    from actors.prepare import prepare
    from actors.writer_actor import WriterActor

    cfg = RunConfig.flat(
        protocol=protocol,
        agents=n_agents,
        rounds=rounds,
        limit=warmup_questions + repeats * questions,
        seed=seed,
        backend="simulated",
        sim_latency_s=0.0,
        max_batch=max_batch,
        progress=False,
        topology="ring" if protocol == "sparse" else None,
        out=str(base / f"agents{n_agents}"),
    )
    qs, prompts = prepare(cfg)
    warm_qs = qs[:warmup_questions]
    sets = [qs[warmup_questions + k * questions : warmup_questions + (k + 1) * questions] for k in range(repeats)]
    replica = runner.replicas_for(cfg, [cfg.sampling.model]).handles[cfg.sampling.model][0]
    specs = cfg.agent_specs()
    t = time.perf_counter()
    writer = WriterActor.remote(cfg.output.out)
    agents = [AgentGroupActor.remote() for _ in specs]  # one agent per actor
    ray.get([a.ready.remote() for a in agents] + [writer.flush.remote()])
    coordinator = CoordinatorActor.remote()
    setups = [AgentSetup(i, spec, prompts, True, replica) for i, spec in enumerate(specs)]
    ray.get(
        coordinator.setup.remote(
            cfg,
            cfg.run_id(),
            agents,
            [[s] for s in setups],
            writer,
            cfg.sampling.backend,
            True,
            None,
            uuid.uuid4().hex[:12],
        )
    )
    actors_s = time.perf_counter() - t
    reps = []
    try:
        if warm_qs:
            ray.get(coordinator.run.remote(warm_qs))
        if settle_s > 0:  # let the burst of process start-ups die down before timing
            time.sleep(settle_s)
        for timed_qs in sets:
            before = ray.get(replica.get_stats.remote())
            load, running = loadavg(), procs_running()
            t = time.perf_counter()
            rows = ray.get(coordinator.run.remote(timed_qs))
            wall = time.perf_counter() - t
            after = ray.get(replica.get_stats.remote())
            busy = after["busy_s"] - before["busy_s"]
            turns = sum(r["n_calls"] for r in rows)
            compute, n_compute = backend_compute_s(cfg, timed_qs)
            rep = {
                "questions": len(timed_qs),
                "turns": turns,
                "expected_turns": len(timed_qs) * n_agents * rounds,
                "errors": sum(r["n_errors"] for r in rows),
                "replica_requests": after["requests"] - before["requests"],
                "replica_hops": after["hops"] - before["hops"],
                "prompt_tokens": sum(r["prompt_tokens"] for r in rows),
                "completion_tokens": sum(r["completion_tokens"] for r in rows),
                "wall_s": round(wall, 4),
                "backend_busy_s": round(busy, 4),
                "backend_compute_s": round(compute, 4),
                "backend_compute_calls": n_compute,
                **{k: round(v, 4) for k, v in per_turn(wall, busy, turns).items()},
                "overhead_strict_ms_per_turn": round(1000.0 * (wall - compute) / turns, 4),
                "turns_per_s": round(turns / wall, 1),
                "loadavg_before": load,
                "procs_running_before": running,
                "loadavg_after": loadavg(),
            }
            reps.append(rep)
    finally:
        for actor in [coordinator, writer, *agents]:
            ray.kill(actor)
    best = min(reps, key=lambda r: r["overhead_ms_per_turn"])
    out = {
        "agents": n_agents,
        "rounds": rounds,
        "actor_startup_s": round(actors_s, 3),
        **best,
        "repeats": reps,
        "run_config": cfg.to_dict(),
    }
    out["target_met"] = out["overhead_ms_per_turn"] < TARGET_MS
    out["target_met_strict"] = out["overhead_strict_ms_per_turn"] < TARGET_MS
    return out


def measure(
    agent_counts: tuple[int, ...] = (6, 16, 64),
    questions: int = 40,
    warmup_questions: int = 4,
    rounds: int = 2,
    protocol: str = "sparse",
    seed: int = 0,
    max_batch: int = 16,
    repeats: int = 2,
    settle_s: float = 10.0,
    workdir: str | None = None,
    log=print,
) -> dict[str, Any]:
    from actors.driver import DebateRunner

    params = {
        "agent_counts": list(agent_counts),
        "questions": questions,
        "warmup_questions": warmup_questions,
        "rounds": rounds,
        "protocol": protocol,
        "topology": "ring" if protocol == "sparse" else None,
        "seed": seed,
        "max_batch": max_batch,
        "backend": "simulated",
        "sim_latency_s": 0.0,
        "repeats": repeats,
        "settle_s": settle_s,
    }
    result: dict[str, Any] = {
        "benchmark": "coordinator_overhead",
        "machine": machine_info(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "params": params,
        "simulated": True,
        "loadavg_before": loadavg(),
    }
    tmpdir = scratch_dir() if workdir is None else None
    base = Path(workdir or tmpdir.name)
    rows = []
    try:
        t = time.perf_counter()
        with DebateRunner() as runner:
            result["startup_s"] = round(time.perf_counter() - t, 3)
            for n in agent_counts:
                r = run_size(
                    runner, n, questions, warmup_questions, rounds, protocol, seed, max_batch, base, repeats, settle_s
                )
                rows.append(r)
                log(
                    f"{n:3d} agents: {r['turns']} turns in {r['wall_s']:.2f} s, backend {r['backend_busy_s']:.3f} s, "
                    f"overhead {r['overhead_ms_per_turn']:.3f} ms/turn "
                    f"(strict {r['overhead_strict_ms_per_turn']:.3f})"
                )
    finally:
        if tmpdir is not None:
            tmpdir.cleanup()
    result.update(
        sizes=rows,
        target={
            "overhead_ms_per_turn_below": TARGET_MS,
            "met": all(r["target_met"] for r in rows),
            "met_by_agents": {str(r["agents"]): r["target_met"] for r in rows},
            "met_strict": all(r["target_met_strict"] for r in rows),
            "met_strict_by_agents": {str(r["agents"]): r["target_met_strict"] for r in rows},
        },
        loadavg_after=loadavg(),
    )
    return result


def print_table(res: dict[str, Any]) -> None:
    p = res["params"]
    c, t = rich_table(
        f"Coordinator overhead per agent turn (SIMULATED backend, sim_latency_s=0): {p['protocol']}"
        f"{' ring' if p['topology'] else ''}, {p['rounds']} rounds, {p['questions']} questions",
        (
            "agents",
            "turns",
            "wall s",
            "replica busy s",
            "sim compute s",
            "wall ms/turn",
            "busy ms/turn",
            "overhead ms/turn",
            "strict ms/turn",
            "turns/s",
            "actor start s",
            "load avg before",
            f"< {TARGET_MS} ms",
        ),
    )
    for r in res["sizes"]:
        t.add_row(
            str(r["agents"]),
            str(r["turns"]),
            f"{r['wall_s']:.2f}",
            f"{r['backend_busy_s']:.3f}",
            f"{r['backend_compute_s']:.3f}",
            f"{r['wall_ms_per_turn']:.3f}",
            f"{r['backend_ms_per_turn']:.3f}",
            f"{r['overhead_ms_per_turn']:.3f}",
            f"{r['overhead_strict_ms_per_turn']:.3f}",
            f"{r['turns_per_s']:.0f}",
            f"{r['actor_startup_s']:.1f}",
            str(r["loadavg_before"]),
            ("yes" if r["target_met"] else "NO") + "/" + ("yes" if r["target_met_strict"] else "NO"),
        )
    c.print(t)
    c.print(
        "overhead = (wall - replica busy_s) / turns; strict = (wall - pure simulated-model time of the same "
        "requests, timed in-process) / turns. busy_s also counts the replica's thread hop and event-loop delays, "
        "which are engine machinery, so 'strict' is the fuller overhead. Fastest of the repeats shown."
    )
    c.print(
        f"target overhead < {TARGET_MS} ms per turn: {'MET' if res['target']['met'] else 'NOT MET'} "
        f"{res['target']['met_by_agents']}, strict: {'MET' if res['target']['met_strict'] else 'NOT MET'} "
        f"{res['target']['met_strict_by_agents']}; load average before {res['loadavg_before']} after "
        f"{res['loadavg_after']} on {res['machine']['cpus']} CPUs"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", default="6,16,64", help="comma-separated agent counts")
    ap.add_argument("--questions", type=int, default=40, help="timed questions per agent count")
    ap.add_argument("--warmup-questions", type=int, default=4, help="untimed questions run first on the same actors")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--protocol", default="sparse", choices=("sparse", "mad"), help="sparse = ring topology")
    ap.add_argument("--max-batch", type=int, default=16)
    ap.add_argument(
        "--repeats", type=int, default=2, help="timed runs per agent count (disjoint questions); fastest kept"
    )
    ap.add_argument("--settle-s", type=float, default=10.0, help="pause after the warm-up, before timing")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="bench/coordinator_overhead.json")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    res = measure(
        agent_counts=tuple(int(x) for x in args.agents.split(",") if x.strip()),
        questions=args.questions,
        warmup_questions=args.warmup_questions,
        rounds=args.rounds,
        protocol=args.protocol,
        seed=args.seed,
        max_batch=args.max_batch,
        repeats=args.repeats,
        settle_s=args.settle_s,
        log=log_for(args.quiet),
    )
    return finish(res, args.out, argv, args.quiet, print_table)


if __name__ == "__main__":
    sys.exit(main())
