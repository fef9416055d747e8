"""Unreadable Parquet parts (truncated, empty, not Parquet, a column of another type): every
reader stops with one line naming the file, ``--skip-bad-parts`` reads around it with a note
naming it, and a resuming run sets it aside (:mod:`engine.bad_parts`). No Ray: folders are made
in-process (tests/support/result_dirs.py); the resumed run itself is in
tests/actors/test_bad_parts_ray.py."""

from __future__ import annotations

import datetime as dt
import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app.cli import main
from app.sweep import disk_status, expand, parse_sweep
from engine.bad_parts import set_aside
from engine.results import ParquetSink, ResultsError, load, read_table, write_part
from tests.support.result_dirs import simulated_run
from tests.support.rows import complete_rows

TABLES = ("questions", "calls", "graphs", "prompts", "runs")


def truncated(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def emptied(path):
    path.write_bytes(b"")


def garbage(path):
    path.write_bytes(b"this is not a Parquet file\n" * 40)


DAMAGE = {"truncated": truncated, "zero-byte": emptied, "garbage": garbage}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """One folder holding two simulated runs (2 and 3 agents, 3 questions each): every table has
    one part (or runs file) per run."""
    out = tmp_path_factory.mktemp("two_runs") / "out"
    simulated_run(out, n_questions=3, protocol="mad", agents=2, rounds=2)
    simulated_run(out, n_questions=3, protocol="mad", agents=3, rounds=2)
    return out


@pytest.fixture
def folder(two_runs, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(two_runs, out)
    return out


def first_part(out, table):
    return sorted((out / table).glob("*.parquet"))[0]


def the_error(exc: pytest.ExceptionInfo, path) -> str:
    message = str(exc.value)
    assert message.startswith(f"{path}: unreadable Parquet part (") and "\n" not in message, message
    assert "--skip-bad-parts" in message, message
    return message


# ------------------------------------------------------------------------------------- readers
@pytest.mark.parametrize("damage", DAMAGE)
@pytest.mark.parametrize("table", TABLES)
def test_read_table_names_the_bad_part_and_reads_around_it_when_told(folder, table, damage):
    bad, good = sorted((folder / table).glob("*.parquet"))
    good_rows = pq.read_table(good).num_rows
    DAMAGE[damage](bad)
    with pytest.raises(ResultsError) as exc:
        read_table(folder, table)
    the_error(exc, bad)
    notes: list[str] = []
    assert read_table(folder, table, skip_bad_parts=True, notes=notes).num_rows == good_rows
    assert len(notes) == 1 and notes[0].startswith(f"{bad}: unreadable Parquet part (") and "left out" in notes[0]


def test_a_column_that_cannot_be_cast_is_named(folder):
    bad = first_part(folder, "calls")
    table = pq.read_table(bad)
    pq.write_table(table.set_column(table.column_names.index("round"), "round", pa.array(["x"] * len(table))), bad)
    with pytest.raises(ResultsError) as exc:
        read_table(folder, "calls")
    assert "'x'" in the_error(exc, bad)  # pyarrow's word for it: the value it could not read as int32


def test_a_directory_named_like_a_part_is_named(folder):
    bad = folder / "calls" / "part-x-00000.parquet"
    bad.mkdir()
    with pytest.raises(ResultsError) as exc:
        read_table(folder, "calls")
    assert "(a directory, not a file)" in the_error(exc, bad)
    notes: list[str] = []
    assert read_table(folder, "calls", skip_bad_parts=True, notes=notes).num_rows > 0 and len(notes) == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file without read permission")
def test_a_part_without_read_permission_is_named(folder):
    bad = first_part(folder, "questions")
    bad.chmod(0)
    try:
        with pytest.raises(ResultsError) as exc:
            read_table(folder, "questions")
        assert "(permission denied)" in the_error(exc, bad)
    finally:
        bad.chmod(0o644)


def test_load_names_the_bad_part_and_skips_it_with_a_note(folder):
    bad = first_part(folder, "calls")
    truncated(bad)
    with pytest.raises(ResultsError) as exc:
        load(folder)
    the_error(exc, bad)
    r = load(folder, skip_bad_parts=True)
    assert len(r.questions) == 6 and len(r.runs) == 2  # the other tables are whole
    assert 0 < len(r.calls) < r.questions.n_calls.sum()  # one run's calls are gone
    said = [n for n in r.notes if str(bad) in n]
    assert len(said) == 1 and said[0].startswith(f"{bad}: unreadable Parquet part (")
    assert not any(" lacks " in n for n in r.notes)  # the left-out part is not "written before columns existed"


# ----------------------------------------------------------------------------------- the CLI
COMMANDS = {
    "report": lambda out, tmp: ["report", str(out), "--out", str(tmp / "report"), "--no-figures"],
    "show": lambda out, tmp: ["show", str(out), "--limit", "1"],
    "show --html": lambda out, tmp: ["show", str(out), "--html", str(tmp / "page.html")],
    "export": lambda out, tmp: ["export", str(out), "--to", str(tmp / "q.csv")],
    "rescore": lambda out, tmp: ["rescore", str(out), "--dry-run"],
}


# a bad calls part takes each command through the same load() as a bad questions part (a bad calls
# part through load() is in the inner loop above): CI runs those
@pytest.mark.parametrize("table", ["questions", pytest.param("calls", marks=pytest.mark.slow)])
@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_stops_on_one_line_naming_the_part_then_skips_it_when_told(
    folder, tmp_path, capsys, monkeypatch, command, table
):
    monkeypatch.setenv("COLUMNS", "1000")  # rich prints a note on one line
    bad = first_part(folder, table)
    truncated(bad)
    argv = COMMANDS[command](folder, tmp_path)
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert err.startswith(f"debate: error: {bad}: unreadable Parquet part (") and err.count("\n") == 1, err
    assert "--skip-bad-parts" in err and "Traceback" not in out + err
    assert main([*argv, "--skip-bad-parts"]) == 0
    out, err = capsys.readouterr()
    said = [line for line in (out + err).splitlines() if str(bad) in line]
    assert len(said) == 1 and said[0].startswith(f"note: {bad}: unreadable Parquet part ("), out + err


def test_rescore_writes_nothing_to_a_folder_it_cannot_fully_read(folder, capsys):
    """Re-grading part of a run would write grades of incomplete debates: with --skip-bad-parts
    the folder is left as it is (a note says so), and without it rescore stops."""
    truncated(first_part(folder, "calls"))
    before = sorted(p.name for p in folder.rglob("*"))
    assert main(["rescore", str(folder)]) == 2
    assert main(["rescore", str(folder), "--skip-bad-parts"]) == 0
    assert f"note: {folder}: left as it is" in capsys.readouterr().err
    assert sorted(p.name for p in folder.rglob("*")) == before


# ------------------------------------------------------------------------- a sweep cell's status
@pytest.mark.parametrize("table", ["questions", "calls", "runs"])
def test_a_finished_cell_with_a_bad_part_counts_as_partial(tmp_path, table):
    """So that the sweep runs the cell again, and the resumed run sets the part aside."""
    cell = expand(parse_sweep({"backend": "simulated", "limit": 1, "protocol": "mad", "progress": False}), tmp_path)[0]
    sink = ParquetSink(cell.out)
    sink.write("questions", complete_rows("questions", [{"run_id": cell.run_id, "question_id": "a"}]))
    sink.write("calls", complete_rows("calls", [{"run_id": cell.run_id, "question_id": "a"}]))
    sink.flush()
    sink.write_run({"run_id": cell.run_id, "status": "finished", "n_questions": 1})
    assert disk_status(cell)[0] == "finished"
    truncated(first_part(cell.out, table))
    assert disk_status(cell)[0] == "partial"


# ------------------------------------------------------------------ a resuming run sets parts aside
def _rows(out, table):
    return read_table(out, table).to_pylist()


def test_a_bad_questions_part_is_renamed_aside_and_its_questions_are_not_done(folder):
    run_a = _rows(folder, "questions")[0]["run_id"]
    bad = first_part(folder, "questions")
    assert {r["run_id"] for r in pq.read_table(bad).to_pylist()} == {run_a}
    garbage(bad)
    data = bad.read_bytes()
    assert set_aside(folder, run_a) == set()  # the rows are gone with the part: nothing to supersede
    aside = bad.with_name(bad.name + ".unreadable")
    assert not bad.exists() and aside.read_bytes() == data  # the bytes are kept
    assert {r["run_id"] for r in _rows(folder, "questions")} == {r["run_id"] for r in _rows(folder, "runs")} - {run_a}


def test_a_bad_calls_part_supersedes_the_questions_its_attempt_finished(folder):
    run_a = _rows(folder, "questions")[0]["run_id"]
    bad, questions_part = first_part(folder, "calls"), first_part(folder, "questions")
    qids = {r["question_id"] for r in pq.read_table(questions_part).to_pylist()}
    truncated(bad)
    assert set_aside(folder, run_a) == qids
    assert bad.with_name(bad.name + ".unreadable").exists()
    assert questions_part.with_name(questions_part.name + ".superseded").exists() and not questions_part.exists()
    assert run_a not in {r["run_id"] for r in _rows(folder, "questions")}  # readable without the flag
    load(folder)


def test_another_runs_bad_part_is_left_in_place(folder):
    bad = first_part(folder, "graphs")
    run_a = pq.read_table(bad).column("run_id")[0].as_py()
    run_b = next(r["run_id"] for r in _rows(folder, "runs") if r["run_id"] != run_a)
    truncated(bad)
    assert set_aside(folder, run_b) == set()
    assert bad.exists() and not list(folder.rglob("*.unreadable")) and not list(folder.rglob("*.superseded"))


RESCORED = (("q1", "a1"), ("q2", "a1"), ("q3", "a2"))


def test_rescore_rows_of_the_questions_debated_again_are_superseded_the_others_kept(tmp_path):
    """Two attempts of run A (writers w1: q1, q2; w2: q3) and a rescore part re-grading all three:
    w1's calls part is unreadable, so q1 and q2 are debated again and their rows go, the rescore
    part rewritten with q3's row only (the old part kept byte for byte)."""
    out = tmp_path / "out"
    for name, attempt, qids in (("w1", "a1", ["q1", "q2"]), ("w2", "a2", ["q3"])):
        sink = ParquetSink(out, name=name)
        rows = [{"run_id": "A", "question_id": q, "attempt": attempt} for q in qids]
        sink.write("questions", complete_rows("questions", rows))
        sink.write("calls", complete_rows("calls", rows))
        sink.flush()
    graded = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    regraded = [{"run_id": "A", "question_id": q, "attempt": a, "graded": graded} for q, a in RESCORED]
    rescore_part = out / "questions" / "part-rescore-20260101T000000-abcdef.parquet"
    write_part(rescore_part, "questions", complete_rows("questions", regraded))
    old = rescore_part.read_bytes()
    truncated(out / "calls" / "part-w1-00000.parquet")
    assert set_aside(out, "A") == {"q1", "q2"}
    assert (out / "questions" / "part-w1-00000.parquet.superseded").exists()
    assert rescore_part.with_name(rescore_part.name + ".superseded").read_bytes() == old
    assert [r["question_id"] for r in pq.read_table(rescore_part).to_pylist()] == ["q3"]
    assert [(r["question_id"], r["graded"] is not None) for r in _rows(out, "questions")] == [("q3", True)]
