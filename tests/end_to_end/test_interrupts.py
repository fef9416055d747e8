"""Ctrl-C, SIGTERM and SIGKILL reach a real ``debate run`` (actors/interrupts.py, actors/reaper.py).

Before: Ctrl-C printed a 25-line ``KeyboardInterrupt`` traceback; SIGTERM (what SLURM and
Kubernetes send) ended the process with exit 134 and Ray's native "SIGTERM received ... PC: @"
dump, with the progress bar ahead of what was on disk; a SIGKILLed run left Ray's dashboard and
runtime-env agents running. Now: one line saying how many questions are saved (as many as are on
disk), exit 130 / 143, the run marked interrupted, the same command resumes to each question once,
and nothing of the run's Ray outlives it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import pytest

from engine.results import read_table
from tests.support.processes import DEBATE, _env, _session_procs

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(600)]  # a minute or more each: CI runs them

LIMIT, AGENTS, ROUNDS = 24, 3, 3


def argv(out) -> list[str]:
    return [
        *DEBATE,
        "run",
        "--backend",
        "simulated",
        "--protocol",
        "mad",
        "--agents",
        str(AGENTS),
        "--rounds",
        str(ROUNDS),
        "--limit",
        str(LIMIT),
        "--sim-latency-s",
        "0.1",
        "--max-concurrent-questions",
        "2",
        "--out",
        str(out),
    ]


def start_and_wait_for_rows(tmp_path, out, rows: int = 4) -> tuple[subprocess.Popen, object]:
    """A ``debate run`` in its own session, once ``rows`` question rows are on disk."""
    log = open(tmp_path / "run.log", "wb")
    proc = subprocess.Popen(argv(out), cwd=tmp_path, env=_env(), stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + 180
    while not (out / "questions").is_dir() or read_table(out, "questions").num_rows < rows:
        assert proc.poll() is None, (tmp_path / "run.log").read_text()[-2000:]
        assert time.monotonic() < deadline, "no question rows within 180 s"
        time.sleep(0.2)
    return proc, log


def leftovers(session: int, within_s: float = 20.0) -> list[int]:
    """The processes of ``session`` still alive (zombies aside) once ``within_s`` passed, or none earlier."""
    deadline = time.monotonic() + within_s
    while True:
        alive = [pid for pid, state in _session_procs(session) if state != "Z"]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.5)


def check_interrupted(tmp_path, out, code: int, want: int) -> None:
    text = (tmp_path / "run.log").read_text(errors="replace")
    assert code == want, text[-3000:]
    assert "Traceback" not in text and "SIGTERM received" not in text and "PC: @" not in text, text[-3000:]
    last = text.strip().splitlines()[-1]
    line = rf"debate: interrupted: (\d+)/{LIMIT} questions saved in (.+); run the same command to resume"
    found = re.fullmatch(line, last)
    assert found, last
    saved = read_table(out, "questions").num_rows
    assert int(found[1]) == saved and 0 < saved < LIMIT and found[2] == str(out)
    # the progress lines' counts (off a terminal: "mad (simulated, SIMULATED): 5/24 q (21%) ...")
    shown = [int(n) for n in re.findall(rf"(\d+)/{LIMIT} q\b", text)]
    assert shown and max(shown) <= saved, f"the bar showed {max(shown)} questions, {saved} were on disk"
    assert read_table(out, "runs").column("status").to_pylist() == ["interrupted"]


def check_resumes(tmp_path, out) -> None:
    done = subprocess.run(argv(out) + ["--no-progress"], cwd=tmp_path, env=_env(), capture_output=True, timeout=400)
    assert done.returncode == 0, done.stderr[-2000:]
    qs = read_table(out, "questions").to_pandas()
    assert len(qs) == LIMIT and qs.question_id.is_unique
    calls = read_table(out, "calls").to_pandas()
    keep = calls.merge(qs[["run_id", "question_id", "attempt"]], on=["run_id", "question_id", "attempt"])
    assert len(keep) == LIMIT * AGENTS * ROUNDS and not keep.duplicated(["question_id", "round", "agent_id"]).any()


def test_sigterm_saves_what_finished_in_one_line_exit_143_and_resumes(tmp_path):
    out = tmp_path / "out"
    proc, log = start_and_wait_for_rows(tmp_path, out)
    proc.send_signal(signal.SIGTERM)  # to the driver only, as Kubernetes and `kill` do
    t0 = time.monotonic()
    code = proc.wait(timeout=60)
    log.close()
    stop_s = time.monotonic() - t0
    assert stop_s < 30, f"SIGTERM took {stop_s:.1f} s to end the run (SLURM kills after 30 s)"
    check_interrupted(tmp_path, out, code, 143)
    assert not leftovers(proc.pid), "processes of the interrupted run outlive it"
    check_resumes(tmp_path, out)


def test_ctrl_c_to_the_process_group_saves_what_finished_exit_130(tmp_path):
    out = tmp_path / "out"
    proc, log = start_and_wait_for_rows(tmp_path, out)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: every process of the foreground group
    code = proc.wait(timeout=60)
    log.close()
    check_interrupted(tmp_path, out, code, 130)
    assert not leftovers(proc.pid), "processes of the interrupted run outlive it"


def test_a_sigkilled_run_leaves_no_ray_process_and_reads_interrupted(tmp_path):
    out = tmp_path / "out"
    proc, log = start_and_wait_for_rows(tmp_path, out)
    ours = {pid for pid, _ in _session_procs(proc.pid)} - {proc.pid}
    assert ours, "the run's Ray processes were not found in its session"
    proc.kill()  # the driver only: the OOM killer, kill -9
    proc.wait(timeout=30)
    log.close()
    left = leftovers(proc.pid, within_s=20)
    for pid in left:  # do not leave them to the next test either
        os.kill(pid, signal.SIGKILL)
    assert not left, f"Ray processes of the killed run still alive 20 s later: {left}"
    assert read_table(out, "runs").column("status").to_pylist() == ["interrupted"]
    check_resumes(tmp_path, out)
