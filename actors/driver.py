"""The front door: ``run(config)`` runs one debate run on Ray and returns its summary.

It checks every input before any actor starts (:mod:`actors.prepare`: a bad flag fails in a
second with a message naming it: dataset, topology, model files, endpoint), starts or joins Ray,
then uses a :class:`DebateRunner`: ``--replicas`` replica actors per distinct model (a placement
group each for tensor parallelism; laid out by :mod:`actors.layout`), agent-group actors hosting
the agents (``--agents-per-actor``; each agent bound to one of its model's replicas, a group's
agents to one replica where possible), one writer and one coordinator — all kept for the
engine's next run — and waits for the coordinator while showing progress. Data flows one way:
questions -> coordinator -> agents -> replica -> coordinator -> writer.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
import socket
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actors import cluster
from actors.cluster import (
    RAY_WORKER_CLEANUP,
    PlacementTimeout,
    cluster_gpus,
    default_placement_timeout,
    driver_node_strategy,
    group_nodes,
    local_ray_on_loopback,
    wants_gpu,
)
from actors.interrupts import exit_code, reinstall, stop_signals
from actors.layout import ReplicaSet, ReplicaSpec, agents_per_actor, embedding_placement, pack_agents, replica_layout
from actors.prepare import RUNS_DIR, check_loaded_images, needs_embeddings, prepare
from actors.reaper import watch as watch_ray_processes
from actors.remote import actor_class, probe_all
from actors.served import (
    NAMESPACE,
    ServeError,
    check_room,
    choose,
    served_group,
    served_name,
    served_replicas,
    served_setup,
)
from backends.registry import check_device
from engine.accounting import summarize
from engine.bad_parts import set_aside
from engine.config import RunConfig
from engine.errors import UserError
from engine.kv_budget import plan_in_flight
from engine.metrics import runs_columns
from engine.progress import progress
from engine.prompts import PromptSet
from engine.protocols.shared import EMBEDDING_MODEL
from engine.results import read_table
from engine.run_lock import RunLock
from engine.tasks import Question

log = logging.getLogger(__name__)


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
    generated_tokens: int = 0  # completion tokens of the questions debated in this process
    faults: dict[str, int] = field(default_factory=dict)  # agent restores and call retries during the run
    batching: dict[str, int] = field(default_factory=dict)  # Ray calls to agents vs agent turns they carried
    backend: str = ""  # the backend that ran (--backend auto resolved)
    engine: list[dict[str, Any]] = field(default_factory=list)  # each model's resolved engine settings
    placement: list[dict[str, Any]] = field(
        default_factory=list
    )  # where each replica / agent actor / embedder / writer / coordinator ran
    timings: dict[str, float] = field(default_factory=dict)  # seconds: replicas_s, agents_s (start-up), debate_s

    @property
    def dtype(self) -> str:
        return engine_dtypes(self.engine) or "-"


def engine_dtypes(engine: list[dict[str, Any]]) -> str | None:
    """The compute dtype(s) of a run's models, from their resolved engine settings ("bfloat16",
    or "bfloat16,float32" for mixed models); None where no backend reports one."""
    return ",".join(dict.fromkeys(str(e["dtype"]) for e in engine if e.get("dtype"))) or None


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def default_out_dir() -> Path:
    return RUNS_DIR / _now().strftime("%Y%m%d-%H%M%S")


class ReplicaStartError(UserError, RuntimeError):
    """A replica actor whose model could not be loaded."""


def _start_error(model: str, exc: BaseException) -> ReplicaStartError:
    """One line from a replica's failed creation: the model and the innermost error message."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    errs = [ln for ln in lines if re.match(r"^[A-Za-z_.]*(Error|Exception|NotFound)\b.*:", ln)]
    cause = (errs[-1] if errs else lines[-1] if lines else type(exc).__name__)[:500]
    return ReplicaStartError(f"--model {model}: the replica could not load it: {cause}")


class RayAddressError(UserError, ConnectionError):
    """``--ray-address`` (or ``RAY_ADDRESS``) names a host:port where nothing listens."""


def check_ray_address(address: str | None, timeout_s: float = 5.0) -> None:
    """Raise :class:`RayAddressError` in one line when ``address`` is a ``host:port`` (optionally
    ``ray://``) that refuses or does not answer a TCP connection within ``timeout_s``; Ray itself
    would retry for minutes and then print a traceback. ``auto`` is checked as what it stands
    for, the Ray that ``ray start`` (or ``debate serve``) started on this machine; with none,
    and no other local Ray that Ray's ``auto`` would join, one line too. ``local`` and None are
    Ray's to resolve and are not checked."""
    if address == "auto" and not os.environ.get("RAY_ADDRESS"):
        # function-level: importing ray._private here keeps it off start-up
        from ray._private import services

        found = services.find_bootstrap_address(None)
        if not found and not services.find_gcs_addresses():
            raise RayAddressError(
                "--ray-address auto: no Ray runs on this machine; start one ('debate serve' starts one with the "
                "model's replicas, 'ray start --head' an empty one) or give its host:port"
            )
        address = found
    if not address or address in ("auto", "local"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise RayAddressError(
            f"--ray-address {address}: no Ray cluster answers there ({exc.strerror or exc}); start one with "
            "'ray start --head' on that node or fix the address (RAY_ADDRESS is read when the flag is not given)"
        ) from None


def init_ray(address: str | None = None, reap: bool = True, **options: Any) -> None:
    """Start Ray here, or join ``address`` (else ``RAY_ADDRESS``), as the engine runs it.

    No dashboard; a Ray started here listens on 127.0.0.1 only
    (:func:`actors.cluster.local_ray_on_loopback`) and kills a dead worker's processes with it
    (:data:`actors.cluster.RAY_WORKER_CLEANUP`, in the environment its processes inherit; a
    joined cluster has its own, cluster.yaml's ``ray start`` sets the same). The actors' output
    and Ray's own warnings (e.g. "N worker processes have been started") reach this terminal
    unless the engine logs errors only (``-q``: the ``actors`` logger at ERROR); they stay in
    Ray's session logs (``/tmp/ray/session_latest/logs``) either way. ``options`` go to
    ``ray.init`` (the tests: ``num_cpus``, ``log_to_driver``). ``reap=False``: no reaper
    (:mod:`actors.reaper`) ends the Ray processes below this one when it ends (``debate serve``,
    whose Ray outlives it).
    """
    # function-level: importing ray here keeps it off start-up
    import ray

    if ray.is_initialized():
        return
    address = address or os.environ.get("RAY_ADDRESS") or None
    check_ray_address(address)
    os.environ.setdefault("RAY_DEDUP_LOGS", "1")
    os.environ.update(RAY_WORKER_CLEANUP)
    if reap:  # before ray.init: a signal during its start-up must not leave its processes behind either
        watch_ray_processes()
    with local_ray_on_loopback(address, options.get("_temp_dir")):
        ray.init(
            **{
                "address": address,
                "include_dashboard": False,
                "logging_level": "ERROR",
                "log_to_driver": logging.getLogger("actors").getEffectiveLevel() < logging.ERROR,
                **options,
            }
        )
    reinstall()  # Ray's core replaced the SIGTERM handler of a run in progress


@dataclass
class RunActors:
    """The actors one run's debate uses: the coordinator, the embedder (or None), the agent-group
    actors and the agents each hosts, with the replica (layout ordinal) they call."""

    coordinator: Any
    embedder: Any
    groups: list[Any]
    packs: list[list[int]]
    replicas: list[int]


class RunInterrupted(RuntimeError):
    """A run that could not finish: an engine actor without restarts (writer, coordinator) died,
    the writer could not write, or a signal stopped it; everything written so far is whole and a
    re-run resumes it. ``exit_code``: what the command exits with (1; 130/143 for a signal)."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


class ErrorRateExceeded(RunInterrupted):
    """A run stopped by ``--max-error-rate``: more than that share of its calls errored (see
    :mod:`actors.coordinator_actor`). What was written stays; a re-run resumes it."""

    def __init__(self, message: str, rate_text: str):
        super().__init__(message)
        self.rate_text = rate_text  # the rate and the limit, for a sweep's cell line


class EngineError(RuntimeError):
    """An exception the engine did not expect (a bug: in a protocol, an agent, the writer's schema
    check) stopped the run. Its traceback is logged; everything written so far is whole and a
    re-run resumes it once the bug is fixed."""


def _error_rate_exceeded(cfg: RunConfig, run_id: str, out: Path, progress: dict[str, Any]) -> ErrorRateExceeded:
    """The one-line error of a run the coordinator stopped on ``--max-error-rate``."""
    calls, errors = progress["calls"], progress["call_errors"]
    limit = cfg.tuning.max_error_rate
    rate = f"{errors} of {calls} calls errored ({errors / calls:.0%}), more than --max-error-rate {limit:g}"
    first = (progress.get("first_error") or "").splitlines()[0][:200] if progress.get("first_error") else ""
    return ErrorRateExceeded(
        f"run {run_id} stopped: {rate}" + (f"; first error: {first}" if first else "") + f". The results written so "
        f"far are in {out}: fix the cause (the calls table's error column) and run the same command again to resume "
        f"(a higher --max-error-rate resumes the same run)",
        rate,
    )


def _probe(actor, method: str = "info", timeout: float = 60.0) -> Any:
    """The result of a no-argument method, or None if the actor is dead (or does not answer)."""
    # function-level: importing ray here keeps it off start-up
    import ray

    try:
        return ray.get(getattr(actor, method).remote(), timeout=timeout)
    except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
        return None


def _alive(actor, method: str = "info", timeout: float = 60.0) -> bool:
    return _probe(actor, method, timeout) is not None


def _stats(replica) -> dict[str, Any]:
    """A replica's counters, or a note that it is gone (restarts used up during the run)."""
    # function-level: importing ray here keeps it off start-up
    import ray

    try:
        return ray.get(replica.get_stats.remote())
    except ray.exceptions.RayActorError as exc:
        return {"dead": True, "error": f"{type(exc).__name__}"}


def _resume_state(
    out: Path, run_id: str, questions: list[Question]
) -> tuple[list[dict[str, Any]], list[Question], dict[str, Any] | None]:
    """What ``out`` already holds of this run: the question rows of the selected questions, the
    questions still to debate, and the earlier attempt's runs row (or None).

    Unreadable part files are set aside first (:func:`engine.bad_parts.set_aside`: renamed to
    ``NAME.parquet.unreadable``, a warning naming both names): the questions a bad questions
    part held, and those finished by the attempt that wrote a bad calls, graphs or prompts part,
    count as not done and are debated again. Another run's bad parts are read around."""
    set_aside(out, run_id)
    previous = [r for r in read_table(out, "questions", skip_bad_parts=True).to_pylist() if r["run_id"] == run_id]
    done = {r["question_id"] for r in previous}
    previous = [r for r in previous if r["question_id"] in {q.qid for q in questions}]
    todo = [q for q in questions if q.qid not in done]
    if previous:
        log.info("run %s: resuming in %s, %d of %d questions already done", run_id, out, len(previous), len(questions))
    old_run = [r for r in read_table(out, "runs", skip_bad_parts=True).to_pylist() if r["run_id"] == run_id]
    return previous, todo, (old_run[0] if old_run else None)


@dataclass
class _Live:
    """A run in progress, as the code that ends it early needs it."""

    run_id: str
    out: Path
    questions: list[Question]
    cfg: RunConfig
    run_row: dict[str, Any] | None = None  # written once the replicas are up
    writer: Any = None
    actors: RunActors | None = None
    debate: Any = None  # the coordinator's run() while the debates run

    def saved_text(self) -> str:
        """``N/M questions saved in OUT``, N counted from the question rows on disk."""
        saved = saved_questions(self.out, self.run_id, self.questions)
        return f"{saved}/{len(self.questions)} questions saved in {self.out}"


def saved_questions(out: Path, run_id: str, questions: list[Question]) -> int:
    """How many of ``questions`` have a question row of ``run_id`` in ``out`` (0 where it cannot be read)."""
    try:
        table = read_table(out, "questions", ["run_id", "question_id"], skip_bad_parts=True)
    except (OSError, ValueError) as exc:
        log.warning("%s: cannot count the saved questions (%s)", out, exc)
        return 0
    wanted = {q.qid for q in questions}
    return len({r["question_id"] for r in table.to_pylist() if r["run_id"] == run_id} & wanted)


class DebateRunner:
    """Runs debates on long-lived actors shared by consecutive runs (a sweep's cells).

    Replicas are keyed by (backend, model, backend options, max batch) and embedding actors by
    model name, so cells that use the same model reuse the loaded model instead of restarting
    it; a replica the next run does not need is stopped first, so its CPUs/GPUs are free. A
    replica that ``debate serve`` started with the same setup (:mod:`actors.served`) is used
    instead of starting one, and left running: neither :meth:`shutdown` nor a run that does not
    need it stops it (:attr:`served`).
    ``run`` resumes: questions that already have a result row for this run id in ``--out`` are
    not debated again, and the run's summary covers old and new rows.
    """

    def __init__(self, ray_address: str | None = None):
        init_ray(ray_address)
        self._replicas: dict[tuple, Any] = {}
        self._groups: dict[tuple, Any] = {}  # replica key -> its placement group (tensor parallel)
        # replica key -> (name, found on the cluster) of each served replica in _replicas: never killed here
        self.served: dict[tuple, tuple[str, bool]] = {}
        self._embedders: dict[str, Any] = {}
        # actor handles (typed Any: actors/remote.py), None until first used
        self._cache: Any | None = None  # first-round reply cache (actors/cache_actor.py)
        # agent-group actors per node (None: anywhere), reused by the next run (configured per run)
        self._agent_pool: dict[str | None, list] = {}
        self._writer: Any | None = None
        self._coordinator: Any | None = None

    def __enter__(self) -> DebateRunner:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        # function-level: importing ray here keeps it off start-up
        import ray

        singles = [x for x in (self._cache, self._writer, self._coordinator) if x is not None]
        agents = [a for pool in self._agent_pool.values() for a in pool]
        own = [r for key, r in self._replicas.items() if key not in self.served]
        for actor in [*own, *self._embedders.values(), *agents, *singles]:
            ray.kill(actor)
        for key, pg in self._groups.items():
            if key not in self.served:
                ray.util.remove_placement_group(pg)
        self._replicas.clear()
        self.served.clear()
        self._groups.clear()
        self._embedders.clear()
        self._agent_pool.clear()
        self._cache = self._writer = self._coordinator = None

    def _stop_replica(self, key: tuple) -> None:
        """Stop a replica this runner started; a served one is only let go (it keeps running)."""
        # function-level: importing ray here keeps it off start-up
        import ray

        if self.served.pop(key, None) is not None:
            self._replicas.pop(key)
            self._groups.pop(key, None)
            return
        ray.kill(self._replicas.pop(key))
        pg = self._groups.pop(key, None)
        if pg is not None:
            ray.util.remove_placement_group(pg)

    def _loaded(self, key: tuple, model: str, info_ref) -> dict[str, Any]:
        """A new replica's info once its model is loaded; if it could not load, stop it and raise
        a one-line :class:`ReplicaStartError` naming the model."""
        # function-level: importing ray here keeps it off start-up
        import ray

        try:
            info = ray.get(info_ref)
        except ray.exceptions.RayActorError as exc:  # died while loading (e.g. out of memory)
            self.served.pop(key, None)  # started here for debate serve: stopped all the same
            self._stop_replica(key)
            raise _start_error(model, exc) from None
        if info.get("error"):
            self.served.pop(key, None)
            self._stop_replica(key)
            raise ReplicaStartError(f"--model {model}: the replica could not load it: {info['error']}")
        return info

    def _adopt_served(self, cfg: RunConfig, wanted: dict[tuple, ReplicaSpec], serve: bool) -> dict[tuple, Any]:
        """The served replicas (:mod:`actors.served`) of the wanted setups that this runner does not
        hold yet, taken as its own (never stopped by it): their info by key. One line per
        replica: reused (info), or why a served one of that model is not (warning). ``serve``:
        for ``debate serve``, which starts another one beside a served one that differs. The
        replicas still to start must fit beside the served ones (:func:`actors.served.check_room`)."""
        missing = {key: spec for key, spec in wanted.items() if key not in self._replicas}
        served = served_replicas() if missing else []
        infos: dict[tuple, Any] = {}
        for key, spec in missing.items() if served else ():
            want = served_setup(cfg, spec)
            found, line = choose(want, served, "serving another beside it" if serve else "starting its own")
            if found is not None:
                log.info("%s", line)
                self._replicas[key], self.served[key], infos[key] = found.handle, (found.name, True), found.info
            elif serve and any(s.name == served_name(want) for s in served):
                raise ServeError(f"{line}; end it with 'debate serve --stop' first")
            elif line:
                log.warning("%s", line)
        check_room([spec for key, spec in missing.items() if key not in infos], served)
        return infos

    def replicas_for(self, cfg: RunConfig, models: list[str], serve: bool = False) -> ReplicaSet:
        """Each model's replicas (started, kept from an earlier run with the same setup, or served
        by ``debate serve``), once every model is loaded. ``serve``: the replicas it starts are
        served ones (named, detached: :mod:`actors.served`) and outlive this runner."""
        # function-level: importing ray.util.scheduling_strategies here keeps it off start-up
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        # function-level: importing ray here keeps it off start-up
        from actors.replica_actor import ReplicaActor, shipped_backend

        gpu = wants_gpu(cfg, cluster_gpus())
        check_device(cfg, gpu)
        layout = replica_layout(cfg, models, gpu)
        wanted = {spec.key(cfg): spec for specs in layout.values() for spec in specs}
        infos: dict[tuple, dict[str, Any]] = {}
        for key in [k for k in self._replicas if k in wanted]:
            info = _probe(self._replicas[key])
            if info is None:
                self._stop_replica(key)  # died for good (restarts used up) in an earlier run: start afresh
            else:
                infos[key] = info
        for key in [k for k in self._replicas if k not in wanted]:
            self._stop_replica(key)  # frees its CPUs/GPUs before the new ones ask for them
        infos.update(self._adopt_served(cfg, wanted, serve))
        new = {key: spec for key, spec in wanted.items() if key not in self._replicas}
        setups = {key: served_setup(cfg, spec) for key, spec in new.items()} if serve else {}
        # GPUs / custom resources: every new replica's group asked for at once (an autoscaler sees
        # the whole demand), then one deadline for all, ending in a line naming what no node offered
        asks = {
            key: (list(spec.bundles), f"--model {spec.model} (replica {spec.index})")
            for key, spec in new.items()
            if spec.bundles
        }
        if asks:
            names = {key: served_name(setup) for key, setup in setups.items()}
            self._groups.update(cluster.reserve_all(asks, default_placement_timeout(cfg), detached=names))
        for key, spec in new.items():
            opts = dict(spec.actor_options)
            if serve:
                self.served[key] = (served_name(setups[key]), False)
                opts.update(name=self.served[key][0], namespace=NAMESPACE, lifetime="detached")
            if spec.bundles:
                pg = self._groups[key]
                opts["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                    placement_group=pg, placement_group_bundle_index=0, placement_group_capture_child_tasks=True
                )
            elif cfg.backend_spec.loads_model:
                # a CPU replica never touches a GPU it merely sees (recent Ray leaves them visible)
                opts["runtime_env"] = {"env_vars": {"CUDA_VISIBLE_DEVICES": ""}}
            log.info(
                "starting replica %d of %s (%s backend, resources %s%s)",
                spec.index,
                spec.model,
                cfg.sampling.backend,
                {k: v for k, v in spec.actor_options.items() if k in ("num_cpus", "num_gpus", "resources")},
                ", placement group" if spec.bundles else "",
            )
            self._replicas[key] = (
                actor_class(ReplicaActor)
                .options(**opts)
                .remote(
                    shipped_backend(cfg.backend_spec),
                    spec.model,
                    spec.backend_options,
                    max_batch=cfg.tuning.max_batch,
                    served=setups.get(key),
                )
            )
        # All new replicas were created before waiting on any, so their models load in parallel.
        loading = {key: self._replicas[key].info.remote() for key in wanted if key not in infos}
        for key, ref in loading.items():
            infos[key] = self._loaded(key, wanted[key].model, ref)
        return ReplicaSet(
            layout,
            [infos[spec.key(cfg)] for specs in layout.values() for spec in specs],
            {m: [self._replicas[s.key(cfg)] for s in specs] for m, specs in layout.items()},
        )

    def embedder_for(self, name: str, cfg: RunConfig | None = None):
        """The engine's embedding actor for ``name``, on the device the driver chose
        (:func:`embedding_placement`), started once and kept."""
        # function-level: importing ray here keeps it off start-up
        import ray

        # function-level: importing ray here keeps it off start-up
        from actors.embedding_actor import EmbeddingActor

        if name not in self._embedders:
            restarts = cfg.tuning.max_restarts if cfg else 3
            retries = cfg.tuning.call_retries if cfg else 2
            opts, device = embedding_placement(cfg)
            actor = (
                actor_class(EmbeddingActor)
                .options(max_restarts=restarts, max_task_retries=retries, **opts)
                .remote(name, threads=1, device=device)
            )

            ready, _ = ray.wait([actor.info.remote()], timeout=default_placement_timeout(cfg))
            if not ready:
                ray.kill(actor)

                raise PlacementTimeout(
                    f"--embedding-device {device}: no node offers {opts} for the embedding actor "
                    f"within --placement-timeout; use --embedding-device cpu"
                )
            ray.get(ready[0])
            self._embedders[name] = actor
        return self._embedders[name]

    def cache_for(self, cfg: RunConfig, layout: dict[str, list[ReplicaSpec]]) -> tuple[Any, dict[str, str]]:
        """With ``reuse_first_round``: the engine's one cache actor (kept across runs) and, per
        model, the cache namespace naming its replica setup (backend, model, backend options), so
        runs share a first-round reply only when the same replica setup would have produced it."""
        if not cfg.tuning.reuse_first_round:
            return None, {}
        # function-level: importing ray here keeps it off start-up
        from actors.cache_actor import CacheActor

        if self._cache is None:
            self._cache = actor_class(CacheActor).options(scheduling_strategy=driver_node_strategy()).remote()
        namespaces = {
            m: json.dumps([cfg.sampling.backend, m, specs[0].backend_options], sort_keys=True)
            for m, specs in layout.items()
        }
        return self._cache, namespaces

    def agent_groups_for(self, nodes: list[str | None], cfg: RunConfig) -> list:
        """One agent-group actor per entry of ``nodes`` (the node of the replica its agents call;
        None: anywhere, Ray's choice), from the engine's pool of that node: started only where the
        pool is too small, all at once, on that node where it has room (soft affinity); one whose
        restarts are used up is replaced. Returns once every one answers."""
        # function-level: importing ray here keeps it off start-up
        import ray

        # function-level: importing ray.util.scheduling_strategies here keeps it off start-up
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        # function-level: importing ray here keeps it off start-up
        from actors.agent_actor import AgentGroupActor

        def new(node: str | None):
            opts: dict[str, Any] = {"max_restarts": cfg.tuning.max_restarts, "max_task_retries": 0}
            if node is not None:
                opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=True)
            return actor_class(AgentGroupActor).options(**opts).remote()

        slots: list[tuple[str | None, int]] = []
        taken: dict[str | None, int] = {}  # actors of each node's pool given out so far
        for node in nodes:
            pool = self._agent_pool.setdefault(node, [])
            k = taken[node] = taken.get(node, 0) + 1
            if k > len(pool):
                pool.append(new(node))
            slots.append((node, k - 1))
        refs = [self._agent_pool[node][k].ready.remote() for node, k in slots]
        replaced = []
        for (node, k), ref in zip(slots, refs):
            try:
                ray.get(ref)
            except ray.exceptions.RayActorError:  # dead for good in an earlier run
                self._agent_pool[node][k] = new(node)
                replaced.append(self._agent_pool[node][k].ready.remote())
        ray.get(replaced)  # a new actor that cannot start is not a fault the run absorbs
        return [self._agent_pool[node][k] for node, k in slots]

    def run(
        self,
        cfg: RunConfig,
        questions: list[Question] | None = None,
        progress_cb=None,
        prepared: tuple[list[Question], PromptSet] | None = None,
    ) -> RunResult:
        """Debate ``questions`` (default: the configured dataset) with ``cfg``; resumes the
        questions already in ``cfg.output.out``. Returns totals and where everything ran.
        ``prepared``: what :func:`prepare` returned for this ``cfg``, when the caller checked the
        inputs already (:func:`run` does, before Ray starts).

        The run holds its lock in ``cfg.output.out`` (:class:`engine.run_lock.RunLock`; ``--wait``) while
        it runs. It ends with :class:`RunInterrupted` (one line: how many questions are saved, how
        to resume) when Ctrl-C or SIGTERM reaches it, when the writer dies or cannot write, or when
        the writer or coordinator actor dies; what was written stays and a re-run resumes it."""
        questions, prompts = prepared if prepared is not None else prepare(cfg, questions)
        out = Path(cfg.output.out) if cfg.output.out else default_out_dir()
        live = _Live(cfg.run_id(), out, questions, cfg)
        with stop_signals(), RunLock(out, live.run_id, wait=cfg.output.wait):
            try:
                return self._run_locked(cfg, prompts, live, progress_cb)
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM (actors.interrupts)
                raise self._interrupted(live) from None

    def _run_locked(self, cfg: RunConfig, prompts: PromptSet, live: _Live, progress_cb) -> RunResult:
        """:meth:`run` once its lock is held."""
        run_id, out, questions = live.run_id, live.out, live.questions
        attempt, t0 = uuid.uuid4().hex[:12], time.perf_counter()
        previous, todo, old_run = _resume_state(out, run_id, questions)
        writer = live.writer = self._writer_for(cfg, out)
        t_replicas = time.perf_counter()
        replicas = self.replicas_for(cfg, cfg.run_models())
        timings = {"replicas_s": time.perf_counter() - t_replicas, "agents_s": 0.0, "debate_s": 0.0}
        check_loaded_images(cfg, questions, replicas.infos)
        log.info("run %s: backend %s, engine %s", run_id, cfg.sampling.backend, replicas.engine)
        flight = plan_in_flight(cfg, questions, replicas.kv_capacity())
        log.info("run %s: %s", run_id, flight.reason)
        engine = flight.engine(replicas.engine)  # with the KV cache sizes and the limit they gave
        live.run_row = {
            "run_id": run_id,
            "protocol": cfg.experiment.protocol,
            "backend": cfg.sampling.backend,
            "simulated": replicas.simulated,
            "dtype": engine_dtypes(replicas.engine),
            "engine": json.dumps(engine, sort_keys=True),
            "config": cfg.to_json(),
            "status": "running",
            "started": old_run["started"] if old_run else _now(),
            "n_questions": len(questions),
        }
        self._writer_get(live, writer.write_run.remote(live.run_row))
        rows: list[dict[str, Any]] = []
        progress: dict[str, Any] = {}
        actors: RunActors | None = None
        if todo:
            t_agents = time.perf_counter()
            actors = live.actors = self._setup_run(cfg, run_id, attempt, prompts, replicas, writer, flight.limit)
            t_debate = time.perf_counter()
            rows, progress = self._debate_all(cfg, live, todo, len(previous), replicas.simulated, progress_cb)
            timings.update(agents_s=t_debate - t_agents, debate_s=time.perf_counter() - t_debate)
        if progress.get("stopped") == "writer":
            raise self._writer_failed(live, progress["writer_error"])
        wall = time.perf_counter() - t0
        summary = summarize(previous + rows)
        placement = self._placement(cfg, replicas, writer, actors)
        timings = {k: round(v, 3) for k, v in timings.items()}
        stopped = progress.get("stopped")
        live.run_row.update(
            placement=json.dumps(placement, sort_keys=True),
            status=f"stopped: {stopped}" if stopped else "finished",
            finished=_now(),
            wall_s=wall + ((old_run or {}).get("wall_s") or 0.0),
            timings=json.dumps(timings),
            **runs_columns(summary),  # the aggregates engine/metrics.py says the runs table stores
        )
        self._writer_get(live, [writer.write_run.remote(live.run_row), writer.flush.remote()])
        if stopped:
            raise _error_rate_exceeded(cfg, run_id, out, progress)
        return RunResult(
            run_id,
            out,
            summary,
            wall,
            previous + rows,
            replicas.simulated,
            [_stats(r) for r in replicas.all_handles],
            resumed=len(previous),
            generated_tokens=summarize(rows)["completion_tokens"],
            faults={k: progress.get(k, 0) for k in ("agent_restores", "call_retries")},
            batching={
                "agent_calls": progress.get("agent_calls", 0),
                "agent_turns": progress.get("agent_turns_shipped", 0),
            },
            backend=cfg.sampling.backend,
            engine=engine,
            placement=placement,
            timings=timings,
        )

    def _interrupted(self, live: _Live) -> RunInterrupted:
        """End a run that a signal reached: its debates stopped, the writer flushed, the run marked
        ``interrupted``; the one-line error to raise (its ``exit_code``: 130 or 143)."""
        # function-level: importing ray here keeps it off start-up
        import ray

        log.info("run %s: interrupted: stopping the debates and saving what is done", live.run_id)
        try:
            if live.debate is not None and live.actors is not None:
                ray.get(live.actors.coordinator.stop.remote("interrupted"), timeout=10)
                ray.wait([live.debate], timeout=30)  # the coordinator flushes the writer as it ends
            elif live.writer is not None:
                ray.get(live.writer.flush.remote(), timeout=30)
        except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError) as exc:
            log.warning("run %s: could not flush the writer after the interrupt (%s)", live.run_id, type(exc).__name__)
        self._mark(live, "interrupted")
        return RunInterrupted(f"interrupted: {live.saved_text()}; run the same command to resume", exit_code())

    def _writer_failed(self, live: _Live, reason: str) -> RunInterrupted:
        """The error of a run whose writer died or could not write (the run is marked ``interrupted``
        where the disk still lets a small file be written)."""
        self._mark(live, "interrupted", after_failure=True)
        fix = "free some space, then " if reason.startswith("no space left") else ""
        return RunInterrupted(
            f"run {live.run_id} stopped: {reason}; {live.saved_text()}: {fix}run the same command again to resume"
        )

    def _writer_get(self, live: _Live, refs) -> Any:
        """``ray.get(refs)`` of calls to the writer; a writer that died or cannot write ends the run
        (:meth:`_writer_failed`)."""
        # function-level: importing ray here keeps it off start-up
        import ray

        # function-level: importing ray here keeps it off start-up
        from actors.coordinator_actor import writer_failure

        try:
            return ray.get(refs)
        except ray.exceptions.RayError as exc:
            reason = writer_failure(exc)
            if reason is None:
                raise
            raise self._writer_failed(live, reason) from None

    def _mark(self, live: _Live, status: str, after_failure: bool = False) -> None:
        """Rewrite the run's row with ``status``, if it was written (best effort: a writer that died
        is started again; a disk that is still full leaves the row ``running``, which readers show
        as interrupted once the run's lock is gone)."""
        # function-level: importing ray here keeps it off start-up
        import ray

        if live.run_row is None:
            return
        live.run_row.update(status=status, finished=_now())
        try:
            if live.writer is None or not _alive(live.writer, method="where", timeout=10):
                live.writer = self._writer_for(live.cfg, live.out)
            ray.get(live.writer.write_run.remote(live.run_row, after_failure), timeout=30)
        except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError, RunInterrupted) as exc:
            # function-level: importing ray here keeps it off start-up
            from actors.coordinator_actor import writer_failure

            why = writer_failure(exc) or type(exc).__name__
            log.info("run %s: its row still says running (readers show it %s): %s", live.run_id, status, why)

    def _writer_for(self, cfg: RunConfig, out: Path):
        """The writer actor, pointed at ``out`` and handed ``--sink`` (started again if the last one died)."""
        # function-level: importing ray here keeps it off start-up
        import ray

        # function-level: importing ray here keeps it off start-up
        from actors.writer_actor import WriterActor, shipped_sink

        if self._writer is None or not _alive(self._writer, method="where"):
            # on the driver's node, where --out is, unless the user says --out is shared storage
            pin = {} if cfg.output.out_shared else {"scheduling_strategy": driver_node_strategy()}
            self._writer = actor_class(WriterActor).options(**pin).remote()
        ray.get(self._writer.open.remote(str(out), shipped_sink(cfg.output.sink)))
        return self._writer

    def _setup_run(
        self,
        cfg: RunConfig,
        run_id: str,
        attempt: str,
        prompts: PromptSet,
        replicas: ReplicaSet,
        writer,
        max_questions: int | None = None,
    ) -> RunActors:
        """Agents packed into agent-group actors (:func:`pack_agents`, ``--agents-per-actor``) next
        to the replica they call (each also told its model's other replicas, for calls routed per
        question's round), the embedder if the protocol needs one, and the coordinator, configured
        for this run with at most ``max_questions`` in flight (None: ``--max-concurrent-questions``)."""
        # function-level: importing ray here keeps it off start-up
        import ray

        # function-level: importing ray here keeps it off start-up
        from actors.agent_actor import AgentSetup

        # function-level: importing ray here keeps it off start-up
        from actors.coordinator_actor import CoordinatorActor

        specs = cfg.agent_specs()
        cache, namespaces = self.cache_for(cfg, replicas.layout)
        bound, ordinals = replicas.for_agents(cfg, [s.model for s in specs], self._replicas)
        setups = [
            AgentSetup(
                i,
                spec,
                prompts,
                replicas.simulated,
                bound[i],
                cache,
                namespaces.get(spec.model, ""),
                max(0, int(cfg.tuning.call_retries)),
                cfg.output.store_prompts,
                replicas.handles[spec.model],
            )
            for i, spec in enumerate(specs)
        ]
        per_actor = agents_per_actor(cfg.tuning.agents_per_actor, len(specs), ray.cluster_resources().get("CPU", 1))
        packs = pack_agents(ordinals, per_actor)
        group_replicas = [ordinals[pack[0]] for pack in packs]
        groups = self.agent_groups_for([replicas.infos[r].get("node_id") for r in group_replicas], cfg)
        log.info("%d agents in %d agent actors (%d per actor at most)", len(specs), len(groups), per_actor)
        embedder = self.embedder_for(cfg.option(EMBEDDING_MODEL), cfg) if needs_embeddings(cfg) else None
        if self._coordinator is None or not _alive(self._coordinator, method="progress"):
            self._coordinator = (
                actor_class(CoordinatorActor).options(scheduling_strategy=driver_node_strategy()).remote()
            )
        # Configures every group and waits for it, so the first round's requests reach the
        # replicas together and are batched together, instead of trickling in.
        ray.get(
            self._coordinator.setup.remote(
                cfg,
                run_id,
                groups,
                [[setups[i] for i in pack] for pack in packs],
                writer,
                cfg.sampling.backend,
                replicas.simulated,
                embedder,
                attempt,
                max_questions,
            )
        )
        return RunActors(self._coordinator, embedder, groups, packs, group_replicas)

    def _debate_all(
        self, cfg: RunConfig, live: _Live, todo: list[Question], already: int, simulated: bool, progress_cb
    ) -> tuple[list[dict[str, Any]], dict]:
        """The coordinator debates ``todo``; returns the question rows and its progress counters.
        A dead coordinator (or writer, where the coordinator died with it) stops the run
        (RunInterrupted), an exception raised inside a live actor is a bug (EngineError); either
        way what was written stays and resumes."""
        # function-level: importing ray here keeps it off start-up
        import ray

        assert live.actors is not None
        coordinator = live.actors.coordinator
        try:
            live.debate = coordinator.run.remote(todo)
            rows = self._wait(cfg, coordinator, live.debate, len(live.questions), already, simulated, progress_cb)
            live.debate = None
            return rows, ray.get(coordinator.progress.remote())
        except ray.exceptions.RayError as exc:
            live.debate = None
            lost = [
                name
                for name, actor in (("writer", live.writer), ("coordinator", coordinator))
                if not _alive(actor, method="where")
            ]
            cause = getattr(exc, "cause", None)
            if (
                not lost
                and isinstance(exc, ray.exceptions.RayTaskError)
                and not isinstance(cause, ray.exceptions.RayActorError)
            ):
                # raised inside an actor that is still alive: a bug, not a death
                log.error("run %s stopped by an unexpected error:\n%s", live.run_id, exc)
                what = f"{type(cause).__name__}: {str(cause).splitlines()[0][:300]}" if cause else type(exc).__name__
                raise EngineError(
                    f"run {live.run_id} stopped by an unexpected error in the engine ({what}); traceback "
                    f"above; the results written so far are in {live.out} and resume with the same "
                    f"command"
                ) from None
            raise RunInterrupted(
                f"run {live.run_id} stopped: the {' and '.join(lost) or 'engine'} actor died "
                f"({type(exc).__name__}); {live.saved_text()} — run the same command again to resume"
            ) from None

    def _placement(
        self, cfg: RunConfig, replicas: ReplicaSet, writer, actors: RunActors | None
    ) -> list[dict[str, Any]]:
        """Where this run's actors ran (the runs row's ``placement``): each replica (model, index,
        node, GPU ids, the Ray resources it holds and, with a placement group, its bundles and
        their nodes), each agent-group actor (the agents it hosts, the replica they call, node,
        pid), the embedder, writer and coordinator."""
        # function-level: importing ray here keeps it off start-up
        import ray

        out: list[dict[str, Any]] = []
        where = ("node_id", "node_ip", "gpu_ids")
        specs = [s for specs in replicas.layout.values() for s in specs]
        for spec, info in zip(specs, replicas.infos):
            held = {
                k: spec.actor_options[k] for k in ("num_cpus", "num_gpus", "resources") if spec.actor_options.get(k)
            }
            entry = {
                "role": "replica",
                "model": spec.model,
                "replica": spec.index,
                **{k: info.get(k) for k in where},
                "resources": held,
            }
            pg = self._groups.get(spec.key(cfg))
            served = self.served.get(spec.key(cfg))
            if served is not None:
                entry["served"] = served[0]
                pg = pg or (served_group(served[0]) if spec.bundles else None)
            if pg is not None:
                entry["bundles"] = [dict(b) for b in spec.bundles]
                entry["bundle_nodes"] = group_nodes(pg)
            out.append(entry)
        if actors is None:
            return out + ([{"role": "writer", **ray.get(writer.where.remote())}] if writer is not None else [])
        for g, (pack, r, info) in enumerate(
            zip(actors.packs, actors.replicas, probe_all([a.where.remote() for a in actors.groups]))
        ):
            out.append(
                {
                    "role": "agents",
                    "actor": g,
                    "agents": pack,
                    "model": specs[r].model,
                    "replica": specs[r].index,
                    **({k: info.get(k) for k in (*where[:2], "pid")} if info else {"dead": True}),
                }
            )
        if actors.embedder is not None:
            info = ray.get(actors.embedder.info.remote())
            out.append(
                {
                    "role": "embedder",
                    "model": cfg.option(EMBEDDING_MODEL),
                    "device": info.get("device"),
                    **{k: info.get(k) for k in where},
                }
            )
        for role, actor in (("writer", writer), ("coordinator", actors.coordinator)):
            out.append({"role": role, **ray.get(actor.where.remote())})
        return out

    @staticmethod
    def _wait(cfg, coordinator, ref, total: int, already: int, simulated: bool, progress_cb) -> list[dict[str, Any]]:
        # function-level: importing ray here keeps it off start-up
        import ray

        bar = None
        if cfg.output.progress:
            desc = f"{cfg.experiment.protocol} ({cfg.sampling.backend}{', SIMULATED' if simulated else ''})"
            bar = progress(total, initial=already, unit="q", desc=desc)
        try:
            while True:
                ready, _ = ray.wait([ref], timeout=0.5)
                state = ray.get(coordinator.progress.remote())
                if bar is not None:
                    bar.set_postfix(
                        calls=state["calls"], tok=state["prompt_tokens"] + state["completion_tokens"], refresh=False
                    )
                    # what is on disk, not what is debated: an interrupted run keeps what the bar showed
                    bar.update(already + state["questions_saved"] - bar.n)  # redraws at most every mininterval
                if progress_cb is not None:
                    progress_cb(state)
                if ready:
                    return ray.get(ref)
        finally:
            if bar is not None:
                bar.close()


def run(cfg: RunConfig, questions: list[Question] | None = None, progress_cb=None) -> RunResult:
    """Run one configuration on fresh actors (stopped afterwards). Every input is checked
    (:func:`prepare`) before Ray starts, so bad input fails in a second with one line. See
    :class:`DebateRunner` for reuse."""
    prepared = prepare(cfg, questions)
    out = Path(cfg.output.out) if cfg.output.out else default_out_dir()
    cfg = cfg.replace(out=str(out))
    # the lock before Ray starts: a run of the same id in progress is refused in a second
    with stop_signals(), RunLock(out, cfg.run_id(), wait=cfg.output.wait):
        try:
            with DebateRunner(cfg.cluster.ray_address) as runner:
                return runner.run(cfg, progress_cb=progress_cb, prepared=prepared)
        except KeyboardInterrupt:  # while Ray started or stopped: the run's own cleanup did not apply
            live = _Live(cfg.run_id(), out, prepared[0], cfg)
            raise RunInterrupted(
                f"interrupted: {live.saved_text()}; run the same command to resume", exit_code()
            ) from None
