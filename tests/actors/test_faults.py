"""Fault tolerance through real Ray actors: agent actors and replicas killed mid-run with ``ray.kill``.

The simulated backend is deterministic per request seed, so a run that loses actors and recovers
(stateless agents configured again and their turns resent, replica calls resubmitted by Ray) must
produce exactly the calls of an undisturbed run. When restarts are used up, every question still
ends with a row: answered, or errored with the failed calls recorded as error rows. Every test
runs with one actor per agent and with agents packed two per actor (``--agents-per-actor``).
"""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.ray

from actors.driver import DebateRunner  # noqa: E402
from engine.config import RunConfig  # noqa: E402
from engine.results import read_table  # noqa: E402


@pytest.fixture(scope="module")
def runner(ray_local):  # the session's Ray (2 CPUs, no GPU), not one of this machine's size
    with DebateRunner() as e:
        yield e


# packed (the default layout at 3 agents on 2 CPUs) in the fast suite; one actor per agent in the slow one
@pytest.fixture(params=[pytest.param(1, id="actor-per-agent", marks=pytest.mark.slow), pytest.param(2, id="packed")])
def per_actor(request) -> int:
    return request.param


def sim(tmp_path, name: str, per_actor: int = 1, **kw) -> RunConfig:
    base = dict(
        protocol="mad",
        agents=3,
        rounds=3,
        limit=8,
        seed=5,
        backend="simulated",
        sim_latency_s=0.05,
        max_batch=4,
        max_concurrent_questions=4,
        progress=False,
        out=str(tmp_path / name),
        agents_per_actor=per_actor,
    )
    base.update(kw)
    return RunConfig.flat(**base)


def host_of(runner, agent: int):
    """The agent actor that hosts ``agent`` in the current run, and all the agents it hosts."""
    for actor in (a for pool in runner._agent_pool.values() for a in pool):
        hosted = ray.get(actor.where.remote())["agents"]
        if agent in hosted:
            return actor, hosted
    raise AssertionError(f"no agent actor hosts agent {agent}")


def killer(after_calls: int, victims):
    """A progress callback that kills ``victims()`` once, when the run has made ``after_calls`` calls."""
    state = {"done": False, "killed": []}

    def cb(progress):
        if not state["done"] and progress["calls"] >= after_calls:
            state["done"] = True
            for actor, restart in victims():
                ray.kill(actor, no_restart=not restart)
                state["killed"].append(actor)

    return cb, state


def calls_of(out) -> list[tuple]:
    rows = read_table(out, "calls").to_pylist()
    return sorted(
        (r["question_id"], r["round"], r["agent_id"], r["prompt_tokens"], r["completion_tokens"], r["text"])
        for r in rows
    )


def test_killed_agents_and_replica_recover_with_identical_results(runner, tmp_path, per_actor):
    clean = runner.run(sim(tmp_path, "clean", 1))  # undisturbed, one actor per agent
    assert clean.summary["n_errors"] == 0

    def victims():
        replica = next(iter(runner._replicas.values()))
        return [(host_of(runner, 0)[0], True), (host_of(runner, 2)[0], True), (replica, True)]

    cb, state = killer(20, victims)
    hurt = runner.run(sim(tmp_path, "hurt", per_actor), progress_cb=cb)
    assert len(state["killed"]) == 3, "the run ended before the kill point"
    assert sum(p["role"] == "agents" for p in hurt.placement) == (3 if per_actor == 1 else 2)
    assert hurt.summary["n_questions"] == 8 and hurt.summary["n_errors"] == 0
    assert hurt.faults["agent_restores"] >= 2  # both killed agent actors were configured again
    # Turns carry the transcripts, so resent turns reproduce every call exactly (same prompts => same tokens).
    assert calls_of(hurt.out_dir) == calls_of(clean.out_dir)
    assert [r["final_answer"] for r in sorted(hurt.questions, key=lambda r: r["question_id"])] == [
        r["final_answer"] for r in sorted(clean.questions, key=lambda r: r["question_id"])
    ]


def test_replica_dead_for_good_gives_error_rows_and_errored_questions(runner, tmp_path, per_actor):
    cfg = sim(tmp_path, "dead", per_actor, max_restarts=0, call_retries=0, limit=6)

    def victims():
        return [(h, False) for k, h in runner._replicas.items() if '"max_restarts": 0' in k[5]]

    cb, state = killer(6, victims)
    res = runner.run(cfg, progress_cb=cb)
    assert state["killed"], "the run ended before the kill point"
    qrows = read_table(res.out_dir, "questions").to_pylist()
    assert sorted(r["question_id"] for r in qrows) == sorted(r["question_id"] for r in res.questions)
    assert len(qrows) == 6  # every question has its row: none dropped
    errored = [r for r in qrows if r["errored"]]
    assert errored, "killing the only replica for good must error the questions still debating"
    assert all(not r["correct"] for r in errored)
    assert all(r["errored"] == (r["n_errors"] > 0) for r in qrows)
    err_calls = [r for r in read_table(res.out_dir, "calls").to_pylist() if r["error"]]
    assert err_calls and all(r["finish_reason"] == "error" and "replica unavailable" in r["error"] for r in err_calls)
    assert all(r["run_id"] == res.run_id and r["round"] >= 0 and r["agent_id"] >= 0 for r in err_calls)
    assert res.summary["n_errored_questions"] == len(errored)
    assert any(s.get("dead") for s in res.replica_stats)
    from app.report import build_report  # the report says so too

    rep = build_report(res.out_dir, tmp_path / "report")
    assert [r["errored_questions"] for r in rep.rows] == [len(errored)]
    assert any("errored, counted wrong" in n for n in rep.notes)
    # The engine notices the dead replica and starts a fresh one for the next run.
    again = runner.run(sim(tmp_path, "after", per_actor, max_restarts=0, call_retries=0, limit=2))
    assert again.summary["n_errors"] == 0 and again.summary["n_questions"] == 2


def test_max_error_rate_stops_a_run_whose_replica_died_for_good_and_it_resumes(runner, tmp_path):
    """Every call fails once the only replica is gone: with --max-error-rate 0.2 the run stops
    early (fewer calls than the full run), says so, and leaves resumable output; with the default
    the same run finishes with error rows, as before."""
    from actors.coordinator_actor import ERROR_RATE_MIN_CALLS
    from actors.driver import ErrorRateExceeded

    def victims():
        return [(h, False) for k, h in runner._replicas.items() if '"max_restarts": 0' in k[5]]

    full = 16 * 3 * 3  # questions x agents x rounds
    cfg = sim(tmp_path, "rate", max_restarts=0, call_retries=0, limit=16, max_error_rate=0.2)
    cb, state = killer(6, victims)
    with pytest.raises(
        ErrorRateExceeded,
        match=r"calls errored \(\d+%\), more than --max-error-rate 0.2.*"
        r"run the same command again to resume",
    ):
        runner.run(cfg, progress_cb=cb)
    assert state["killed"], "the run ended before the kill point"
    calls = read_table(cfg.output.out, "calls").to_pylist()
    errors = sum(r["error"] is not None for r in calls)
    assert ERROR_RATE_MIN_CALLS <= len(calls) < full and errors > 0.2 * len(calls)
    run_row = read_table(cfg.output.out, "runs").to_pylist()[-1]
    assert run_row["status"] == "stopped: error rate"
    stopped_questions = read_table(cfg.output.out, "questions").to_pylist()
    assert len(stopped_questions) < 16
    # The engine starts a fresh replica; the same command resumes and finishes each question once.
    again = runner.run(cfg)
    qs = read_table(cfg.output.out, "questions").to_pandas()
    assert len(qs) == 16 and qs.question_id.nunique() == 16 and again.summary["n_questions"] == 16
    assert again.resumed == len(stopped_questions)
    assert read_table(cfg.output.out, "runs").to_pylist()[-1]["status"] == "finished"
    # The default (1.0) never stops: the same fault ends "finished" with error rows.
    cfg = sim(tmp_path, "default", max_restarts=0, call_retries=0, limit=16)
    cb, state = killer(6, victims)
    res = runner.run(cfg, progress_cb=cb)
    assert state["killed"] and res.summary["n_questions"] == 16 and res.summary["n_errors"] > 0
    assert read_table(cfg.output.out, "runs").to_pylist()[-1]["status"] == "finished"


def test_agent_dead_for_good_gives_error_rows_not_lost_questions(runner, tmp_path, per_actor):
    cfg = sim(tmp_path, "agentdead", per_actor, call_retries=1, limit=6)
    lost = {}

    def victims():
        actor, lost["agents"] = host_of(runner, 1)
        return [(actor, False)]

    cb, state = killer(6, victims)
    res = runner.run(cfg, progress_cb=cb)
    assert state["killed"]
    assert lost["agents"] == ([1] if per_actor == 1 else [0, 1])
    qrows = read_table(res.out_dir, "questions").to_pylist()
    assert len(qrows) == 6
    calls = read_table(res.out_dir, "calls").to_pylist()
    dead = [r for r in calls if r["error"]]
    assert dead and {r["agent_id"] for r in dead} == set(lost["agents"])
    assert all("ActorDied" in r["error"] or "RayActorError" in r["error"] for r in dead)
    # every question either answered cleanly or is marked errored (and then counted wrong)
    for r in qrows:
        assert r["errored"] == (r["n_errors"] > 0)
        if r["errored"]:
            assert not r["correct"]
    # the pool replaces the dead agent for the next run
    again = runner.run(sim(tmp_path, "agentafter", per_actor, limit=2))
    assert again.summary["n_errors"] == 0


def test_writer_death_stops_the_run_with_a_resume_hint_and_the_rerun_completes(runner, tmp_path, per_actor):
    """The writer has no restarts (its buffer is gone with it): the run stops with one clear
    error, what was flushed stays readable, a new writer is started and the re-run finishes
    each question exactly once."""
    from actors.driver import RunInterrupted

    cfg = sim(tmp_path, "writer", per_actor, limit=10)
    cb, state = killer(12, lambda: [(runner._writer, False)])
    with pytest.raises(RunInterrupted, match="writer actor died.*run the same command again to resume"):
        runner.run(cfg, progress_cb=cb)
    assert state["killed"]
    read_table(cfg.output.out, "calls")  # whole parts only
    again = runner.run(cfg)
    qs = read_table(cfg.output.out, "questions").to_pandas()
    assert len(qs) == 10 and qs.question_id.nunique() == 10 and again.summary["n_questions"] == 10
    calls = read_table(cfg.output.out, "calls").to_pandas()
    keep = calls.merge(qs[["run_id", "question_id", "attempt"]], on=["run_id", "question_id", "attempt"])
    assert len(keep) == 10 * 3 * 3 and not keep.duplicated(["question_id", "round", "agent_id"]).any()


def test_coordinator_death_stops_the_run_with_a_resume_hint_and_the_rerun_completes(runner, tmp_path):
    """The coordinator has no restarts: killed mid-run, the run stops with one line naming it, the
    rows written so far stay whole, a new coordinator is started and the re-run finishes each
    question exactly once."""
    from actors.driver import RunInterrupted

    cfg = sim(tmp_path, "coordinator", 2, limit=10)
    cb, state = killer(12, lambda: [(runner._coordinator, False)])
    with pytest.raises(RunInterrupted, match="coordinator actor died.*run the same command again to resume") as info:
        runner.run(cfg, progress_cb=cb)
    assert state["killed"] and "\n" not in str(info.value)
    read_table(cfg.output.out, "calls")  # whole parts only
    again = runner.run(cfg)
    qs = read_table(cfg.output.out, "questions").to_pandas()
    assert len(qs) == 10 and qs.question_id.nunique() == 10 and again.summary["n_questions"] == 10
    assert again.summary["n_errors"] == 0
