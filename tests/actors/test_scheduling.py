"""Which replica serves a call (actors/scheduling.py): under ``--prompt-layout shared`` every call of
one question's round goes to one replica of its model, the least loaded when the round starts;
under ``paper`` each agent keeps its own replica.

Pure rules first (no Ray); then real runs on Ray with 2 simulated replicas whose replies say which
process served them (a backend registered here: :class:`WhereBackend`).
"""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from actors.agent_actor import AgentSetup
from actors.scheduling import RoundRouter, least_loaded, routes_rounds
from backends.registry import register, unregister
from backends.simulated_backend import SimulatedBackend
from engine.config import AgentSpec, RunConfig
from engine.records import Turn


def test_least_loaded_takes_the_fewest_calls_then_the_preferred_then_the_first():
    assert least_loaded([3, 1, 2]) == 1
    assert least_loaded([2, 1, 1]) == 1
    assert least_loaded([2, 1, 1], prefer=2) == 2  # a tie: the question's previous replica
    assert least_loaded([2, 1, 1], prefer=0) == 1  # the previous one is busier: not it
    assert least_loaded([0], prefer=5) == 0


def test_a_round_goes_to_one_replica_chosen_when_it_starts():
    router = RoundRouter({"m": 2})
    # question a's round 0: three calls, all on the replica free when its first call went out
    assert [router.route("a", 0, "m") for _ in range(3)] == [0, 0, 0]
    assert router.in_flight == {"m": [3, 0]}
    assert [router.route("b", 0, "m") for _ in range(3)] == [1, 1, 1]  # b's round starts: 1 is free
    for _ in range(3):
        router.done("m", 0)
    router.route("b", 0, "m")  # b's round goes on where it started, whatever the load now
    assert router.in_flight == {"m": [0, 4]}
    assert router.route("a", 1, "m") == 0  # a's next round starts: replica 0 is the least loaded
    for _ in range(4):
        router.done("m", 1)
    assert router.route("b", 1, "m") == 1  # a tie (1 call each): b stays where its last round was
    router.forget("a")
    assert router.route("a", 1, "m") == 0  # a forgotten question starts afresh (0 and 1 tie again)


def test_each_model_has_its_own_replicas_and_load():
    router = RoundRouter({"big": 1, "small": 3})
    assert router.route("q", 0, "big") == 0 and router.route("q", 0, "small") == 0
    assert router.route("r", 0, "small") == 1 and router.route("r", 0, "big") == 0
    assert router.in_flight == {"big": [2], "small": [1, 1, 0]}
    with pytest.raises(ValueError, match="every model needs a replica"):
        RoundRouter({"m": 0})


def test_only_the_shared_layout_routes_rounds():
    cfg = RunConfig()
    assert not routes_rounds(cfg)  # paper, or a config from before --prompt-layout
    assert routes_rounds(_shared(RunConfig()))
    assert routes_rounds(_shared(RunConfig.flat(protocol="group")))
    for same in ("cot", "sc", "reconcile"):  # they ignore the option: served as under paper, like their run id
        assert not routes_rounds(_shared(RunConfig.flat(protocol=same))), same


def test_an_agent_calls_the_replica_its_turn_names_else_its_own():
    spec = AgentSpec("m", None, 0.0, 1.0, 16, 0)
    setup = AgentSetup(0, spec, None, True, "own", replicas=["r0", "r1"])  # type: ignore[arg-type]
    turn = Turn(question=None, call=None, round=0, key=0)
    assert setup.serving(turn) == "own"
    turn.replica = 1
    assert setup.serving(turn) == "r1"


def _shared(cfg: RunConfig) -> RunConfig:
    """``cfg`` under ``--prompt-layout shared``."""
    return cfg.replace(prompt_layout="shared")


# --------------------------------------------------------------------------- on Ray

WHERE = "sim-where"
KV_TOKENS = 5000


class WhereBackend(SimulatedBackend):
    """The simulated model, each reply starting with the serving process's id ("pid123"), and a
    KV cache of :data:`KV_TOKENS` tokens in its settings (as vLLM reports its own)."""

    def __init__(self, model: str = "simulated", **options):
        super().__init__(model, **options)
        self.settings = {**self.settings, "kv_cache_tokens": KV_TOKENS}

    def generate(self, requests):
        out = super().generate(requests)
        for res in out:
            res.text = f"pid{os.getpid()} {res.text}"
        return out


@pytest.fixture
def where():
    from backends.registry import backend_spec

    sim = backend_spec("simulated")
    register(dataclasses.replace(sim, name=WHERE, factory=WhereBackend, summary="simulated, says its process"))
    yield
    unregister(WHERE)


def _served(out) -> list[dict]:
    from engine.results import read_table

    rows = read_table(out, "calls").to_pylist()
    return [{**r, "pid": r["text"].split()[0]} for r in rows]


def _run(tmp_path, name: str, shared: bool):
    from actors.driver import DebateRunner

    cfg = RunConfig.flat(
        protocol="mad",
        agents=4,
        rounds=3,
        limit=6,
        backend=WHERE,
        replicas=2,
        progress=False,
        max_concurrent_questions=5,
        out=str(tmp_path / name),
    )
    with DebateRunner() as runner:
        return runner.run(_shared(cfg) if shared else cfg)


@pytest.mark.ray
def test_shared_layout_sends_a_question_s_round_to_one_replica(ray_local, where, tmp_path):
    res = _run(tmp_path, "shared", shared=True)
    calls = _served(res.out_dir)
    assert len(calls) == 6 * 4 * 3 and all(c["error"] is None for c in calls)
    by_round: dict[tuple, set] = {}
    for c in calls:
        by_round.setdefault((c["question_id"], c["round"]), set()).add(c["pid"])
    assert all(len(pids) == 1 for pids in by_round.values()), by_round
    assert len({c["pid"] for c in calls}) == 2  # the questions' rounds spread over both replicas


@pytest.mark.ray
def test_paper_layout_keeps_each_agent_on_its_replica(ray_local, where, tmp_path):
    res = _run(tmp_path, "paper", shared=False)
    calls = _served(res.out_dir)
    pid_of: dict[int, set] = {}
    for c in calls:
        pid_of.setdefault(c["agent_id"], set()).add(c["pid"])
    assert all(len(p) == 1 for p in pid_of.values()), pid_of
    # agent j on replica j mod 2 (actors.layout.assign_replicas), as before
    assert pid_of[0] == pid_of[2] != pid_of[1] == pid_of[3]
    # the runs row: the replicas' KV cache, one question's estimate and the limit they give
    from engine.kv_budget import estimate_for
    from engine.plan import Planner
    from engine.results import read_table

    (row,) = read_table(res.out_dir, "runs").to_pylist()
    (engine,) = json.loads(row["engine"])
    cfg = json.loads(row["config"])
    kv = estimate_for(RunConfig.flat(**cfg), Planner().questions(RunConfig.flat(**cfg)))  # type: ignore[arg-type]
    assert kv is not None and engine["kv_cache_tokens"] == KV_TOKENS
    assert engine["kv_question_tokens"] == round(kv.tokens(4))
    # 2 replicas x 5,000 tokens hold fewer questions than --max-concurrent-questions 5
    assert engine["kv_questions"] == 2 * KV_TOKENS // engine["kv_question_tokens"] < 5
    assert engine["questions_in_flight"] == engine["kv_questions"]
