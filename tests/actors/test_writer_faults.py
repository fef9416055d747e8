"""A writer that dies or cannot write stops the run within seconds, in one line, resumable.

Before: a writer SIGKILLed mid-run was noticed only when the debate ended (minutes later, every
row after the kill thrown away), and a full disk made the run crawl for minutes through dozens of
"Unhandled error" tracebacks, then end as a bug with the run left ``running``. Now the coordinator
awaits every write and checks the writer every second (actors/coordinator_actor.py), so the run
stops at once with ``run ... stopped: <why>; N/M questions saved in OUT: ... resume``, the run reads
as ``interrupted``, and the same command resumes it to each question once.

The full disk is real where the test may mount a small tmpfs (root here and in CI); the same path
also runs everywhere with a writer whose Parquet writes fail with ENOSPC after a few parts.
"""

from __future__ import annotations

import errno
import re
import subprocess
import sys
import time

import pytest

ray = pytest.importorskip("ray")
pytestmark = [pytest.mark.ray, pytest.mark.slow]  # ~3 min of real runs: CI runs them, the fast suite leaves them out

from actors.driver import DebateRunner, RunInterrupted  # noqa: E402
from actors.writer_actor import WriterActor  # noqa: E402
from engine.config import RunConfig  # noqa: E402
from engine.results import read_table  # noqa: E402

LIMIT, AGENTS, ROUNDS = 40, 3, 4


@pytest.fixture(scope="module")
def runner(ray_local):  # the session's Ray (2 CPUs, no GPU), not one of this machine's size
    with DebateRunner() as e:
        yield e


def cfg_for(out, **kw) -> RunConfig:
    base = dict(
        protocol="mad",
        agents=AGENTS,
        rounds=ROUNDS,
        limit=LIMIT,
        seed=2,
        backend="simulated",
        sim_latency_s=0.1,
        max_concurrent_questions=4,
        progress=False,
        out=str(out),
    )
    base.update(kw)
    return RunConfig.flat(**base)


def saved_in(message: str) -> int:
    found = re.search(rf"(\d+)/{LIMIT} questions saved in ", message)
    assert found, message
    return int(found[1])


def check_stopped_then_resumed(runner, cfg, message: str) -> None:
    """The one line names what was saved (as on disk), the run reads interrupted, and the same
    command resumes it to every question once, with whole calls."""
    assert "\n" not in message and "run the same command again to resume" in message
    on_disk = read_table(cfg.output.out, "questions").num_rows
    assert saved_in(message) == on_disk and on_disk < LIMIT
    assert read_table(cfg.output.out, "runs").column("status").to_pylist() == ["interrupted"]
    again = runner.run(cfg)
    assert again.resumed == on_disk and again.summary["n_questions"] == LIMIT
    qs = read_table(cfg.output.out, "questions").to_pandas()
    assert len(qs) == LIMIT and qs.question_id.is_unique
    calls = read_table(cfg.output.out, "calls").to_pandas()
    keep = calls.merge(qs[["run_id", "question_id", "attempt"]], on=["run_id", "question_id", "attempt"])
    assert len(keep) == LIMIT * AGENTS * ROUNDS and not keep.duplicated(["question_id", "round", "agent_id"]).any()
    assert read_table(cfg.output.out, "runs").column("status").to_pylist() == ["finished"]


def test_a_killed_writer_stops_the_run_within_seconds_and_it_resumes(runner, tmp_path):
    cfg = cfg_for(tmp_path / "killed")
    state: dict = {}

    def kill_once(progress):
        if "t" not in state and progress["calls"] >= 60:
            ray.kill(runner._writer, no_restart=True)
            state["t"], state["calls"] = time.monotonic(), progress["calls"]
        state["last"] = progress["calls"]

    with pytest.raises(RunInterrupted, match="the writer actor died") as info:
        runner.run(cfg, progress_cb=kill_once)
    stop_s = time.monotonic() - state["t"]
    total = LIMIT * AGENTS * ROUNDS
    assert stop_s < 10, f"the run stopped {stop_s:.1f} s after its writer was killed"
    assert state["last"] < total, f"the debate went on to the end ({state['last']} of {total} calls) after the kill"
    print(f"\nwriter killed after {state['calls']} calls: stopped {stop_s:.1f} s later, at {state['last']} calls")
    check_stopped_then_resumed(runner, cfg, str(info.value))


class _FullAfter(WriterActor.__ray_actor_class__):  # type: ignore[name-defined,misc]
    """A writer whose Parquet writes fail as on a full disk (ENOSPC) after ``parts`` of them."""

    def __init__(self, parts: int):
        super().__init__()
        self.parts = parts

    def open(self, out_dir: str, sink=None) -> str:
        import pyarrow.parquet as pq

        real, left = pq.write_table, [self.parts]

        def write_table(table, where, **kw):
            left[0] -= 1
            if left[0] < 0:
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(table, where, **kw)

        pq.write_table = write_table  # this actor's own process
        return super().open(out_dir, sink)


def full_disk_writer(parts: int):
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray workers cannot import tests/
    return ray.remote(num_cpus=0)(_FullAfter).remote(parts)


def test_a_writer_that_cannot_write_stops_the_run_at_once_and_it_resumes(runner, tmp_path):
    cfg = cfg_for(tmp_path / "enospc")
    if runner._writer is not None:
        ray.kill(runner._writer)
    runner._writer = full_disk_writer(parts=12)
    t0 = time.monotonic()
    try:
        with pytest.raises(RunInterrupted, match=r"stopped: no space left on .* writing .*\.parquet;") as info:
            runner.run(cfg)
    finally:
        ray.kill(runner._writer)
        runner._writer = None  # the next run starts a plain writer
    took = time.monotonic() - t0
    assert took < 60, f"the run took {took:.1f} s to stop on a full disk"
    assert "free some space, then run the same command again to resume" in str(info.value)
    check_stopped_then_resumed(runner, cfg, str(info.value))


def _mount_tmpfs(where, size: str) -> bool:
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    return done.returncode == 0


def test_a_full_tmpfs_stops_the_run_at_once_and_it_resumes_once_there_is_room(runner, tmp_path):
    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk, "160k"):
        pytest.skip("cannot mount a tmpfs here (not root): the ENOSPC writer test covers the same path")
    try:
        cfg = cfg_for(disk / "out")
        t0 = time.monotonic()
        with pytest.raises(RunInterrupted, match=rf"stopped: no space left on tmpfs \(mounted on {disk}\)") as info:
            runner.run(cfg)
        took = time.monotonic() - t0
        assert took < 60, f"the run took {took:.1f} s to stop on a full disk"
        print(f"\nfull tmpfs: stopped after {took:.1f} s: {info.value}")
        assert not list(disk.rglob(".*.tmp")), "a failed write left its temporary file"
        subprocess.run(["mount", "-o", "remount,size=8m", str(disk)], check=True)
        check_stopped_then_resumed(runner, cfg, str(info.value))
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)
