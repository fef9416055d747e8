"""The engine's own backends (vLLM, transformers, an OpenAI-compatible server, the simulator),
registered in the core's registry (:mod:`engine.backend_registry`), and their resource rules and
checks.

Adding a backend is one module with a :class:`~backends.base.Backend` subclass plus one line::

    register(BackendSpec("echo", EchoBackend, summary="repeats the question"))

in a module the engine imports: this one, or one named by an entry point of the group
``debate_engine.backends`` of an installed package. A backend registered outside this package
travels to the replica actors with the run (the driver ships its entry, class included, by
value), so its module needs no install on the Ray nodes.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from backends import installed as _installed
from backends import preflight
from backends.openai_backend import OpenAISettings
from backends.simulated_backend import SimulatedSettings
from engine.backend_registry import (  # noqa: F401 (the registry's names, as this module had them)
    AUTO,
    AUTO_HELP,
    BackendSpec,
    ReplicaAsk,
    ReplicaPlacement,
    backend_choices,
    backend_help,
    backend_names,
    backend_spec,
    backend_specs,
    check_device,
    engine_settings,
    find_backend,
    no_resources,
    register,
    resolve_auto,
    unregister,
)
from engine.options import ENGINE_KEYS, VLLM_ONLY_KEYS

if TYPE_CHECKING:
    from engine.config import RunConfig


# ------------------------------------------------------------------------------ the built-ins
def _local_model_resources(cfg: RunConfig, where: ReplicaPlacement) -> ReplicaAsk:
    """A model loaded in the replica: one GPU (or ``--gpus-per-replica``) with a CPU, else the
    node's CPUs split evenly between the run's replicas (``--replica-cpus`` overrides)."""
    spec = cfg.backend_spec
    engine = engine_settings(cfg, spec)
    if where.gpu:
        return ReplicaAsk({"num_cpus": 1, "num_gpus": float(cfg.cluster.gpus_per_replica or 1)}, engine)
    cpus = cfg.cluster.replica_cpus or where.node_cpus / max(1, where.n_replicas)
    if spec.owns_threads:  # e.g. vLLM-CPU manages its own OpenMP threads and engine process
        return ReplicaAsk({"num_cpus": cpus}, engine)
    # Ray sets OMP_NUM_THREADS=1 in actors: give torch the CPUs the actor reserves.
    return ReplicaAsk({"num_cpus": cpus}, {"threads": max(1, int(cpus)), **engine})


def _simulated_resources(cfg: RunConfig, where: ReplicaPlacement) -> ReplicaAsk:
    """No CPU; GPUs only where the config asks for them (a layout tried on CPUs that declare
    GPUs), never because the cluster happens to have some."""
    gpus = {"num_gpus": float(cfg.cluster.gpus_per_replica or 1)} if where.gpu and where.gpu_asked else {}
    return ReplicaAsk({"num_cpus": 0, **gpus}, cfg.settings(SimulatedSettings).backend_options())


def _openai_resources(cfg: RunConfig, where: ReplicaPlacement) -> ReplicaAsk:
    """The model runs on the server: the replica only waits on HTTP."""
    return ReplicaAsk({"num_cpus": 0}, cfg.settings(OpenAISettings).backend_options())


def _check_models(cfg: RunConfig) -> None:
    for model in dict.fromkeys(spec.model for spec in cfg.agent_specs()):
        preflight.check_model(model)


def _check_endpoint(cfg: RunConfig) -> None:
    preflight.check_endpoint(cfg.settings(OpenAISettings).api_base or "")


def _check_vllm_device(cfg: RunConfig, gpu: bool) -> None:
    preflight.check_vllm_device(cfg, gpu)


def _vllm_available(device: str) -> bool:
    """vLLM where it is installed, except its GPU build asked for the CPU (a warning says so)."""
    if not _installed.vllm_installed():  # looked up when called: tests stand in for them
        return False
    if device == "cpu" and _installed.vllm_build() == "gpu":
        logging.getLogger("engine.config").warning(
            "--device cpu: the installed vLLM is its GPU build, which cannot run on the CPU; --backend auto uses "
            "the transformers backend"
        )
        return False
    return True


def node_cpus() -> float:
    """This node's CPUs, as the resource rules split them."""
    return float(os.cpu_count() or 1)


register(
    BackendSpec(
        "vllm",
        "backends.vllm_backend:VLLMBackend",
        loads_model=True,
        tensor_parallel=True,
        owns_threads=True,
        accepts_images=True,  # checked again once loaded: the model may be text only
        engine_keys=ENGINE_KEYS,
        resources=_local_model_resources,
        preflight=_check_models,
        device_check=_check_vllm_device,
        auto_rank=0,
        available=_vllm_available,
    )
)
register(
    BackendSpec(
        "transformers",
        "backends.transformers_backend:TransformersBackend",
        loads_model=True,
        engine_keys=tuple(k for k in ENGINE_KEYS if k not in VLLM_ONLY_KEYS),
        resources=_local_model_resources,
        preflight=_check_models,
        auto_rank=1,
    )
)
register(
    BackendSpec(
        "openai",
        "backends.openai_backend:OpenAIBackend",
        summary="any /v1/chat/completions server, --api-base",
        needs_endpoint=True,
        accepts_images=True,
        option_prefix="api_",
        settings=OpenAISettings,
        hash_settings_always=True,
        resources=_openai_resources,
        preflight=_check_endpoint,
    )
)
register(
    BackendSpec(
        "simulated",
        "backends.simulated_backend:SimulatedBackend",
        summary="seeded fake model for tests",
        accepts_images=True,
        simulated=True,
        option_prefix="sim_",
        settings=SimulatedSettings,
        hash_settings_always=True,
        resources=_simulated_resources,
    )
)
