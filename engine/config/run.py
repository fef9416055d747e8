"""The run configuration: typed parts composed into one :class:`RunConfig`.

A run's configuration is made of parts, one per concern, each a dataclass whose fields are
run options (:mod:`engine.config.fields`): the experiment (:class:`ExperimentConfig`), models
and sampling (:class:`SamplingConfig`), the cluster (:class:`ClusterConfig`), engine tuning
(:class:`TuningConfig`), output (:class:`OutputConfig`), the protocols' options
(:class:`ProtocolOptions`, declared in each :class:`~engine.protocols.spec.ProtocolSpec` and read
typed with :meth:`RunConfig.option`) and each backend's own settings (declared in its backend
module, carried by its :class:`~engine.backend_registry.BackendSpec`, read with
:meth:`RunConfig.settings`). Flat names live only at the edge: the flags, the YAML keys and
:meth:`RunConfig.flat` take them (:mod:`engine.config.flat`), :meth:`RunConfig.to_dict` gives
them back, and the run id hashes that flat form, so it is the id the flat configuration had.

Per-agent settings (model, system prompt, temperature, top_p, max_tokens, seed) default to the
run-level values and can be overridden agent by agent with the ``agent_settings`` list in YAML.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Self, TypeVar

from engine.backend_registry import (
    BackendSpec,
    backend_choices,
    backend_spec,
    backend_specs,
    find_backend,
    resolve_auto,
)
from engine.config.cluster import ClusterConfig
from engine.config.experiment import ExperimentConfig
from engine.config.fields import ConfigPart
from engine.config.output import OutputConfig
from engine.config.sampling import AgentSpec, SamplingConfig
from engine.config.tuning import TuningConfig
from engine.footprint import check_graph, check_questions
from engine.inputs import bad_text
from engine.options import (
    ENGINE_KEYS,
    MAX_AGENT_SEED,
    MAX_CPUS,
    MAX_GPUS,
    RESULT_ENGINE_KEYS,
    ConfigError,
    Option,
    merge_options,
)
from engine.protocols import SPECS, protocol_spec
from engine.protocols.layout import check_layout
from topologies import TopologyError
from topologies.placement import PLACEMENTS, assign_models, parse_models

T = TypeVar("T")
S = TypeVar("S", bound=ConfigPart)

# The parts every run has, by attribute, in ``--help`` order.
CORE_PARTS: dict[str, type[ConfigPart]] = {
    "experiment": ExperimentConfig,
    "sampling": SamplingConfig,
    "output": OutputConfig,
    "tuning": TuningConfig,
    "cluster": ClusterConfig,
}
# The engine's own options (those of the core parts); backends add theirs (:func:`engine_options`).
ENGINE_OPTIONS: tuple[Option[Any], ...] = tuple(opt for part in CORE_PARTS.values() for opt in part.OPTIONS)
_CORE_PART_OF = {opt.name: attr for attr, part in CORE_PARTS.items() for opt in part.OPTIONS}


def resolve_backend(backend: str, device: str = "auto") -> str:
    """``auto``: the first available backend by the registry's ``auto_rank``
    (:func:`engine.backend_registry.resolve_auto`): vLLM where it is installed (the production
    engine, CPU or GPU build), else the transformers backend (the portable fallback, e.g. macOS);
    with ``--device cpu`` and vLLM's GPU build, transformers too (that build cannot run on the
    CPU; a warning says so). Other names are returned as given."""
    return resolve_auto(device) if backend == "auto" else backend


def backend_options() -> dict[str, tuple[str, Option[Any]]]:
    """The registered backends' own options: name -> (backend, its Option)."""
    out: dict[str, tuple[str, Option[Any]]] = {}
    seen: set[type[ConfigPart]] = set()  # backends may share one settings class (a variant of another)
    for spec in backend_specs():
        if spec.settings is None or spec.settings in seen:
            continue
        seen.add(spec.settings)
        for opt in spec.settings.OPTIONS:
            if opt.name in out or opt.name in _CORE_PART_OF:
                raise TypeError(f"backend {spec.name}: option {opt.name} is declared twice")
            out[opt.name] = (spec.name, opt)
    return out


def engine_options() -> tuple[Option[Any], ...]:
    """Every option but the protocols': the core parts' and the registered backends'."""
    return (*ENGINE_OPTIONS, *(opt for _, opt in backend_options().values()))


def unhashed_options() -> frozenset[str]:
    """Engine and backend options that do not change results: the run id leaves them out (and
    so they are no sweep axis)."""
    return frozenset(opt.name for opt in engine_options() if not opt.hashed)


def engine_option(name: str) -> Option[Any]:
    """The engine or backend option named ``name`` (a KeyError for another name)."""
    return {opt.name: opt for opt in engine_options()}[name]


# The checks of numbers given outside the flags: an agent's own sampling seed (agent_settings), and
# the keys of a model's placement_resources entry that are not engine options by the same name.
AGENT_SEED = Option("seed", int, 0, low=0, high=MAX_AGENT_SEED)
RESOURCE_AMOUNT = Option("resources", float, 0, low=0, high=2**40)  # a custom Ray resource's amount
_ENGINE_OPTION = {opt.name: opt for opt in ENGINE_OPTIONS}
PLACEMENT_OPTIONS = {
    **{key: _ENGINE_OPTION[key] for key in ENGINE_KEYS},  # dtype, max_model_len, ...: as their flags
    "replicas": _ENGINE_OPTION["replicas"],
    "tensor_parallel_size": _ENGINE_OPTION["tensor_parallel"],
    "gpus_per_replica": _ENGINE_OPTION["gpus_per_replica"],
    "num_gpus": Option("num_gpus", float, None, low=0, high=MAX_GPUS),
    "num_cpus": Option("num_cpus", float, None, low=0, high=MAX_CPUS),
}


def _protocol_options() -> dict[str, Option[Any]]:
    return merge_options({name: list(spec.settings) for name, spec in SPECS.items()}, set(_ENGINE_OPTION))


# name -> Option: every protocol's own options (ProtocolSpec.settings), in registry order
PROTOCOL_OPTIONS: dict[str, Option[Any]] = _protocol_options()


def _old_names() -> dict[str, str]:
    out = {}
    for opt in (*ENGINE_OPTIONS, *PROTOCOL_OPTIONS.values()):
        if opt.old_name is None:
            continue
        if opt.old_name in _ENGINE_OPTION or opt.old_name in PROTOCOL_OPTIONS or opt.old_name in out:
            raise TypeError(f"option {opt.name}: old name {opt.old_name!r} is another option's name")
        out[opt.old_name] = opt.name
    return out


# old name -> the option's name now (Option.old_name: --placement is now --strong-agents)
OLD_NAMES: dict[str, str] = _old_names()
HASHED_AS_OLD = {new: old for old, new in OLD_NAMES.items()}  # run_id() hashes these under the old name


def option_readers(name: str) -> list[str]:
    """The protocols that read protocol option ``name`` (registry order)."""
    return [p for p, spec in SPECS.items() if name in spec.options]


def _fresh(opt: Option[Any]) -> Any:
    """An option's default as a config holds it (a mapping or list of its own)."""
    if opt.type is dict:
        return {}
    return [] if opt.type is list and opt.default == () else opt.default


@dataclass
class ProtocolOptions:
    """Every protocol's options (:data:`PROTOCOL_OPTIONS`), name -> value; a protocol reads its
    own typed with :meth:`RunConfig.option`."""

    values: dict[str, Any] = field(default_factory=lambda: {n: _fresh(o) for n, o in PROTOCOL_OPTIONS.items()})


def _backend_settings() -> dict[str, ConfigPart]:
    """Each registered backend's settings part, by backend; backends sharing a settings class
    share one part (one value per option)."""
    made: dict[type[ConfigPart], ConfigPart] = {}
    return {
        spec.name: made.setdefault(spec.settings, spec.settings())
        for spec in backend_specs()
        if spec.settings is not None
    }


@dataclass
class RunConfig:
    """One run's configuration: its parts (see the module docstring). Make one from flat option
    names with :meth:`flat` (or :func:`engine.config.flat.config_from_mapping` for a YAML file's
    keys); read an option as ``cfg.experiment.agents``, a protocol's as ``cfg.option(TAU)``, a
    backend's settings as ``cfg.settings(SimulatedSettings)``."""

    experiment: ExperimentConfig = field(default_factory=ExperimentConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    tuning: TuningConfig = field(default_factory=TuningConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    protocol_options: ProtocolOptions = field(default_factory=ProtocolOptions)
    backends: dict[str, ConfigPart] = field(default_factory=_backend_settings)  # backend -> its settings
    # the run's backend entry, looked up once by validate() and handed to the layout, cluster and
    # replica code with the config (an entry registered in the driver travels with it)
    resolved: BackendSpec | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        """Read option values given as text (``density: 2/5``, ``Option.parse``; text that does
        not parse is left for :meth:`validate` to report), then let the protocol derive options
        from others (``ProtocolSpec.resolve``: sparse's ``--degree``), so the run id, taken
        before any check, is the same for every way of giving one setting."""
        for opt in self.all_options():
            if opt.parse is None:
                continue
            value = self.value(opt.name)
            if isinstance(value, str):
                try:
                    self.set_value(opt.name, opt.parse(value, opt.flag))
                except ConfigError:
                    pass
        spec = SPECS.get(self.experiment.protocol)
        if spec is not None and spec.resolve is not None:
            spec.resolve(self)

    # ------------------------------------------------------------------ the flat edge
    @classmethod
    def flat(cls, **options: Any) -> RunConfig:
        """A config from flat option names (``RunConfig.flat(protocol="mad", agents=5)``); a
        ConfigError for a name that is no option."""
        return cls.from_options(options)

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> RunConfig:
        """A config from ``options``: option name (underscored) -> value."""
        cfg = cls.__new__(cls)  # each field at its default, __post_init__ once the options are set
        for f in dataclasses.fields(cls):
            setattr(cfg, f.name, f.default if f.default_factory is dataclasses.MISSING else f.default_factory())
        for name, value in options.items():
            cfg.set_value(name, value)
        cfg.__post_init__()
        return cfg

    @classmethod
    def from_stored(cls, config: dict[str, Any]) -> RunConfig:
        """The config a runs row's stored ``config`` describes, as far as this engine knows its
        options (an option since removed is left out; nothing is checked)."""
        known = {opt.name for opt in cls.all_options()}
        return cls.from_options({k: v for k, v in config.items() if k in known})

    @staticmethod
    def all_options() -> tuple[Option[Any], ...]:
        """Every option a config holds: the core parts', the registered backends', the protocols'."""
        return (*engine_options(), *PROTOCOL_OPTIONS.values())

    def _holder(self, name: str) -> tuple[Any, bool]:
        """Where option ``name`` lives: (the part, False) or (the protocol options' dict, True)."""
        if name in _CORE_PART_OF:
            return getattr(self, _CORE_PART_OF[name]), False
        if name in PROTOCOL_OPTIONS:
            return self.protocol_options.values, True
        for part in self.backends.values():
            if any(opt.name == name for opt in part.OPTIONS):
                return part, False
        raise ConfigError(f"{name!r} is not a run option; see debate run --help")

    def value(self, name: str) -> Any:
        """The value of the option named ``name`` (a flat name: ``agents``, ``tau``, ``sim_follow``)."""
        holder, is_dict = self._holder(name)
        return holder[name] if is_dict else getattr(holder, name)

    def set_value(self, name: str, value: Any) -> None:
        """Set the option named ``name`` (flat); see :meth:`value`."""
        holder, is_dict = self._holder(name)
        if is_dict:
            holder[name] = value
        else:
            setattr(holder, name, value)

    def option(self, opt: Option[T]) -> T:
        """A protocol option's value, typed by its declaration (``cfg.option(TAU)``: a float)."""
        return self.protocol_options.values[opt.name]

    def settings(self, kind: type[S]) -> S:
        """The run's settings part of class ``kind`` (a backend's: ``cfg.settings(SimulatedSettings)``)."""
        for part in self.backends.values():
            if isinstance(part, kind):
                return part
        raise LookupError(f"no backend registered here declares {kind.__name__}")

    def replace(self, **options: Any) -> RunConfig:
        """A copy with the flat options ``options`` changed (derived options worked out again)."""
        return type(self).from_options({**self.to_dict(), **options})

    def to_dict(self) -> dict[str, Any]:
        """The flat form: every option name -> value (a runs row stores it as ``config``)."""
        out: dict[str, Any] = {}
        for part in (self.experiment, self.sampling, self.output, self.tuning, self.cluster):
            out.update(part.items())
        out.update(self.protocol_options.values)
        for settings in self.backends.values():
            out.update(settings.items())
        return copy.deepcopy(out)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, default=str)

    # ------------------------------------------------------------------ derived
    def _shape(self) -> tuple[int, int]:
        spec = SPECS.get(self.experiment.protocol)
        return spec.shape(self) if spec is not None else (self.experiment.agents, self.experiment.rounds)

    @property
    def n_agents(self) -> int:
        """The agents the protocol uses (``ProtocolSpec.shape``: CoT is one agent whatever
        ``--agents`` says; CoT-SC(k) uses k = ``--agents`` samples)."""
        return self._shape()[0]

    @property
    def n_rounds(self) -> int:
        """The rounds the protocol runs (CoT and CoT-SC have only the first-answer round)."""
        return self._shape()[1]

    @property
    def simulated(self) -> bool:
        """Whether the run's backend is a fake model (its registry entry says; False for a name
        not registered in this process)."""
        spec = self.resolved or find_backend(self.sampling.backend)
        return spec is not None and spec.simulated

    @property
    def backend_spec(self) -> BackendSpec:
        """The run's backend entry: the one :meth:`validate` resolved, else looked up by name."""
        if self.resolved is not None and self.resolved.name == self.sampling.backend:
            return self.resolved
        return backend_spec(self.sampling.backend)

    def agent_specs(self) -> list[AgentSpec]:
        """One spec per agent. An agent's model is, in order of precedence: its
        ``agent_settings[i]["model"]``; else, when ``--models`` is set, the model that
        ``topologies.placement.assign_models`` gives it (``--models`` ranked strongest first,
        placed by ``--strong-agents`` on the run's topology, paper sec. 6); else ``--model``.

        The topology used for placement is the protocol's fixed graph (``ProtocolSpec.topology``:
        cot/sc/mad/sparse/probmad). GroupDebate, S2-MAD and CortexDebate have none (groups /
        similarity / learned weights decide who reads whom), so placement uses the fully
        connected graph, on which every agent ties: "central"/"peripheral" then equal "none"
        (agent i gets the i-th listed model).
        """
        ex, sm = self.experiment, self.sampling
        defaults = [sm.model] * self.n_agents
        if sm.models:
            graph = protocol_spec(ex.protocol).topology
            ranked = parse_models(sm.models, self.n_agents)
            if graph is None:  # the fully connected graph: every agent ties, any placement is "none"
                if sm.strong_agents not in PLACEMENTS:
                    raise TopologyError(f"--strong-agents {sm.strong_agents!r}: choose one of {', '.join(PLACEMENTS)}")
                defaults = ranked
            else:
                defaults = assign_models(ranked, graph(self), sm.strong_agents)
        return [self._agent_spec(i, defaults[i]) for i in range(self.n_agents)]

    def _agent_spec(self, i: int, model: str) -> AgentSpec:
        ex, sm = self.experiment, self.sampling
        over = ex.agent_settings[i] if i < len(ex.agent_settings) else {}
        first = ex.first_round_seed
        return AgentSpec(
            model=over.get("model", model),
            system_prompt=over.get("system_prompt", sm.system_prompt),
            temperature=float(over.get("temperature", sm.temperature)),
            top_p=float(over.get("top_p", sm.top_p)),
            max_tokens=int(over.get("max_tokens", sm.max_tokens)),
            seed=int(over.get("seed", ex.seed * 1000 + i)),
            context_overflow=sm.context_overflow,
            first_seed=None if first is None else int(over.get("seed", first * 1000 + i)),
            first_key_seed=first,
        )

    def options_read(self) -> frozenset[str]:
        """The protocol options this run reads: its protocol's ``settings`` but the ones this
        config leaves unused (``ProtocolSpec.unused``: S2-MAD's ``tau`` with answer similarity)."""
        spec = SPECS.get(self.experiment.protocol)
        if spec is None:
            return frozenset(PROTOCOL_OPTIONS)
        return spec.options - spec.unused(self)

    def run_id(self) -> str:
        """Deterministic id from everything that changes results, over the flat form
        (:meth:`to_dict`), so it is the id the flat configuration had before the parts: every
        option but the unhashed ones (:func:`unhashed_options`: ``out``, engine knobs), the
        settings of the run's backend and of those whose entry hashes them for every run
        (``BackendSpec.hash_settings_always``), and the protocol options the run reads
        (:meth:`options_read`), at their values even when they are the defaults, so a changed
        default never gives an old id new results. Other protocols' options are left out:
        ``--tau`` does not make a MAD run a new run. A file option (``Option.hash_as``,
        ``--reconcile-samples``) is hashed by its checked content, and left out when not given.
        A protocol option with ``hashed=False`` is another way to give a hashed one (sparse's
        ``--degree`` sets ``--density``) and is left out. A renamed option (``Option.old_name``)
        is hashed under its old name. An option with ``hash_default=False`` is left out at its
        default (``--prompt-layout paper``: the runs made before it existed keep their ids)."""
        d = self.to_dict()
        for k in (*unhashed_options(), *self._other_backends_options(), *self._protocol_options_left_out()):
            d.pop(k, None)
        for name in self.options_read():  # a file option: its content, not its path; not given: left out
            opt = PROTOCOL_OPTIONS.get(name)
            if opt is not None and not opt.hash_default and d.get(name) == opt.default:
                d.pop(name, None)
            elif opt is not None and opt.hash_as is not None and d.get(name) is not None:
                d[name] = opt.hash_as(d.pop(name))
            elif opt is not None and opt.hash_as is not None:
                d.pop(name, None)
        for new, old in HASHED_AS_OLD.items():
            if new in d:
                d[old] = d.pop(new)
        per_model = {
            m: {k: v for k, v in sorted((o or {}).items()) if k in RESULT_ENGINE_KEYS}
            for m, o in sorted(self.cluster.placement_resources.items())
        }
        per_model = {m: o for m, o in per_model.items() if o}
        if per_model:  # a model's own dtype / context length changes its results
            d["engine_per_model"] = per_model
        digest = hashlib.sha1(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:10]
        return f"{self.experiment.protocol}-{digest}"

    def _protocol_options_left_out(self) -> list[str]:
        read = self.options_read()
        return [name for name, opt in PROTOCOL_OPTIONS.items() if name not in read or not opt.hashed]

    def _other_backends_options(self) -> list[str]:
        """The settings of backends other than the run's whose entry does not hash them always."""
        own = self.backends.get(self.sampling.backend)
        names: list[str] = []
        for backend, part in self.backends.items():
            spec = find_backend(backend)
            if part is not own and not (spec is not None and spec.hash_settings_always):
                names.extend(part.items())
        return names

    def run_models(self) -> list[str]:
        """The models the run's agents use (:meth:`agent_specs`), each once, in agent order."""
        return list(dict.fromkeys(s.model for s in self.agent_specs()))

    # ------------------------------------------------------------------ checks
    def validate(self) -> Self:
        """Check every option (type, choices, bounds, text), the protocol's and the backend's own
        checks, and resolve ``--backend auto``; a ConfigError naming the flag, else ``self``."""
        ex, sm = self.experiment, self.sampling

        def bad(flag: str, msg: str) -> ConfigError:
            return ConfigError(f"--{flag.replace('_', '-')} {msg}")

        if ex.protocol not in SPECS:
            raise bad("protocol", f"{ex.protocol!r} is not one of {', '.join(SPECS)}")
        self._check_values()

        check_graph(self.n_agents)  # before anything builds them
        check_questions(ex.dataset, ex.limit)
        if sm.backend not in backend_choices():
            raise bad("backend", f"{sm.backend!r} is not one of {', '.join(backend_choices())}")
        sm.backend = resolve_backend(sm.backend, self.cluster.device)
        spec = self.resolved = backend_spec(sm.backend)
        self._check_backend(spec)
        check = SPECS[ex.protocol].check
        if check is not None:
            check(self)
        check_layout(self, self.options_read())
        self._check_models()
        if spec.name in self.backends:
            self.backends[spec.name].check(self.run_models())
        self._check_agent_settings()
        self._check_placement_resources()
        return self

    def _check_values(self) -> None:
        """Type, allowed values and bounds of every option (:class:`~engine.options.Option`)."""
        for opt in self.all_options():
            value = self.value(opt.name)
            opt.check(value)
            why = bad_text(value)
            if why is not None:
                raise ConfigError(f"{opt.flag} holds text that cannot be written as UTF-8: {why}")

    def _check_backend(self, spec: BackendSpec) -> None:
        backend = self.sampling.backend
        if spec.needs_endpoint and not self.value("api_base"):
            raise ConfigError(f"--api-base is required with --backend {backend} (e.g. http://127.0.0.1:8000/v1)")
        if self.cluster.tensor_parallel > 1 and not (spec.tensor_parallel or spec.simulated):
            raise ConfigError(
                f"--tensor-parallel needs --backend vllm (or simulated, to test a layout; got --backend {backend})"
            )

    def _check_models(self) -> None:
        sm = self.sampling
        if sm.strong_agents != "none" and not sm.models:
            raise ConfigError(
                f"--strong-agents {sm.strong_agents} needs --models (models strongest first, e.g. 'big*1,small*5')"
            )
        if sm.models:
            try:
                parse_models(sm.models, self.n_agents)
            except TopologyError as exc:
                raise ConfigError(str(exc)) from None

    def _check_agent_settings(self) -> None:
        """``agent_settings``: at most one entry per agent, each a mapping of AgentSpec keys whose
        values pass the check of the run option of that name (an agent's own ``seed`` is its
        sampling seed: :data:`AGENT_SEED`)."""
        if len(self.experiment.agent_settings) > self.n_agents:
            raise ConfigError(
                f"agent_settings has {len(self.experiment.agent_settings)} entries but the run has "
                f"{self.n_agents} agents"
            )
        allowed = {f.name for f in dataclasses.fields(AgentSpec)} - {"first_seed", "first_key_seed"}
        for i, over in enumerate(self.experiment.agent_settings):
            if not isinstance(over, dict):
                raise ConfigError(f"agent_settings[{i}] must be a mapping, got {type(over).__name__}")
            unknown = set(over) - allowed
            if unknown:
                raise ConfigError(f"agent_settings[{i}]: unknown key(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
            for key, value in over.items():
                opt = AGENT_SEED if key == "seed" else _ENGINE_OPTION[key]
                opt.check(value, f"agent_settings[{i}].{key}")

    def _check_placement_resources(self) -> None:
        """``placement_resources``: per model a mapping whose numbers and engine settings pass the
        check of the run option they stand for (``replicas`` as ``--replicas``, ``max_model_len``
        as ``--max-model-len``, ...); its keys are checked where the replicas are laid out."""
        for model, over in self.cluster.placement_resources.items():
            where = f"placement_resources[{model!r}]"
            if over is None:
                continue
            if not isinstance(over, dict):
                raise ConfigError(f"{where} must be a mapping, got {type(over).__name__}")
            for key, value in over.items():
                if key == "resources" and isinstance(value, dict):
                    for name, amount in value.items():
                        RESOURCE_AMOUNT.check(amount, f"{where}.resources.{name}")
                elif key in PLACEMENT_OPTIONS:
                    PLACEMENT_OPTIONS[key].check(value, f"{where}.{key}")
