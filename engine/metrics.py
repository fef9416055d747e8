"""The per-question metrics, each declared once (:class:`Metric`, :data:`METRICS`).

A metric is a column of the ``questions`` table that a question's debate produces
(:meth:`engine.debate.DebateLog.question_row`, :func:`engine.debate.graded_columns`). Its
declaration says its Arrow type (:data:`engine.results.QUESTIONS_SCHEMA` takes the column from
here), how the run summary aggregates it (:func:`engine.accounting.summarize`), whether
``debate rescore`` recomputes it from the stored replies (:mod:`engine.rescore`) and whether
``debate report`` reads it (:mod:`engine.report`). This module imports only pyarrow, so the
results, accounting, rescore and report modules can all use it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

AGGREGATES = ("sum", "count", "mean", "by_round")


@dataclass(frozen=True)
class Metric:
    """One question-level metric.

    name:    the ``questions`` column.
    type:    its Arrow type.
    help:    what it holds (one line).
    summary: the run summary key it aggregates into (:func:`engine.accounting.summarize`), or None.
    agg:     how: ``sum`` over questions, ``count`` of questions where it is true, ``mean`` over
             questions, ``by_round`` the round-by-round mean of a per-round list (a question that
             stopped early carries its last value, :func:`engine.accounting.carried_mean`).
    graded:  recomputed by ``debate rescore`` from the stored replies (a change is a re-grade).
    report:  read by ``debate report`` from the question rows.
    label:   the row of its aggregate in the summary ``debate run`` prints, or None (not shown).
    """

    name: str
    type: pa.DataType
    help: str
    summary: str | None = None
    agg: str | None = None
    graded: bool = False
    report: bool = True
    label: str | None = None

    def __post_init__(self) -> None:
        if (self.summary is None) != (self.agg is None):
            raise TypeError(f"metric {self.name}: give both summary and agg, or neither")
        if self.label is not None and self.summary is None:
            raise TypeError(f"metric {self.name}: a label shows a summary aggregate; give summary and agg")
        if self.agg is not None and self.agg not in AGGREGATES:
            raise TypeError(f"metric {self.name}: agg must be one of {', '.join(AGGREGATES)}")

    @property
    def field(self) -> tuple[str, pa.DataType]:
        """The (name, type) pair of its schema column."""
        return self.name, self.type


# In questions-table column order.
METRICS: tuple[Metric, ...] = (
    Metric(
        "effective_rounds",
        pa.int32(),
        "rounds until all agents first agree on one valid answer (all rounds if never)",
        summary="effective_rounds",
        agg="mean",
        graded=True,
        label="effective rounds (mean)",
    ),
    Metric("stopped_early", pa.bool_(), "the protocol ended the question before its last round"),
    Metric("final_answer", pa.string(), "the final vote", graded=True, report=False),
    Metric("correct", pa.bool_(), "the final answer is graded correct", summary="n_correct", agg="count", graded=True),
    Metric(
        "answer_by_round",
        pa.list_(pa.string()),
        "the vote after each round (the last: final_answer)",
        graded=True,
        report=False,
    ),
    Metric(
        "correct_by_round",
        pa.list_(pa.bool_()),
        "each round's vote graded; the last equals correct",
        summary="accuracy_by_round",
        agg="by_round",
        graded=True,
        label="accuracy by round",
    ),
    Metric(
        "tie",
        pa.bool_(),
        "the final vote had a tie on top (broken by --tie-break)",
        summary="n_ties",
        agg="count",
        graded=True,
        label="tied votes (broken by --tie-break)",
    ),
    # n_errored_questions also counts rows of older runs that have n_errors but no errored column
    Metric("errored", pa.bool_(), "a call failed after the engine's retries: counted wrong, see engine/debate.py"),
    Metric("n_calls", pa.int32(), "LLM calls", summary="n_calls", agg="sum", label="calls"),
    Metric(
        "n_summary_calls", pa.int32(), "summariser calls", summary="n_summary_calls", agg="sum", label="summary calls"
    ),
    Metric(
        "n_skipped",
        pa.int32(),
        "agent turns the protocol skipped",
        summary="n_skipped",
        agg="sum",
        label="skipped turns",
    ),
    Metric(
        "n_invalid",
        pa.int32(),
        "replies with no answer read from them",
        summary="n_invalid",
        agg="sum",
        graded=True,
        report=False,
        label="invalid answers",
    ),
    Metric(
        "n_errors", pa.int32(), "calls that failed (error rows)", summary="n_errors", agg="sum", label="error calls"
    ),
    Metric(
        "prompt_tokens",
        pa.int64(),
        "prompt tokens of all its calls",
        summary="prompt_tokens",
        agg="sum",
        label="prompt tokens",
    ),
    Metric(
        "completion_tokens",
        pa.int64(),
        "completion tokens of all its calls",
        summary="completion_tokens",
        agg="sum",
        label="completion tokens",
    ),
    Metric(
        "consensus",
        pa.list_(pa.float64()),
        "per round, the share of agents whose answer equals the majority answer",
        summary="consensus_by_round",
        agg="by_round",
        graded=True,
        label="consensus by round",
    ),
)
METRIC = {m.name: m for m in METRICS}  # name -> its Metric

# the columns `debate rescore` recomputes
GRADED = tuple(m.name for m in METRICS if m.graded)


def format_aggregate(metric: Metric, value) -> str:
    """A summary aggregate as the printed summary shows it: a count, a mean with two decimals,
    or a per-round list of them ("-" when empty)."""
    if metric.agg == "by_round":
        return " ".join(f"{v:.2f}" for v in value or []) or "-"
    if metric.agg == "mean":
        return f"{value:.2f}"
    return str(value)


__all__ = ["AGGREGATES", "GRADED", "METRIC", "METRICS", "Metric", "format_aggregate"]
