"""`debate run` end to end with the real CPU model on local Ray (small, but every part real): the
session's Ray (2 CPUs, no GPU, whatever the machine has), so the replicas run on the CPU."""

import pandas as pd
import pytest

from actors.driver import run
from backends.installed import vllm_installed
from engine.config import RunConfig
from engine.extract import extract_answer
from engine.results import read_table

pytestmark = [pytest.mark.slow, pytest.mark.ray]


@pytest.mark.parametrize("backend", ["auto", "transformers"])
def test_real_model_debate_writes_texts_and_token_counts(ray_local, tmp_path, backend):
    """The default backend (vLLM here) and the transformers fallback, each end to end."""
    cfg = RunConfig.flat(
        protocol="mad",
        agents=2,
        rounds=2,
        limit=2,
        max_tokens=48,
        out=str(tmp_path / "real"),
        progress=False,
        replica_cpus=2,  # the session's Ray has 2 CPUs, whatever this machine has (default: its cores)
        backend=backend,
    )
    result = run(cfg)
    calls = read_table(result.out_dir, "calls").to_pandas()
    qs = read_table(result.out_dir, "questions").to_pandas()
    ran = ("vllm" if vllm_installed() else "transformers") if backend == "auto" else backend
    assert result.backend == ran and (calls.backend == ran).all()
    runs = read_table(result.out_dir, "runs").to_pandas()
    assert list(runs.backend) == [ran]
    if backend == "auto":  # --dtype auto: bf16 where this CPU has fast bf16 (AMX / AVX512-BF16), else fp32
        from backends.model_store import pick_dtype

        assert list(runs.dtype) == [pick_dtype("auto", "cpu")] == [result.dtype]
    assert not result.simulated and not calls.simulated.any()
    assert len(calls) == 8 and len(qs) == 2
    assert calls.text.str.len().gt(0).all() and calls.error.isna().all()
    assert calls.prompt_tokens.gt(30).all() and calls.completion_tokens.between(1, 48).all()
    # a debate prompt contains the peer's reply, so it is longer than the first prompt
    r0 = calls[calls["round"] == 0].set_index(["question_id", "agent_id"]).prompt_tokens
    r1 = calls[calls["round"] == 1].set_index(["question_id", "agent_id"]).prompt_tokens
    assert (r1 > r0.reindex(r1.index)).all()  # rows arrive in completion order: align by (question, agent)
    stored = [None if pd.isna(a) else a for a in calls.answer]  # pandas 3 reads a null string as NaN
    # a reply cut off at the token limit counts only a marked answer (engine/extract.py, marked_only)
    assert [
        extract_answer(t, "numeric", marked_only=fr == "length") for t, fr in zip(calls.text, calls.finish_reason)
    ] == stored
    assert qs.correct.dtype == bool and result.summary["completion_tokens"] == calls.completion_tokens.sum()


def test_two_models_get_two_replicas_and_central_placement(ray_local, tmp_path):
    """Strong/weak placement with two real replicas: the 'strong' alias goes to the star's centre.

    Both aliases load the same SmolLM2 weights (the only model that ships here); what is tested
    is the engine: two replica actors in one run, each agent served by its own model's replica.
    """
    cfg = RunConfig.flat(
        protocol="sparse",
        topology="star",
        center=2,
        agents=3,
        rounds=2,
        limit=1,
        max_tokens=16,
        models="smollm2*1,smollm2-135m-instruct*2",
        strong_agents="central",
        out=str(tmp_path / "place"),
        progress=False,
        backend="transformers",
        replica_cpus=1,  # the session's Ray has 2 CPUs, whatever this machine has (default: its cores / 2)
    )  # two replicas load faster on transformers
    assert [s.model for s in cfg.agent_specs()] == ["smollm2-135m-instruct", "smollm2-135m-instruct", "smollm2"]
    result = run(cfg)
    calls = read_table(result.out_dir, "calls").to_pandas()
    assert len(result.replica_stats) == 2 and sum(s["requests"] for s in result.replica_stats) == 6
    assert dict(zip(calls.agent_id, calls.model)) == {
        0: "smollm2-135m-instruct",
        1: "smollm2-135m-instruct",
        2: "smollm2",
    }


def test_without_vllm_auto_falls_back_to_transformers(ray_local, tmp_path, monkeypatch):
    """A machine where vLLM does not import (hidden here): --backend auto runs the transformers
    backend, and the rows and the run say so."""
    import sys

    monkeypatch.setitem(sys.modules, "vllm", None)
    cfg = RunConfig.flat(
        protocol="mad",
        agents=2,
        rounds=1,
        limit=1,
        max_tokens=8,
        out=str(tmp_path / "fallback"),
        progress=False,
        dtype="float32",
        replica_cpus=2,  # the session's Ray has 2 CPUs, whatever this machine has
    )
    result = run(cfg)
    calls = read_table(result.out_dir, "calls").to_pandas()
    runs = read_table(result.out_dir, "runs").to_pandas()
    assert result.backend == "transformers" and (calls.backend == "transformers").all()
    assert list(runs.backend) == ["transformers"] and list(runs.dtype) == ["float32"] and result.dtype == "float32"
    assert calls.error.isna().all() and len(calls) == 2
