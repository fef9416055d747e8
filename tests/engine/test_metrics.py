"""The per-question metrics are declared once (engine/metrics.py) and every place derives from it."""

from types import SimpleNamespace

import pyarrow as pa
import pytest

from engine.accounting import summarize
from engine.cli import summary_rows
from engine.config import RunConfig
from engine.debate import graded_columns
from engine.metrics import GRADED, METRIC, METRICS, Metric
from engine.results import QUESTIONS_SCHEMA


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
