"""Which models answer and how they sample: backend, model, sampling, per-agent models, and one
agent's resolved settings (:class:`AgentSpec`)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.config.fields import ConfigPart, config_part, option
from engine.options import MAX_CONTEXT, MAX_TEMPERATURE, MAX_TOKENS
from topologies.placement import PLACEMENTS

DTYPES = ("auto", "bfloat16", "float32")
CONTEXT_OVERFLOW = ("error", "truncate")
DEFAULT_MODEL = "smollm2-135m-instruct"


@config_part("model and sampling")
@dataclass
class SamplingConfig(ConfigPart):
    """Models and sampling: every option changes results."""

    backend: str = option("auto")
    model: str = option(
        DEFAULT_MODEL,
        (
            "model alias (default smollm2-135m-instruct, packaged), .gguf file, local model folder or"
            " Hugging Face hub id"
        ),
    )
    system_prompt: str | None = option(None, "system message of every agent's calls (default: none)")
    temperature: float = option(
        0.7, "sampling temperature of every agent (default 0.7; 0 is greedy)", low=0, high=MAX_TEMPERATURE
    )
    top_p: float = option(
        1.0,
        ("nucleus sampling: draw from the most likely tokens whose probabilities sum to top_p (default 1.0: all)"),
        low=0,
        high=1,
        low_open=True,
        bound_error="must be in (0, 1]",
    )
    max_tokens: int = option(256, "most tokens one reply may generate (default 256)", low=1, high=MAX_TOKENS)
    context_overflow: str = option(
        "error",
        (
            "prompt longer than the model context: 'error' (error row, default) or 'truncate' (drop "
            "the oldest debate turns; recorded per call in calls.truncated_messages)"
        ),
        choices=CONTEXT_OVERFLOW,
    )
    models: str | None = option(None, "per-agent models, strongest first: 'modelA*1,modelB*5'")
    strong_agents: str = option(
        "none",
        (
            "which agents get the stronger models of --models: none (agent i gets the i-th) | central"
            " (the most central agents) | peripheral (the least central)"
        ),
        choices=PLACEMENTS,
        old_name="placement",
    )
    dtype: str = option(
        "auto",
        (
            "auto (bfloat16 on CUDA and on CPUs with AMX/AVX512-BF16, else float32) | bfloat16 | "
            "float32; float32 on CPU gives identical texts run after run, bf16 texts change with "
            "batch composition"
        ),
        choices=DTYPES,
    )
    max_model_len: int | None = option(
        None, "context length of each model (default: the model's own)", low=1, high=MAX_CONTEXT
    )


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
