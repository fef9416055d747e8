"""The front door: ``run(config)`` runs one debate run on Ray and returns its summary.

It checks every input before any actor starts (so a bad flag fails in a second with a message
naming it), starts or joins Ray, creates one replica actor per distinct model, one agent actor per
agent bound to its model's replica, one writer and one coordinator, then waits for the
coordinator while showing progress. Data flows one way: questions -> coordinator -> agents ->
replica -> coordinator -> writer.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.accounting import summarize
from engine.config import RunConfig
from engine.protocols import validate_protocol
from engine.prompts import PromptSet
from engine.tasks import Question, load_questions


@dataclass
class RunResult:
    run_id: str
    out_dir: Path
    summary: dict[str, Any]
    wall_s: float
    questions: list[dict[str, Any]] = field(default_factory=list)
    simulated: bool = False
    replica_stats: list[dict[str, Any]] = field(default_factory=list)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def default_out_dir() -> Path:
    return Path("runs") / _now().strftime("%Y%m%d-%H%M%S")


def check_model(backend: str, model: str) -> None:
    """Fail early, in the driver, on a model that cannot be loaded (without loading it)."""
    if backend != "transformers":
        return
    from actors.model_store import ALIASES, ModelNotFound, packaged_gguf

    if model in ALIASES:
        packaged_gguf(model)
        return
    p = Path(model).expanduser()
    if p.is_file() and p.suffix == ".gguf":
        return
    if p.is_dir() and (p / "config.json").is_file():
        return
    if p.is_dir():
        raise ModelNotFound(f"--model {model}: folder has no config.json, so it is not a transformers model folder")
    raise ModelNotFound(f"--model {model}: not a known alias ({', '.join(ALIASES)}), a .gguf file or a model folder")


def init_ray(address: str | None = None) -> None:
    import ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_DEDUP_LOGS", "1")
    ray.init(
        address=address or os.environ.get("RAY_ADDRESS") or None,
        include_dashboard=False,
        logging_level="ERROR",
        log_to_driver=True,
    )


def needs_embeddings(cfg: RunConfig) -> bool:
    """Protocols that ask for a similarity matrix (S2-MAD's embedding check, CortexDebate's intimacy)."""
    return cfg.protocol == "cortex" or (cfg.protocol == "s2mad" and cfg.similarity == "embedding")


def replica_options(cfg: RunConfig, n_replicas: int = 1) -> tuple[dict[str, Any], dict[str, Any]]:
    """(Ray actor options, backend options) for a replica of this run's backend.

    Without ``--replica-cpus`` the node's CPUs are split evenly between the run's replicas (one
    per distinct model), so several models fit on one machine instead of waiting for CPUs.
    """
    if cfg.backend == "simulated":
        opts = {
            "accuracy": cfg.sim_accuracy,
            "follow": cfg.sim_follow,
            "reply_tokens": cfg.sim_reply_tokens,
            "invalid": cfg.sim_invalid,
            "latency_s": cfg.sim_latency_s,
        }
        return {"num_cpus": 0}, opts
    cpus = cfg.replica_cpus or float(os.cpu_count() or 1) / max(1, n_replicas)
    # Ray sets OMP_NUM_THREADS=1 in actors: give torch the CPUs the actor reserves.
    return {"num_cpus": cpus}, {"threads": max(1, int(cpus))}


def prepare(cfg: RunConfig, questions: list[Question] | None = None) -> tuple[list[Question], PromptSet]:
    cfg.validate()
    if questions is None:
        questions = load_questions(cfg.dataset, cfg.task, cfg.limit, cfg.seed, offset=cfg.offset)
    if not questions:
        raise ValueError(f"--dataset {cfg.dataset}: no questions selected")
    tasks = {q.task for q in questions}
    if len(tasks) != 1:
        raise ValueError(f"--dataset {cfg.dataset}: questions of several tasks {sorted(tasks)} in one run")
    # Imports the protocol's module (registering its prompt stages) and runs its own checks,
    # e.g. TopologyError naming --density/--agents or --groups, before anything starts.
    validate_protocol(cfg)
    prompts = PromptSet.for_task(tasks.pop(), cfg.prompts)
    for spec in cfg.agent_specs():
        check_model(cfg.backend, spec.model)
    if needs_embeddings(cfg):
        from actors.backend_embedding import resolve_embedding_model

        resolve_embedding_model(cfg.embedding_model)  # names --embedding-model if it cannot load
    return questions, prompts


def run(cfg: RunConfig, questions: list[Question] | None = None, progress_cb=None) -> RunResult:
    import ray

    from actors.agent_actor import AgentActor
    from actors.coordinator_actor import CoordinatorActor
    from actors.replica_actor import ReplicaActor
    from actors.writer_actor import WriterActor

    questions, prompts = prepare(cfg, questions)
    out = Path(cfg.out) if cfg.out else default_out_dir()
    run_id = cfg.run_id()
    started = _now()
    t0 = time.perf_counter()
    init_ray(cfg.ray_address)

    writer = WriterActor.remote(str(out))
    specs = cfg.agent_specs()
    models = list(dict.fromkeys(s.model for s in specs))
    actor_opts, backend_opts = replica_options(cfg, len(models))
    replicas = {}
    for model in models:
        replicas[model] = ReplicaActor.options(**actor_opts).remote(
            cfg.backend, model, backend_opts, max_batch=cfg.max_batch
        )
    infos = ray.get([r.info.remote() for r in replicas.values()])
    simulated = any(i["simulated"] for i in infos)
    agents = [
        AgentActor.remote(i, spec, prompts, simulated, replicas[spec.model])
        for i, spec in enumerate(specs)
    ]
    # Wait until every agent's worker process is up, so the first round's requests reach the
    # replica together and are batched together, instead of trickling in as processes start.
    ray.get([a.ready.remote() for a in agents])
    embedder = None
    if needs_embeddings(cfg):
        from actors.embedding_actor import EmbeddingActor

        # No CPU reserved: encoding a round's replies is short next to generating them, and on a
        # CPU machine the replica already holds the cores; one thread avoids oversubscribing.
        embedder = EmbeddingActor.remote(cfg.embedding_model, threads=1)
        ray.get(embedder.info.remote())
    coordinator = CoordinatorActor.remote(cfg, run_id, agents, writer, cfg.backend, simulated, embedder)
    run_row = {
        "run_id": run_id,
        "protocol": cfg.protocol,
        "backend": cfg.backend,
        "simulated": simulated,
        "config": cfg.to_json(),
        "status": "running",
        "started": started,
        "n_questions": len(questions),
    }
    ray.get(writer.write_run.remote(run_row))

    ref = coordinator.run.remote(questions)
    bar = None
    if cfg.progress:
        from tqdm import tqdm

        bar = tqdm(total=len(questions), desc=f"{cfg.protocol} ({cfg.backend}{', SIMULATED' if simulated else ''})", unit="q",
                   mininterval=1.0 if sys.stderr.isatty() else 15.0)
    try:
        while True:
            ready, _ = ray.wait([ref], timeout=0.5)
            state = ray.get(coordinator.progress.remote())
            if bar is not None:
                bar.set_postfix(calls=state["calls"], tok=state["prompt_tokens"] + state["completion_tokens"], refresh=False)
                bar.update(state["questions_done"] - bar.n)  # redraws at most every mininterval
            if progress_cb is not None:
                progress_cb(state)
            if ready:
                break
        rows = ray.get(ref)
    finally:
        if bar is not None:
            bar.close()
    wall = time.perf_counter() - t0
    summary = summarize(rows)
    stats = ray.get([r.get_stats.remote() for r in replicas.values()])
    run_row.update(
        status="finished",
        finished=_now(),
        accuracy=summary["accuracy"],
        prompt_tokens=summary["prompt_tokens"],
        completion_tokens=summary["completion_tokens"],
        n_calls=summary["n_calls"],
        effective_rounds=summary["effective_rounds"],
        consensus_by_round=summary["consensus_by_round"],
        wall_s=wall,
    )
    ray.get(writer.write_run.remote(run_row))
    for actor in [coordinator, writer, *agents, *replicas.values(), *([embedder] if embedder else [])]:
        ray.kill(actor)
    return RunResult(run_id, out, summary, wall, rows, simulated, stats)
