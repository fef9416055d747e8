"""The engine benchmarks in scripts/: bench_vs_peers (engine vs offline, sequential and thread-pool
peers) and bench_coordinator_overhead.

Pure helpers are tested without Ray on the SIMULATED backend; one small smoke run per script
(marked ``ray``) checks the JSON it writes: counts, same work on both sides, sane ratios.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from actors.local_run import run_local
from backends.simulated_backend import SimulatedBackend
from engine.config import RunConfig
from engine.records import GenRequest
from engine.tasks import arithmetic_questions
from tests.support.needs import need_vllm

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


peers = _load("bench_vs_peers")
coord = _load("bench_coordinator_overhead")


def _sim_cfg(**kw) -> RunConfig:
    base = dict(
        protocol="mad", agents=3, rounds=2, limit=2, backend="simulated", temperature=0.0, max_tokens=64, progress=False
    )
    base.update(kw)
    return RunConfig.flat(**base)


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


# ----------------------------------------------------------------- engine vs peers, no Ray
def test_recorded_requests_are_the_engines_exact_requests():
    cfg = _sim_cfg(agents=3, rounds=3, limit=2)
    qs = arithmetic_questions(2, seed=0)
    sent, rows = _recorded_run(cfg, qs)
    items = peers.recorded_requests(cfg, qs, rows)
    assert len(items) == len(sent) == 18
    by_seed = {it["seed"]: it for it in items}
    for req in sent:  # the very same messages (incl. peers' texts and the agent's own transcript)
        assert by_seed[req.seed]["messages"] == req.messages
    rec = {r["seed"]: r for r in rows}
    for it in items:  # each generates exactly what the engine's call generated
        assert (
            it["tokens"] == rec[it["seed"]]["completion_tokens"]
            and it["prompt_tokens"] == rec[it["seed"]]["prompt_tokens"]
        )
    # the protocol's own order: question by question, round by round, agent by agent
    keys = [(it["question"], it["round"], it["agent"]) for it in items]
    assert keys == sorted(keys, key=lambda k: ([q.qid for q in qs].index(k[0]), k[1], k[2]))
    r2 = [it for it in items if it["round"] == 2][0]["messages"]
    assert [m["role"] for m in r2] == ["user", "assistant", "user", "assistant", "user"]


def test_replay_backend_rejects_duplicate_seeds():
    row = {"seed": 7, "text": "a", "prompt_tokens": 1, "completion_tokens": 1, "finish_reason": "stop", "error": None}
    with pytest.raises(ValueError, match="seed 7"):
        peers.ReplayBackend([row, dict(row)])


class _FakeGen:
    """Stands in for the vLLM engine: each call takes a little while; records concurrency and order."""

    def __init__(self):
        self.active = 0
        self.peak = 0
        self.started: list[tuple] = []
        self.peak_by_round: dict[int, int] = {}

    async def __call__(self, it):
        import asyncio

        self.active += 1
        self.peak = max(self.peak, self.active)
        self.peak_by_round[it["round"]] = max(self.peak_by_round.get(it["round"], 0), self.active)
        self.started.append((it["question"], it["round"], it["agent"]))
        await asyncio.sleep(0.01)
        self.active -= 1
        return it["prompt_tokens"], it["tokens"]


def _items(nq=3, rounds=2, agents=2):
    return [
        {
            "question": f"q{q}",
            "round": r,
            "agent": a,
            "messages": [],
            "seed": 100 * q + 10 * r + a,
            "tokens": 5,
            "prompt_tokens": 50,
        }
        for q in range(nq)
        for r in range(rounds)
        for a in range(agents)
    ]


def test_the_three_peer_schedules():
    import asyncio

    items = _items()
    g = _FakeGen()
    assert asyncio.run(peers.sequential(g, items)) == [(50, 5)] * 12
    assert g.peak == 1 and g.started == [
        (i["question"], i["round"], i["agent"]) for i in items
    ]  # one at a time, in order
    g = _FakeGen()
    asyncio.run(peers.offline(g, items))
    assert g.peak_by_round == {0: 6, 1: 6}  # a whole round (every question) at once
    assert [r for _, r, _ in g.started] == [0] * 6 + [1] * 6  # rounds in order
    g = _FakeGen()
    out = asyncio.run(peers.threadpool(g, items))
    assert out == [(50, 5)] * 12 and g.peak == 3  # one thread per question, each one call at a time
    for q in ("q0", "q1", "q2"):  # inside a question: the protocol's order
        mine = [k for k in g.started if k[0] == q]
        assert mine == [k for k in ((i["question"], i["round"], i["agent"]) for i in items) if k[0] == q]


# ----------------------------------------------------------------- (c) coordinator overhead, no Ray
def test_per_turn_overhead_formula():
    r = coord.per_turn(wall_s=1.0, busy_s=0.4, turns=200)
    assert r["wall_ms_per_turn"] == pytest.approx(5.0)
    assert r["backend_ms_per_turn"] == pytest.approx(2.0)
    assert r["overhead_ms_per_turn"] == pytest.approx(3.0)
    with pytest.raises(ValueError):
        coord.per_turn(1.0, 0.0, 0)


def test_backend_compute_counts_every_turn():
    cfg = RunConfig.flat(
        protocol="sparse", topology="ring", agents=5, rounds=2, limit=3, backend="simulated", progress=False
    )
    qs = arithmetic_questions(3, seed=0)
    seconds, calls = coord.backend_compute_s(cfg, qs)
    assert calls == 3 * 5 * 2 and 0 < seconds < 5


# ----------------------------------------------------------------- smoke runs on Ray (SIMULATED)
@pytest.mark.ray
@pytest.mark.slow
def test_bench_vs_peers_script_json_on_vllm(tmp_path):
    """A small full run of the script on the real vLLM engine (Ray engine + in-process peers)."""
    need_vllm()
    out = tmp_path / "peers.json"
    assert (
        peers.main(
            [
                "--questions",
                "2",
                "--agents",
                "2",
                "--rounds",
                "2",
                "--max-tokens",
                "12",
                "--quiet",
                "--repeat",
                "2",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    r = json.loads(out.read_text())
    assert r["workload"]["calls"] == 8 and r["backend"] == "vllm" and r["identical_work"] is True
    reps = r["repetitions"]
    assert r["repeat"] == len(reps) == 2 and "sequential" in reps[0] and "sequential" not in reps[1]
    for rep in reps:  # each repetition's peers did that repetition's engine work, call by call
        assert rep["calls"] == 8
        for name in ("offline", "threadpool", "sequential"):
            if name in rep:
                p = rep[name]
                assert p["prompt_tokens"] == rep["prompt_tokens"] and p["completion_tokens"] == rep["completion_tokens"]
                assert p["identical_prompts"] and p["identical_tokens"]
        assert rep["efficiency_vs_offline"] == pytest.approx(rep["offline"]["seconds"] / rep["engine_s"], abs=2e-3)
        assert rep["speedup_vs_threadpool"] == pytest.approx(rep["threadpool"]["seconds"] / rep["engine_s"], abs=2e-3)
    # the headline ratios are the medians of the repetitions' own ratios (side by side, never across)
    for key in ("efficiency_vs_offline", "speedup_vs_threadpool"):
        assert r[key] == pytest.approx(sum(rep[key] for rep in reps) / 2, abs=2e-3)
    assert r["speedup_vs_sequential"] == pytest.approx(r["sequential_s"] / reps[0]["engine_s"], abs=2e-3)
    assert r["engine_s"] == pytest.approx(sum(rep["engine_s"] for rep in reps) / 2, abs=2e-3)
    assert r["targets_met"] == {k: r[k] >= v for k, v in peers.TARGETS.items()}
    assert r["engine_settings"][0]["dtype"] == r["peer_settings"]["dtype"]  # the same engine settings


@pytest.mark.ray
def test_coordinator_overhead_script_json(ray_local, tmp_path):
    out = tmp_path / "coord.json"
    assert (
        coord.main(
            [
                "--agents",
                "2,3",
                "--questions",
                "3",
                "--warmup-questions",
                "1",
                "--repeats",
                "1",
                "--settle-s",
                "0",
                "--quiet",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    r = json.loads(out.read_text())
    assert [s["agents"] for s in r["sizes"]] == [2, 3]
    for s in r["sizes"]:
        assert s["turns"] == s["expected_turns"] == 3 * s["agents"] * 2
        assert s["replica_requests"] == s["turns"] == s["backend_compute_calls"] and s["errors"] == 0
        assert s["wall_s"] > s["backend_busy_s"] >= 0 and s["wall_ms_per_turn"] > 0
        assert s["overhead_ms_per_turn"] == pytest.approx(
            1000 * (s["wall_s"] - s["backend_busy_s"]) / s["turns"], abs=0.01
        )
        assert s["overhead_strict_ms_per_turn"] == pytest.approx(
            1000 * (s["wall_s"] - s["backend_compute_s"]) / s["turns"], abs=0.01
        )
        assert s["target_met"] == (s["overhead_ms_per_turn"] < 2.0)
    assert r["simulated"] and r["params"]["sim_latency_s"] == 0.0 and r["target"]["overhead_ms_per_turn_below"] == 2.0


def test_profile_engine_cpu_counts_this_process():
    import os

    prof = _load("profile_engine_cpu")
    sum(i * i for i in range(200_000))  # burn a little CPU
    seen = prof.cpu_by_process()
    cpu, name = seen[os.getpid()]
    assert cpu > 0 and name.startswith("python")
