"""Token accounting: run totals from question rows, and the grouping of runs over seeds.

Every LLM call's prompt and completion tokens are those the serving model's tokenizer counted
(chat template applied); a question's cost is the plain sum over its calls — agent turns and
summary calls alike (:meth:`engine.debate.DebateLog.question_row`) — and a run's the sum over
its questions. Nothing is estimated here.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def mean_sd(values) -> tuple[float, float]:
    """Mean and sample standard deviation (n - 1) of ``values`` (sd nan for fewer than 2)."""
    xs = [float(v) for v in values]
    if not xs:
        return math.nan, math.nan
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else math.nan)


def seed_key(settings: Mapping[str, Any], ignore: Iterable[str] = ()) -> str:
    """What the runs of one seed group share, as one string: their settings but ``seed`` and the
    keys in ``ignore`` (the report: the options that do not change results)."""
    skip = {"seed", *ignore}
    return json.dumps({k: v for k, v in settings.items() if k not in skip}, sort_keys=True, default=str)


def seed_groups(
    items: Iterable[T], settings: Callable[[T], Mapping[str, Any]], ignore: Iterable[str] = ()
) -> list[list[T]]:
    """The engine's one seed grouping (sweep status and report): ``items`` (runs or sweep cells)
    grouped by :func:`seed_key` of ``settings(item)``, groups and members in first-seen order,
    keeping only groups of two or more different seeds (``settings(item).get("seed")``)."""
    ignore = tuple(ignore)
    groups: dict[str, list[T]] = {}
    for item in items:
        groups.setdefault(seed_key(settings(item), ignore), []).append(item)
    return [
        members
        for members in groups.values()
        if len({json.dumps(settings(m).get("seed"), default=str) for m in members}) >= 2
    ]


def carried_mean(lists: Iterable[Sequence[float] | None], length: int | None = None) -> list[float]:
    """Round-by-round mean of per-question lists. A question that stopped early keeps its last
    round's value in later rounds (its debate ended in that state), up to the longest list or
    ``length`` if larger; empty lists are left out. The engine's one carry-forward rule (runs
    table, printed summary, sweep status and report)."""
    values = [[float(v) for v in x] for x in lists if x is not None and len(x)]
    if not values:
        return []
    longest = max(max(len(v) for v in values), length or 0)
    return [sum(v[t] if t < len(v) else v[-1] for v in values) / len(values) for t in range(longest)]


def per_round_mean(rows: list[dict[str, Any]], key: str) -> list[float]:
    """Mean of a per-round list column (``consensus``, ``correct_by_round``) over questions, round
    by round (:func:`carried_mean`). Rows without the column (older runs) are left out."""
    return carried_mean(r.get(key) for r in rows)


def consensus_by_round(rows: list[dict[str, Any]]) -> list[float]:
    """Mean consensus proportion per round over questions (see :func:`per_round_mean`)."""
    return per_round_mean(rows, "consensus")


def accuracy_by_round(rows: list[dict[str, Any]]) -> list[float]:
    """Share of questions whose vote after each round is correct (see :func:`per_round_mean`);
    the last entry equals the run's accuracy."""
    return per_round_mean(rows, "correct_by_round")


def summarize(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The engine's one run summary, from question rows: the printed table, the runs row (and so
    the sweep status) and the report all take their totals from here. Accuracy counts
    unparseable finals and errored questions as wrong; a column missing from older rows counts 0."""
    rows = list(rows)
    n = len(rows)

    def total(key: str) -> int:
        return sum(r.get(key) or 0 for r in rows)

    correct = sum(bool(r.get("correct")) for r in rows)
    return {
        "n_questions": n,
        "n_correct": correct,
        "accuracy": correct / n if n else 0.0,
        "prompt_tokens": total("prompt_tokens"),
        "completion_tokens": total("completion_tokens"),
        "n_calls": total("n_calls"),
        "n_summary_calls": total("n_summary_calls"),
        "n_skipped": total("n_skipped"),
        "n_invalid": total("n_invalid"),
        "n_errors": total("n_errors"),
        "n_errored_questions": sum(bool(r.get("errored") or r.get("n_errors")) for r in rows),
        "effective_rounds": total("effective_rounds") / n if n else 0.0,
        "consensus_by_round": consensus_by_round(rows),
        "accuracy_by_round": accuracy_by_round(rows),
        "n_ties": sum(bool(r.get("tie")) for r in rows),
    }
