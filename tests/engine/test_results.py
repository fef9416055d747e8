import pyarrow.parquet as pq
import pytest

from engine.results import ParquetSink, WriteFailed, read_table
from tests.support.rows import complete_rows


def call_row(i):
    return {
        "run_id": "r",
        "question_id": f"q{i}",
        "round": 0,
        "agent_id": i,
        "peers": [1, 2],
        "prompt_tokens": 10 + i,
        "completion_tokens": 3,
        "text": "t",
        "answer": None,
        "simulated": True,
    }


def test_rows_stream_to_part_files_as_they_come(tmp_path):
    sink = ParquetSink(tmp_path, flush_rows=3, flush_seconds=3600)
    sink.write("calls", complete_rows("calls", [call_row(0), call_row(1)]))
    assert read_table(tmp_path, "calls").num_rows == 0  # buffered
    sink.write("calls", complete_rows("calls", [call_row(2)]))  # reaches flush_rows -> a part file appears now
    t = read_table(tmp_path, "calls")
    assert t.num_rows == 3 and t.column("prompt_tokens").to_pylist() == [10, 11, 12]
    assert t.column("answer").to_pylist() == [None, None, None]  # unparseable stays null
    sink.write("calls", complete_rows("calls", [call_row(3)]))
    sink.flush()
    assert read_table(tmp_path, "calls").num_rows == 4
    assert len(list((tmp_path / "calls").glob("*.parquet"))) == 2
    assert not list((tmp_path / "calls").glob(".*tmp"))  # no temp files left behind


def test_run_row_is_rewritten_in_place(tmp_path):
    sink = ParquetSink(tmp_path)
    sink.write_run({"run_id": "abc", "status": "running", "config": "{}"})
    sink.write_run({"run_id": "abc", "status": "finished", "config": "{}", "accuracy": 0.5})
    t = read_table(tmp_path, "runs")
    assert t.num_rows == 1 and t.column("status").to_pylist() == ["finished"]
    assert pq.read_schema(tmp_path / "runs" / "abc.parquet").field("accuracy").type == "double"


def test_unknown_table_and_empty_read(tmp_path):
    sink = ParquetSink(tmp_path)
    with pytest.raises(ValueError, match="unknown table"):
        sink.write("nope", [])
    assert read_table(tmp_path, "questions").num_rows == 0


def _parts(out, table):
    return sorted(p.name for p in (out / table).glob("*.parquet"))


def test_a_write_that_fails_midway_leaves_no_part_and_readers_see_nothing_new(tmp_path, monkeypatch):
    sink = ParquetSink(tmp_path, flush_rows=100, flush_seconds=3600)
    sink.write("calls", complete_rows("calls", [call_row(0), call_row(1)]))
    sink.flush()
    sink.write_run({"run_id": "abc", "status": "running", "config": "{}"})
    before = _parts(tmp_path, "calls")
    real = pq.write_table

    def half_then_fail(table, where, **kw):  # the disk fills up half way through the file
        real(table, where, **kw)
        data = open(where, "rb").read()
        with open(where, "wb") as f:
            f.write(data[: len(data) // 2])
        raise OSError("No space left on device")

    monkeypatch.setattr(pq, "write_table", half_then_fail)
    sink.write("calls", complete_rows("calls", [call_row(2)]))
    with pytest.raises(WriteFailed, match=r"^no space left on .* writing .*/calls/part-[^ ]*\.parquet$"):
        sink.flush()
    with pytest.raises(WriteFailed, match=r"^no space left on .*/runs/abc\.parquet$"):  # the run row fails too
        sink.write_run({"run_id": "abc", "status": "finished", "config": "{}"})
    monkeypatch.undo()
    assert _parts(tmp_path, "calls") == before and len(before) == 1
    t = read_table(tmp_path, "calls")
    assert t.num_rows == 2 and t.column("question_id").to_pylist() == ["q0", "q1"]
    assert pq.read_table(tmp_path / "runs" / "abc.parquet").column("status").to_pylist() == ["running"]  # whole
    assert read_table(tmp_path, "runs").column("status").to_pylist() == ["interrupted"]  # no process runs it
    assert not list(tmp_path.rglob(".*.tmp"))  # the half file removed: a full disk gets its space back


def test_a_write_whose_fsync_fails_is_never_renamed_into_place(tmp_path, monkeypatch):
    import engine.results.parquet as results

    sink = ParquetSink(tmp_path, flush_rows=100, flush_seconds=3600)

    def fail(fd):
        raise OSError("Input/output error")

    monkeypatch.setattr(results.os, "fsync", fail)
    sink.write("calls", complete_rows("calls", [call_row(0)]))
    with pytest.raises(OSError, match="Input/output"):
        sink.flush()
    monkeypatch.undo()
    assert _parts(tmp_path, "calls") == [] and read_table(tmp_path, "calls").num_rows == 0


def test_every_column_of_every_table_is_described():
    """COLUMN_HELP (the docs site's results reference) describes exactly the schemas' columns."""
    from engine.results import COLUMN_HELP, SCHEMAS

    assert set(COLUMN_HELP) == set(SCHEMAS)
    for table, schema in SCHEMAS.items():
        undescribed = [c for c in schema.names if not COLUMN_HELP[table].get(c, "").strip()]
        assert not undescribed, f"{table}: columns without a description in engine.results.COLUMN_HELP: {undescribed}"
        assert set(COLUMN_HELP[table]) <= set(schema.names), (table, set(COLUMN_HELP[table]) - set(schema.names))
