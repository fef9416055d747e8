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

from engine.metrics import CACHED_SHARE, cached_share, metrics

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


def summarize(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The engine's one run summary, from question rows: the printed table, the runs row (and so
    the sweep status) and the report all take their totals from here. Each metric with a summary
    key is aggregated as it declares (:func:`engine.metrics.metrics`), a count's ``rate`` (the
    share ``accuracy``, which counts unparseable finals and errored questions as wrong) after
    them. A question counts as errored when it has ``errored`` or (older rows) ``n_errors``. A
    column missing from older rows counts 0, except in a ``known_sum`` (cached prompt tokens),
    which leaves such rows out and is None when no row knows it; ``cached_prompt_share`` is
    :func:`engine.metrics.cached_share` of those sums."""
    rows = list(rows)
    n = len(rows)
    out: dict[str, Any] = {"n_questions": n}
    for m in metrics():
        key = m.summary
        if key is None:  # not aggregated (a Metric has summary and agg both or neither)
            continue
        if m.agg == "sum":
            out[key] = sum(r.get(m.name) or 0 for r in rows)
        elif m.agg == "count":
            out[key] = sum(bool(r.get(m.name)) for r in rows)
        elif m.agg == "mean":
            out[key] = sum(r.get(m.name) or 0 for r in rows) / n if n else 0.0
        elif m.agg == "by_round":
            out[key] = per_round_mean(rows, m.name)
        elif m.agg == "known_sum":
            known = [r[m.name] for r in rows if r.get(m.name) is not None]
            out[key] = sum(known) if known else None
    for m in metrics():
        if m.rate is not None and m.summary is not None:  # after every aggregate, as always listed
            out[m.rate] = out[m.summary] / n if n else 0.0
    out["n_errored_questions"] = sum(bool(r.get("errored") or r.get("n_errors")) for r in rows)
    out[CACHED_SHARE.key] = cached_share(out["cached_prompt_tokens"], out["computed_prompt_tokens"])
    return out
