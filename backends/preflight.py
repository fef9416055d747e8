"""Checks a backend runs before Ray starts (no actor, no model loaded), named in its registry entry.

:func:`check_model` fails on a model that cannot be loaded (the local-model backends),
:func:`check_endpoint` on an OpenAI-compatible server that cannot be reached, and
:func:`check_vllm_device` on vLLM's GPU build asked to run CPU replicas (once the run knows
whether its replicas use GPUs). Each raises a :class:`~engine.errors.UserError`: one line.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from backends import installed
from engine.errors import UserError

if TYPE_CHECKING:
    from engine.config import RunConfig


def check_model(model: str) -> None:
    """Fail early, in the driver, on a local model that cannot be loaded (without loading it): an
    unknown alias, a path that does not exist (:func:`~backends.model_store.looks_like_path`: the
    hub is not asked), a file that is not GGUF, a folder without a usable config or weights. The
    preflight of the backends that load a model (their registry entry's ``loads_model``)."""
    # function-level: importing numpy here keeps it off start-up
    from backends.model_store import ALIASES, ModelNotFound, looks_like_path, packaged_gguf

    if model in ALIASES:
        packaged_gguf(model)
        return
    p = Path(model).expanduser()
    if not p.exists() and looks_like_path(model):
        raise ModelNotFound(f"--model {model}: no such {'file' if p.suffix == '.gguf' else 'folder'} ({p.absolute()})")
    if _hub_model(model):
        return
    if p.is_file():
        if p.suffix != ".gguf":
            raise ModelNotFound(f"--model {model}: a file that is not .gguf; give a .gguf file or a model folder")
        with open(p, "rb") as f:
            if f.read(4) != b"GGUF":
                raise ModelNotFound(
                    f"--model {model}: does not start with the GGUF magic bytes, so it is not a GGUF file"
                )
        return
    if p.is_dir():
        cfg_file = p / "config.json"
        if not cfg_file.is_file():
            raise ModelNotFound(f"--model {model}: folder has no config.json, so it is not a transformers model folder")
        try:
            model_type = json.loads(cfg_file.read_text()).get("model_type")
        except (ValueError, AttributeError):
            raise ModelNotFound(f"--model {model}: {cfg_file} is not a JSON object") from None
        if not model_type:
            raise ModelNotFound(
                f"--model {model}: {cfg_file} has no model_type, so transformers cannot build the model"
            )
        if not any(p.glob("*.safetensors")) and not any(p.glob("pytorch_model*.bin")):
            raise ModelNotFound(f"--model {model}: folder has no weights (*.safetensors or pytorch_model*.bin)")
        if not (p / "tokenizer.json").is_file() and not (p / "tokenizer_config.json").is_file():
            raise ModelNotFound(f"--model {model}: folder has no tokenizer (tokenizer.json / tokenizer_config.json)")
        return
    raise ModelNotFound(
        f"--model {model}: not a known alias ({', '.join(ALIASES)}), a .gguf file, a model folder "
        f"or a Hugging Face hub id (org/name)"
    )


def _hub_model(model: str) -> bool:
    """Check a hub id (:func:`~backends.model_store.check_hub_model`: vLLM and transformers resolve
    it with their own caches); False for a name that is not one. A hub id that does not resolve
    could also be a mistyped folder: the one-line error says both."""
    # function-level: importing numpy here keeps it off start-up
    from backends.model_store import ModelNotFound, check_hub_model, is_hub_id

    if not is_hub_id(model):
        return False
    try:
        check_hub_model(model)
    except ModelNotFound as exc:
        why = str(exc).removeprefix(f"--model {model}: ")
        raise ModelNotFound(f"--model {model}: no such folder here, and {why}") from None
    return True


def check_vllm_device(cfg: RunConfig, gpu: bool) -> None:
    """Before any replica starts: ``--backend vllm`` with replicas on the CPU (``--device cpu``, or
    no GPU asked for or in the cluster) needs vLLM's CPU build; the GPU build would find the GPU
    through NVML whatever ``CUDA_VISIBLE_DEVICES`` says, and its engine would die. One line instead.
    (Each replica checks its own node's build too: on a cluster the nodes' vLLMs may differ.)"""
    # function-level: importing numpy here keeps it off start-up
    from backends.base import VLLMBuildError

    if gpu or installed.vllm_build() != "gpu":
        return
    why = (
        "--device cpu"
        if cfg.cluster.device == "cpu"
        else "no GPU asked for (placement_resources, --gpus-per-replica, "
        "--tensor-parallel, --device gpu) and none in the Ray cluster now"
    )
    raise VLLMBuildError(
        f"--backend vllm: the replicas would run on the CPU ({why}), and the installed vLLM is its GPU "
        f"build, which cannot run there; use --backend transformers for CPU replicas, or run on GPUs "
        f"(--device gpu)"
    )


class EndpointError(UserError, ValueError):
    """An OpenAI-compatible endpoint that cannot be reached (checked before any actor starts)."""


def check_endpoint(api_base: str, timeout: float = 5.0) -> None:
    """A TCP connection to ``--api-base``'s host and port, so that a server that refuses or a
    wrong address fails the run at once with one line, instead of after every call has failed."""
    url = urlsplit(api_base if "://" in api_base else f"http://{api_base}")
    if url.scheme not in ("http", "https") or not url.hostname:
        raise EndpointError(f"--api-base {api_base}: not an http(s) URL such as http://127.0.0.1:8000/v1")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname, port), timeout=timeout):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise EndpointError(f"--api-base {api_base}: cannot connect to {url.hostname}:{port} ({reason})") from None
