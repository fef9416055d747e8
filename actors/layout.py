"""Where a run's replicas go: how many per model, their Ray and backend options, placement groups.

Pure decisions made before any actor starts (tested without Ray): each model's replicas
(:func:`replica_layout`, from ``--replicas``, ``--tensor-parallel``, ``--gpus-per-replica`` and
``placement_resources``), which replica each agent calls (:func:`assign_replicas`), how agents are
packed into agent actors (:func:`agents_per_actor`, :func:`pack_agents`) and where the embedding
actor runs (:func:`embedding_placement`). :class:`actors.driver.DebateRunner` starts what they describe.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from typing import Any

from actors.cluster import (
    cluster_gpus,
    free_gpu_share,
    gpu_hints,
    largest_node_cpus,
    needs_group,
    replica_bundles,
    wants_gpu,
)
from backends.registry import ReplicaPlacement, engine_settings
from engine.config import ConfigError, RunConfig
from engine.options import ENGINE_KEYS

log = logging.getLogger(__name__)


def replica_options(
    cfg: RunConfig, n_replicas: int = 1, gpu: bool | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(Ray actor options, backend options) for a replica of this run's backend.

    ``gpu``: whether the run's replicas use GPUs; default :func:`actors.cluster.wants_gpu` (from
    the run's configuration, else the GPUs the cluster has now). On GPUs each replica holds one
    (tensor parallel: see :func:`replica_layout`). On CPUs, without ``--replica-cpus``, the
    largest node's CPUs as Ray counts them (:func:`actors.cluster.largest_node_cpus`) are split
    evenly between the run's ``n_replicas`` replicas (all models), so several models fit on one
    machine instead of waiting for CPUs.
    """
    spec = cfg.backend_spec
    if gpu is None and spec.loads_model:  # a local model uses the cluster's GPUs when it has some
        gpu = wants_gpu(cfg, cluster_gpus())
    where = ReplicaPlacement(max(1, n_replicas), bool(gpu), bool(gpu_hints(cfg)), largest_node_cpus())
    ask = spec.resources(cfg, where)
    return dict(ask.ray_options), dict(ask.backend_options)


PLACEMENT_KEYS = ("num_cpus", "num_gpus", "gpus_per_replica", "resources", "replicas", "tensor_parallel_size")
GPU_MEMORY_SHARE = 0.9  # vLLM's default gpu_memory_utilization for a whole GPU, scaled by a replica's share


def _placement_keys() -> tuple[str, ...]:
    return (*PLACEMENT_KEYS, *ENGINE_KEYS)


def placement_options(cfg: RunConfig, model: str, default: dict[str, Any]) -> dict[str, Any]:
    """Ray options of one model's replica: the backend default, overridden by the run's
    ``placement_resources[model]`` (num_cpus, num_gpus, custom resources such as a cluster node
    type's ``strong_gpu``), so each model lands on the node type meant for it. ``replicas``,
    ``tensor_parallel_size`` and the engine settings there (``dtype``, ``max_model_len``, ...) are
    read by :func:`replica_layout`, not passed to Ray."""
    over = dict(cfg.cluster.placement_resources.get(model) or {})
    unknown = set(over) - set(_placement_keys())
    if unknown:
        raise ConfigError(
            f"placement_resources[{model!r}]: unknown key(s) {sorted(unknown)}; use {', '.join(_placement_keys())}"
        )
    if "gpus_per_replica" in over:  # the per-model name of --gpus-per-replica; Ray calls it num_gpus
        share = over.pop("gpus_per_replica")
        if over.get("num_gpus", share) != share:
            raise ConfigError(
                f"placement_resources[{model!r}]: gpus_per_replica {share} and num_gpus {over['num_gpus']} "
                f"disagree (they are the same setting; give one)"
            )
        over["num_gpus"] = share
    if over.get("num_gpus") is not None and not float(over["num_gpus"]) >= 0:
        raise ConfigError(f"placement_resources[{model!r}]: num_gpus must be >= 0 (got {over['num_gpus']})")
    ray_keys = ("num_cpus", "num_gpus", "resources")
    return {**default, **{k: v for k, v in over.items() if k in ray_keys}}


@dataclass(frozen=True)
class ReplicaSpec:
    """One replica to start: Ray options, backend options, and the bundles of the placement group
    that reserves its resources (empty: a CPU-only replica, placed by Ray without a group)."""

    model: str
    index: int
    actor_options: dict[str, Any]
    backend_options: dict[str, Any]
    bundles: tuple[dict[str, float], ...] = ()

    def key(self, cfg: RunConfig) -> tuple:
        return (
            cfg.sampling.backend,
            self.model,
            self.index,
            json.dumps(self.backend_options, sort_keys=True),
            cfg.tuning.max_batch,
            json.dumps(self.actor_options, sort_keys=True),
            json.dumps(self.bundles, sort_keys=True),
        )


def replica_layout(cfg: RunConfig, models: list[str], gpu: bool) -> dict[str, list[ReplicaSpec]]:
    """Every replica of every model (pure: tested without Ray).

    ``--replicas`` (or ``placement_resources[model].replicas``) replicas per model. A replica that
    asks for GPUs or custom resources is placed through a placement group
    (:func:`actors.cluster.replica_bundles`): its first bundle holds the actor's CPUs, custom
    resources and first GPU. With ``--tensor-parallel`` (or ``...tensor_parallel_size``) T > 1 the
    group has T one-GPU bundles on one node, the replica actor holds no GPU itself, and vLLM's Ray
    executor puts its T workers in the group's bundles (the actor is scheduled with
    ``placement_group_capture_child_tasks``). The simulated backend takes the same settings, so a
    cluster layout can be tested on CPUs that declare GPUs. Each replica is told its device.
    """
    spec = cfg.backend_spec
    per_model = {}
    for m in models:
        over = cfg.cluster.placement_resources.get(m) or {}
        n = int(over.get("replicas", cfg.cluster.replicas))
        tp = int(over.get("tensor_parallel_size", cfg.cluster.tensor_parallel))
        if n < 1 or tp < 1:
            raise ConfigError(f"placement_resources[{m!r}]: replicas and tensor_parallel_size must be >= 1")
        if tp > 1 and (not (spec.tensor_parallel or spec.simulated) or not gpu):
            raise ConfigError(
                f"--tensor-parallel {tp} for model {m!r} needs --backend vllm and GPUs "
                f"(placement_resources num_gpus, or --device gpu)"
            )
        per_model[m] = (n, tp)
    actor_default, backend_default = replica_options(cfg, sum(n for n, _ in per_model.values()), gpu)
    layout: dict[str, list[ReplicaSpec]] = {}
    for m, (n, tp) in per_model.items():
        actor = placement_options(cfg, m, actor_default)
        backend = {
            **backend_default,
            **engine_settings(cfg.cluster.placement_resources.get(m) or {}, spec),
        }
        share = float(actor.get("num_gpus") or 0)
        _check_gpu_share(cfg, m, share, tp)
        if spec.loads_model:  # the device of the GPU it holds, never one it merely sees
            backend["device"] = "cuda" if share > 0 or tp > 1 else "cpu"
        if (
            ("gpu_memory_utilization" in spec.engine_keys or spec.simulated)
            and 0 < share < 1
            and tp == 1
            and backend.get("gpu_memory_utilization") is None
        ):
            # vLLM takes 0.9 of the whole GPU by default: a replica on a quarter of it takes 0.9 x 0.25
            backend["gpu_memory_utilization"] = round(GPU_MEMORY_SHARE * share, 6)
        if tp > 1 and spec.tensor_parallel:
            backend["tensor_parallel_size"] = tp
        bundles: tuple[dict[str, float], ...] = ()
        if needs_group(actor, tp if tp > 1 else 0):
            bundles = tuple(replica_bundles(actor, tp if tp > 1 else 0))
        if tp > 1:
            actor = {**actor, "num_gpus": 0}  # the workers in bundles 0..T-1 hold the GPUs
        actor = {**actor, "max_restarts": cfg.tuning.max_restarts, "max_task_retries": cfg.tuning.call_retries}
        layout[m] = [ReplicaSpec(m, i, actor, backend, bundles) for i in range(n)]
    return layout


def _check_gpu_share(cfg: RunConfig, model: str, share: float, tp: int) -> None:
    """One line for a GPU request a replica cannot use: more than one GPU without tensor parallel
    (the engine would use one, the rest reserved for nothing), or a share other than whole GPUs
    for a tensor-parallel replica (one GPU per rank)."""
    over = cfg.cluster.placement_resources.get(model) or {}
    key = next((k for k in ("gpus_per_replica", "num_gpus") if k in over), None)
    where = f"placement_resources[{model!r}].{key}" if key else "--gpus-per-replica"
    if tp == 1 and share > 1:
        raise ConfigError(
            f"{where} {share:g}: a replica without tensor parallelism uses one GPU, so {share - 1:g} would be "
            f"reserved for nothing; set tensor_parallel_size {share:g} (--tensor-parallel) to spread the "
            f"model over {share:g} GPUs, or ask for 1"
        )
    if tp > 1 and share not in (1, tp):
        raise ConfigError(
            f"{where} {share:g} with tensor parallel {tp}: a tensor-parallel replica takes {tp} whole GPUs, "
            f"one per rank; leave it out"
        )


def assign_replicas(agent_models: list[str], layout: dict[str, list[ReplicaSpec]]) -> list[ReplicaSpec]:
    """Agent i's replica: the j-th agent of a model goes to that model's replica j mod k, and stays
    there for the whole run (its growing transcript keeps hitting the same prefix cache)."""
    seen: dict[str, int] = {}
    out = []
    for m in agent_models:
        j = seen.get(m, 0)
        seen[m] = j + 1
        out.append(layout[m][j % len(layout[m])])
    return out


AUTO_AGENT_ACTORS = 2  # agent actors that start as fast as one on a 2-core node (measured: docs/scaling.md)


def agents_per_actor(setting: int, n_agents: int, cpus: float) -> int:
    """Agents hosted by one agent actor: ``setting`` (``--agents-per-actor``) when it is >= 1;
    0 is auto: one actor per agent up to ``max(AUTO_AGENT_ACTORS, cpus)`` agents (``cpus``: the
    cluster's; Ray starts that many worker processes at once), and above that as many actors,
    the agents spread evenly over them. An actor is a process that costs memory and start-up
    time (measured: docs/scaling.md); its agents only render prompts and wait on their replica,
    so a few hundred share one process without slowing the debate."""
    if setting >= 1:
        return setting
    return max(1, math.ceil(n_agents / max(AUTO_AGENT_ACTORS, int(cpus))))


def pack_agents(agent_replicas: list[int], per_actor: int) -> list[list[int]]:
    """The agents each agent actor hosts (pure): agents bound to the same replica (``agent_replicas[i]``:
    agent i's replica ordinal) share actors, in agent order, ``per_actor`` at most per actor, so an
    actor's requests all go to one replica and its prefix cache."""
    by_replica: dict[int, list[int]] = {}
    for agent, replica in enumerate(agent_replicas):
        by_replica.setdefault(replica, []).append(agent)
    return [
        agents[i : i + per_actor] for _, agents in sorted(by_replica.items()) for i in range(0, len(agents), per_actor)
    ]


@dataclass
class ReplicaSet:
    """The replicas of a run: each model's specs (``layout``), their ``info()`` in layout order,
    and their actor handles per model."""

    layout: dict[str, list[ReplicaSpec]]
    infos: list[dict[str, Any]]
    handles: dict[str, list[Any]]

    @property
    def all_handles(self) -> list[Any]:
        return [h for hs in self.handles.values() for h in hs]

    @property
    def simulated(self) -> bool:
        return any(i["simulated"] for i in self.infos)

    @property
    def engine(self) -> list[dict[str, Any]]:
        """Each distinct model setting, as the replicas resolved it (the runs row's ``engine``)."""
        return list(
            {
                json.dumps(e, sort_keys=True): e
                for e in ({"model": i["model"], **i.get("settings", {})} for i in self.infos)
            }.values()
        )

    def kv_capacity(self) -> dict[str, tuple[int, int | None]]:
        """Each model's replicas and the smallest KV cache among them in tokens (the replicas'
        ``settings["kv_cache_tokens"]``; None where one reports none), for :mod:`engine.kv_budget`."""
        infos = iter(self.infos)
        out: dict[str, tuple[int, int | None]] = {}
        for model, specs in self.layout.items():
            sizes = [next(infos).get("settings", {}).get("kv_cache_tokens") for _ in specs]
            known = [int(x) for x in sizes if x is not None]
            out[model] = (len(specs), min(known) if len(known) == len(sizes) else None)
        return out

    def for_agents(
        self, cfg: RunConfig, agent_models: list[str], replicas: dict[tuple, Any]
    ) -> tuple[list[Any], list[int]]:
        """The replica handle of each agent (agent j of a model on that model's replica j mod K),
        and its replica's ordinal in layout order (index into ``infos``)."""
        ordinal = {spec.key(cfg): i for i, spec in enumerate(s for specs in self.layout.values() for s in specs)}
        bound = assign_replicas(agent_models, self.layout)
        return [replicas[spec.key(cfg)] for spec in bound], [ordinal[spec.key(cfg)] for spec in bound]


EMBEDDER_GPU_SHARE = 0.1


def embedding_placement(cfg: RunConfig | None, free_gpu: bool | None = None) -> tuple[dict[str, Any], str]:
    """(Ray options, device) of the embedding actor. ``--embedding-device auto``: a 0.1 share of a
    GPU when the run's replicas use GPUs and such a share is free now on a node that is up
    (``free_gpu``; default :func:`actors.cluster.free_gpu_share`, asked after the replicas hold
    theirs), else the CPU, one thread, nothing reserved (encoding a round's replies is short next
    to generating them, and on a CPU machine the replicas hold the cores). Never a GPU share that
    would wait for one: with the replicas holding every GPU it would wait out the placement timeout,
    and on an autoscaling cluster launch a GPU node for a small embedding model."""
    device = cfg.cluster.embedding_device if cfg else "auto"
    if device == "auto":
        on_gpus = cfg is not None and cfg.backend_spec.loads_model and wants_gpu(cfg, cluster_gpus())
        if on_gpus and free_gpu is None:
            free_gpu = free_gpu_share(EMBEDDER_GPU_SHARE)
        if on_gpus and not free_gpu:
            log.info(
                "embedder: no node has %g of a GPU free now (the replicas hold them): it runs on the CPU",
                EMBEDDER_GPU_SHARE,
            )
        device = "cuda" if on_gpus and free_gpu else "cpu"
    if device == "cuda":
        return {"num_cpus": 0, "num_gpus": EMBEDDER_GPU_SHARE}, "cuda"
    return {"num_cpus": 0, "runtime_env": {"env_vars": {"CUDA_VISIBLE_DEVICES": ""}}}, "cpu"
