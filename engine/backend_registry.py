"""The backends by name: one :class:`BackendSpec` per ``--backend``, registered with :func:`register`.

This is the core's half of the registry: it imports no backend. The engine's own backends
register in :mod:`backends.registry` (:data:`BUILTIN`), which the core imports by name the first
time a backend is looked up, with every module named by the entry point group
``debate_engine.backends`` (:data:`ENTRY_POINTS`): a package of backends of its own registers
them by adding its module to that group.

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
import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.config.fields import ConfigPart
from engine.options import ConfigError

# What the callbacks of an entry are handed: the run's engine.config.RunConfig, which is built from
# this registry (so it is typed in each backend's own module, not here).
Run = Any
# What an entry's factory makes: a backends.base.Backend (the floor above; typed there).
Backend = Any

ENTRY_POINTS = "debate_engine.backends"  # the entry point group of modules that register backends
BUILTIN = "backends.registry"  # the module registering the engine's own backends
BUILTIN_PACKAGE = "backends"  # the package every Ray node has: its backends travel by name
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


def no_resources(cfg: Run, where: ReplicaPlacement) -> ReplicaAsk:
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
    resources: Callable[[Run, ReplicaPlacement], ReplicaAsk] = no_resources
    preflight: Callable[[Run], None] | None = None  # before Ray starts
    device_check: Callable[[Run, bool], None] | None = None  # once GPU use is known, before replicas
    auto_rank: int | None = None  # --backend auto tries these, lowest first
    available: Callable[[str], bool] = field(default=lambda device: True)  # for auto, given --device
    settings: type[ConfigPart] | None = None  # its own options (declared in its module), a part of every config
    hash_settings_always: bool = False  # its hashed settings in every run's id (the built-ins', as before)

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
        return target.split(".")[0].split(":")[0] == BUILTIN_PACKAGE


_REGISTRY: dict[str, BackendSpec] = {}
_LOADED: list[str] = []  # the registering modules imported so far (empty: not loaded yet)


def load_registrations() -> None:
    """Import every module that registers backends, once: the engine's own (:data:`BUILTIN`)
    and those the entry points of :data:`ENTRY_POINTS` name."""
    if _LOADED:
        return
    _LOADED.append("(loading)")  # a registering module that looks a backend up does not recurse
    names = [ep.value for ep in importlib.metadata.entry_points(group=ENTRY_POINTS)]
    for name in dict.fromkeys([BUILTIN, *names]):
        importlib.import_module(name.partition(":")[0])
        _LOADED.append(name)


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
    load_registrations()
    return tuple(_REGISTRY)


def backend_specs() -> tuple[BackendSpec, ...]:
    """Every registered entry, in registration order."""
    load_registrations()
    return tuple(_REGISTRY.values())


def backend_choices() -> tuple[str, ...]:
    """The values ``--backend`` takes: ``auto`` and every registered backend."""
    load_registrations()
    return (AUTO, *_REGISTRY)


def backend_help() -> str:
    """The ``--backend`` help text, one ``name (summary)`` per entry."""
    load_registrations()
    return " | ".join([AUTO_HELP, *(f"{s.name} ({s.summary})" if s.summary else s.name for s in _REGISTRY.values())])


def find_backend(name: str) -> BackendSpec | None:
    """The entry named ``name``, or None."""
    load_registrations()
    return _REGISTRY.get(name)


def backend_spec(name: str) -> BackendSpec:
    """The entry named ``name`` (``auto``: the one :func:`resolve_auto` picks, for a config not
    validated yet); a :class:`ValueError` for an unknown one."""
    load_registrations()
    spec = _REGISTRY.get(resolve_auto() if name == AUTO else name)
    if spec is None:
        raise ValueError(f"--backend {name!r} is not available")
    return spec


def resolve_auto(device: str = "auto") -> str:
    """``--backend auto``: the available entry with the lowest ``auto_rank``."""
    load_registrations()
    ranked = sorted((s for s in _REGISTRY.values() if s.auto_rank is not None), key=lambda s: s.auto_rank or 0)
    for spec in ranked:
        if spec.available(device):
            return spec.name
    raise ConfigError("--backend auto: no registered backend is available here")


def engine_settings(cfg: Run | dict[str, Any], spec: BackendSpec) -> dict[str, Any]:
    """The engine settings backend ``spec`` takes, from the run's flags or a model's
    ``placement_resources`` entry; unset (None) ones are left to the backend's defaults."""
    get = cfg.get if isinstance(cfg, dict) else cfg.value
    return {k: get(k) for k in spec.engine_keys if get(k) is not None}


def check_device(cfg: Run, gpu: bool) -> None:
    """The backend's own check once the run knows whether its replicas use GPUs (if it has one)."""
    check = cfg.backend_spec.device_check
    if check is not None:
        check(cfg, gpu)
