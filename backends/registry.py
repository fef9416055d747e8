"""The backends by name: one :class:`BackendSpec` per ``--backend``, registered with :func:`register`.

An entry says what the engine needs to know about a backend without importing it (vLLM, torch
and transformers load only when a replica makes one): how to construct it, its capabilities
(loads a local model, tensor parallel, owns its threads, needs an endpoint, accepts images),
the resources a replica asks Ray for, the checks run before Ray starts, the engine settings it
takes and the options only it reads. Every place that used to ask ``backend == "vllm"`` asks the
entry instead; ``--backend auto`` is :func:`resolve_auto` over the entries' ``auto_rank``.

Adding a backend is one module with a :class:`~backends.base.Backend` subclass plus one line::

    register(BackendSpec("echo", EchoBackend, summary="repeats the question"))

A backend registered outside this package travels to the replica actors with the run (the driver
ships its entry, class included, by value), so its module needs no install on the Ray nodes.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from backends import installed as _installed
from engine.options import ENGINE_KEYS, VLLM_ONLY_KEYS, ConfigError

if TYPE_CHECKING:
    from backends.base import Backend
    from engine.config import RunConfig

AUTO = "auto"
AUTO_HELP = "auto (default: vllm where installed, else transformers)"


@dataclass(frozen=True)
class ReplicaPlacement:
    """What a backend's resource rule is told about where the run's replicas go."""

    n_replicas: int  # replicas of the run, all models: the node's CPUs are split between them
    gpu: bool  # whether the replicas use GPUs (the config asks for them, or the cluster has some)
    gpu_asked: bool  # whether the configuration itself asks for GPUs (not only the cluster has them)
    node_cpus: float  # CPUs of this node


@dataclass(frozen=True)
class ReplicaAsk:
    """One replica's request: Ray actor options (CPUs, GPUs) and the backend's own options."""

    ray_options: dict[str, Any]
    backend_options: dict[str, Any]


def no_resources(cfg: RunConfig, where: ReplicaPlacement) -> ReplicaAsk:
    """A replica that computes nothing itself (a remote server, a toy model): no CPU reserved."""
    return ReplicaAsk({"num_cpus": 0}, {})


@dataclass(frozen=True)
class BackendSpec:
    """One backend: its name, how to make it, and what the engine needs to know about it.

    ``factory`` is the :class:`~backends.base.Backend` class (or a callable taking ``model=`` and
    the backend options) or its import path ``"module:Name"``, imported when first used.
    """

    name: str
    factory: Callable[..., Backend] | str
    summary: str = ""  # the CLI's help line after the name ("" for none)
    loads_model: bool = False  # loads model files here: model checks, engine settings, a device per replica
    tensor_parallel: bool = False  # shards a model over GPUs (--tensor-parallel > 1)
    owns_threads: bool = False  # runs its own threads / engine processes: told no torch thread count
    needs_endpoint: bool = False  # talks to a server at --api-base (required, checked before Ray)
    accepts_images: bool = False  # can send image content parts (the model may still refuse, see Backend)
    simulated: bool = False  # a fake model: takes every GPU layout setting to test one, uses none
    engine_keys: tuple[str, ...] = ()  # engine settings (engine.config.ENGINE_KEYS) it takes
    option_prefix: str | None = None  # RunConfig options only it reads (sweeps reset them for others)
    resources: Callable[[RunConfig, ReplicaPlacement], ReplicaAsk] = no_resources
    preflight: Callable[[RunConfig], None] | None = None  # before Ray starts
    device_check: Callable[[RunConfig, bool], None] | None = None  # once GPU use is known, before replicas
    auto_rank: int | None = None  # --backend auto tries these, lowest first
    available: Callable[[str], bool] = field(default=lambda device: True)  # for auto, given --device

    def load(self) -> Callable[..., Backend]:
        """The backend's class (or factory), importing its module if the entry names it by path."""
        if not isinstance(self.factory, str):
            return self.factory
        module, _, attr = self.factory.partition(":")
        return getattr(importlib.import_module(module), attr)

    def make(self, model: str, options: dict[str, Any]) -> Backend:
        """A backend instance serving ``model`` with ``options`` (loads the model)."""
        return self.load()(model=model, **options)

    @property
    def builtin(self) -> bool:
        """Whether the backend lives in this package (every Ray node imports it by name)."""
        target = self.factory if isinstance(self.factory, str) else getattr(self.factory, "__module__", "")
        return target.split(".")[0].split(":")[0] == __name__.split(".")[0]


_REGISTRY: dict[str, BackendSpec] = {}


def register(spec: BackendSpec, replace: bool = False) -> BackendSpec:
    """Add ``spec`` under its name (a second registration of a name fails unless ``replace``)."""
    if spec.name == AUTO or not spec.name:
        raise ValueError(f"{spec.name!r} cannot name a backend")
    if spec.name in _REGISTRY and not replace and _REGISTRY[spec.name] is not spec:
        raise ValueError(f"backend {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Remove a registered backend (tests)."""
    _REGISTRY.pop(name, None)


def backend_names() -> tuple[str, ...]:
    """Every registered backend, in registration order."""
    return tuple(_REGISTRY)


def backend_specs() -> tuple[BackendSpec, ...]:
    """Every registered entry, in registration order."""
    return tuple(_REGISTRY.values())


def backend_choices() -> tuple[str, ...]:
    """The values ``--backend`` takes: ``auto`` and every registered backend."""
    return (AUTO, *_REGISTRY)


def backend_help() -> str:
    """The ``--backend`` help text, one ``name (summary)`` per entry."""
    return " | ".join([AUTO_HELP, *(f"{s.name} ({s.summary})" if s.summary else s.name for s in _REGISTRY.values())])


def find_backend(name: str) -> BackendSpec | None:
    """The entry named ``name``, or None."""
    return _REGISTRY.get(name)


def backend_spec(name: str) -> BackendSpec:
    """The entry named ``name`` (``auto``: the one :func:`resolve_auto` picks, for a config not
    validated yet); a :class:`ValueError` for an unknown one."""
    spec = _REGISTRY.get(resolve_auto() if name == AUTO else name)
    if spec is None:
        raise ValueError(f"--backend {name!r} is not available")
    return spec


def resolve_auto(device: str = "auto") -> str:
    """``--backend auto``: the available entry with the lowest ``auto_rank``."""
    ranked = sorted((s for s in _REGISTRY.values() if s.auto_rank is not None), key=lambda s: s.auto_rank or 0)
    for spec in ranked:
        if spec.available(device):
            return spec.name
    raise ConfigError("--backend auto: no registered backend is available here")


def engine_settings(cfg: RunConfig | dict[str, Any], backend: str) -> dict[str, Any]:
    """The engine settings a backend takes, from the run's flags or a model's
    ``placement_resources`` entry; unset (None) ones are left to the backend's defaults."""
    get = cfg.get if isinstance(cfg, dict) else (lambda k: getattr(cfg, k, None))
    return {k: get(k) for k in backend_spec(backend).engine_keys if get(k) is not None}


def check_device(cfg: RunConfig, gpu: bool) -> None:
    """The backend's own check once the run knows whether its replicas use GPUs (if it has one)."""
    check = backend_spec(cfg.backend).device_check
    if check is not None:
        check(cfg, gpu)


# ------------------------------------------------------------------------------ the built-ins
def _local_model_resources(cfg: RunConfig, where: ReplicaPlacement) -> ReplicaAsk:
    """A model loaded in the replica: one GPU (or ``--gpus-per-replica``) with a CPU, else the
    node's CPUs split evenly between the run's replicas (``--replica-cpus`` overrides)."""
    spec = backend_spec(cfg.backend)
    engine = engine_settings(cfg, cfg.backend)
    if where.gpu:
        return ReplicaAsk({"num_cpus": 1, "num_gpus": float(cfg.gpus_per_replica or 1)}, engine)
    cpus = cfg.replica_cpus or where.node_cpus / max(1, where.n_replicas)
    if spec.owns_threads:  # e.g. vLLM-CPU manages its own OpenMP threads and engine process
        return ReplicaAsk({"num_cpus": cpus}, engine)
    # Ray sets OMP_NUM_THREADS=1 in actors: give torch the CPUs the actor reserves.
    return ReplicaAsk({"num_cpus": cpus}, {"threads": max(1, int(cpus)), **engine})


def _simulated_resources(cfg: RunConfig, where: ReplicaPlacement) -> ReplicaAsk:
    """No CPU; GPUs only where the config asks for them (a layout tried on CPUs that declare
    GPUs), never because the cluster happens to have some."""
    opts = {
        "accuracy": cfg.sim_accuracy,
        "follow": cfg.sim_follow,
        "reply_tokens": cfg.sim_reply_tokens,
        "invalid": cfg.sim_invalid,
        "latency_s": cfg.sim_latency_s,
    }
    gpus = {"num_gpus": float(cfg.gpus_per_replica or 1)} if where.gpu and where.gpu_asked else {}
    return ReplicaAsk({"num_cpus": 0, **gpus}, opts)


def _openai_resources(cfg: RunConfig, where: ReplicaPlacement) -> ReplicaAsk:
    """The model runs on the server: the replica only waits on HTTP."""
    return ReplicaAsk(
        {"num_cpus": 0}, {"api_base": cfg.api_base, "concurrency": cfg.api_concurrency, "timeout_s": cfg.api_timeout}
    )


def _check_models(cfg: RunConfig) -> None:
    from backends import preflight

    for model in dict.fromkeys(spec.model for spec in cfg.agent_specs()):
        preflight.check_model(model)


def _check_endpoint(cfg: RunConfig) -> None:
    from backends import preflight

    preflight.check_endpoint(cfg.api_base or "")


def _check_vllm_device(cfg: RunConfig, gpu: bool) -> None:
    from backends import preflight

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
        resources=_simulated_resources,
    )
)
