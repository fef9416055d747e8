"""Where the engine's actors run on a Ray cluster: decided by the driver, from the run's config.

* **GPU use comes from the configuration**, not from what the cluster shows at start-up (an
  autoscaling cluster's GPU workers are often not up yet): a model-serving run wants GPUs when
  ``--device gpu`` says so, or when ``num_gpus``, a tensor-parallel size above 1 or a GPU node
  resource (a custom resource whose name contains "gpu", such as cluster.yaml's ``strong_gpu``)
  appears in its settings; with none of those, ``--device auto`` uses GPUs only if the cluster
  has some now (a workstation with a GPU).
* **A replica that asks for GPUs or custom resources gets a placement group** whose first bundle
  holds what the replica actor itself takes (its CPUs and custom resources) plus its GPU (or GPU
  share, ``--gpus-per-replica``), and one more one-GPU bundle per extra tensor-parallel rank, packed
  on one node (``STRICT_PACK``). Every group of a run is created before any is waited on
  (:func:`reserve_all`), so an autoscaler sees the whole demand at once and brings the nodes up
  together; the wait has one deadline (``--placement-timeout``; longer by default where the
  cluster has an autoscaler, :func:`default_placement_timeout`) and ends in one line naming what
  no node offered.
* **Replicas that share a GPU load one after another** (:func:`gpu_start_lock`): vLLM sizes its KV
  cache from the memory it sees free while it profiles, so a co-tenant loading at the same moment
  would be counted against it.
* **The writer, coordinator and first-round cache run on the driver's node** (hard node
  affinity): results land in the ``--out`` the user looks at, and no actor holding run state sits
  on a GPU worker the autoscaler may remove. ``--out-shared`` lets the writer go anywhere.
* **The embedder takes a GPU share only where one is free now** (:func:`free_gpu_share`): with the
  replicas holding every GPU, or on an autoscaling cluster, a 0.1-GPU request would wait out the
  timeout or launch a GPU node for a small embedding model.
* **Devices are the driver's choice**: Ray 2.60 (pinned; the default changed in
  ray-project/ray#62492) no longer hides GPUs from actors that ask for none, so an actor choosing
  its device with ``torch.cuda.is_available()`` would take a GPU it does not hold. Every actor
  that can use a GPU is told its device (``cpu`` unless it holds a GPU), and CPU replicas and a
  CPU embedder run with ``CUDA_VISIBLE_DEVICES=""``.
* **A dead worker's processes die with it**: every Ray the engine starts, and every node of
  cluster.yaml, kills a worker's process group when the worker exits (:data:`RAY_WORKER_CLEANUP`),
  so a SIGKILLed or OOM-killed replica leaves no vLLM engine core holding its GPU.
* **A Ray the engine starts listens on 127.0.0.1 only** (:func:`local_ray_on_loopback`); a
  cluster it joins listens as its ``ray start`` set it up.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from backends.registry import node_cpus
from engine.errors import UserError

log = logging.getLogger(__name__)

GPU_RESOURCE = re.compile("gpu", re.IGNORECASE)  # custom node resources that mark a GPU node type
# The environment under which Ray starts: Ray puts each worker in its own process group and kills
# the group when the worker exits, even when it was SIGKILLed or OOM-killed, so a replica's vLLM
# engine core (a child process holding the model's GPU memory) dies with it instead of making the
# restarted replica fail to load. Ray 2.60's default, set all the same (init_ray, cluster.yaml's
# `ray start`) so that neither another Ray release nor the environment turns it off. Chosen over
# Ray's raylet subreaper (RAY_kill_child_processes_on_worker_exit_with_raylet_subreaper): Ray 2.60
# ignores that one while process groups are on, it reaps only every 10 s, and it makes every Ray
# process, the driver included, ignore SIGCHLD, so each subprocess's exit status then reads 0.
RAY_WORKER_CLEANUP = {"RAY_process_group_cleanup_enabled": "true"}


@contextlib.contextmanager
def local_ray_on_loopback(address: str | None, temp_dir: str | None = None):
    """Around ``ray.init(address=address)``: a Ray that it starts on this machine listens on the
    loopback address only.

    Ray on Linux gives a new local instance the machine's LAN address as its node IP, and its GCS,
    raylet, workers, agents and metrics exporters then listen there or on all interfaces: a laptop
    on a café network offers them to everyone on it. Ray's own default on macOS and Windows is the
    loopback address (``ray_constants.ENABLE_RAY_CLUSTER`` off, read by
    ``ray._private.services.get_node_ip_address`` while a node starts; Ray 2.60, pinned); it is
    turned on for the call inside the ``with`` only, and only when that call starts a new local
    Ray or joins one on the loopback address (``debate serve``'s, :mod:`actors.serve`; Ray would
    otherwise take this machine's LAN address for 127.0.0.1 and not find it). Such a Ray is
    joined as Ray joins a local one it finds itself: with token authentication when
    ``~/.ray/auth_token`` exists and ``RAY_AUTH_MODE`` is not set, as ``ray start --head``
    decides for the head (an address given explicitly never sends the token). Joining another
    Ray (an ``address``, ``RAY_ADDRESS``, or a ``ray start`` of this machine that ``ray.init``
    would join: its session in ``temp_dir``) changes nothing. Other nodes cannot join such a Ray:
    ``ray start --head`` starts one that they can (docs/troubleshooting.md).
    """
    # function-level: importing ray._private here keeps it off start-up
    from ray._private import ray_constants, services

    joined = address
    if address in (None, "auto"):  # ray.init's own look-up of the Ray to join, unresolved
        joined = os.environ.get("RAY_ADDRESS") or services.find_bootstrap_address(temp_dir) or address
    if joined is not None and not on_loopback(joined):
        yield
        return
    if joined is not None:
        # function-level: importing ray._private.authentication.authentication_token_setup here keeps it off start-up
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available,
        )

        quiet = logging.getLogger(maybe_enable_token_auth_if_token_available.__module__)
        level = quiet.level
        quiet.setLevel(logging.ERROR)  # not Ray's warning on every join
        try:
            maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
        finally:
            quiet.setLevel(level)
    cluster = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = cluster


def on_loopback(address: str) -> bool:
    """Whether a Ray address (``host:port``, ``ray://host:port``) names this machine's loopback
    address."""
    host = address.removeprefix("ray://").rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class PlacementTimeout(UserError, RuntimeError):
    """No node offered what an actor's placement group asks for within the placement timeout."""


def gpu_hints(cfg) -> list[str]:
    """What in a run's configuration asks for GPUs (empty: nothing does)."""
    hints = []
    if cfg.cluster.device == "gpu":
        hints.append("--device gpu")
    if cfg.cluster.tensor_parallel > 1:
        hints.append(f"--tensor-parallel {cfg.cluster.tensor_parallel}")
    if cfg.cluster.gpus_per_replica:
        hints.append(f"--gpus-per-replica {cfg.cluster.gpus_per_replica:g}")
    for model, over in sorted((cfg.cluster.placement_resources or {}).items()):
        over = over or {}
        for key in ("num_gpus", "gpus_per_replica"):
            if float(over.get(key) or 0) > 0:
                hints.append(f"placement_resources[{model}].{key}")
        if int(over.get("tensor_parallel_size") or 1) > 1:
            hints.append(f"placement_resources[{model}].tensor_parallel_size")
        for name in sorted(over.get("resources") or {}):
            if GPU_RESOURCE.search(name):
                hints.append(f"placement_resources[{model}].resources.{name}")
    return hints


def wants_gpu(cfg, cluster_gpus: float | None = None) -> bool:
    """Whether this run's replicas use GPUs (see the module docstring). ``cluster_gpus`` (the
    GPUs the cluster has now) is only consulted with ``--device auto`` and no hint in the config."""
    device = cfg.cluster.device
    if device == "cpu":
        return False
    if gpu_hints(cfg):
        return True
    return bool(cluster_gpus)


def cluster_gpus() -> float:
    """GPUs the running Ray cluster has right now (0 without Ray)."""
    # function-level: importing ray here keeps it off start-up
    import ray

    return float(ray.cluster_resources().get("GPU", 0)) if ray.is_initialized() else 0.0


def largest_node_cpus() -> float:
    """CPUs of the largest node the running Ray cluster has now, as Ray counts them (a container's
    CPU limit, ``ray start --num-cpus``); without Ray, or where no node has CPUs yet (an
    autoscaling head with none), this machine's (:func:`backends.registry.node_cpus`)."""
    # function-level: importing ray here keeps it off start-up
    import ray

    if ray.is_initialized():
        most = max((float(n.get("Resources", {}).get("CPU", 0)) for n in ray.nodes() if n.get("Alive")), default=0.0)
        if most > 0:
            return most
    return node_cpus()


def _positive(d: dict[str, float]) -> dict[str, float]:
    return {k: float(v) for k, v in d.items() if v and float(v) > 0}


def replica_bundles(actor_options: dict[str, Any], gpus: int) -> list[dict[str, float]]:
    """The placement-group bundles of one replica (pure). Bundle 0 holds the replica actor's own
    CPUs and custom resources plus its first GPU; bundles 1.. one GPU each (tensor parallel
    ranks). ``gpus`` = 0: a single bundle with the actor's own resources, its GPU share included
    (``num_gpus``, a fraction where replicas share a GPU)."""
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


DEFAULT_PLACEMENT_TIMEOUT_S = 600.0
AUTOSCALER_PLACEMENT_TIMEOUT_S = 1800.0
_READONLY_NODE_TYPE = re.compile(r"node_[0-9a-f]{56}")  # the monitor's name for a node no autoscaler manages


def has_autoscaler() -> bool:
    """Whether the running Ray cluster has an autoscaler that can add nodes (``ray up``'s head, a
    cluster started with ``--autoscaling-config``): autoscaler v2 says so in the GCS; v1's monitor
    reports its node types, which without an autoscaling config are only the anonymous
    ``node_<id>`` of each node already up (a local instance, hand-started nodes)."""

    # function-level: importing ray here keeps it off start-up
    import ray

    if not ray.is_initialized():
        return False
    try:
        # function-level: importing ray.autoscaler.v2.utils here keeps it off start-up
        from ray.autoscaler.v2.utils import is_autoscaler_v2

        if is_autoscaler_v2(fetch_from_server=True):
            return True
    except Exception:  # noqa: BLE001 - an older or unusual cluster: fall through to v1's report
        log.debug("autoscaler v2 check failed", exc_info=True)
    # function-level: importing ray.experimental.internal_kv here keeps it off start-up
    from ray.experimental.internal_kv import _internal_kv_get

    try:
        raw = _internal_kv_get("__autoscaling_status")
        report = json.loads(raw or b"{}").get("autoscaler_report") or {}
    except (ValueError, AttributeError, TypeError):
        return False
    types = set(report.get("active_nodes") or {}) | set(report.get("idle_nodes") or {})
    return any(not _READONLY_NODE_TYPE.fullmatch(str(t)) for t in types)


def default_placement_timeout(cfg) -> float:
    """``--placement-timeout``, or its default: 600 s, or 1800 s where the cluster has an autoscaler
    (a GPU node boots, runs its setup and downloads its model before it can take a replica)."""
    if cfg.cluster.placement_timeout:
        return float(cfg.cluster.placement_timeout)
    return AUTOSCALER_PLACEMENT_TIMEOUT_S if has_autoscaler() else DEFAULT_PLACEMENT_TIMEOUT_S


def reserve_all(
    requests: dict[Any, tuple[list[dict[str, float]], str]],
    timeout_s: float,
    report_every_s: float = 60.0,
    detached: dict[Any, str] | None = None,
) -> dict[Any, Any]:
    """STRICT_PACK placement groups for every ``key: (bundles, what)``, all created before any is
    waited on, so that an autoscaler sees the whole demand at once and starts the nodes together.
    ``detached``: ``key: name`` of the groups that outlive this driver (``debate serve``'s
    replicas), named so that ``debate serve --stop`` finds them.

    One deadline for all: after ``timeout_s`` without a node for each, every group made here is
    removed and :class:`PlacementTimeout` names the ones still waiting, what they ask for and the
    nodes up now. Progress is logged every ``report_every_s``. Returns ``key: group``."""
    # function-level: importing ray here keeps it off start-up
    import ray

    keep = detached or {}
    groups = {
        key: ray.util.placement_group(
            bundles, strategy="STRICT_PACK", **({"name": keep[key], "lifetime": "detached"} if key in keep else {})
        )
        for key, (bundles, _) in requests.items()
    }
    if not groups:
        return groups
    for key, (bundles, what) in requests.items():
        log.info(
            "%s: waiting for a node with %s (placement group %s)", what, describe(bundles), groups[key].id.hex()[:8]
        )
    waiting = {groups[key].ready(): key for key in groups}
    deadline = time.monotonic() + timeout_s
    next_report = time.monotonic() + report_every_s
    while waiting:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _ = ray.wait(
            list(waiting), num_returns=len(waiting), timeout=min(left, max(0.1, next_report - time.monotonic()))
        )
        for ref in ready:
            waiting.pop(ref)
        if waiting and time.monotonic() >= next_report:
            log.warning(
                "waiting for nodes: %d of %d placement groups placed, %.0f s left (%s)",
                len(groups) - len(waiting),
                len(groups),
                max(0.0, deadline - time.monotonic()),
                "; ".join(requests[k][1] for k in waiting.values()),
            )
            next_report = time.monotonic() + report_every_s
    if not waiting:
        return groups
    for pg in groups.values():
        ray.util.remove_placement_group(pg)
    pending = list(waiting.values())
    have = sorted({describe([_positive(n.get("Resources", {}))]) for n in ray.nodes() if n.get("Alive")})
    first = pending[0]
    more = (
        f" (and {len(pending) - 1} more placement group{'s' if len(pending) > 2 else ''} of this run)"
        if len(pending) > 1
        else ""
    )
    raise PlacementTimeout(
        f"{requests[first][1]}: no node offers {describe(requests[first][0])}{more} (waited {timeout_s:g} s for the "
        f"cluster or its autoscaler; nodes now: {'; '.join(have) or 'none'}) -- check placement_resources and the "
        f"cluster's node types, or raise --placement-timeout"
    )


def free_gpu_share(share: float) -> bool:
    """Whether some node that is up has at least ``share`` of a GPU free right now (per node: a
    share cannot span nodes)."""
    # function-level: importing ray here keeps it off start-up
    import ray

    # function-level: importing ray._private.state here keeps it off start-up
    from ray._private.state import available_resources_per_node

    if not ray.is_initialized():
        return False
    return any(float(res.get("GPU", 0.0)) + 1e-9 >= share for res in available_resources_per_node().values())


@contextlib.contextmanager
def gpu_start_lock(timeout_s: float = 3600.0):
    """Held while the calling actor loads its model on the GPUs Ray gave it, so that replicas
    sharing a GPU load one after another (a file lock per node and GPU id, in the node's temp
    folder); nothing is locked for an actor that holds no GPU."""
    # function-level: importing ray here keeps it off start-up
    import ray

    # function-level: importing numpy here keeps it off start-up
    from backends.model_store import file_lock

    ctx = ray.get_runtime_context()
    gpus = sorted(str(g) for g in ctx.get_accelerator_ids().get("GPU", []))
    if not gpus:
        yield
        return
    folder = Path(tempfile.gettempdir()) / "debate-engine-gpu-locks"
    node = ctx.get_node_id()[:16]
    with contextlib.ExitStack() as stack:
        for g in gpus:  # sorted: two actors sharing several GPUs never wait on each other crosswise
            stack.enter_context(
                file_lock(
                    folder / f"{node}-gpu{g}.lock",
                    log,
                    f"GPU {g}: another replica on it is loading; this one waits its turn",
                    timeout_s,
                )
            )
        yield


def driver_node_strategy():
    """Hard node affinity to the node this driver runs on."""
    # function-level: importing ray here keeps it off start-up
    import ray

    # function-level: importing ray.util.scheduling_strategies here keeps it off start-up
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)


def here() -> dict[str, Any]:
    """Where the calling actor runs: node id, node IP and the GPU ids Ray gave it."""
    # function-level: importing ray here keeps it off start-up
    import ray

    ctx = ray.get_runtime_context()
    gpus = [str(g) for g in ctx.get_accelerator_ids().get("GPU", [])]
    return {"node_id": ctx.get_node_id(), "node_ip": ray.util.get_node_ip_address(), "gpu_ids": gpus}


def group_nodes(pg) -> list[str]:
    """The node id of each bundle of a placement group (where a tensor-parallel replica's ranks run)."""
    # function-level: importing ray.util.placement_group here keeps it off start-up
    from ray.util.placement_group import placement_group_table

    table = placement_group_table(pg)
    by_index = table.get("bundles_to_node_id", {})
    return [by_index.get(i) for i in range(len(table.get("bundles", {})))]
