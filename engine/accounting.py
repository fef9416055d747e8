"""Token accounting: run totals from question rows.

Every LLM call's prompt and completion tokens are those the serving model's tokenizer counted
(chat template applied); a question's cost is the plain sum over its calls — agent turns and
summary calls alike (:meth:`engine.debate.DebateLog.question_row`) — and a run's the sum over
its questions. Nothing is estimated here.
"""

from __future__ import annotations

from typing import Any, Iterable


def consensus_by_round(rows: list[dict[str, Any]]) -> list[float]:
    """Mean consensus proportion per round over questions. A question that stopped early keeps
    its last round's consensus in later rounds (its debate ended in that state)."""
    longest = max((len(r.get("consensus") or []) for r in rows), default=0)
    if not longest:
        return []
    out = []
    for t in range(longest):
        vals = [(r["consensus"][t] if t < len(r["consensus"]) else r["consensus"][-1]) for r in rows if r.get("consensus")]
        out.append(sum(vals) / len(vals))
    return out


def summarize(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Run totals from question rows: accuracy counts unparseable finals and errored questions as wrong."""
    rows = list(rows)
    n = len(rows)
    return {
        "n_questions": n,
        "accuracy": (sum(bool(r["correct"]) for r in rows) / n) if n else 0.0,
        "prompt_tokens": sum(r["prompt_tokens"] for r in rows),
        "completion_tokens": sum(r["completion_tokens"] for r in rows),
        "n_calls": sum(r["n_calls"] for r in rows),
        "n_summary_calls": sum(r.get("n_summary_calls", 0) for r in rows),
        "n_skipped": sum(r.get("n_skipped", 0) for r in rows),
        "n_invalid": sum(r["n_invalid"] for r in rows),
        "n_errors": sum(r["n_errors"] for r in rows),
        "n_errored_questions": sum(bool(r.get("errored") or r["n_errors"]) for r in rows),
        "effective_rounds": (sum(r.get("effective_rounds", 0) for r in rows) / n) if n else 0.0,
        "consensus_by_round": consensus_by_round(rows),
    }
