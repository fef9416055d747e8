"""``debate rescore OUT``: re-grade stored replies with the current grader.

Researchers re-grade old runs when the grader improves. For every run under ``OUT`` (a run
directory or a sweep folder, any depth) and every question row in force, this re-reads the
answer of each agent call of the attempt that made the row (``calls.text``, with the call's
``finish_reason``: a reply cut off at the token limit counts only a marked answer), rebuilds the
votes the protocol took and grades them again against the stored gold:

* an agent's answer after round *r* is the answer of its latest call at or before *r* (agents a
  protocol left silent, as S2-MAD and CortexDebate do, keep their answer); summary calls
  (``agent_id`` -1) and side calls (``side``: a review or score by the agent, e.g. PRD's reviews)
  do not vote and are not re-read; a call that ended in an error has no answer;
* ``answer_by_round`` is the vote after each round, ``final_answer`` the vote over the agents'
  last answers (every protocol here decides so: the majority, or RECONCILE's confidence-weighted
  vote with the confidences read again from the replies, ``ProtocolSpec.revote``), ties broken
  as the run was configured
  (``--tie-break``; runs made before that option existed used the first-seen rule, and keep it);
* ``correct``/``correct_by_round``, ``tie``, ``n_invalid``, ``consensus``, ``effective_rounds``
  follow; an errored question stays errored (counted wrong). These are the metrics declared
  ``graded`` in :data:`engine.metrics.METRICS`.

What the debate *did* is not re-run: the protocol's decisions during the run (S2-MAD's early stop,
who spoke) were taken on the answers read at the time. Model outputs are never touched: for a run
with changes, new question rows (same columns, ``graded`` = now) are written as a new Parquet part
that supersedes the old rows (:func:`engine.results.latest_grades`; every reader uses it), the
re-read answer of every call goes to the ``answers`` table, and the run's row (accuracy, accuracy
and consensus by round, effective rounds) is rewritten. A run whose grades do not change gets
nothing written, so a second rescore is a no-op.

A ``choice`` question's letter range comes from its dataset file when that file can still be read
(the run's ``dataset``); otherwise four letters are assumed, and a note says so.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import logging
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.report import ReportError, find_run_dirs
from engine.accounting import summarize
from engine.dataset_routing import load_questions
from engine.debate import graded_columns, question_key
from engine.extract import extract_answer, majority_vote
from engine.metrics import GRADED, metric_columns, runs_columns
from engine.protocols import SPECS
from engine.protocols.base import SUMMARIZER
from engine.results import check_rows, read_table, write_part
from engine.safe_text import inert, print_error

log = logging.getLogger(__name__)


@dataclass
class RunRescore:
    """What re-grading one run changed."""

    run_dir: Path
    run_id: str
    replies: int = 0  # agent calls re-read
    answers_changed: int = 0  # agent calls whose answer reads differently now
    finals_changed: int = 0  # questions whose final answer changed
    verdicts_changed: int = 0  # questions whose correctness changed
    accuracy_before: float | None = None
    accuracy_after: float | None = None
    changed: bool = False  # anything graded reads differently now (a dry run writes nothing all the same)
    written: bool = False
    notes: list[str] = field(default_factory=list)


def _tie_key(config: dict[str, Any], qid: str) -> int | None:
    # Runs made before --tie-break existed broke ties by first sight (agent order): keep that.
    if config.get("tie_break", "first") == "first":
        return None
    return question_key(int(config.get("seed", 0) or 0), qid)


def _revote(config: dict[str, Any]):
    """The run's protocol's own vote rule (``ProtocolSpec.revote``), or None: the majority vote."""
    spec = SPECS.get(config.get("protocol", ""))
    return spec.revote if spec is not None else None


def _option_texts(config: dict[str, Any], notes: list[str]) -> dict[str, tuple[str, ...]]:
    """The option texts of each choice question, by question id, from the run's dataset file when
    it can be read (a reply that answers with an option's text reads as its letter)."""
    dataset = config.get("dataset")
    if dataset is None:  # a config that could not be read ({}): nothing to count the choices from
        notes.append("the run's config names no dataset; choice questions re-read with 4 letters (A-D)")
        return {}
    try:
        questions = load_questions(
            dataset,
            config.get("task"),
            config.get("limit"),
            int(config.get("seed", 0) or 0),
            offset=int(config.get("offset", 0) or 0),
        )
    except (OSError, ValueError) as exc:  # the file moved or no longer reads: 4 letters, said once
        notes.append(f"dataset {dataset!r} cannot be read ({exc}); choice questions re-read with 4 letters (A-D)")
        return {}
    return {q.qid: tuple(q.choices) for q in questions if q.choices}


def regrade_question(
    row: dict[str, Any], calls: list[dict[str, Any]], config: dict[str, Any], choices: tuple[str, ...] = ()
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The question row re-graded from its calls, and each agent call's new answer
    (``{round, agent_id, answer, previous_answer}``); ``choices``: a choice question's option
    texts (none: four letters, A-D). Pure: no files."""
    task, qid = row["task"], row["question_id"]
    n_agents = int(row["n_agents"] or 0)
    rounds = int(row["rounds_run"] or 0)
    agent_calls = sorted(
        (c for c in calls if c["agent_id"] is not None and c["agent_id"] != SUMMARIZER and not c.get("side")),
        key=lambda c: (c["round"], c["agent_id"]),
    )
    read: list[dict[str, Any]] = []
    latest: list[str | None] = [None] * n_agents
    latest_text: list[str | None] = [None] * n_agents
    answers_by_round: list[list[str | None]] = []
    texts_by_round: list[list[str | None]] = []
    i = 0
    for r in range(rounds):
        while i < len(agent_calls) and agent_calls[i]["round"] <= r:
            c = agent_calls[i]
            answer = (
                None
                if c["error"] is not None
                else extract_answer(
                    c["text"],
                    task,
                    marked_only=c["finish_reason"] == "length",
                    choices=choices,
                    question=row.get("question"),
                )
            )
            read.append(
                {"round": c["round"], "agent_id": c["agent_id"], "answer": answer, "previous_answer": c["answer"]}
            )
            if 0 <= c["agent_id"] < n_agents:
                latest[c["agent_id"]] = answer
                latest_text[c["agent_id"]] = c["text"] if c["error"] is None else None
            i += 1
        answers_by_round.append(list(latest))
        texts_by_round.append(list(latest_text))
    key = _tie_key(config, qid)
    revote = _revote(config)
    votes = revote(config, answers_by_round, texts_by_round, key) if revote and answers_by_round else None
    if votes is not None:  # the protocol's own vote (RECONCILE's confidence-weighted one)
        final = votes.by_round[-1]
    else:  # every other protocol's final rule
        final = majority_vote(answers_by_round[-1], key) if answers_by_round else None
    graded = graded_columns(
        answers_by_round,
        final,
        row["gold"],
        task,
        key,
        bool(row.get("errored")),
        votes.by_round if votes else None,
        votes.tie if votes else None,
    )
    graded["n_invalid"] = sum(x["answer"] is None and c["error"] is None for x, c in zip(read, agent_calls))
    # every metric declared graded=True (engine/metrics.py) is recomputed, and nothing else
    return {**row, **metric_columns(graded, GRADED)}, read


def _changed(old: dict[str, Any], new: dict[str, Any]) -> bool:
    def norm(v):
        return [round(x, 12) if isinstance(x, float) else x for x in v] if isinstance(v, list) else v

    return any(norm(old.get(k)) != norm(new.get(k)) for k in GRADED)  # engine/metrics.py: graded=True


def rescore_run(
    run_dir: Path,
    run_row: dict[str, Any],
    questions: list[dict[str, Any]],
    calls: list[dict[str, Any]],
    write: bool = True,
) -> RunRescore:
    """Re-grade one run (``questions``: its rows in force; ``calls``: its call rows)."""
    run_id = run_row["run_id"]
    out = RunRescore(run_dir, run_id)
    try:
        config = json.loads(run_row.get("config") or "{}")
    except json.JSONDecodeError as exc:
        out.notes.append(f"the runs row's config is not JSON ({exc}): ties re-broken by the first-seen rule")
        config = {}
    options: dict[str, tuple[str, ...]] = {}
    if any(q["task"] == "choice" for q in questions):
        options = _option_texts(config, out.notes)
    by_attempt: dict[tuple[str, str | None], list[dict[str, Any]]] = {}
    for c in calls:
        by_attempt.setdefault((c["question_id"], c["attempt"]), []).append(c)
    graded = dt.datetime.now(dt.UTC).replace(microsecond=0)
    new_rows: list[dict[str, Any]] = []
    answer_rows: list[dict[str, Any]] = []
    for q in questions:
        new, read = regrade_question(
            q, by_attempt.get((q["question_id"], q["attempt"]), []), config, options.get(q["question_id"], ())
        )
        out.replies += len(read)
        out.answers_changed += sum(x["answer"] != x["previous_answer"] for x in read)
        out.finals_changed += new["final_answer"] != q["final_answer"]
        out.verdicts_changed += bool(new["correct"]) != bool(q["correct"])
        out.changed = out.changed or _changed(q, new) or any(x["answer"] != x["previous_answer"] for x in read)
        new_rows.append({**new, "graded": graded})
        answer_rows += [
            {"run_id": run_id, "question_id": q["question_id"], "attempt": q["attempt"], **x, "graded": graded}
            for x in read
        ]
    n = len(questions)
    out.accuracy_before = sum(bool(q["correct"]) for q in questions) / n if n else None
    out.accuracy_after = sum(bool(q["correct"]) for q in new_rows) / n if n else None
    if not (write and out.changed):
        return out
    part = f"part-rescore-{graded:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}.parquet"
    for table, rows in (("questions", new_rows), ("answers", answer_rows)):
        check_rows(table, rows)
        (run_dir / table).mkdir(parents=True, exist_ok=True)
        write_part(run_dir / table / part, table, rows)
    if run_row.get("status") is not None:  # a run with a runs row: its totals follow the new grades
        s = summarize(new_rows)
        run = {**run_row, **runs_columns(s, graded=True)}
        check_rows("runs", [run])
        write_part(run_dir / "runs" / f"{run_id}.parquet", "runs", [run])
    out.written = True
    log.info(
        "rescored %s/%s: %d answers, %d final answers, %d verdicts changed",
        run_dir,
        run_id,
        out.answers_changed,
        out.finals_changed,
        out.verdicts_changed,
    )
    return out


def _with_latest_answers(calls: list[dict[str, Any]], answers: list[dict[str, Any]]) -> None:
    """Set each call's ``answer`` to its latest re-graded reading (``answers``, the rows in force),
    if any: what the last rescore read is what the next one compares with."""
    latest = {(a["run_id"], a["question_id"], a["attempt"], a["round"], a["agent_id"]): a["answer"] for a in answers}
    for c in calls:
        key = (c["run_id"], c["question_id"], c["attempt"], c["round"], c["agent_id"])
        if key in latest:
            c["answer"] = latest[key]


def rescore(
    path: str | Path, write: bool = True, skip_bad_parts: bool = False, notes: list[str] | None = None
) -> list[RunRescore]:
    """Re-grade every run at or below ``path`` (see the module docstring).

    A part file that cannot be read raises :class:`ReportError` naming it, before anything is
    written to its folder. With ``skip_bad_parts`` a run directory holding one is left as it is
    (re-grading from part of a run's rows would write grades from incomplete debates): lines in
    ``notes`` name the part and the folder, and the other folders are re-graded."""
    results: list[RunRescore] = []
    for run_dir in find_run_dirs(path):
        bad: list[str] = []
        read = functools.partial(read_table, run_dir, skip_bad_parts=skip_bad_parts, notes=bad)
        runs = {r["run_id"]: r for r in read("runs").to_pylist()}
        questions = read("questions").to_pylist()
        calls = read(
            "calls",
            [
                "run_id",
                "question_id",
                "attempt",
                "round",
                "agent_id",
                "text",
                "answer",
                "finish_reason",
                "error",
                "side",
            ],
        ).to_pylist()
        answers = read("answers").to_pylist()
        if bad:
            bad.append(f"{run_dir}: left as it is: it holds unreadable part(s)")
            if notes is None:
                for line in bad:
                    log.warning("%s", line)
            else:
                notes += bad
            continue
        _with_latest_answers(calls, answers)
        run_ids = sorted(set(runs) | {q["run_id"] for q in questions})
        for run_id in run_ids:
            qs = [q for q in questions if q["run_id"] == run_id]
            if not qs:
                continue
            cs = [c for c in calls if c["run_id"] == run_id]
            results.append(rescore_run(run_dir, runs.get(run_id, {"run_id": run_id}), qs, cs, write=write))
    return results


def rescore_command(path: str, dry_run: bool = False, skip_bad_parts: bool = False) -> int:
    """``debate rescore OUT [--dry-run] [--skip-bad-parts]``: one line per run and a total; exit 0.
    Lines that quote the folder (run ids, notes) are printed inert (:func:`engine.safe_text.inert`)."""
    notes: list[str] = []
    try:
        results = rescore(path, write=not dry_run, skip_bad_parts=skip_bad_parts, notes=notes)
    except (ReportError, OSError) as exc:
        return print_error(exc)
    for note in notes:
        print(f"note: {inert(note, lines=False)}", file=sys.stderr)
    if not results:
        print(inert(f"{path}: no question rows to re-grade"))
        return 0
    for r in results:
        acc = (
            f"accuracy {r.accuracy_before:.3f} -> {r.accuracy_after:.3f}"
            if r.accuracy_before is not None
            else "no questions"
        )
        what = "re-graded" if r.written else "would re-grade" if r.changed else "unchanged"
        print(
            inert(
                f"{r.run_dir} {r.run_id}: {what}: {r.replies} replies re-read, {r.answers_changed} answers changed, "
                f"{r.finals_changed} final answers changed, {r.verdicts_changed} verdicts changed ({acc})"
            )
        )
        for note in r.notes:
            print(inert(f"  note: {note}"))
    total = sum(r.verdicts_changed for r in results)
    print(
        f"{len(results)} run(s): {sum(r.answers_changed for r in results)} answers, "
        f"{sum(r.finals_changed for r in results)} final answers and {total} verdicts changed"
        + ("" if not dry_run else " (dry run: nothing written)")
    )
    return 0
