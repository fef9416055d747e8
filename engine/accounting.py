"""Token accounting: per-question and per-run totals from the call records.

Every LLM call's prompt and completion tokens are those the serving model's tokenizer counted
(chat template applied); a question's cost is the plain sum over its calls, a run's the sum over
its questions. Nothing is estimated here.
"""

from __future__ import annotations

from typing import Any, Iterable

from engine.debate import Debate
from engine.extract import answers_equal


def question_row(debate: Debate, run_id: str, protocol: str, backend: str, simulated: bool, wall_s: float) -> dict[str, Any]:
    recs = list(debate.records.values())
    final = debate.final_answer()
    q = debate.question
    return {
        "run_id": run_id,
        "question_id": q.qid,
        "protocol": protocol,
        "task": q.task,
        "n_agents": debate.n_agents,
        "rounds_run": debate.rounds_run,
        "final_answer": final,
        "gold": q.gold,
        "correct": answers_equal(final, q.gold, q.task),
        "n_calls": len(recs),
        "n_invalid": sum(r.answer is None and r.error is None for r in recs),
        "n_errors": sum(r.error is not None for r in recs),
        "prompt_tokens": sum(r.prompt_tokens for r in recs),
        "completion_tokens": sum(r.completion_tokens for r in recs),
        "consensus": [debate.consensus(r) for r in range(debate.rounds_run)],
        "wall_s": wall_s,
        "backend": backend,
        "simulated": simulated,
    }


def summarize(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Run totals from question rows: accuracy counts unparseable finals as wrong."""
    rows = list(rows)
    n = len(rows)
    return {
        "n_questions": n,
        "accuracy": (sum(bool(r["correct"]) for r in rows) / n) if n else 0.0,
        "prompt_tokens": sum(r["prompt_tokens"] for r in rows),
        "completion_tokens": sum(r["completion_tokens"] for r in rows),
        "n_calls": sum(r["n_calls"] for r in rows),
        "n_invalid": sum(r["n_invalid"] for r in rows),
        "n_errors": sum(r["n_errors"] for r in rows),
    }
