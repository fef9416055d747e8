"""Audit the grader on stored real replies: which agent replies it reads no answer from.

    .venv/bin/python scripts/grading_audit.py OUT [--all] [--stored]

For every run under ``OUT`` (a run directory or a sweep folder) every agent call's reply is read
again with the current grader (:func:`engine.grading.extract_answer`; a reply cut off at the
token limit counts only a marked answer) and one JSON object is printed: per run, its task, the
number of replies, how many read as invalid (no answer), those replies in full, and the replies
whose answer now reads differently from the stored one (``--stored``: the answer the run stored
at the time). ``--all`` lists every reply with its answer, for reading the valid ones for
misreads. Writes nothing; a person still judges each listed reply.
"""

from __future__ import annotations

import argparse
import json
import sys

from engine.dataset_routing import load_questions
from engine.grading import extract_answer
from engine.results import find_run_dirs, read_table, run_options


def _options(config: dict) -> dict[str, tuple[str, ...]]:
    """The option texts per question id from the run's dataset file (empty when it cannot be read)."""
    try:
        questions = load_questions(
            config["dataset"],
            config.get("task"),
            config.get("limit"),
            int(config.get("seed", 0) or 0),
            offset=int(config.get("offset", 0) or 0),
        )
    except (KeyError, OSError, ValueError):
        return {}
    return {q.qid: tuple(q.choices) for q in questions if q.choices}


def audit_run(run_dir, show_all: bool = False, stored: bool = False) -> list[dict]:
    """One summary per run in ``run_dir`` (see the module docstring)."""
    runs = read_table(run_dir, "runs").to_pylist()
    calls = read_table(run_dir, "calls").to_pylist()
    questions = read_table(run_dir, "questions").to_pylist()
    out = []
    for run in runs:
        config = run_options(run["config"])
        task = config.get("task") or next((q["task"] for q in questions if q["run_id"] == run["run_id"]), "numeric")
        options = _options(config) if task == "choice" else {}
        texts = {q["question_id"]: q.get("question") for q in questions if q["run_id"] == run["run_id"]}
        gold = {q["question_id"]: q["gold"] for q in questions if q["run_id"] == run["run_id"]}
        replies = []
        for c in calls:
            if c["run_id"] != run["run_id"] or c["agent_id"] is None or c["agent_id"] < 0 or c.get("side"):
                continue
            if c["error"] is not None:
                continue
            truncated = c["finish_reason"] == "length"
            answer = extract_answer(
                c["text"],
                task,
                truncated=truncated,
                choices=options.get(c["question_id"], ()),
                question=texts.get(c["question_id"]),
            )
            replies.append(
                {
                    "question_id": c["question_id"],
                    "round": c["round"],
                    "agent_id": c["agent_id"],
                    "truncated": truncated,
                    "gold": gold.get(c["question_id"]),
                    "answer": answer,
                    "stored": c["answer"],
                    "text": c["text"],
                }
            )
        summary: dict = {
            "run_dir": str(run_dir),
            "run_id": run["run_id"],
            "task": task,
            "replies": len(replies),
            "invalid": sum(r["answer"] is None for r in replies),
            "invalid_replies": [r for r in replies if r["answer"] is None],
        }
        if stored:
            changed = [r for r in replies if r["answer"] != r["stored"]]
            summary["changed_from_stored"] = len(changed)
            summary["changed_replies"] = changed
        if show_all:
            summary["all_replies"] = replies
        out.append(summary)
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the audit of every run under OUT as JSON."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", help="a run directory or a folder of them")
    p.add_argument("--all", action="store_true", help="list every reply with its answer")
    p.add_argument("--stored", action="store_true", help="list replies whose answer differs from the stored one")
    a = p.parse_args(argv)
    dirs = find_run_dirs(a.out)
    if not dirs:
        print(f"grading_audit: no run directory under {a.out}", file=sys.stderr)
        return 2
    result = [s for d in dirs for s in audit_run(d, a.all, a.stored)]
    json.dump(result, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
