"""debate rescore: re-grading stored replies with the current grader (app/rescore.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.rescore import regrade_question, rescore, rescore_run
from engine.config import RunConfig
from engine.results import ParquetSink, read_table

GRADE = (
    "final_answer",
    "answer_by_round",
    "correct",
    "correct_by_round",
    "tie",
    "n_invalid",
    "consensus",
    "effective_rounds",
)


def _call_rows(log) -> list[dict]:
    return [{**r.to_row(), "attempt": "a1"} for r in log.records]


@pytest.mark.parametrize(
    "protocol, extra",
    [
        ("mad", {}),
        ("sparse", {"density": 2 / 3}),
        ("cortex", {}),
        ("probmad", {"density": 0.5}),
        ("sc", {}),
        ("cot", {}),
        ("group", {"groups": "2+2", "stage_rounds": 2}),
        ("s2mad", {"groups": "2+2", "stage_rounds": 2, "similarity": "answer"}),
        ("mad", {"tie_break": "first"}),
        ("reconcile", {}),
        ("reconcile", {"reconcile_vote": "majority"}),
        ("prd", {}),
        ("cortex", {"cortex_weights": "peer"}),  # side calls (reviews, scores) carry no answer and no vote
    ],
)
def test_rescore_rebuilds_every_protocols_votes_from_its_calls(protocol, extra):
    """Re-reading the calls of a run the current grader made gives back its question rows
    exactly: the votes per round (agents a protocol left silent keep their answer), the final
    answer, ties and grades."""
    from actors.local_run import run_local
    from backends.simulated_backend import SimulatedBackend
    from engine.tasks import arithmetic_questions

    cfg = RunConfig.flat(protocol=protocol, agents=4, rounds=4, backend="simulated", limit=6, **extra).validate()
    out = run_local(
        cfg,
        arithmetic_questions(6, seed=3),
        SimulatedBackend(),
        similarity=lambda texts: [[1.0 if i == j else 0.5 for j in range(len(texts))] for i in range(len(texts))],
    )
    config = json.loads(cfg.to_json())
    silent = 0
    for row, log in out:
        row = {**row, "attempt": "a1"}
        new, read = regrade_question(row, _call_rows(log), config)
        assert {k: new[k] for k in GRADE} == {k: row[k] for k in GRADE}, row["question_id"]
        assert all(x["answer"] == x["previous_answer"] for x in read)
        silent += sum(
            1
            for r in range(row["rounds_run"])
            for a in range(4)
            if not any(c.round == r and c.agent_id == a for c in log.records)
        )
    if protocol == "s2mad":
        assert silent > 0  # the carry-forward of silent agents was exercised


def _full(table: str, row: dict) -> dict:
    """A row with every column of its table (null where the test does not care)."""
    from engine.results import OPTIONAL, SCHEMAS

    return {**{k: None for k in SCHEMAS[table].names if k not in OPTIONAL.get(table, ())}, **row}


def _write_run(out: Path, config: dict, questions: list[dict], calls: list[dict]) -> None:
    sink = ParquetSink(out, name="run")
    sink.write("calls", [_full("calls", c) for c in calls])
    sink.write("questions", [_full("questions", q) for q in questions])
    sink.flush()
    sink.write_run(
        {
            "run_id": "r1",
            "protocol": "mad",
            "config": json.dumps(config),
            "status": "finished",
            "n_questions": len(questions),
            "accuracy": sum(q["correct"] for q in questions) / len(questions),
        }
    )


def _old_rules_run(out: Path) -> None:
    """A 3-agent, 2-round MAD run on one question, graded by an older grader that read the peer's
    quoted answer (15) instead of the agent's own final answer (8), and one that needs none."""
    config = {"protocol": "mad", "agents": 3, "rounds": 2, "seed": 0, "tie_break": "random", "dataset": "arithmetic"}
    texts = {
        (0, 0): "8 + 0 = 8. The answer is 8.",
        (0, 1): "I think it is 15.",
        (0, 2): "The answer is 8.",
        (1, 0): "Agent 2 argued the answer is 15, but I get 8.\nFinal answer: 8",
        (1, 1): "Agent 1 and agent 3 said 8.\nFinal answer: 8",
        (1, 2): "Final answer: 8",
    }
    old = {(0, 0): "8", (0, 1): "15", (0, 2): "8", (1, 0): "15", (1, 1): "8", (1, 2): "8"}
    old[(1, 1)] = "3"  # the old grader read "agent 3"
    calls = [
        {
            "run_id": "r1",
            "question_id": "q1",
            "round": r,
            "agent_id": a,
            "kind": "debate" if r else "first",
            "text": t,
            "answer": old[(r, a)],
            "finish_reason": "stop",
            "error": None,
            "attempt": "a1",
            "prompt_tokens": 10,
            "completion_tokens": 5,
        }
        for (r, a), t in texts.items()
    ]
    calls.append({**calls[0], "question_id": "q2", "answer": "8", "text": "The answer is 8.", "round": 0})
    q1 = {
        "run_id": "r1",
        "question_id": "q1",
        "protocol": "mad",
        "task": "numeric",
        "n_agents": 3,
        "rounds_run": 2,
        "effective_rounds": 2,
        "final_answer": "15",
        "gold": "8",
        "correct": False,
        "answer_by_round": ["8", "15"],
        "correct_by_round": [True, False],
        "tie": True,
        "errored": False,
        "n_invalid": 0,
        "n_errors": 0,
        "n_calls": 6,
        "prompt_tokens": 60,
        "completion_tokens": 30,
        "consensus": [2 / 3, 1 / 3],
        "attempt": "a1",
    }
    q2 = {
        **q1,
        "question_id": "q2",
        "n_agents": 1,
        "rounds_run": 1,
        "final_answer": "8",
        "correct": True,
        "answer_by_round": ["8"],
        "correct_by_round": [True],
        "tie": False,
        "consensus": [1.0],
        "n_calls": 1,
        "effective_rounds": 1,
        "prompt_tokens": 10,
        "completion_tokens": 5,
    }
    _write_run(out, config, [q1, q2], calls)


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*.parquet"))}


def test_rescore_of_an_old_run_reports_and_writes_the_changes(tmp_path, capsys):
    from app.cli import main

    out = tmp_path / "run"
    _old_rules_run(out)
    calls_before = {k: v for k, v in _files(out).items() if k.startswith("calls")}
    assert main(["rescore", str(out), "--dry-run"]) == 0
    assert "would re-grade" in capsys.readouterr().out and len(_files(out)) == 3  # dry run: nothing written
    assert main(["rescore", str(out)]) == 0
    text = capsys.readouterr().out
    assert "re-graded: 7 replies re-read, 2 answers changed, 1 final answers changed, 1 verdicts changed" in text
    assert "accuracy 0.500 -> 1.000" in text
    assert {k: v for k, v in _files(out).items() if k.startswith("calls")} == calls_before  # model outputs untouched
    q = {r["question_id"]: r for r in read_table(out, "questions").to_pylist()}
    assert len(q) == 2 and len(read_table(out, "questions")) == 2  # the new row replaces the old one
    assert q["q1"]["final_answer"] == "8" and q["q1"]["correct"] and q["q1"]["correct_by_round"] == [True, True]
    assert q["q1"]["tie"] is False and q["q1"]["graded"] is not None
    answers = {
        (a["round"], a["agent_id"]): (a["previous_answer"], a["answer"])
        for a in read_table(out, "answers").to_pylist()
        if a["question_id"] == "q1"
    }
    assert answers[(1, 0)] == ("15", "8") and answers[(1, 1)] == ("3", "8")
    assert read_table(out, "runs").to_pylist()[0]["accuracy"] == 1.0
    from app.report import build_report

    rep = build_report(out, tmp_path / "rep", figures=False)
    assert rep.rows[0]["accuracy"] == 1.0  # the report reads the re-graded rows
    # a second rescore finds nothing to change and writes nothing
    before = _files(out)
    assert main(["rescore", str(out)]) == 0
    assert "unchanged" in capsys.readouterr().out and _files(out) == before


def test_rescore_keeps_the_first_seen_rule_for_runs_made_before_tie_break(tmp_path):
    row = {
        "question_id": "q",
        "task": "numeric",
        "n_agents": 2,
        "rounds_run": 1,
        "gold": "1",
        "errored": False,
        "attempt": None,
        "final_answer": "2",
    }
    calls = [
        {"round": 0, "agent_id": a, "text": f"The answer is {v}.", "answer": v, "finish_reason": "stop", "error": None}
        for a, v in ((0, "2"), (1, "1"))
    ]
    old = [regrade_question({**row, "question_id": f"q{i}"}, calls, {"seed": 0})[0] for i in range(20)]
    assert all(new["final_answer"] == "2" and new["tie"] for new in old)  # no tie_break key: an old run, first seen
    finals = {
        regrade_question({**row, "question_id": f"q{i}"}, calls, {"seed": 0, "tie_break": "random"})[0]["final_answer"]
        for i in range(20)
    }
    assert finals == {"1", "2"}


def test_rescore_reads_a_cut_off_reply_as_no_answer(tmp_path):
    row = {
        "question_id": "q",
        "task": "numeric",
        "n_agents": 1,
        "rounds_run": 1,
        "gold": "12",
        "errored": False,
        "attempt": None,
        "final_answer": "12",
    }
    calls = [
        {
            "round": 0,
            "agent_id": 0,
            "text": "First 3 * 4 = 12, then we add",
            "answer": "12",
            "finish_reason": "length",
            "error": None,
        }
    ]
    new, read = regrade_question(row, calls, {})
    assert read[0]["answer"] is None and new["final_answer"] is None and new["n_invalid"] == 1 and not new["correct"]


def test_rescore_walks_a_sweep_folder(tmp_path):
    for name in ("cell-a", "cell-b"):
        _old_rules_run(tmp_path / "sweep" / name)
    results = rescore(tmp_path / "sweep")
    assert [r.run_dir.name for r in results] == ["cell-a", "cell-b"] and all(r.written for r in results)


@pytest.mark.ray
def test_rescore_of_an_engine_run_changes_nothing(ray_local, tmp_path):
    """A run the engine just made, through Ray: re-grading it with the same grader changes
    nothing and writes nothing."""
    from actors.driver import run

    res = run(
        RunConfig.flat(
            protocol="mad", backend="simulated", limit=8, agents=3, rounds=2, progress=False, out=str(tmp_path / "mad")
        )
    )
    before = _files(res.out_dir)
    [r] = rescore(res.out_dir)
    assert r.replies == 8 * 3 * 2 and (r.answers_changed, r.finals_changed, r.verdicts_changed) == (0, 0, 0)
    assert not r.written and _files(res.out_dir) == before


def test_rescore_leaves_a_question_whose_debate_could_not_go_on_as_it_was():
    """A question that ended before its first round (the embedder gone: ServiceLost) has no calls
    to re-read; its re-graded columns are those the run wrote, so rescore reports no change."""
    from app.rescore import _changed
    from engine.debate import DebateLog
    from engine.protocols.base import Outcome
    from engine.tasks import Question

    row = DebateLog(Question("q", "numeric", "1+1?", "2")).question_row(
        Outcome(None, [], info={"error": "ServiceLost: the embedding actor is gone"}), 3, tie_key=5
    )
    new, read = regrade_question({**row, "attempt": "a"}, [], {"tie_break": "random"})
    assert read == [] and new["answer_by_round"] == [None] and not _changed(row, new)


def test_rescore_of_a_choice_run_whose_config_is_unreadable_uses_four_letters(tmp_path):
    # a runs row whose config is not JSON rescoring as config {}: no dataset to count choices
    # from; that is a note and the 4-letter default, not a TypeError from load_questions(None)
    row = {
        "question_id": "q",
        "task": "choice",
        "n_agents": 1,
        "rounds_run": 1,
        "gold": "B",
        "errored": False,
        "attempt": None,
        "final_answer": "B",
        "correct": True,
    }
    calls = [
        {
            "question_id": "q",
            "attempt": None,
            "round": 0,
            "agent_id": 0,
            "text": "The answer is (B).",
            "answer": "B",
            "finish_reason": "stop",
            "error": None,
        }
    ]
    out = rescore_run(tmp_path, {"run_id": "r", "config": "{not json"}, [row], calls, write=False)
    assert out.replies == 1 and out.finals_changed == 0 and out.verdicts_changed == 0
    assert any("not JSON" in n for n in out.notes)
    assert any("names no dataset" in n for n in out.notes)
