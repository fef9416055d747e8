"""Where the engine's actors run on a Ray cluster: decided by the driver, from the run's config.

* **GPU use comes from the configuration**, not from what the cluster shows at start-up (an
  autoscaling cluster's GPU workers are often not up yet): a model-serving run wants GPUs when
  ``--device gpu`` says so, or when ``num_gpus``, a tensor-parallel size above 1 or a GPU node
  resource (a custom resource whose name contains "gpu", such as cluster.yaml's ``strong_gpu``)
  appears in its settings; with none of those, ``--device auto`` uses GPUs only if the cluster
  has some now (a workstation with a GPU).
* **A replica that asks for GPUs or custom resources gets a placement group** whose first bundle
  holds what the replica actor itself takes (its CPUs and custom resources) plus one GPU, and one
  more one-GPU bundle per extra tensor-parallel rank, packed on one node (``STRICT_PACK``). The
  group is the autoscaler's demand signal; waiting for it has a timeout
  (``--placement-timeout``) that ends in one line naming what no node offered.
* **The writer, coordinator and first-round cache run on the driver's node** (hard node
  affinity): results land in the ``--out`` the user looks at, and no actor holding run state sits
  on a GPU worker the autoscaler may remove. ``--out-shared`` lets the writer go anywhere.
* **Devices are the driver's choice**: Ray 2.60 (pinned; the default changed in
  ray-project/ray#62492) no longer hides GPUs from actors that ask for none, so an actor choosing
  its device with ``torch.cuda.is_available()`` would take a GPU it does not hold. Every actor
  that can use a GPU is told its device (``cpu`` unless it holds a GPU), and CPU replicas and a
  CPU embedder run with ``CUDA_VISIBLE_DEVICES=""``.
* **A dead worker's processes die with it**: every Ray the engine starts, and every node of
  cluster.yaml, kills a worker's process group when the worker exits (:data:`RAY_WORKER_CLEANUP`),
  so a SIGKILLed or OOM-killed replica leaves no vLLM engine core holding its GPU.
"""

from __future__ import annotations

import logging
import re
from typing import Any

log = logging.getLogger(__name__)

GPU_RESOURCE = re.compile("gpu", re.IGNORECASE)  # custom node resources that mark a GPU node type
MODEL_BACKENDS = ("vllm", "transformers")
# The environment under which Ray starts: Ray puts each worker in its own process group and kills
# the group when the worker exits, even when it was SIGKILLed or OOM-killed, so a replica's vLLM
# engine core (a child process holding the model's GPU memory) dies with it instead of making the
# restarted replica fail to load. Ray 2.60's default, set all the same (init_ray, cluster.yaml's
# `ray start`) so that neither another Ray release nor the environment turns it off. Chosen over
# Ray's raylet subreaper (RAY_kill_child_processes_on_worker_exit_with_raylet_subreaper): Ray 2.60
# ignores that one while process groups are on, it reaps only every 10 s, and it makes every Ray
# process, the driver included, ignore SIGCHLD, so each subprocess's exit status then reads 0.
RAY_WORKER_CLEANUP = {"RAY_process_group_cleanup_enabled": "true"}


class PlacementTimeout(RuntimeError):
    """No node offered what an actor's placement group asks for within the placement timeout."""


def gpu_hints(cfg) -> list[str]:
    """What in a run's configuration asks for GPUs (empty: nothing does)."""
    hints = []
    if getattr(cfg, "device", "auto") == "gpu":
        hints.append("--device gpu")
    if cfg.tensor_parallel > 1:
        hints.append(f"--tensor-parallel {cfg.tensor_parallel}")
    for model, over in sorted((cfg.placement_resources or {}).items()):
        over = over or {}
        if float(over.get("num_gpus") or 0) > 0:
            hints.append(f"placement_resources[{model}].num_gpus")
        if int(over.get("tensor_parallel_size") or 1) > 1:
            hints.append(f"placement_resources[{model}].tensor_parallel_size")
        for name in sorted((over.get("resources") or {})):
            if GPU_RESOURCE.search(name):
                hints.append(f"placement_resources[{model}].resources.{name}")
    return hints


def wants_gpu(cfg, cluster_gpus: float | None = None) -> bool:
    """Whether this run's replicas use GPUs (see the module docstring). ``cluster_gpus`` (the
    GPUs the cluster has now) is only consulted with ``--device auto`` and no hint in the config."""
    device = getattr(cfg, "device", "auto")
    if device == "cpu":
        return False
    if gpu_hints(cfg):
        return True
    return bool(cluster_gpus)


def cluster_gpus() -> float:
    """GPUs the running Ray cluster has right now (0 without Ray)."""
    import ray

    return float(ray.cluster_resources().get("GPU", 0)) if ray.is_initialized() else 0.0


def _positive(d: dict[str, float]) -> dict[str, float]:
    return {k: float(v) for k, v in d.items() if v and float(v) > 0}


def replica_bundles(actor_options: dict[str, Any], gpus: int) -> list[dict[str, float]]:
    """The placement-group bundles of one replica (pure). Bundle 0 holds the replica actor's own
    CPUs and custom resources plus its first GPU; bundles 1.. one GPU each (tensor parallel
    ranks). ``gpus`` = 0: a single bundle with the actor's own resources (custom resources only)."""
    first = {"CPU": actor_options.get("num_cpus") or 0, **(actor_options.get("resources") or {})}
    if gpus:
        first["GPU"] = 1
    elif actor_options.get("num_gpus"):
        first["GPU"] = actor_options["num_gpus"]
    return [_positive(first)] + [{"GPU": 1.0} for _ in range(max(0, gpus - 1))]


def needs_group(actor_options: dict[str, Any], gpus: int) -> bool:
    """A replica is placed through a placement group when it asks for GPUs or custom resources
    (the requests that can wait on the autoscaler, or never fit); CPU-only replicas are not."""
    return bool(gpus or actor_options.get("num_gpus") or actor_options.get("resources"))


def describe(bundles: list[dict[str, float]]) -> str:
    """'4 GPUs + strong_gpu:1 + 1 CPU' for a placement group's bundles (one node, STRICT_PACK)."""
    total: dict[str, float] = {}
    for b in bundles:
        for k, v in b.items():
            total[k] = total.get(k, 0) + v

    def fmt(v: float) -> str:
        return str(int(v)) if float(v).is_integer() else f"{v:g}"

    parts = []
    if "GPU" in total:
        parts.append(f"{fmt(total['GPU'])} GPU{'s' if total['GPU'] != 1 else ''}")
    parts += [f"{k}:{fmt(v)}" for k, v in sorted(total.items()) if k not in ("GPU", "CPU")]
    if "CPU" in total:
        parts.append(f"{fmt(total['CPU'])} CPU{'s' if total['CPU'] != 1 else ''}")
    return " + ".join(parts) or "nothing"


def reserve(bundles: list[dict[str, float]], what: str, timeout_s: float):
    """A STRICT_PACK placement group of ``bundles``, once Ray has placed it; after ``timeout_s``
    without a node that offers them all, the group is removed and :class:`PlacementTimeout` names
    what was asked for."""
    import ray

    pg = ray.util.placement_group(bundles, strategy="STRICT_PACK")
    log.info("%s: waiting for a node with %s (placement group %s)", what, describe(bundles), pg.id.hex()[:8])
    ready, _ = ray.wait([pg.ready()], timeout=timeout_s)
    if not ready:
        ray.util.remove_placement_group(pg)
        have = sorted({describe([_positive(n.get("Resources", {}))]) for n in ray.nodes() if n.get("Alive")})
        raise PlacementTimeout(
            f"{what}: no node offers {describe(bundles)} (waited {timeout_s:g} s for the cluster or its "
            f"autoscaler; nodes now: {'; '.join(have) or 'none'}) -- check placement_resources and the "
            f"cluster's node types, or raise --placement-timeout")
    return pg


def driver_node_strategy():
    """Hard node affinity to the node this driver runs on."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)


def here() -> dict[str, Any]:
    """Where the calling actor runs: node id, node IP and the GPU ids Ray gave it."""
    import ray

    ctx = ray.get_runtime_context()
    gpus = [str(g) for g in ctx.get_accelerator_ids().get("GPU", [])]
    return {"node_id": ctx.get_node_id(), "node_ip": ray.util.get_node_ip_address(), "gpu_ids": gpus}


def group_nodes(pg) -> list[str]:
    """The node id of each bundle of a placement group (where a tensor-parallel replica's ranks run)."""
    from ray.util.placement_group import placement_group_table

    table = placement_group_table(pg)
    by_index = table.get("bundles_to_node_id", {})
    return [by_index.get(i) for i in range(len(table.get("bundles", {})))]
