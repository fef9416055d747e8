"""The results layer's plug points, each one module and one registration: a sink
(tests/support/jsonl_sink.py, ``register_sink``) and a metric (tests/support/made_up_metric.py,
``register_metric``), run through a real debate in this process (``run_local``, simulated model,
no Ray). Every registration is undone after its test, so the others see the built-in registry."""

import pyarrow as pa
import pytest

from actors.local_run import run_local
from backends.simulated_backend import SimulatedBackend
from engine.accounting import summarize
from engine.config import RunConfig
from engine.metrics import METRICS, Metric, RunsColumn, metrics, register_metric, unregister_metric
from engine.results import (
    QUESTIONS_SCHEMA,
    SCHEMAS,
    UnknownSink,
    load,
    read_table,
    register_sink,
    sink_class,
    sink_names,
    unregister_sink,
)
from engine.tasks import arithmetic_questions
from tests.support.cli import timed_main
from tests.support.jsonl_sink import JsonlSink, read_jsonl
from tests.support.made_up_metric import DISTINCT_ANSWERS, distinct_answers

QUESTIONS, AGENTS, ROUNDS = 5, 3, 2


@pytest.fixture
def jsonl():
    """The made-up sink, registered for one test."""
    register_sink("jsonl", JsonlSink)
    yield "jsonl"
    unregister_sink("jsonl")


@pytest.fixture
def distinct():
    """The made-up metric, registered for one test."""
    register_metric(DISTINCT_ANSWERS)
    yield DISTINCT_ANSWERS.name
    unregister_metric(DISTINCT_ANSWERS.name)


def _debate(out, sink="parquet"):
    """A real MAD debate of arithmetic questions on the simulated model, written to ``out``."""
    cfg = RunConfig.flat(backend="simulated", protocol="mad", agents=AGENTS, rounds=ROUNDS, sink=sink)
    backend = SimulatedBackend(reply_tokens=12, accuracy=0.5, follow=0.3)
    return cfg, [row for row, _ in run_local(cfg, arithmetic_questions(QUESTIONS, seed=3), backend, out=out)]


def _expected(calls, qid):
    """The made-up metric recomputed from the stored call rows of question ``qid``."""
    return len({c["answer"] for c in calls if c["question_id"] == qid and c["answer"] is not None})


def test_a_made_up_sink_and_metric_store_a_real_debate(tmp_path, jsonl, distinct):
    cfg, rows = _debate(tmp_path, sink=jsonl)
    questions, calls = read_jsonl(tmp_path, "questions"), read_jsonl(tmp_path, "calls")
    assert not list(tmp_path.rglob("*.parquet"))  # the sink named by --sink wrote, and it alone
    assert [q["question_id"] for q in questions] == [r["question_id"] for r in rows]
    assert len(calls) == QUESTIONS * AGENTS * ROUNDS and {c["run_id"] for c in calls} == {cfg.run_id()}
    # every column of the questions table (the made-up one included) but graded (rescore's)
    assert set(questions[0]) == set(SCHEMAS["questions"].names) - {"graded"}
    values = [q[distinct] for q in questions]
    assert values == [_expected(calls, q["question_id"]) for q in questions]
    assert len(set(values)) > 1, f"every question gave the same count {values}: the check would be blind"
    assert read_jsonl(tmp_path, "graphs") and read_jsonl(tmp_path, "prompts")
    (run,) = read_jsonl(tmp_path, "runs")
    assert (run["run_id"], run["status"], run["n_questions"]) == (cfg.run_id(), "finished", QUESTIONS)
    assert summarize(rows)[distinct] == sum(values)  # aggregated as it declares


def test_a_registered_metric_is_a_column_of_the_parquet_tables_readers_read(tmp_path, distinct):
    _, rows = _debate(tmp_path)
    stored = read_table(tmp_path, "questions")
    names = stored.column_names
    assert names.index(distinct) == names.index("computed_prompt_tokens") + 1  # after the built-in metrics
    calls = read_table(tmp_path, "calls").to_pylist()
    assert stored.column(distinct).to_pylist() == [_expected(calls, r["question_id"]) for r in rows]
    assert list(load(tmp_path).questions[distinct]) == [r[distinct] for r in rows]


def test_registrations_are_undone_and_the_built_in_registry_is_back():
    register_metric(DISTINCT_ANSWERS)
    register_sink("jsonl", JsonlSink)
    assert metrics()[-1] is DISTINCT_ANSWERS and SCHEMAS["questions"] != QUESTIONS_SCHEMA
    assert sink_class("jsonl") is JsonlSink and sink_names() == ("parquet", "jsonl")
    unregister_metric(DISTINCT_ANSWERS.name)
    unregister_sink("jsonl")
    assert metrics() == METRICS
    assert SCHEMAS["questions"].serialize().to_pybytes() == QUESTIONS_SCHEMA.serialize().to_pybytes()
    with pytest.raises(UnknownSink, match=r"^--sink 'jsonl': no such results sink \(known: parquet\)$"):
        sink_class("jsonl")


def test_a_metric_may_not_declare_what_only_a_built_in_one_does():
    def made(**kw):
        return Metric("x", pa.int32(), "x", compute=distinct_answers, **kw)

    with pytest.raises(ValueError, match="'n_calls' is already declared"):
        register_metric(Metric("n_calls", pa.int32(), "x", compute=distinct_answers))
    with pytest.raises(ValueError, match="give compute"):
        register_metric(Metric("x", pa.int32(), "x"))
    with pytest.raises(ValueError, match="graded and runs are for the built-in metrics"):
        register_metric(made(graded=True))
    with pytest.raises(ValueError, match="graded and runs are for the built-in metrics"):
        register_metric(made(summary="x", agg="sum", runs=RunsColumn("x", pa.int64(), 10)))
    with pytest.raises(ValueError, match="run summary key 'n_calls' is taken"):
        register_metric(made(summary="n_calls", agg="sum"))
    assert metrics() == METRICS  # none of them was registered


def test_a_metric_named_like_a_questions_column_fails_at_the_schema():
    register_metric(Metric("gold", pa.string(), "x", compute=distinct_answers))
    try:
        with pytest.raises(ValueError, match="metric 'gold' is named like a column of the questions table"):
            SCHEMAS["questions"]
    finally:
        unregister_metric("gold")


def test_an_unknown_sink_is_one_line_naming_the_known_ones_before_ray(capsys, tmp_path, no_ray):
    argv = ["run", "--backend", "simulated", "--limit", "2", "--no-progress", "--out", str(tmp_path / "o")]
    code, text, took = timed_main(capsys, [*argv, "--sink", "nope"])
    assert (code, text) == (2, "debate: error: --sink 'nope': no such results sink (known: parquet)")
    assert took < 5, f"took {took:.1f} s"


def test_a_metric_registered_here_only_is_refused_by_a_ray_run(capsys, tmp_path, no_ray, distinct):
    argv = ["run", "--backend", "simulated", "--limit", "2", "--no-progress", "--out", str(tmp_path / "o")]
    code, text, _ = timed_main(capsys, argv)
    assert code == 2 and len(text.splitlines()) == 1, text
    assert text.startswith(f"debate: error: metric {distinct!r} is registered in this process only"), text
