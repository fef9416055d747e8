"""``app.transcript`` views and ``debate show`` on simulated-model run folders (made in-process,
no Ray) and on hand-built folders written before columns existed."""

from __future__ import annotations

import json

import pytest

from app.cli import main
from app.show import footer
from app.transcript import (
    AgentInfo,
    DebateView,
    RoundView,
    Turn,
    changed,
    debate_views,
    disagrees,
    is_right,
    is_wrong,
    strong_model,
)
from engine.extract import answers_equal
from engine.results import ParquetSink, ResultsError, load, write_part
from tests.support.result_dirs import config, full, simulated_run, write_run


@pytest.fixture(scope="module")
def group_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("group")
    simulated_run(out, n_questions=4, protocol="group", agents=4, rounds=4, groups="2+2", stage_rounds=2)
    return out


@pytest.fixture(scope="module")
def mad_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("mad")
    simulated_run(out, n_questions=6, protocol="mad", agents=3, rounds=3, models="big*1,small*2")
    return out


@pytest.fixture
def old_dir(tmp_path):
    """Two hand-built runs written with only token columns per call (no round, kind, text, question)."""
    write_run(
        ParquetSink(tmp_path / "a"),
        "mad-3",
        config("mad", 3, 2),
        [
            ("q0", True, [1.0, 1.0], False, 1, 0, full(3, 2, 10, 5)),
            ("q1", False, [0.5, 1.0], False, 2, 0, full(3, 2, 7, 4)),
        ],
    )
    write_run(
        ParquetSink(tmp_path / "b"),
        "sparse-3",
        config("sparse", 3, 2),
        [("q0", True, [1.0, 1.0], False, 1, 0, full(3, 2, 1, 1))],
    )
    return tmp_path


def test_group_debate_view_matches_the_stored_rows(group_dir):
    r = load(group_dir)
    views = debate_views(r)
    assert [v.question_id for v in views] == r.questions.question_id.tolist()
    for v, q in zip(views, r.questions.to_dict("records")):
        assert v.question and v.question == q["question"] and v.gold == q["gold"] and v.protocol == "group"
        assert [rv.round for rv in v.rounds] == list(range(4))
        assert [rv.vote for rv in v.rounds] == list(q["answer_by_round"])
        assert [rv.vote_correct for rv in v.rounds] == list(q["correct_by_round"])
        assert v.final_answer == q["final_answer"] and v.correct == q["correct"]
        calls = r.calls[r.calls.question_id == v.question_id]
        assert sum(len(rv.turns) + len(rv.summaries) for rv in v.rounds) == len(calls)
        assert v.tokens == {"prompt": calls.prompt_tokens.sum(), "completion": calls.completion_tokens.sum()}
        group_of = {a.agent_id: a.group for a in v.agents}
        assert sorted(group_of.values()) == [0, 0, 1, 1]
        for rv in v.rounds:
            assert [t.agent_id for t in rv.turns] == [0, 1, 2, 3]
            for t in rv.turns:
                assert t.correct == answers_equal(t.answer, v.gold, "numeric") and t.correct is not None
                if t.kind == "gd_inter":  # reads the summaries (its graphs row), not calls.peers
                    assert sorted(t.read) == [-2, -1] and len(t.read) < 3
                elif t.kind == "gd_intra":
                    assert [group_of[s] for s in t.read] == [t.group]
            for s in rv.summaries:
                assert s.summary and s.node == -1 - s.group and s.answer is None
                assert sorted(s.read) == sorted(a for a, g in group_of.items() if g == s.group)
        assert any(rv.summaries for rv in v.rounds)
        assert v.lacks == []  # a folder written now stores everything
        assert json.loads(json.dumps(v.to_dict()))["rounds"][1]["turns"][0]["agent_id"] == 0


def test_changed_agents_are_those_whose_answer_differs_from_their_last(group_dir):
    for v in debate_views(load(group_dir)):
        last: dict[int, str | None] = {}
        for rv in v.rounds:
            expected = [t.agent_id for t in rv.turns if t.agent_id in last and last[t.agent_id] != t.answer]
            assert rv.changed == expected
            last.update({t.agent_id: t.answer for t in rv.turns})


def test_strong_agents_are_those_of_the_first_listed_model(mad_dir, group_dir):
    (v, *_) = debate_views(load(mad_dir))
    assert v.agents == [
        AgentInfo(0, "simulated:big", None, True),
        AgentInfo(1, "simulated:small", None, False),
        AgentInfo(2, "simulated:small", None, False),
    ]
    assert v.options["models"] == "big*1,small*2" and "model" not in v.options
    assert not any(a.strong for a in debate_views(load(group_dir))[0].agents)  # one model
    assert strong_model('["m1", "m2"]') == "m1" and strong_model(" a * 2, b") == "a" and strong_model(None) is None


def test_selections_keep_exactly_the_questions_they_name(mad_dir):
    r = load(mad_dir)
    views = debate_views(r)
    graded = dict(zip(r.questions.question_id, r.questions.correct))
    assert 0 < sum(graded.values()) < len(graded)  # both kinds present
    assert [v.question_id for v in debate_views(r, only="wrong")] == [q for q, c in graded.items() if not c]
    assert [v.question_id for v in debate_views(r, only="right")] == [q for q, c in graded.items() if c]
    last = {v.question_id: set(v.final_answers().values()) for v in views}
    assert [v.question_id for v in debate_views(r, only="disagree")] == [q for q, a in last.items() if len(a) > 1]
    with pytest.raises(ResultsError, match="unknown selection 'odd'"):
        debate_views(r, only="odd")


def _turn(agent, rnd, answer, side=False):
    return Turn(
        agent, agent, rnd, "m", None, "x", side, False, [], None, [], answer, None, "t", 1, 1, 0.0, None, "stop"
    )


def _view(rounds, correct=None):
    views = [
        RoundView(r, turns=[_turn(a, r, ans) for a, ans in enumerate(answers) if ans != "silent"])
        for r, answers in enumerate(rounds)
    ]
    last: dict[int, str | None] = {}
    for rv in views:  # as the builder computes it
        rv.changed = [t.agent_id for t in rv.turns if t.agent_id in last and last[t.agent_id] != t.answer]
        last.update({t.agent_id: t.answer for t in rv.turns})
    agents = [AgentInfo(a, "m", None, False) for a in range(len(rounds[0]))]
    return DebateView(
        "r",
        "q",
        "mad",
        "numeric",
        "?",
        None,
        "1",
        "1",
        correct,
        False,
        False,
        False,
        len(agents),
        agents,
        views,
        {},
        {},
        [],
    )


def test_the_predicates_on_hand_made_debates():
    agreed_after_change = _view([["1", "2"], ["1", "1"]], correct=True)
    assert changed(agreed_after_change) and not disagrees(agreed_after_change) and is_right(agreed_after_change)
    steady_split = _view([["1", "2"], ["1", "2"]], correct=False)
    assert disagrees(steady_split) and not changed(steady_split) and is_wrong(steady_split)
    # a silent agent keeps its answer: the last round alone would look unanimous
    silent = _view([["1", "2", "1"], ["1", "silent", "1"]])
    assert disagrees(silent) and not changed(silent)
    # a side call (a review) has no answer: neither a change nor a disagreement
    side = _view([["1", "1"], ["1", "1"]])
    side.rounds[1].turns.append(_turn(0, 1, None, side=True))
    assert not disagrees(side) and not changed(side)
    ungraded = _view([["1"]])
    assert not is_wrong(ungraded) and not is_right(ungraded)


def test_an_old_folder_shows_what_it_lacks(old_dir):
    views = debate_views(load(old_dir))
    assert [(v.run_id, v.question_id) for v in views] == [("mad-3", "q0"), ("mad-3", "q1"), ("sparse-3", "q0")]
    v = views[1]
    assert v.question is None and v.correct is False and [rv.round for rv in v.rounds] == [0, 1]
    assert [[t.agent_id for t in rv.turns] for rv in v.rounds] == [[0, 1, 2], [0, 1, 2]]
    assert all(t.correct is None and t.answer is None for rv in v.rounds for t in rv.turns)
    assert v.tokens == {"prompt": 42, "completion": 24}
    assert "question text not stored (folder written before it existed)" in v.lacks
    assert any(line.startswith("call rounds not stored") for line in v.lacks)
    assert v.to_dict()["question"] is None


def test_unknown_or_ambiguous_ids_name_the_valid_ones(old_dir):
    r = load(old_dir)
    with pytest.raises(ResultsError, match=r"no run 'nope' here; runs: mad-3, sparse-3"):
        debate_views(r, run="nope")
    with pytest.raises(ResultsError, match=r"no question 'q9' here; questions: q0, q1"):
        debate_views(r, run="mad", question="q9")  # a unique prefix picks the run
    assert [v.run_id for v in debate_views(r, run="spa")] == ["sparse-3"]
    with pytest.raises(ResultsError, match="ambiguous"):
        debate_views(r, question="q")


def test_a_rescored_answer_replaces_the_stored_reading(mad_dir, tmp_path):
    import shutil

    out = tmp_path / "run"
    shutil.copytree(mad_dir, out)
    r = load(out)
    c = r.calls.iloc[0]
    row = {
        "run_id": c.run_id,
        "question_id": c.question_id,
        "attempt": c.attempt,
        "round": 0,
        "agent_id": int(c.agent_id),
    }
    (out / "answers").mkdir()
    reread = {**row, "answer": "12345", "previous_answer": c.answer, "graded": None}
    write_part(out / "answers" / "part-x-00000.parquet", "answers", [reread])
    (v,) = debate_views(load(out), question=c.question_id)
    assert v.rounds[0].turns[int(c.agent_id)].answer == "12345"


def _show(capsys, monkeypatch, *args, columns="120"):
    monkeypatch.setenv("COLUMNS", columns)
    code = main(["show", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_show_prints_the_debate_with_its_summaries(group_dir, capsys, monkeypatch):
    r = load(group_dir)
    q = r.questions.iloc[0]
    code, out, _ = _show(capsys, monkeypatch, group_dir, "--question", q.question_id)
    assert code == 0
    assert " ".join(q.question.split()[:6]) in " ".join(out.split())
    assert f"gold: {q.gold}" in out and f"final answer: {q.final_answer}" in out
    for r_ in range(4):
        assert f"round {r_}" in out
    assert "✓" in out and "✗" in out
    assert "S0 (group 0)" in out and "S1 (group 1)" in out
    assert "S1,S0" in out or "S0,S1" in out  # an inter-group turn reads both summaries
    rows = [line for line in out.splitlines() if line[:2] in ("0 ", "1 ", "2 ", "3 ")]
    assert len(rows) >= 4 * 4  # each agent in each round
    assert "prompts not stored" not in out
    assert "SIMULATED model" in out  # simulated data is labelled as such
    assert max(len(line) for line in out.splitlines()) <= 120


def test_show_lists_the_selection_then_the_first_limit_debates(mad_dir, capsys, monkeypatch):
    wrong = [v.question_id for v in debate_views(load(mad_dir), only="wrong")]
    assert len(wrong) >= 2
    code, out, _ = _show(capsys, monkeypatch, mad_dir, "--wrong", "--limit", "1")
    assert code == 0 and f"{len(wrong)} questions (wrong)" in out
    assert all(q in out for q in wrong)
    assert out.count("final answer:") == 1 and "big ★" in out
    code, out, _ = _show(capsys, monkeypatch, mad_dir, "--limit", "0")
    assert "final answer:" not in out and "6 questions" in out


def test_show_width_is_100_off_a_terminal_without_columns(mad_dir, capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert main(["show", str(mad_dir), "--full"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) == 100


def test_show_an_old_folder_says_what_it_lacks(old_dir, capsys, monkeypatch):
    code, out, _ = _show(capsys, monkeypatch, old_dir, "--run", "mad-3", "--question", "q1")
    assert code == 0 and "question text not stored (folder written before it existed)" in out
    assert "replies not stored" in out and "final answer: -" in out


def test_show_a_bad_run_id_is_one_line_and_exit_2(old_dir, capsys, monkeypatch):
    code, out, err = _show(capsys, monkeypatch, old_dir, "--run", "nope")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [f"debate: error: {old_dir}: no run 'nope' here; runs: mad-3, sparse-3"]
    code, _, err = _show(capsys, monkeypatch, old_dir / "missing")
    assert code == 2 and err.strip() == f"debate: error: {old_dir / 'missing'}: no such directory"


def test_side_calls_come_after_the_turns_and_weights_are_kept(tmp_path, capsys, monkeypatch):
    import numpy as np

    simulated_run(tmp_path / "prd", n_questions=1, protocol="prd", agents=3, rounds=2)
    (v,) = debate_views(load(tmp_path / "prd"))
    turns = v.rounds[1].turns
    assert [(t.agent_id, t.side) for t in turns[:3]] == [(0, False), (1, False), (2, False)]
    reviews = turns[3:]
    assert reviews and all(t.side and t.answer is None and t.kind == "prd_review" for t in reviews)
    assert all(len(t.read) == 1 and t.read != [t.agent_id] for t in reviews)  # one judged peer each
    assert [sorted(t.read) for t in turns[:3]] == [[1, 2], [0, 2], [0, 1]]  # the revision reads its reviewers

    out = tmp_path / "cortex"
    simulated_run(out, n_questions=1, protocol="cortex", agents=4, rounds=3, similarity=lambda t: np.eye(len(t)))
    r = load(out)
    (v,) = debate_views(r)
    graph_rows = {(g["round"], g["dst"]): g for g in r.graphs.to_dict("records")}
    debated = [t for rv in v.rounds for t in rv.turns if t.read]
    for t in debated:  # the stored row: kept edges, then the pruned ones (flagged), with weights
        g = graph_rows[(t.round, t.agent_id)]
        assert t.read + t.pruned == list(g["srcs"])
        assert t.weights + (t.pruned_weights or []) == list(g["weights"])
        cut = g["pruned"]
        assert t.pruned == ([s for s, x in zip(g["srcs"], cut) if x] if cut is not None else [])
    assert any(t.pruned for t in debated)  # this run prunes: the check above saw pruned edges
    code, text, _ = _show(capsys, monkeypatch, out)
    t = debated[0]
    assert code == 0 and f"{t.read[0]}:{t.weights[0]:.2f}" in text


def test_every_turn_carries_the_messages_it_was_sent(group_dir):
    r = load(group_dir)
    views = debate_views(r)
    key = ("question_id", "round", "agent_id", "kind", "group")
    calls = {tuple(c[k] for k in key): c for c in r.calls.fillna({"group": -9}).to_dict("records")}
    n = 0
    for v in views:
        for rv in v.rounds:
            for t in rv.turns + rv.summaries:
                call = calls[(v.question_id, t.round, t.agent_id, t.kind, -9 if t.group is None else t.group)]
                assert t.prompt == r.messages(call) and t.prompt[-1]["role"] == "user"
                n += 1
    assert n == len(r.calls)
    assert not any("prompts not stored" in line for v in views for line in v.lacks)


def test_the_footer_says_an_early_stop_with_the_rounds_run_and_asked():
    stopped = _view([["1", "2"], ["1", "1"]], correct=True)
    stopped.stopped_early, stopped.options = True, {"rounds": 3}
    stopped.tokens = {"prompt": 10, "completion": 5}
    assert "stopped early after 2 of 3 rounds" in footer(stopped).plain
    stopped.options = {}  # no stored --rounds: the count alone
    assert "stopped early after 2 rounds" in footer(stopped).plain
    stopped.options = {"rounds": 2}  # never "2 of 2": no rounds were left to skip
    assert "stopped early after 2 rounds" in footer(stopped).plain
    full = _view([["1", "2"], ["1", "1"], ["1", "1"]], correct=True)
    full.options, full.tokens = {"rounds": 3}, {"prompt": 10, "completion": 5}
    assert "stopped" not in footer(full).plain  # ran every round asked: no stop said
