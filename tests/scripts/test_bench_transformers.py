"""scripts/bench_transformers.py: the debate-like waves it builds, the baseline backend it reads
from git, and (slow) a whole run on the tiny random Llama with both sides doing the same work."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_transformers.py"


def _load():
    spec = importlib.util.spec_from_file_location("bench_transformers", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


bench = _load()


def _words(messages) -> list[str]:
    """A stand-in tokenizer: a token per word, plus three per message (its template)."""
    return [w for m in messages for w in ["<m>", m["role"], "</m>", *m["content"].split()]]


def test_waves_grow_like_debate_rounds():
    w = {"waves": 3, "per_wave": 12, "first_prompt": 200, "prompt_growth": 150, "max_tokens": 9}
    waves = bench.debate_waves(_words, w, temperature=0.5, top_p=0.8)
    assert [len(x) for x in waves] == [12, 12, 12]
    for rnd, wave in enumerate(waves):
        lengths = [len(_words(r.messages)) for r in wave]
        target = 200 + 150 * rnd
        assert all(abs(n - target) <= 12 for n in lengths)  # within a filler sentence
        assert all(r.max_tokens == 9 and r.temperature == 0.5 and r.top_p == 0.8 for r in wave)
        assert len(wave[0].messages) == (1 if rnd == 0 else 3)  # later rounds: own answer and peers'
    seeds = [r.seed for wave in waves for r in wave]
    assert len(set(seeds)) == len(seeds)
    assert bench.debate_waves(_words, w, 0.5, 0.8) == waves  # the same requests every run


def test_gpu_workload_is_the_issues_shape():
    w = bench.WORKLOADS["gpu"]
    assert w["waves"] * w["per_wave"] == 144 and w["per_wave"] == 48 and w["max_tokens"] == 64
    mean_prompt = w["first_prompt"] + w["prompt_growth"] * (w["waves"] - 1) / 2
    assert 950 <= mean_prompt <= 1100


def test_baseline_is_the_old_backend_file_from_git():
    from backends.transformers_backend import TransformersBackend

    old = bench.load_baseline()
    assert old is not TransformersBackend and old.__module__ == "transformers_backend_baseline"
    assert hasattr(old, "_sample") and not hasattr(old, "_decode")  # per-row host sampling, one step function


@pytest.mark.slow
def test_script_runs_both_sides_on_the_tiny_model(tmp_path):
    from tests.support.tiny_vlm import build_tiny_text_model

    model = build_tiny_text_model(tmp_path / "tiny")
    out = tmp_path / "bench.json"
    argv = ["--model", str(model), "--waves", "2", "--per-wave", "3", "--first-prompt", "60", "--prompt-growth", "30"]
    argv += ["--device", "cpu"]  # also where there is a GPU (the script's default there)
    assert bench.main([*argv, "--max-tokens", "5", "--max-batch", "2", "--quiet", "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["calls"] == 6 and r["same_work"] and r["baseline"] == bench.BASELINE
    for side in r["sides"].values():
        assert side["completion_tokens"] == 30 and side["finish_reasons"] == {"length": 6}
        assert side["max_batch"] == 2 and side["settings"]["device"] == "cpu" and side["tokens_per_s"] > 0
    assert r["sides"]["baseline"]["prompt_tokens"] == r["sides"]["current"]["prompt_tokens"]
    assert r["ratio"] == pytest.approx(
        r["sides"]["current"]["tokens_per_s"] / r["sides"]["baseline"]["tokens_per_s"], rel=0.01
    )
    assert r["params"]["threads"] == 2 and r["machine"]["cpus"] and r["commit"]
