"""Errors that surface: a backend's failure is an error row (data); a service the debate needs,
gone for good, is an errored question; anything else the engine did not expect is a bug that
stops the run loudly, with what was written kept and resumable."""

from __future__ import annotations

import asyncio

import pytest

from engine.config import RunConfig
from engine.debate import debate
from engine.protocols.base import Outcome, Step
from engine.records import CallRecord, ServiceLost, TurnResult
from engine.results import ParquetSink, SchemaError
from engine.tasks import Question

Q = Question("q1", "numeric", "1+1?", "2")


def _echo(turn) -> TurnResult:
    call = turn.call
    return TurnResult(
        CallRecord(
            turn.question.qid,
            turn.round,
            call.agent,
            call.stage,
            "m",
            list(call.peers),
            "\\boxed{2}",
            "2",
            10,
            2,
            0.0,
            "stop",
            None,
            0,
            0.7,
        ),
        {"role": "user", "content": "x"},
    )


def _run(protocol_fn, monkeypatch, similarity=None):
    import engine.debate

    monkeypatch.setattr(engine.debate, "get_protocol", lambda name: protocol_fn)

    async def call(turn):
        return _echo(turn)

    return asyncio.run(debate(Q, RunConfig.flat(agents=2), call, similarity))


def test_a_bug_in_a_protocol_is_not_an_errored_question_it_propagates(monkeypatch):
    from engine.protocols.mad import topology_debate

    def buggy(ctx):
        yield from topology_debate(ctx)
        raise IndexError("list index out of range")

    with pytest.raises(IndexError):
        _run(buggy, monkeypatch)


def test_a_lost_service_ends_the_question_as_an_errored_row(monkeypatch):
    from engine.protocols.base import AgentCall, Similarity

    def needs_embeddings(ctx):
        yield Step(0, [AgentCall(0, "first"), AgentCall(1, "first")])
        yield Similarity(["a", "b"])
        return Outcome("2", [["2", "2"]])

    async def gone(texts):
        raise ServiceLost("the embedding actor is gone")

    row, log = _run(needs_embeddings, monkeypatch, gone)
    assert row["errored"] and not row["correct"] and "ServiceLost" in row["protocol_info"]
    assert len(log.records) == 2  # the calls made before are kept
    row, _ = _run(needs_embeddings, monkeypatch, None)  # a run without an embedder: the same
    assert row["errored"]


def test_the_sink_rejects_rows_that_do_not_fit_the_schema(tmp_path):
    from tests.support.rows import complete_rows

    sink = ParquetSink(tmp_path)
    row = complete_rows("calls", [{"run_id": "r", "question_id": "q"}])[0]
    with pytest.raises(SchemaError, match=r"unknown \['colour'\]"):
        sink.write("calls", [{**row, "colour": "red"}])
    with pytest.raises(SchemaError, match=r"missing \['text'\]"):
        sink.write("calls", [{k: v for k, v in row.items() if k != "text"}])
    sink.write("calls", [row])  # a complete row is fine
    with pytest.raises(SchemaError, match=r"missing \['status'\]"):
        sink.write_run({"run_id": "r"})


@pytest.mark.ray
def test_the_writer_keeps_a_schema_failure_and_the_next_flush_raises_it(ray_local, tmp_path):
    import ray

    from actors.writer_actor import WriterActor

    writer = WriterActor.remote(str(tmp_path))
    writer.write.remote("calls", [{"run_id": "r", "unknown": 1}])  # fire-and-forget, as the coordinator does
    with pytest.raises(ray.exceptions.RayTaskError, match="does not fit the schema"):
        ray.get(writer.flush.remote())
    ray.kill(writer)


@pytest.mark.ray
def test_a_bug_in_an_agent_stops_the_run_with_one_line_and_the_rerun_resumes(ray_local, tmp_path, capsys):
    """A question the engine cannot handle (27 choices: more letters than the grader reads) makes
    the agent raise: the run stops with EngineError instead of counting an 'errored' question,
    the questions finished before it are on disk, and the same run resumes from them."""
    from actors.driver import DebateRunner, EngineError
    from engine.results import read_table

    good = [Question(f"c{i}", "choice", f"Pick {i}", "A", choices=("x", "y", "z", "w")) for i in range(4)]
    bad = Question("c9", "choice", "Pick one", "A", choices=tuple(f"o{i}" for i in range(27)))
    cfg = RunConfig.flat(
        protocol="mad",
        agents=2,
        rounds=2,
        backend="simulated",
        max_concurrent_questions=1,
        progress=False,
        out=str(tmp_path / "run"),
    )
    with DebateRunner() as runner:
        with pytest.raises(EngineError, match=r"unexpected error in the engine \(ValueError: n_choices") as info:
            runner.run(cfg, questions=good + [bad])
        assert "\n" not in str(info.value) and "resume" in str(info.value)
        done = {r["question_id"] for r in read_table(cfg.output.out, "questions").to_pylist()}
        assert done == {q.qid for q in good}  # written before the bug, kept
        again = runner.run(cfg, questions=good)
    assert again.resumed == 4 and again.summary["n_questions"] == 4


def test_the_cli_prints_one_line_for_an_engine_error(monkeypatch, capsys):
    import actors.driver as driver
    from app.cli import main

    def boom(cfg, questions=None, progress_cb=None):
        raise driver.EngineError(
            "run mad-1 stopped by an unexpected error in the engine (IndexError: x); traceback "
            "above; the results written so far are in out and resume with the same command"
        )

    monkeypatch.setattr(driver, "run", boom)
    assert main(["run", "--backend", "simulated", "--limit", "2"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "debate: error: run mad-1 stopped by an unexpected error in the engine (IndexError: x); traceback "
        "above; the results written so far are in out and resume with the same command"
    ]


@pytest.mark.ray
@pytest.mark.parametrize(
    "flag, shown, hidden",
    [
        ("-v", ["INFO actors.driver: starting replica 0 of", "INFO actors.driver: 2 agents in"], ["DEBUG "]),
        pytest.param(None, [], ["INFO ", "DEBUG "], marks=pytest.mark.slow),  # a CLI run each: -v in the fast suite
        pytest.param("-q", [], ["INFO ", "DEBUG ", "WARNING "], marks=pytest.mark.slow),
    ],
)
def test_verbosity_flags_show_the_engines_own_decisions(tmp_path, flag, shown, hidden):
    """``debate run`` as a user runs it: at -v the engine's own decisions (replicas started, agent
    actors) reach stderr; by default and at -q they do not."""
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "app.cli", "run", "--backend", "simulated", "--limit", "1", "--agents", "2"]
    cmd += ["--rounds", "1", "--out", str(tmp_path / "run"), *([flag] if flag else [])]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for line in shown:
        assert line in proc.stderr, proc.stderr[-2000:]
    for prefix in hidden:
        assert not [ln for ln in proc.stderr.splitlines() if ln.startswith(prefix)], proc.stderr[-2000:]


@pytest.mark.ray
def test_a_bug_cancels_the_other_debates_in_flight(ray_local, tmp_path):
    """Eight debates in flight beside the one that hits a bug: the bug stops the run at once, the
    others are cancelled (none finishes: a run that waited for them would have written their
    rows), and the re-run debates them all."""
    from actors.driver import DebateRunner, EngineError
    from engine.results import read_table

    good = [Question(f"c{i}", "choice", f"Pick {i}", "A", choices=("x", "y", "z", "w")) for i in range(8)]
    bad = Question("c9", "choice", "Pick one", "A", choices=tuple(f"o{i}" for i in range(27)))
    cfg = RunConfig.flat(
        protocol="mad",
        agents=2,
        rounds=3,
        backend="simulated",
        sim_latency_s=0.3,  # a good debate takes >= 3 rounds x 0.3 s; the bug comes after one reply
        max_concurrent_questions=9,
        progress=False,
        out=str(tmp_path / "run"),
    )
    with DebateRunner() as runner:
        with pytest.raises(EngineError, match="unexpected error in the engine"):
            runner.run(cfg, questions=[bad, *good])
        assert read_table(cfg.output.out, "questions").num_rows == 0  # an empty table when nothing was written
        again = runner.run(cfg, questions=good)
    assert again.resumed == 0 and again.summary["n_questions"] == 8 and again.summary["n_errors"] == 0
