"""scripts/gpu_check.py without a GPU (hidden where the machine has one): the GPU checks say they
are skipped, and the CPU ones (one replica, a replica SIGKILLed mid-run) run through Ray on the
tiny model for every backend installed (vLLM's CPU build here), so the script a GPU user runs
first is known to work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.ray]


def test_gpu_check_runs_its_cpu_checks_and_skips_the_gpu_ones(tmp_path):
    from backends.installed import vllm_build

    out = tmp_path / "gpu_check.json"
    # no GPU for the script's Ray and torch, also on a machine that has one: the CPU path is checked
    env = {**os.environ, "RAY_ADDRESS": "", "PYTHONUNBUFFERED": "1", "CUDA_VISIBLE_DEVICES": ""}
    # the backends installed (the script's default), but vLLM's CUDA build, which cannot run a CPU replica
    build = vllm_build()
    backends = ["vllm", "transformers"] if build == "cpu" else ["transformers"]
    only = ["--backends", "transformers"] if build == "gpu" else []
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "--out", str(out), *only],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert lines[0].startswith("GPUs Ray sees: 0 on 1 node(s)")
    res = json.loads(out.read_text())
    assert res["backends"] == backends
    status = {c["name"]: c["status"] for c in res["checks"]}
    for b in backends:
        assert status[f"{b}: one replica"] == "PASS"
        assert status[f"{b}: replica killed mid-run"] == "PASS"
        assert status[f"{b}: replicas share a GPU"] == "SKIP"
    assert status[f"{backends[0]}: embedder on the GPU (S2-MAD)"] == "SKIP"
    killed = next(c for c in res["checks"] if c["name"] == f"{backends[0]}: replica killed mid-run")
    assert "engine process(es) gone" in killed["detail"]
    assert sum(line.startswith(("PASS", "SKIP", "FAIL")) for line in lines) == len(res["checks"])
