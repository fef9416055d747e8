"""The debate state machine: who speaks, who reads whom, when it ends, what it answers."""

import pytest

from engine.config import RunConfig
from engine.debate import Debate, build_topology, call_seed, question_key
from engine.records import CallRecord
from engine.tasks import Question
from topologies import ProbMAD, make_topology

Q = Question(qid="q1", task="numeric", text="What is 1+1?", gold="2")


def rec(round_, agent, answer, text=None):
    return CallRecord("q1", round_, agent, "first" if round_ == 0 else "debate", "m", [], text or f"a{agent}r{round_}",
                      answer, 10, 5, 0.1, "stop", None, 0, 0.7)


def run_round(d, answers):
    for t in d.plan():
        d.record(rec(d.round, t.agent, answers[t.agent]))


def test_mad_plan_reads_all_peers_of_previous_round():
    d = Debate(Q, make_topology("full", 4), n_agents=4, n_rounds=3, key=1)
    turns = d.plan()
    assert [t.kind for t in turns] == ["first"] * 4 and all(t.peers == [] for t in turns)
    run_round(d, ["2", "2", "3", None])
    assert d.advance() is True
    turns = d.plan()
    assert [t.peers for t in turns] == [[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]]
    assert d.peer_texts(turns[0]) == [(1, "a1r0"), (2, "a2r0"), (3, "a3r0")]
    run_round(d, ["2", "2", "2", "3"])
    assert d.advance() is True
    run_round(d, ["3", "3", "2", None])
    assert d.advance() is False and d.finished and d.plan() == []
    assert d.rounds_run == 3
    assert d.final_answer() == "3"  # the vote reads the LAST round only
    assert not d.correct()


def test_sparse_ring_reads_only_neighbours():
    cfg = RunConfig(protocol="sparse", agents=6, density=0.4, rounds=2, backend="simulated")
    d = Debate(Q, build_topology(cfg), 6, 2, key=0)
    run_round(d, ["2"] * 6)
    d.advance()
    peers = {t.agent: t.peers for t in d.plan()}
    assert all(len(p) == 2 for p in peers.values())
    assert peers[0] == [1, 5] and peers[3] == [2, 4]


def test_agent_hearing_nobody_self_checks():
    d = Debate(Q, ProbMAD(3, 0.0), 3, 2, key=5)
    run_round(d, ["2", "2", "2"])
    d.advance()
    assert [t.kind for t in d.plan()] == ["self_check"] * 3


def test_cannot_advance_an_incomplete_round_or_record_out_of_round():
    d = Debate(Q, make_topology("full", 2), 2, 2, key=0)
    d.record(rec(0, 0, "2"))
    with pytest.raises(ValueError, match="not complete"):
        d.advance()
    with pytest.raises(ValueError, match="round 1"):
        d.record(rec(1, 1, "2"))


def test_consensus_and_invalid_answers():
    d = Debate(Q, make_topology("full", 4), 4, 1, key=0)
    run_round(d, ["2", "2", None, "5"])
    assert d.consensus(0) == 0.5
    assert d.final_answer() == "2" and d.correct()
    d2 = Debate(Q, make_topology("full", 2), 2, 1, key=0)
    run_round(d2, [None, None])
    assert d2.final_answer() is None and not d2.correct()  # unparseable is never right


def test_cot_and_sc_shapes():
    assert (RunConfig(protocol="cot", agents=5).n_agents, RunConfig(protocol="cot").n_rounds) == (1, 1)
    sc = RunConfig(protocol="sc", agents=5, rounds=4)
    assert (sc.n_agents, sc.n_rounds) == (5, 1)


def test_seeds_are_stable_and_distinct():
    assert question_key(0, "a") == question_key(0, "a") != question_key(1, "a")
    seeds = {call_seed(s, k, r) for s in range(3) for k in range(3) for r in range(3)}
    assert len(seeds) == 27
