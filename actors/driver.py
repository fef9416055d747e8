"""The front door: ``run(config)`` runs one debate run on Ray and returns its summary.

It checks every input before any actor starts (so a bad flag fails in a second with a message
naming it), starts or joins Ray, creates one replica actor per distinct model, one agent actor per
agent bound to its model's replica, one writer and one coordinator, then waits for the
coordinator while showing progress. Data flows one way: questions -> coordinator -> agents ->
replica -> coordinator -> writer.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import time
import uuid
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
    resumed: int = 0  # questions whose results were already in --out (not debated again)


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
    if cfg.backend == "openai":  # the model runs on the server: the replica only waits on HTTP
        return {"num_cpus": 0}, {"api_base": cfg.api_base, "concurrency": cfg.api_concurrency}
    if cfg.backend == "vllm" and _has_gpu():
        # One GPU per replica; the vLLM engine's own processes use it (tensor parallel: see cluster notes).
        return {"num_cpus": 1, "num_gpus": 1}, {}
    cpus = cfg.replica_cpus or float(os.cpu_count() or 1) / max(1, n_replicas)
    if cfg.backend == "vllm":  # vLLM-CPU manages its own OpenMP threads and engine process
        return {"num_cpus": cpus}, {}
    # Ray sets OMP_NUM_THREADS=1 in actors: give torch the CPUs the actor reserves.
    return {"num_cpus": cpus}, {"threads": max(1, int(cpus))}


PLACEMENT_KEYS = ("num_cpus", "num_gpus", "resources")


def placement_options(cfg: RunConfig, model: str, default: dict[str, Any]) -> dict[str, Any]:
    """Ray options of one model's replica: the backend default, overridden by the run's
    ``placement_resources[model]`` (num_cpus, num_gpus, custom resources such as a cluster node
    type's ``strong_gpu``), so each model lands on the node type meant for it."""
    over = dict(cfg.placement_resources.get(model) or {})
    unknown = set(over) - set(PLACEMENT_KEYS)
    if unknown:
        raise ValueError(f"placement_resources[{model!r}]: unknown key(s) {sorted(unknown)}; use {', '.join(PLACEMENT_KEYS)}")
    return {**default, **over}


def _has_gpu() -> bool:
    try:
        import ray

        return bool(ray.is_initialized() and ray.cluster_resources().get("GPU", 0) > 0)
    except Exception:  # pragma: no cover
        return False


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


class Engine:
    """Long-lived actors shared by consecutive runs (a sweep's cells).

    Replicas are keyed by (backend, model, backend options, max batch) and embedding actors by
    model name, so cells that use the same model reuse the loaded model instead of restarting
    it; a replica the next run does not need is stopped first, so its CPUs/GPUs are free.
    ``run`` resumes: questions that already have a result row for this run id in ``--out`` are
    not debated again, and the run's summary covers old and new rows.
    """

    def __init__(self, ray_address: str | None = None):
        init_ray(ray_address)
        self._replicas: dict[tuple, Any] = {}
        self._embedders: dict[str, Any] = {}
        self._cache = None  # first-round reply cache (actors/cache_actor.py), made on first use

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        import ray

        cache = [self._cache] if self._cache is not None else []
        for actor in [*self._replicas.values(), *self._embedders.values(), *cache]:
            ray.kill(actor)
        self._replicas.clear()
        self._embedders.clear()
        self._cache = None

    def replicas_for(self, cfg: RunConfig, models: list[str]) -> dict[str, Any]:
        import ray

        from actors.replica_actor import ReplicaActor

        actor_opts, backend_opts = replica_options(cfg, len(models))
        opts = {m: placement_options(cfg, m, actor_opts) for m in models}
        keys = {m: (cfg.backend, m, json.dumps(backend_opts, sort_keys=True), cfg.max_batch,
                    json.dumps(opts[m], sort_keys=True)) for m in models}
        for key in [k for k in self._replicas if k not in keys.values()]:
            ray.kill(self._replicas.pop(key))
        for model, key in keys.items():
            if key not in self._replicas:
                self._replicas[key] = ReplicaActor.options(**opts[model]).remote(
                    cfg.backend, model, backend_opts, max_batch=cfg.max_batch
                )
        return {m: self._replicas[k] for m, k in keys.items()}

    def embedder_for(self, name: str):
        import ray

        from actors.embedding_actor import EmbeddingActor

        if name not in self._embedders:
            # No CPU reserved: encoding a round's replies is short next to generating them, and on
            # a CPU machine the replica already holds the cores; one thread avoids oversubscribing.
            self._embedders[name] = EmbeddingActor.remote(name, threads=1)
            ray.get(self._embedders[name].info.remote())
        return self._embedders[name]

    def cache_for(self, cfg: RunConfig, replicas: dict[str, Any]) -> tuple[Any, dict[str, str]]:
        """With ``reuse_first_round``: the engine's one cache actor (kept across runs) and, per
        model, the cache namespace naming its replica (backend, model, backend options), so runs
        share a first-round reply only when the same replica setup would have produced it."""
        if not cfg.reuse_first_round:
            return None, {}
        from actors.cache_actor import CacheActor

        if self._cache is None:
            self._cache = CacheActor.remote()
        namespaces = {m: json.dumps(list(key[:3])) for key, handle in self._replicas.items()
                      for m, h in replicas.items() if h is handle}
        return self._cache, namespaces

    def run(self, cfg: RunConfig, questions: list[Question] | None = None, progress_cb=None) -> RunResult:
        import ray

        from actors.agent_actor import AgentActor
        from actors.coordinator_actor import CoordinatorActor
        from actors.writer_actor import WriterActor
        from engine.results import read_table

        questions, prompts = prepare(cfg, questions)
        out = Path(cfg.out) if cfg.out else default_out_dir()
        run_id = cfg.run_id()
        attempt = uuid.uuid4().hex[:12]
        t0 = time.perf_counter()

        previous = [r for r in read_table(out, "questions").to_pylist() if r["run_id"] == run_id]
        done = {r["question_id"] for r in previous}
        previous = [r for r in previous if r["question_id"] in {q.qid for q in questions}]
        todo = [q for q in questions if q.qid not in done]
        old_run = [r for r in read_table(out, "runs").to_pylist() if r["run_id"] == run_id]
        started = old_run[0]["started"] if old_run else _now()

        writer = WriterActor.remote(str(out))
        specs = cfg.agent_specs()
        replicas = self.replicas_for(cfg, list(dict.fromkeys(s.model for s in specs)))
        infos = ray.get([r.info.remote() for r in replicas.values()])
        simulated = any(i["simulated"] for i in infos)
        run_row = {
            "run_id": run_id, "protocol": cfg.protocol, "backend": cfg.backend, "simulated": simulated,
            "config": cfg.to_json(), "status": "running", "started": started, "n_questions": len(questions),
        }
        ray.get(writer.write_run.remote(run_row))
        rows: list[dict[str, Any]] = []
        agents: list = []
        coordinator = None
        if todo:
            cache, namespaces = self.cache_for(cfg, replicas)
            agents = [AgentActor.remote(i, spec, prompts, simulated, replicas[spec.model], cache, namespaces.get(spec.model, ""))
                      for i, spec in enumerate(specs)]
            # Wait until every agent's worker process is up, so the first round's requests reach
            # the replica together and are batched together, instead of trickling in.
            ray.get([a.ready.remote() for a in agents])
            embedder = self.embedder_for(cfg.embedding_model) if needs_embeddings(cfg) else None
            coordinator = CoordinatorActor.remote(cfg, run_id, agents, writer, cfg.backend, simulated, embedder, attempt)
            rows = self._wait(cfg, coordinator, coordinator.run.remote(todo), len(questions), len(previous),
                              simulated, progress_cb)
        wall = time.perf_counter() - t0
        summary = summarize(previous + rows)
        stats = ray.get([r.get_stats.remote() for r in replicas.values()])
        run_row.update(
            status="finished", finished=_now(), accuracy=summary["accuracy"], prompt_tokens=summary["prompt_tokens"],
            completion_tokens=summary["completion_tokens"], n_calls=summary["n_calls"],
            effective_rounds=summary["effective_rounds"], consensus_by_round=summary["consensus_by_round"],
            wall_s=wall + sum(r.get("wall_s") or 0.0 for r in old_run[:1]),
        )
        ray.get(writer.write_run.remote(run_row))
        for actor in [*([coordinator] if coordinator else []), writer, *agents]:
            ray.kill(actor)
        return RunResult(run_id, out, summary, wall, previous + rows, simulated, stats, resumed=len(previous))

    @staticmethod
    def _wait(cfg, coordinator, ref, total: int, already: int, simulated: bool, progress_cb) -> list[dict[str, Any]]:
        import ray

        bar = None
        if cfg.progress:
            from tqdm import tqdm

            bar = tqdm(total=total, initial=already, unit="q",
                       desc=f"{cfg.protocol} ({cfg.backend}{', SIMULATED' if simulated else ''})",
                       mininterval=1.0 if sys.stderr.isatty() else 15.0)
        try:
            while True:
                ready, _ = ray.wait([ref], timeout=0.5)
                state = ray.get(coordinator.progress.remote())
                if bar is not None:
                    bar.set_postfix(calls=state["calls"], tok=state["prompt_tokens"] + state["completion_tokens"],
                                    refresh=False)
                    bar.update(already + state["questions_done"] - bar.n)  # redraws at most every mininterval
                if progress_cb is not None:
                    progress_cb(state)
                if ready:
                    return ray.get(ref)
        finally:
            if bar is not None:
                bar.close()


def run(cfg: RunConfig, questions: list[Question] | None = None, progress_cb=None) -> RunResult:
    """Run one configuration on fresh actors (stopped afterwards). See :class:`Engine` for reuse."""
    with Engine(cfg.ray_address) as engine:
        return engine.run(cfg, questions, progress_cb)
