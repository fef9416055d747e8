"""The writer actor is handed its sink by name (``--sink``) and writes through whatever sink that
names: the made-up JSON-lines sink of tests/support/jsonl_sink.py here, registered for each test
and undone after. The driver ships a sink registered only in its own process to the writer."""

import pytest

from actors.writer_actor import WriterActor, shipped_sink
from engine.config import RunConfig
from engine.results import ParquetSink, register_sink, unregister_sink
from tests.support.jsonl_sink import JsonlSink, read_jsonl
from tests.support.rows import complete_rows


def _calls(n):
    rows = [{"run_id": "r", "question_id": f"q{i}", "round": 0, "agent_id": i, "text": "t"} for i in range(n)]
    return complete_rows("calls", rows)


@pytest.fixture
def jsonl():
    register_sink("jsonl", JsonlSink)
    yield "jsonl"
    unregister_sink("jsonl")


def test_the_writer_writes_through_the_sink_it_is_handed(tmp_path, jsonl):
    writer = WriterActor.__ray_actor_class__(flush_seconds=3600)  # the actor's own class, in this process
    writer.open(str(tmp_path / "a"), jsonl)
    writer.write("calls", _calls(2))
    assert writer.tick() == {"calls": 0, "questions": 0, "graphs": 0, "prompts": 0}  # not due yet
    writer.write_run({"run_id": "r", "status": "running"})  # flushes the rows before it
    assert isinstance(writer.sink, JsonlSink) and writer.flush()["calls"] == 2
    assert [c["question_id"] for c in read_jsonl(tmp_path / "a", "calls")] == ["q0", "q1"]
    assert read_jsonl(tmp_path / "a", "runs") == [{"run_id": "r", "status": "running"}]
    writer.open(str(tmp_path / "b"))  # the next run's directory, through the same sink
    assert isinstance(writer.sink, JsonlSink) and not list(tmp_path.rglob("*.parquet"))
    writer.open(str(tmp_path / "c"), "parquet")
    assert isinstance(writer.sink, ParquetSink)


def test_the_driver_ships_a_sink_of_its_own_by_name_and_any_other_as_its_class(jsonl):
    assert shipped_sink("parquet") == "parquet"
    assert shipped_sink(jsonl) is JsonlSink


@pytest.mark.ray
def test_a_ray_run_writes_through_a_sink_registered_in_the_driver_only(ray_local, tmp_path, jsonl):
    from actors.driver import run

    cfg = RunConfig.flat(
        backend="simulated", protocol="mad", agents=2, rounds=2, limit=3, progress=False, out=str(tmp_path), sink=jsonl
    )
    result = run(cfg)
    questions, calls = read_jsonl(tmp_path, "questions"), read_jsonl(tmp_path, "calls")
    assert sorted(q["question_id"] for q in questions) == sorted(r["question_id"] for r in result.questions)
    assert len(calls) == 3 * 2 * 2 and {c["attempt"] for c in calls} == {questions[0]["attempt"]}
    (row,) = read_jsonl(tmp_path, "runs")
    assert (row["run_id"], row["status"]) == (result.run_id, "finished")
    assert not list(tmp_path.rglob("*.parquet"))  # the writer, in another process, used the sink handed to it
