"""The real-vLLM tests' shared helpers: the ``debate run`` CLI as a subprocess (the tests in
tests/backends/ that run vLLM's real engine; whether vLLM must be there: tests/support/needs.py)."""

import os
import subprocess
import sys

from tests.support.paths import ROOT


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
