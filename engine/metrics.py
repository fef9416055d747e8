"""The per-question metrics, each declared and computed in one place (:class:`Metric`, :data:`METRICS`).

A metric is a column of the ``questions`` table that a question's debate produces. Its
declaration says its Arrow type (:func:`engine.results.questions_schema` takes the column from
here), how it is computed (``compute``: a function of the question's :class:`QuestionFacts`,
which :meth:`engine.debate.DebateLog.question_row` calls for every metric, :func:`metric_values`),
how the run summary aggregates it (:func:`engine.accounting.summarize`), which of those
aggregates the runs table stores (:data:`RUNS_COLUMNS`, :data:`engine.results.RUNS_SCHEMA`),
whether ``debate rescore`` recomputes it from the stored replies (:mod:`app.rescore`), whether
``debate report`` reads it (:mod:`app.report`) and which column of the report's summary
table shows its aggregate.

Adding a metric: a built-in one is one more :class:`Metric` in :data:`METRICS`, its ``compute``
beside it; a metric of one's own (a plug-in, a test) is one :class:`Metric` given to
:func:`register_metric` (undone by :func:`unregister_metric`), which puts its column after the
built-in ones (:func:`metrics`: every metric, in column order). :func:`metric_columns` fails on a
metric declared but not produced, or produced but not declared. A metric registered in this
process is computed where this process makes question rows (:func:`actors.local_run.run_local`);
a Ray run makes them in its coordinator actor, so ``debate run`` refuses one
(:func:`check_ray_metrics`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from engine.errors import UserError
from engine.protocols.base import SUMMARIZER

if TYPE_CHECKING:
    from engine.protocols.base import Outcome
    from engine.records import CallRecord, Message, Reads
    from engine.tasks import Question

AGGREGATES = ("sum", "count", "mean", "by_round", "known_sum")


@dataclass(frozen=True)
class RunsColumn:
    """A run aggregate of a metric that the runs table stores as a column.

    key:   the run summary key stored (the metric's ``summary`` or ``rate``); also the column name.
    type:  the column's Arrow type.
    order: its place among the runs table's aggregate columns, 0 first. Runs files written
           earlier fix the order: a new column takes the next number.
    """

    key: str
    type: pa.DataType
    order: int


@dataclass(frozen=True)
class ReportColumn:
    """The column of ``debate report``'s summary table (summary.csv / summary.json) that shows a
    metric's run aggregate as the run summary has it (a mean over no questions shows nan).

    name:  the column.
    after: the column it follows (the table's column order is fixed by the files written so far).
    """

    name: str
    after: str


@dataclass(frozen=True)
class QuestionFacts:
    """What a metric's ``compute`` reads: one question's finished debate, as
    :meth:`engine.debate.DebateLog.question_row` has it.

    question: the question (:class:`engine.tasks.Question`).
    outcome:  what the protocol returned (:class:`engine.protocols.base.Outcome`: final answer,
              answers and votes by round, ``stopped_early``, skipped turns, ``info``).
    records:  every call's :class:`engine.records.CallRecord` in the order it finished, error
              rows, summary and side calls included.
    grades:   the question's graded columns (:func:`engine.debate.graded_columns`, the one
              grading ``debate rescore`` shares: ``final_answer``, ``correct``, ``consensus``, ...).
    errored:  a call failed after the engine's retries, or the debate could not go on.
    n_agents: the agents that debated it.
    reads:    who read whom: one :class:`engine.records.Reads` per call that read anybody.
    histories: each agent's transcript (alternating user/assistant messages), by agent.
    answers:  each agent's latest answer, by agent.
    """

    question: Question
    outcome: Outcome
    records: list[CallRecord]
    grades: dict[str, Any]
    errored: bool
    n_agents: int
    reads: list[Reads]
    histories: dict[int, list[Message]]
    answers: dict[int, str | None]


@dataclass(frozen=True)
class Metric:
    """One question-level metric.

    name:    the ``questions`` column.
    type:    its Arrow type.
    help:    what it holds (one line).
    summary: the run summary key it aggregates into (:func:`engine.accounting.summarize`), or None.
    agg:     how: ``sum`` over questions, ``count`` of questions where it is true, ``mean`` over
             questions, ``by_round`` the round-by-round mean of a per-round list (a question that
             stopped early carries its last value, :func:`engine.accounting.carried_mean`),
             ``known_sum`` the sum over the questions where it is known (not null), None when it
             is known for none (a count some backends cannot give: unknown is never 0).
    graded:  recomputed by ``debate rescore`` from the stored replies (a change is a re-grade).
    report:  read by ``debate report`` from the question rows.
    label:   the row of its aggregate in the summary ``debate run`` prints, or None (not shown).
    rate:    for a ``count``: the run summary key of the share of questions where it is true.
    runs:    the aggregate the runs table stores as a column (:class:`RunsColumn`), or None.
    column:  the report's summary-table column showing its aggregate (:class:`ReportColumn`), or
             None (the report computes its own, or shows none).
    compute: the question's value from its :class:`QuestionFacts` (None: the metric is declared
             but not produced, which :func:`metric_values` reports).
    """

    name: str
    type: pa.DataType
    help: str
    summary: str | None = None
    agg: str | None = None
    graded: bool = False
    report: bool = True
    label: str | None = None
    rate: str | None = None
    runs: RunsColumn | None = None
    column: ReportColumn | None = None
    compute: Callable[[QuestionFacts], Any] | None = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if (self.summary is None) != (self.agg is None):
            raise TypeError(f"metric {self.name}: give both summary and agg, or neither")
        if self.label is not None and self.summary is None:
            raise TypeError(f"metric {self.name}: a label shows a summary aggregate; give summary and agg")
        if self.agg is not None and self.agg not in AGGREGATES:
            raise TypeError(f"metric {self.name}: agg must be one of {', '.join(AGGREGATES)}")
        if self.rate is not None and self.agg != "count":
            raise TypeError(f"metric {self.name}: a rate is the share of a count; give agg='count'")
        if self.runs is not None and self.runs.key not in (self.summary, self.rate):
            raise TypeError(f"metric {self.name}: the runs table stores its summary or rate key")
        if self.column is not None and self.summary is None:
            raise TypeError(f"metric {self.name}: a report column shows a summary aggregate; give summary and agg")

    @property
    def field(self) -> tuple[str, pa.DataType]:
        """The (name, type) pair of its schema column."""
        return self.name, self.type


def _grade(name: str) -> Callable[[QuestionFacts], Any]:
    """A metric's value from the question's grading (:attr:`QuestionFacts.grades`): the graded
    columns are made together, by the one function ``debate rescore`` grades with too."""

    def compute(facts: QuestionFacts) -> Any:
        return facts.grades[name]

    return compute


def _n_invalid(facts: QuestionFacts) -> int:
    """Agent turns without a readable answer: summary calls and side calls (reviews, scores: they
    state no answer of the agent) never count, nor error rows."""
    return sum(r.answer is None and r.error is None and r.agent_id != SUMMARIZER and not r.side for r in facts.records)


def _cached_calls(facts: QuestionFacts) -> list[tuple[int, int]]:
    """(prompt tokens, cached prompt tokens) of each call whose backend reported a cached count."""
    return [(r.prompt_tokens, r.cached_prompt_tokens) for r in facts.records if r.cached_prompt_tokens is not None]


def _cached_prompt_tokens(facts: QuestionFacts) -> int | None:
    """Cached prompt tokens over the calls that report them; None when none does (unknown is never 0)."""
    known = _cached_calls(facts)
    return sum(c for _, c in known) if known else None


def _computed_prompt_tokens(facts: QuestionFacts) -> int | None:
    """Prompt tokens computed (not taken from the cache) over the same calls; None when none reports."""
    known = _cached_calls(facts)
    return sum(p - c for p, c in known) if known else None


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
        runs=RunsColumn("effective_rounds", pa.float64(), 4),
        column=ReportColumn("effective_rounds", after="errored_questions"),
        compute=_grade("effective_rounds"),
    ),
    Metric(
        "stopped_early",
        pa.bool_(),
        "the protocol ended the question before its last round",
        compute=lambda f: f.outcome.stopped_early,
    ),
    Metric("final_answer", pa.string(), "the final vote", graded=True, report=False, compute=_grade("final_answer")),
    Metric(
        "correct",
        pa.bool_(),
        "the final answer is graded correct",
        summary="n_correct",
        agg="count",
        graded=True,
        rate="accuracy",  # unparseable finals and errored questions count as wrong
        runs=RunsColumn("accuracy", pa.float64(), 0),
        compute=_grade("correct"),
    ),
    Metric(
        "answer_by_round",
        pa.list_(pa.string()),
        "the vote after each round (the last: final_answer)",
        graded=True,
        report=False,
        compute=_grade("answer_by_round"),
    ),
    Metric(
        "correct_by_round",
        pa.list_(pa.bool_()),
        "each round's vote graded; the last equals correct",
        summary="accuracy_by_round",
        agg="by_round",
        graded=True,
        label="accuracy by round",
        runs=RunsColumn("accuracy_by_round", pa.list_(pa.float64()), 6),  # stopped questions carry
        compute=_grade("correct_by_round"),
    ),
    Metric(
        "tie",
        pa.bool_(),
        "the final vote had a tie on top (broken by --tie-break)",
        summary="n_ties",
        agg="count",
        graded=True,
        label="tied votes (broken by --tie-break)",
        column=ReportColumn("ties", after="accuracy_by_round_n"),
        compute=_grade("tie"),
    ),
    # n_errored_questions also counts rows of older runs that have n_errors but no errored column
    Metric(
        "errored",
        pa.bool_(),
        "a call failed after the engine's retries: counted wrong, see engine/debate.py",
        compute=lambda f: f.errored,
    ),
    Metric(
        "n_calls",
        pa.int32(),
        "LLM calls",
        summary="n_calls",
        agg="sum",
        label="calls",
        runs=RunsColumn("n_calls", pa.int64(), 3),
        compute=lambda f: len(f.records),
    ),
    Metric(
        "n_summary_calls",
        pa.int32(),
        "summariser calls",
        summary="n_summary_calls",
        agg="sum",
        label="summary calls",
        compute=lambda f: sum(r.agent_id == SUMMARIZER for r in f.records),
    ),
    Metric(
        "n_skipped",
        pa.int32(),
        "agent turns the protocol skipped",
        summary="n_skipped",
        agg="sum",
        label="skipped turns",
        column=ReportColumn("skipped_turns", after="summary_calls"),
        compute=lambda f: f.outcome.skipped_turns,
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
        compute=_n_invalid,
    ),
    Metric(
        "n_errors",
        pa.int32(),
        "calls that failed (error rows)",
        summary="n_errors",
        agg="sum",
        label="error calls",
        column=ReportColumn("error_calls", after="skipped_turns"),
        compute=lambda f: sum(r.error is not None for r in f.records),
    ),
    Metric(
        "prompt_tokens",
        pa.int64(),
        "prompt tokens of all its calls",
        summary="prompt_tokens",
        agg="sum",
        label="prompt tokens",
        runs=RunsColumn("prompt_tokens", pa.int64(), 1),
        compute=lambda f: sum(r.prompt_tokens for r in f.records),
    ),
    Metric(
        "completion_tokens",
        pa.int64(),
        "completion tokens of all its calls",
        summary="completion_tokens",
        agg="sum",
        label="completion tokens",
        runs=RunsColumn("completion_tokens", pa.int64(), 2),
        compute=lambda f: sum(r.completion_tokens for r in f.records),
    ),
    Metric(
        "consensus",
        pa.list_(pa.float64()),
        "per round, the share of agents whose answer equals the majority answer",
        summary="consensus_by_round",
        agg="by_round",
        graded=True,
        label="consensus by round",
        runs=RunsColumn("consensus_by_round", pa.list_(pa.float64()), 5),
        compute=_grade("consensus"),
    ),
    Metric(
        "cached_prompt_tokens",
        pa.int64(),
        "prompt tokens the serving engine took from its prefix cache, summed over its calls that report "
        "it (calls.cached_prompt_tokens); null when none does",
        summary="cached_prompt_tokens",
        agg="known_sum",
        label="cached prompt tokens",
        runs=RunsColumn("cached_prompt_tokens", pa.int64(), 7),
        compute=_cached_prompt_tokens,
    ),
    Metric(
        "computed_prompt_tokens",
        pa.int64(),
        "prompt tokens the serving engine computed (prompt_tokens - cached_prompt_tokens), summed over "
        "the same calls; null when none reports cached tokens",
        summary="computed_prompt_tokens",
        agg="known_sum",
        label="computed prompt tokens",
        runs=RunsColumn("computed_prompt_tokens", pa.int64(), 8),
        compute=_computed_prompt_tokens,
    ),
)
METRIC = {m.name: m for m in METRICS}  # name -> its Metric

# the columns `debate rescore` recomputes
GRADED = tuple(m.name for m in METRICS if m.graded)

# The share of the prompt tokens that the prefix cache served, over the calls that report it: a
# run aggregate of two metrics (cached / (cached + computed), :func:`cached_share`), not a metric's
# own, stored beside them in the runs table; None when no call reports it.
CACHED_SHARE = RunsColumn("cached_prompt_share", pa.float64(), 9)
CACHED_SHARE_LABEL = "cached share of prompt tokens"

# the run aggregates the runs table stores, in its column order (engine.results.RUNS_SCHEMA)
RUNS_COLUMNS: tuple[RunsColumn, ...] = tuple(
    sorted((*(m.runs for m in METRICS if m.runs), CACHED_SHARE), key=lambda c: c.order)
)
if [c.order for c in RUNS_COLUMNS] != list(range(len(RUNS_COLUMNS))):
    raise TypeError(f"RunsColumn orders must be 0, 1, ... once each: {[c.order for c in RUNS_COLUMNS]}")


# Metrics of one's own, after the built-in ones (register_metric), by name in registration order.
_REGISTERED: dict[str, Metric] = {}


def metrics() -> tuple[Metric, ...]:
    """Every metric, in questions-table column order: the built-in ones (:data:`METRICS`), then
    those registered (:func:`register_metric`)."""
    return (*METRICS, *_REGISTERED.values())


def _summary_keys() -> set[str]:
    """The run summary keys taken (:func:`engine.accounting.summarize`): every metric's summary
    and rate, and the summary's own."""
    taken = {"n_questions", "n_errored_questions", CACHED_SHARE.key}
    return taken | {k for m in metrics() for k in (m.summary, m.rate) if k is not None}


def register_metric(metric: Metric) -> Metric:
    """Add a metric of one's own: its column follows the built-in ones in the questions table
    (:func:`engine.results.questions_schema`), ``compute`` gives every question's value
    (:meth:`engine.debate.DebateLog.question_row`) and the run summary aggregates it as it
    declares (its ``label`` shows it in ``debate run``'s summary). Raises ValueError for a name
    or summary key taken, a metric without ``compute``, and what only a built-in metric may
    declare: ``graded`` (``debate rescore`` recomputes the built-in ones) and ``runs`` (the runs
    table's columns are those run directories already hold). :func:`unregister_metric` undoes it."""
    if metric.name in {m.name for m in metrics()}:
        raise ValueError(f"metric {metric.name!r} is already declared")
    if metric.compute is None:
        raise ValueError(f"metric {metric.name!r}: give compute, the function that makes its value")
    if metric.graded or metric.runs is not None:
        raise ValueError(f"metric {metric.name!r}: graded and runs are for the built-in metrics (engine/metrics.py)")
    taken = {metric.summary, metric.rate} & _summary_keys()
    if taken:
        raise ValueError(f"metric {metric.name!r}: run summary key {sorted(map(str, taken))[0]!r} is taken")
    _REGISTERED[metric.name] = metric
    return metric


def unregister_metric(name: str) -> None:
    """Remove a metric :func:`register_metric` added (a built-in one stays)."""
    _REGISTERED.pop(name, None)


def check_ray_metrics() -> None:
    """Raise :class:`engine.errors.UserError` when a metric is registered in this process: a Ray
    run makes its question rows in the coordinator actor, another process, which does not have
    it (:func:`actors.local_run.run_local` makes them here, and computes it)."""
    if _REGISTERED:
        raise UserError(
            f"metric {next(iter(_REGISTERED))!r} is registered in this process only (register_metric) and a Ray "
            "run makes its question rows in another process: run it with actors.local_run.run_local, or declare "
            "it in engine/metrics.py"
        )


def metric_values(facts: QuestionFacts) -> dict[str, Any]:
    """One question's metric columns, each made by its metric's ``compute`` (:func:`metrics`, in
    column order), checked by :func:`metric_columns` (a metric without ``compute`` is one
    declared but not produced). An exception in a ``compute`` is a bug: it propagates."""
    return metric_columns({m.name: m.compute(facts) for m in metrics() if m.compute is not None})


def metric_columns(values: dict[str, Any], names: tuple[str, ...] | None = None) -> dict[str, Any]:
    """``values``, checked to be exactly the metrics ``names`` (default: every metric,
    :func:`metrics`; a question row's metric columns). Raises ValueError naming a metric declared
    but not produced, or a value produced that no metric declares: a bug, found by the tests."""
    names = tuple(m.name for m in metrics()) if names is None else names
    missing, unknown = set(names) - set(values), set(values) - set(names)
    if missing or unknown:
        raise ValueError(
            f"metric columns do not match engine/metrics.py: declared but not produced {sorted(missing)}, "
            f"produced but not declared {sorted(unknown)}"
        )
    return values


def runs_columns(summary: dict[str, Any], graded: bool = False) -> dict[str, Any]:
    """The runs table's aggregate columns (:data:`RUNS_COLUMNS`) from a run summary
    (:func:`engine.accounting.summarize`); with ``graded``, only those of metrics ``debate
    rescore`` recomputes (the rest do not change with the grades)."""
    stored = [m.runs for m in METRICS if m.runs and (m.graded or not graded)]
    if not graded:  # the cached share follows token counts, never the grades
        stored.append(CACHED_SHARE)
    return {c.key: summary[c.key] for c in RUNS_COLUMNS if c in stored}


def cached_share(cached: int | None, computed: int | None) -> float | None:
    """The share of prompt tokens the prefix cache served: ``cached / (cached + computed)``, both
    summed over the calls that report a cached count; None when none does (or they had no prompt)."""
    if cached is None or computed is None or cached + computed <= 0:
        return None
    return cached / (cached + computed)


def format_share(share: float | None) -> str:
    """A share as printed: a percentage with one decimal, ``n/a`` when unknown."""
    return "n/a" if share is None else f"{100 * share:.1f}%"


def format_aggregate(metric: Metric, value) -> str:
    """A summary aggregate as the printed summary shows it: a count, a mean with two decimals,
    or a per-round list of them ("-" when empty); a ``known_sum`` known for no question is ``n/a``."""
    if metric.agg == "by_round":
        return " ".join(f"{v:.2f}" for v in value or []) or "-"
    if metric.agg == "mean":
        return f"{value:.2f}"
    if metric.agg == "known_sum" and value is None:
        return "n/a"
    return str(value)


__all__ = [
    "AGGREGATES",
    "CACHED_SHARE",
    "CACHED_SHARE_LABEL",
    "GRADED",
    "METRIC",
    "METRICS",
    "RUNS_COLUMNS",
    "Metric",
    "ReportColumn",
    "QuestionFacts",
    "RunsColumn",
    "cached_share",
    "check_ray_metrics",
    "format_aggregate",
    "format_share",
    "metric_columns",
    "metric_values",
    "metrics",
    "register_metric",
    "runs_columns",
    "unregister_metric",
]
