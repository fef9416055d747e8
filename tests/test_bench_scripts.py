"""The engine benchmarks in scripts/: bench_engine_efficiency, bench_vs_sequential, bench_coordinator_overhead.

Pure helpers are tested without Ray on the SIMULATED backend; one small smoke run per script
(marked ``ray``) checks the JSON it writes: counts, same work on both sides, sane ratios.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

from actors.backend_simulated import SimulatedBackend
from actors.local_run import run_local
from engine.config import RunConfig
from engine.records import GenRequest, GenResult
from engine.tasks import arithmetic_questions

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


eff = _load("bench_engine_efficiency")
seqb = _load("bench_vs_sequential")
coord = _load("bench_coordinator_overhead")


def _sim_cfg(**kw) -> RunConfig:
    base = dict(protocol="mad", agents=3, rounds=2, limit=2, backend="simulated", temperature=0.0, max_tokens=64,
                progress=False)
    base.update(kw)
    return RunConfig(**base)


class _Capture:
    """A simulated backend that remembers every request it served (what the 'engine' sent)."""

    simulated = True

    def __init__(self):
        self.inner = SimulatedBackend()
        self.seen: list[GenRequest] = []

    def generate(self, reqs):
        self.seen.extend(reqs)
        return self.inner.generate(reqs)


def _recorded_run(cfg: RunConfig, qs):
    cap = _Capture()
    out = run_local(cfg, qs, cap)
    rows = [r.to_row() for _, log in out for r in log.records]
    return cap.seen, rows


# ----------------------------------------------------------------- (a) engine efficiency, no Ray
def test_replay_reconstructs_exact_requests_by_round():
    cfg = _sim_cfg(agents=3, rounds=3, limit=2)
    qs = arithmetic_questions(2, seed=0)
    sent, rows = _recorded_run(cfg, qs)
    rounds = eff.reconstruct_rounds(cfg, qs, rows, simulated=True)
    assert sorted(rounds) == [0, 1, 2]
    assert [len(v) for v in rounds.values()] == [6, 6, 6]  # 2 questions x 3 agents per round
    rebuilt = {req.seed: req for items in rounds.values() for req, _ in items}
    assert len(rebuilt) == len(sent) == 18
    for req in sent:  # the very same messages (incl. peers' texts and the agent's own transcript)
        assert rebuilt[req.seed].messages == req.messages
        assert rebuilt[req.seed].meta == req.meta
    # later rounds carry the transcript: 1 user message more, 1 assistant message more per round
    r2 = rounds[2][0][0].messages
    assert [m["role"] for m in r2] == ["user", "assistant", "user", "assistant", "user"]


def test_direct_replay_does_the_same_work():
    cfg = _sim_cfg()
    qs = arithmetic_questions(2, seed=3)
    _, rows = _recorded_run(cfg, qs)
    rounds = eff.reconstruct_rounds(cfg, qs, rows, simulated=True)
    batches = []

    def gen(reqs):
        batches.append(len(reqs))
        assert all(r.temperature == 0.0 for r in reqs)
        return SimulatedBackend().generate(reqs)

    d = eff.direct_replay(gen, rounds)
    assert batches == [6, 6]  # one batch per round holding every question's calls of that round
    assert d["requests"] == 12 and d["prompt_tokens_match"] == 12 and d["same_text"] == 12
    assert d["completion_tokens"] == sum(r["completion_tokens"] for r in rows)
    assert d["prompt_tokens"] == sum(r["prompt_tokens"] for r in rows)
    assert d["seconds"] >= 0 and [x["requests"] for x in d["per_round"]] == [6, 6]


def test_direct_replay_caps_each_request_at_its_recorded_length():
    req = GenRequest(messages=[{"role": "user", "content": "q"}], max_tokens=256, seed=5)
    seen = []

    def gen(reqs):
        seen.extend(reqs)
        return [GenResult("x", 3, r.max_tokens, 0.0, "length") for r in reqs]

    d = eff.direct_replay(gen, {0: [(req, {"completion_tokens": 17, "prompt_tokens": 3, "text": "x"})]})
    assert seen[0].max_tokens == 17 and d["completion_tokens"] == 17 and d["prompt_tokens_match"] == 1


def test_replay_backend_rejects_duplicate_seeds():
    row = {"seed": 7, "text": "a", "prompt_tokens": 1, "completion_tokens": 1, "finish_reason": "stop", "error": None}
    with pytest.raises(ValueError, match="seed 7"):
        eff.ReplayBackend([row, dict(row)], simulated=True)


# ----------------------------------------------------------------- (b) vs sequential, no Ray
def test_compare_counts_identical_texts_per_round():
    seq = {1: {"round": 0, "text": "a", "answer": "1", "prompt_tokens": 10},
           2: {"round": 0, "text": "b", "answer": "2", "prompt_tokens": 10},
           3: {"round": 1, "text": "c", "answer": "3", "prompt_tokens": 20},
           4: {"round": 1, "text": "d", "answer": "4", "prompt_tokens": 20}}
    eng = {1: {"round": 0, "text": "a", "answer": "1", "prompt_tokens": 10},
           2: {"round": 0, "text": "b", "answer": "2", "prompt_tokens": 10},
           3: {"round": 1, "text": "c!", "answer": "3", "prompt_tokens": 21},
           5: {"round": 1, "text": "e", "answer": "5", "prompt_tokens": 20}}
    c = seqb.compare(seq, eng)
    assert c["matched_calls"] == 3 and c["unmatched_calls"] == 2
    assert c["identical_text"] == round(2 / 3, 4)
    assert c["identical_answer"] == 1.0
    assert c["identical_prompt_tokens"] == round(2 / 3, 4)
    assert c["identical_text_by_round"] == {"0": 1.0, "1": 0.0}


def test_matching_batch_interpolates_on_log_scale():
    curve = [{"batch": 1, "tok_per_s": 10.0}, {"batch": 2, "tok_per_s": 20.0}, {"batch": 4, "tok_per_s": 30.0}]
    assert seqb.matching_batch(curve, 25.0) == round(2 * math.sqrt(2), 2)  # halfway from 2 to 4 on log2 scale
    assert seqb.matching_batch(curve, 15.0) == round(math.sqrt(2), 2)
    assert seqb.matching_batch(curve, 5.0) == 1.0
    assert seqb.matching_batch(curve, 40.0) == 4.0


def test_typical_request_is_the_median_prompt():
    reqs = [(GenRequest(messages=[{"role": "user", "content": str(n)}]), GenResult("", n, 1, 0.0)) for n in (50, 10, 30, 40)]
    req, n = seqb.typical_request(reqs)
    assert n == 30 and req.messages[0]["content"] == "30"  # lower median of 10, 30, 40, 50


def test_speedup_decomposition_multiplies_back_to_the_speedup():
    r = {"params": {"max_batch": 4, "questions": 2, "agents": 3}, "machine": {"cpus": 2}, "speedup": 4.0,
         "scaling": {"prompt_tokens": 100, "rows": [{"batch": 1, "tok_per_s": 10.0}, {"batch": 4, "tok_per_s": 30.0},
                                                     {"batch": 8, "tok_per_s": 32.0}]},
         "engine": {"calls": 6, "completion_tokens": 600, "seconds": 30.0, "tok_per_s": 20.0},
         "sequential": {"calls": 6, "completion_tokens": 600, "seconds": 120.0, "tok_per_s": 5.0, "prompt_tokens": 600,
                        "cpu_utilisation": 1.2}}
    seqb.analyse(r)
    d = r["speedup_decomposition"]
    assert d["curve_batch"] == 4 and d["batching_gain"] == 3.0  # batch 8 is above --max-batch 4
    assert d["engine_vs_curve"] == round(20 / 30, 4) and d["sequential_vs_curve"] == 0.5
    assert d["product"] == pytest.approx(4.0, abs=1e-3)  # = engine tok/s / sequential tok/s = the speedup
    assert "inflates the speedup" in r["explanation"]  # the loop ran at half the batch-1 rate
    r["sequential"].update(seconds=60.0, tok_per_s=10.0)
    r["speedup"] = 2.0
    seqb.analyse(r)
    assert r["speedup_decomposition"]["sequential_vs_curve"] == 1.0 and "inflates" not in r["explanation"]


class _EosBackend:
    """Stops after 1 token while any end-of-turn id is set, else generates max_tokens."""

    def __init__(self):
        self.eos_ids = {2}
        self.seen_eos = []

    def generate(self, reqs):
        self.seen_eos.append(set(self.eos_ids))
        n = (lambda r: 1) if self.eos_ids else (lambda r: r.max_tokens)
        return [GenResult("t", 5, n(r), 0.0) for r in reqs]


def test_batch_scaling_makes_every_row_generate_max_tokens_and_restores_eos():
    b = _EosBackend()
    req = GenRequest(messages=[{"role": "user", "content": "x"}])
    rows = seqb.batch_scaling(b, req, [1, 2, 4], max_tokens=64, repeats=2)
    assert [r["completion_tokens"] for r in rows] == [64, 128, 256]
    assert all(s == set() for s in b.seen_eos) and len(b.seen_eos) == 6
    assert b.eos_ids == {2}  # restored
    assert rows[0]["vs_batch_1"] == 1.0 and all(r["tok_per_s"] > 0 for r in rows)


def test_sequential_loop_is_one_request_per_call():
    cfg = _sim_cfg(agents=2, rounds=2, limit=2)
    qs = arithmetic_questions(2, seed=1)
    calls = []

    class One(SimulatedBackend):
        def generate(self, reqs):
            calls.append(len(reqs))
            return super().generate(reqs)

    s = seqb.run_sequential(cfg, qs, One())
    assert calls == [1] * 8 and s["n_calls"] == 8 and len(s["calls"]) == 8
    assert s["completion_tokens"] == 8 * 60  # simulated replies are 60 tokens


# ----------------------------------------------------------------- (c) coordinator overhead, no Ray
def test_per_turn_overhead_formula():
    r = coord.per_turn(wall_s=1.0, busy_s=0.4, turns=200)
    assert r["wall_ms_per_turn"] == pytest.approx(5.0)
    assert r["backend_ms_per_turn"] == pytest.approx(2.0)
    assert r["overhead_ms_per_turn"] == pytest.approx(3.0)
    with pytest.raises(ValueError):
        coord.per_turn(1.0, 0.0, 0)


def test_backend_compute_counts_every_turn():
    cfg = RunConfig(protocol="sparse", topology="ring", agents=5, rounds=2, limit=3, backend="simulated",
                    progress=False)
    qs = arithmetic_questions(3, seed=0)
    seconds, calls = coord.backend_compute_s(cfg, qs)
    assert calls == 3 * 5 * 2 and 0 < seconds < 5


# ----------------------------------------------------------------- smoke runs on Ray (SIMULATED)
@pytest.mark.ray
def test_engine_efficiency_script_json(ray_local, tmp_path):
    out = tmp_path / "eff.json"
    assert eff.main(["--backend", "simulated", "--questions", "2", "--agents", "2", "--rounds", "2",
                     "--repeats", "1", "--no-warmup", "--quiet", "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    rep = r["repeats"][0]
    assert r["simulated"] and r["machine"]["cpus"] >= 1 and len(r["loadavg_before"]) == 3
    assert rep["engine_calls"] == rep["direct_requests"] == rep["prompt_tokens_match"] == 8
    assert rep["same_text"] == 8 and r["same_work"] is True
    assert rep["engine_completion_tokens"] == rep["direct_completion_tokens"] == 8 * 60
    assert r["efficiency"] == pytest.approx(r["direct_s"] / r["engine_s"], rel=1e-3) and r["efficiency"] > 0
    assert r["engine_debate_s"] <= r["engine_s"]
    assert r["target"]["efficiency_at_least"] == 0.9 and r["target"]["met"] == (r["efficiency"] >= 0.9)
    assert r["params"]["questions"] == 2 and r["run_config"]["temperature"] == 0.0


@pytest.mark.ray
def test_vs_sequential_script_json(ray_local, tmp_path):
    out = tmp_path / "seq.json"
    assert seqb.main(["--backend", "simulated", "--questions", "2", "--agents", "2", "--rounds", "2",
                      "--sizes", "1,2,4", "--quiet", "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["sequential"]["calls"] == r["engine"]["calls"] == 8
    assert r["sequential"]["completion_tokens"] == r["engine"]["completion_tokens"] == 8 * 60
    o = r["outputs"]  # the simulated model is seeded per call: identical on both sides
    assert o["matched_calls"] == 8 and o["unmatched_calls"] == 0 and o["identical_text"] == 1.0
    assert o["identical_text_by_round"] == {"0": 1.0, "1": 1.0}
    assert [x["batch"] for x in r["scaling"]["rows"]] == [1, 2, 4]
    assert [x["completion_tokens"] for x in r["scaling"]["rows"]] == [60, 120, 240]
    assert r["speedup"] == pytest.approx(r["sequential"]["seconds"] / r["engine"]["seconds"], rel=1e-3, abs=2e-6)  # JSON values are rounded to 6 decimals
    assert r["speedup"] > 0 and r["target"]["met"] == (r["speedup"] >= 4.0)
    assert r["engine"]["end_to_end_s"] >= r["engine"]["seconds"] and "x faster" in r["explanation"]
    # the slow sequential part is checkpointed and can be reused after an interrupted run
    ck = json.loads((tmp_path / "seq.sequential.json").read_text())
    assert ck["params"]["questions"] == 2 and len(ck["calls"]) == 8
    assert seqb.main(["--backend", "simulated", "--questions", "2", "--agents", "2", "--rounds", "2",
                      "--sizes", "1,2,4", "--quiet", "--reuse-sequential", "--out", str(out)]) == 0
    r2 = json.loads(out.read_text())
    assert r2["sequential"]["seconds"] == r["sequential"]["seconds"] and r2["sequential"]["date"] == ck["date"]
    assert r2["outputs"]["identical_text"] == 1.0


@pytest.mark.ray
def test_coordinator_overhead_script_json(ray_local, tmp_path):
    out = tmp_path / "coord.json"
    assert coord.main(["--agents", "2,3", "--questions", "3", "--warmup-questions", "1", "--repeats", "1",
                       "--settle-s", "0", "--quiet", "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    assert [s["agents"] for s in r["sizes"]] == [2, 3]
    for s in r["sizes"]:
        assert s["turns"] == s["expected_turns"] == 3 * s["agents"] * 2
        assert s["replica_requests"] == s["turns"] == s["backend_compute_calls"] and s["errors"] == 0
        assert s["wall_s"] > s["backend_busy_s"] >= 0 and s["wall_ms_per_turn"] > 0
        assert s["overhead_ms_per_turn"] == pytest.approx(1000 * (s["wall_s"] - s["backend_busy_s"]) / s["turns"],
                                                          abs=0.01)
        assert s["overhead_strict_ms_per_turn"] == pytest.approx(
            1000 * (s["wall_s"] - s["backend_compute_s"]) / s["turns"], abs=0.01)
        assert s["target_met"] == (s["overhead_ms_per_turn"] < 2.0)
    assert r["simulated"] and r["params"]["sim_latency_s"] == 0.0 and r["target"]["overhead_ms_per_turn_below"] == 2.0
