"""The per-question metrics are declared once (engine/metrics.py) and every place derives from it."""

from types import SimpleNamespace

import pyarrow as pa
import pytest

from app.cli import summary_rows
from app.report import with_metric_columns
from engine.accounting import summarize
from engine.config import RunConfig
from engine.debate import DebateLog, graded_columns
from engine.metrics import (
    GRADED,
    METRIC,
    METRICS,
    RUNS_COLUMNS,
    Metric,
    ReportColumn,
    RunsColumn,
    metric_columns,
    runs_columns,
)
from engine.protocols.base import Outcome
from engine.records import CallRecord
from engine.results import QUESTIONS_SCHEMA, RUNS_SCHEMA
from engine.tasks import Question

# The runs table as run directories already hold it: new rows are written beside (and read
# together with) old files, so its columns, their order and types never change. A new aggregate
# takes the next place among the aggregates (RunsColumn.order); older files read it as null.
PINNED_RUNS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("protocol", pa.string()),
        ("backend", pa.string()),
        ("simulated", pa.bool_()),
        ("dtype", pa.string()),
        ("engine", pa.string()),
        ("placement", pa.string()),
        ("config", pa.string()),
        ("status", pa.string()),
        ("started", pa.timestamp("ms", tz="UTC")),
        ("finished", pa.timestamp("ms", tz="UTC")),
        ("n_questions", pa.int64()),
        ("accuracy", pa.float64()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("n_calls", pa.int64()),
        ("effective_rounds", pa.float64()),
        ("consensus_by_round", pa.list_(pa.float64())),
        ("accuracy_by_round", pa.list_(pa.float64())),
        ("cached_prompt_tokens", pa.int64()),
        ("computed_prompt_tokens", pa.int64()),
        ("cached_prompt_share", pa.float64()),
        ("wall_s", pa.float64()),
        ("timings", pa.string()),
    ]
)


# The questions table as run directories already hold it (as PINNED_RUNS_SCHEMA above): its
# metric columns come from engine/metrics.py, the rest from engine/results; neither may move one.
PINNED_QUESTIONS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("question_id", pa.string()),
        ("protocol", pa.string()),
        ("task", pa.string()),
        ("question", pa.string()),
        ("image", pa.string()),
        ("n_agents", pa.int32()),
        ("rounds_run", pa.int32()),
        ("gold", pa.string()),
        ("effective_rounds", pa.int32()),
        ("stopped_early", pa.bool_()),
        ("final_answer", pa.string()),
        ("correct", pa.bool_()),
        ("answer_by_round", pa.list_(pa.string())),
        ("correct_by_round", pa.list_(pa.bool_())),
        ("tie", pa.bool_()),
        ("errored", pa.bool_()),
        ("n_calls", pa.int32()),
        ("n_summary_calls", pa.int32()),
        ("n_skipped", pa.int32()),
        ("n_invalid", pa.int32()),
        ("n_errors", pa.int32()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("consensus", pa.list_(pa.float64())),
        ("cached_prompt_tokens", pa.int64()),
        ("computed_prompt_tokens", pa.int64()),
        ("protocol_info", pa.string()),
        ("wall_s", pa.float64()),
        ("backend", pa.string()),
        ("simulated", pa.bool_()),
        ("attempt", pa.string()),
        ("graded", pa.timestamp("ms", tz="UTC")),
    ]
)


def test_every_metric_is_a_questions_column_of_its_type():
    for m in METRICS:
        assert QUESTIONS_SCHEMA.field(m.name).type == m.type


def test_rescore_recomputes_what_the_grader_produces():
    """graded=True: exactly the columns graded_columns returns, plus n_invalid (re-read answers)."""
    cols = graded_columns([["1", "2"], ["1", "1"]], "1", "1", "numeric", None, False)
    assert set(GRADED) == {*cols, "n_invalid"}


def test_summary_aggregates_each_metric_as_declared():
    rows = [
        {"correct": True, "tie": True, "n_calls": 3, "effective_rounds": 1, "consensus": [1.0]},
        {"correct": False, "tie": False, "n_calls": 5, "effective_rounds": 2, "consensus": [0.5, 1.0]},
        {"correct": None, "n_errors": 1, "consensus": None},  # an older row: missing columns count 0
    ]
    s = summarize(rows)
    assert s["n_questions"] == 3 and s["n_correct"] == 1 and s["accuracy"] == pytest.approx(1 / 3)
    assert s["n_ties"] == 1 and s["n_calls"] == 8 and s["n_errors"] == 1 and s["n_errored_questions"] == 1
    assert s["effective_rounds"] == pytest.approx(1.0)
    assert s["consensus_by_round"] == [0.75, 1.0]  # the stopped question carries its last value
    assert {m.summary for m in METRICS if m.summary} <= set(s)


def test_the_printed_summary_shows_every_labelled_metric():
    s = summarize([{"correct": True, "tie": True, "n_calls": 2, "consensus": [1.0], "correct_by_round": [True]}])
    result = SimpleNamespace(summary=s, wall_s=1.0, simulated=True, out_dir="o", backend="simulated", dtype="-")
    rows = dict(summary_rows(result, RunConfig()))
    for m in METRICS:
        if m.label:
            assert m.label in rows
    assert rows[METRIC["tie"].label] == "1" and rows["consensus by round"] == "1.00"


def test_a_metric_declares_summary_and_aggregate_together():
    with pytest.raises(TypeError, match="both summary and agg"):
        Metric("x", pa.int32(), "x", summary="n_x")
    with pytest.raises(TypeError, match="agg must be one of"):
        Metric("x", pa.int32(), "x", summary="n_x", agg="median")


def test_the_runs_schema_derived_from_the_metrics_is_the_pinned_one():
    assert RUNS_SCHEMA.serialize().to_pybytes() == PINNED_RUNS_SCHEMA.serialize().to_pybytes()
    stored = [(c.key, c.type) for c in RUNS_COLUMNS]
    assert stored == [(f.name, f.type) for f in PINNED_RUNS_SCHEMA][12:22]


def test_the_questions_schema_derived_from_the_metrics_is_the_pinned_one():
    assert QUESTIONS_SCHEMA.serialize().to_pybytes() == PINNED_QUESTIONS_SCHEMA.serialize().to_pybytes()
    assert [m.field for m in METRICS] == [(f.name, f.type) for f in PINNED_QUESTIONS_SCHEMA][9:27]


def test_the_runs_row_takes_every_stored_aggregate_from_the_summary():
    s = summarize([{"correct": True, "n_calls": 2, "prompt_tokens": 5, "consensus": [1.0], "correct_by_round": [1]}])
    row = runs_columns(s)
    assert list(row) == [c.key for c in RUNS_COLUMNS] and row["accuracy"] == 1.0 and row["n_calls"] == 2
    # rescore rewrites the aggregates of the metrics it re-grades, and only those
    assert set(runs_columns(s, graded=True)) == {
        "accuracy",
        "accuracy_by_round",
        "consensus_by_round",
        "effective_rounds",
    }


def _record(agent: int, answer: str | None) -> CallRecord:
    kind = "summary" if agent < 0 else "agent"
    return CallRecord("q", 0, agent, kind, "m", [], "", answer, 3, 2, 0.0, "stop", None, 0, 0.0)


def test_a_question_row_has_exactly_the_declared_metric_columns():
    log = DebateLog(Question("q", "numeric", "1+1?", "2"))
    log.records += [_record(0, "2"), _record(1, None), _record(-1, None)]
    row = log.question_row(Outcome("2", [["2", None]], skipped_turns=1), 2)
    not_metrics = {"question_id", "task", "question", "image", "n_agents", "rounds_run", "gold", "protocol_info"}
    assert set(row) - not_metrics == set(METRIC)
    assert (row["n_calls"], row["n_summary_calls"], row["n_invalid"], row["n_skipped"]) == (3, 1, 1, 1)
    assert row["question"] == "1+1?"  # the text the agents were given


def test_a_metric_declared_but_not_produced_or_produced_but_not_declared_fails():
    values = {m.name: None for m in METRICS}
    assert metric_columns(values) is values
    with pytest.raises(ValueError, match=r"declared but not produced \['tie'\]"):
        metric_columns({k: v for k, v in values.items() if k != "tie"})
    with pytest.raises(ValueError, match=r"produced but not declared \['n_new'\]"):
        metric_columns({**values, "n_new": 1})
    with pytest.raises(ValueError, match="declared but not produced"):
        metric_columns({"correct": True}, GRADED)


def test_the_report_places_each_metric_column_where_its_table_has_it():
    row = {"summary_calls": 1, "errored_questions": 0, "accuracy_by_round_n": 2, "placement": ""}
    run = summarize([{"tie": True, "n_skipped": 2, "n_errors": 1, "effective_rounds": 3}])
    out = with_metric_columns(row, run)
    assert list(out) == [
        "summary_calls",
        "skipped_turns",
        "error_calls",
        "errored_questions",
        "effective_rounds",
        "accuracy_by_round_n",
        "ties",
        "placement",
    ]
    assert (out["skipped_turns"], out["error_calls"], out["effective_rounds"], out["ties"]) == (2, 1, 3.0, 1)
    empty = with_metric_columns(row, summarize([]))
    assert empty["effective_rounds"] != empty["effective_rounds"] and empty["ties"] == 0  # a mean of nothing: nan
    with pytest.raises(ValueError, match="placed after a column"):
        with_metric_columns({"placement": ""}, run)


def test_a_metric_declares_its_stored_and_shown_aggregates_consistently():
    with pytest.raises(TypeError, match="share of a count"):
        Metric("x", pa.int32(), "x", summary="n_x", agg="sum", rate="x_rate")
    with pytest.raises(TypeError, match="stores its summary or rate key"):
        Metric("x", pa.int32(), "x", summary="n_x", agg="sum", runs=RunsColumn("y", pa.int64(), 7))
    with pytest.raises(TypeError, match="report column shows a summary aggregate"):
        Metric("x", pa.int32(), "x", column=ReportColumn("x", after="calls"))
