"""``engine.results.load`` and ``debate export`` on hand-built result folders (no Ray, no model)."""

import json
import shutil
from datetime import UTC, datetime

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app.cli import main
from engine.results import ParquetSink, ResultsError, load, read_table, write_part
from tests.support.result_dirs import config, full, write_run

ACCURACY = {("mad", 3): 0.5, ("mad", 5): 1.0, ("sparse", 3): 1.0}  # of the sweep fixture


def _q(qid, correct, agents=3, rounds=2):
    return (qid, correct, [1.0] * rounds, False, 1, 0, full(agents, rounds, 10, 5))


@pytest.fixture
def sweep(written_sweep, tmp_path):
    """Three runs in three folders: MAD with 3 agents (2 questions, one right; a stale attempt's
    calls), MAD with 5 agents (1 right of 1), sparse with 3 agents (density 0.5, 2 of 2). A copy
    per test of the folder written once (a test may add to it)."""
    return shutil.copytree(written_sweep, tmp_path / "runs")


@pytest.fixture(scope="module")
def written_sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep") / "runs"
    write_run(
        ParquetSink(root / "a"),
        "mad-3",
        config("mad", 3, 2),
        [_q("q0", True), _q("q1", False)],
        stale=[("q1", "dead", [(0, 999, 999)])],
    )
    write_run(ParquetSink(root / "b"), "mad-5", config("mad", 5, 2), [_q("q0", True, agents=5)])
    sparse = config("sparse", 3, 2, density=0.5, models=["m1", "m2"])
    write_run(ParquetSink(root / "c"), "sparse-3", sparse, [_q("q0", True), _q("q1", True)])
    return root


def test_one_line_accuracy_per_protocol_and_agents(sweep):
    r = load(sweep)
    acc = r.questions.groupby(["protocol", "agents"]).correct.mean()
    assert acc.to_dict() == ACCURACY
    assert sorted(r.runs.run_id) == ["mad-3", "mad-5", "sparse-3"]
    runs = r.runs.set_index("run_id")
    assert runs.loc["sparse-3", "density"] == 0.5 and pd.isna(runs.loc["mad-3", "density"])
    assert runs.loc["sparse-3", "models"] == '["m1", "m2"]'  # a list option as JSON text: it groups
    assert runs.loc["mad-5", "rounds"] == 2 and runs.loc["mad-5", "seed"] == 0
    # an option named like a stored column keeps the stored one; the option gets a prefix
    assert (r.runs.config_backend == "simulated").all() and "config_protocol" not in r.runs
    q = r.questions.set_index(["run_id", "question_id"])
    assert q.loc[("sparse-3", "q1"), "density"] == 0.5 and q.loc[("mad-5", "q0"), "agents"] == 5
    assert set(r.questions.run_dir) == {str(sweep / d) for d in "abc"}
    assert r.notes == []


def test_calls_of_unfinished_attempts_are_left_out(sweep):
    r = load(sweep)
    mad3 = r.calls[r.calls.run_id == "mad-3"]
    assert len(mad3) == 12 and (mad3.attempt == "new").all() and mad3.prompt_tokens.max() == 10
    assert len(read_table(sweep / "a", "calls")) == 13  # the stale call is stored, not loaded
    assert len(r.calls) == 12 + 10 + 12
    # calls per question match the question rows' counts
    per_q = r.calls.groupby(["run_id", "question_id"]).size()
    assert per_q.to_dict() == r.questions.set_index(["run_id", "question_id"]).n_calls.to_dict()


def test_a_run_in_two_folders_counts_once_the_finished_one(sweep, tmp_path):
    # the same run id started again in another folder and stopped there: its runs row says so
    sink = ParquetSink(sweep / "z")
    write_run(sink, "mad-3", config("mad", 3, 2), [_q("q0", False)])
    row = read_table(sweep / "z", "runs").to_pylist()[0]
    sink.write_run({**row, "status": "stopped: error rate", "finished": datetime(2030, 1, 1, tzinfo=UTC)})
    r = load(sweep)
    assert (r.runs.run_id == "mad-3").sum() == 1
    assert r.runs.set_index("run_id").loc["mad-3", "run_dir"] == str(sweep / "a")
    mad3 = r.questions[r.questions.run_id == "mad-3"]
    assert sorted(mad3.question_id) == ["q0", "q1"] and mad3.correct.tolist() == [True, False]
    assert (r.calls[r.calls.run_id == "mad-3"].run_dir == str(sweep / "a")).all()
    assert any("mad-3" in n and str(sweep / "z") in n for n in r.notes)


def test_the_latest_grading_wins(sweep):
    q1 = read_table(sweep / "a", "questions").to_pylist()[1]
    graded = {**q1, "correct": True, "graded": datetime(2030, 1, 1, tzinfo=UTC)}
    write_part(sweep / "a" / "questions" / "part-rescore-00000.parquet", "questions", [graded])
    r = load(sweep / "a")
    assert len(r.questions) == 2 and r.questions.correct.all()
    assert len(r.calls) == 12  # the regraded row keeps its attempt: its calls stay


def test_an_old_folder_loads_with_newer_columns_null(tmp_path):
    """Parts written before columns existed (questions without attempt, graded, image; calls
    without group, attempt; runs without timings, placement): they load, those columns null
    (NaN), and a note names them."""
    run = tmp_path / "old"
    for t in ("runs", "questions", "calls"):
        (run / t).mkdir(parents=True)
    questions = pa.table(
        {"run_id": ["mad-old"], "question_id": ["q0"], "protocol": ["mad"], "correct": [True], "n_agents": [2]}
    )
    pq.write_table(questions, run / "questions" / "part-x-00000.parquet")
    calls = pa.table({"run_id": ["mad-old"] * 2, "question_id": ["q0"] * 2, "agent_id": pa.array([0, 1], pa.int32())})
    pq.write_table(calls, run / "calls" / "part-x-00000.parquet")
    cfg = json.dumps(config("mad", 2, 1))
    runs = pa.table({"run_id": ["mad-old"], "protocol": ["mad"], "config": [cfg], "status": ["finished"]})
    pq.write_table(runs, run / "runs" / "mad-old.parquet")
    r = load(run)
    assert r.questions.groupby(["protocol", "agents"]).correct.mean().to_dict() == {("mad", 2): 1.0}
    assert len(r.calls) == 2 and r.calls.attempt.isna().all() and r.calls.group.isna().all()
    assert r.questions.graded.isna().all() and r.runs.timings.isna().all() and r.graphs.empty
    lacks = " ".join(r.notes)
    assert "questions lacks" in lacks and "attempt" in lacks and "calls lacks" in lacks and "timings" in lacks


def test_load_refuses_a_folder_without_results(tmp_path):
    with pytest.raises(ResultsError, match="no results"):
        load(tmp_path)
    with pytest.raises(ResultsError, match="no such directory"):
        load(tmp_path / "nope")


@pytest.mark.parametrize("table", ["questions", "runs", "calls", "graphs"])
def test_export_parquet_and_csv_round_trip(sweep, tmp_path, capsys, table):
    r = load(sweep)
    want = r.table(table)
    assert main(["export", str(sweep), "--to", str(tmp_path / "t.parquet"), "--table", table]) == 0
    assert f"wrote {len(want)} {table} rows" in capsys.readouterr().out
    got = pd.read_parquet(tmp_path / "t.parquet")
    assert list(got.columns) == list(want.columns) and len(got) == len(want)
    assert main(["export", str(sweep), "--to", str(tmp_path / "t.csv"), "--table", table]) == 0
    csv = pd.read_csv(tmp_path / "t.csv")
    assert list(csv.columns) == list(want.columns) and len(csv) == len(want)


def test_export_default_is_questions_with_options(sweep, tmp_path):
    assert main(["export", str(sweep), "--to", str(tmp_path / "q.csv")]) == 0
    q = pd.read_csv(tmp_path / "q.csv")
    assert q.groupby(["protocol", "agents"]).correct.mean().to_dict() == ACCURACY
    assert q.models.dropna().map(json.loads).tolist() == [["m1", "m2"]] * 2  # lists as JSON text
    assert q.consensus.map(json.loads).map(len).eq(2).all()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{sweep}", "--to", "{tmp}/q.xlsx"], "must end in .parquet or .csv"),
        (["{sweep}", "--to", "{tmp}/no/such/q.csv"], "no such directory"),
        (["{tmp}/nope", "--to", "{tmp}/q.csv"], "no such directory"),
        (["{tmp}", "--to", "{tmp}/q.csv"], "no results"),
    ],
)
def test_export_bad_input_is_one_line_exit_2(sweep, tmp_path, capsys, args, message):
    argv = [a.format(sweep=sweep, tmp=tmp_path / "x") for a in args]
    (tmp_path / "x").mkdir()
    assert main(["export", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("debate: error: ") and message in err


def test_an_option_of_mixed_types_is_text_and_exports(tmp_path):
    """--sim-accuracy 0.5 in one run and a per-model mapping in another: one text column."""
    root = tmp_path / "runs"
    write_run(ParquetSink(root / "a"), "mad-a", config("mad", 3, 2, sim_accuracy=0.5), [_q("q0", True)])
    mapping = {"big": 1.0, "small": 0.0}
    write_run(ParquetSink(root / "b"), "mad-b", config("mad", 3, 2, sim_accuracy=mapping), [_q("q0", False)])
    write_run(ParquetSink(root / "c"), "mad-c", config("mad", 3, 2), [_q("q0", False)])  # no such option
    runs = load(root).runs.set_index("run_id")
    assert runs.loc["mad-a", "sim_accuracy"] == "0.5" and json.loads(runs.loc["mad-b", "sim_accuracy"]) == mapping
    assert pd.isna(runs.loc["mad-c", "sim_accuracy"])
    assert main(["export", str(root), "--to", str(tmp_path / "q.parquet")]) == 0
    assert sorted(pq.read_table(tmp_path / "q.parquet").column("sim_accuracy").to_pylist(), key=str) == [
        "0.5",
        None,
        json.dumps(mapping, sort_keys=True),
    ]


def test_two_writers_of_one_run_in_one_folder_count_each_question_once(sweep, capsys):
    """What two processes that debated the same run into one folder leave (before the run lock,
    or with a folder copied over another): every question row and call twice, from two attempts.
    load, report and a resuming run's reader count each question once, with one attempt's calls."""
    out = sweep / "a"
    for table in ("questions", "calls"):
        rows = [{**r, "attempt": "twin"} for r in read_table(out, table).to_pylist() if r["attempt"] == "new"]
        write_part(out / table / "part-twin-00000.parquet", table, rows)
    assert read_table(out, "questions").num_rows == 2  # the reader: one row per (run, question)
    r = load(sweep)
    mad3 = r.questions[r.questions.run_id == "mad-3"]
    assert sorted(mad3.question_id) == ["q0", "q1"]
    calls = r.calls[r.calls.run_id == "mad-3"]
    assert len(calls) == 12 and calls.attempt.nunique() == 1
    per_q = calls.groupby("question_id").attempt.first().to_dict()
    assert per_q == mad3.set_index("question_id").attempt.to_dict()  # the calls of the row kept
    assert main(["report", str(out), "--format", "csv", "--out", str(out / "report"), "--no-figures"]) == 0
    report = capsys.readouterr().out
    header, row = report.splitlines()[:2]
    assert dict(zip(header.split(","), row.split(",")))["n"] == "2", report
