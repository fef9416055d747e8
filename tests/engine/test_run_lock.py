"""The run lock (engine/run_lock.py): one process per run id and results folder.

Real processes hold the lock here (a Python child that takes it and sleeps), so the refusal, the
take-over of a SIGKILLed holder's lock and ``wait`` are tested as they happen between two runs.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from engine.run_lock import RunLock, RunLocked, holder_alive, lock_path, read_holder, run_alive

ROOT = Path(__file__).resolve().parents[2]


def hold(out: Path, run_id: str) -> subprocess.Popen:
    """A child process that takes the lock of ``run_id`` in ``out``, says so and sleeps."""
    code = textwrap.dedent(
        f"""
        import sys, time
        from engine.run_lock import RunLock
        with RunLock({str(out)!r}, {run_id!r}):
            print("held", flush=True)
            time.sleep(120)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_process_is_refused_in_one_line_naming_the_holder_and_the_file(tmp_path):
    proc = hold(tmp_path, "mad-1")
    try:
        t0 = time.monotonic()
        with pytest.raises(RunLocked) as info, RunLock(tmp_path, "mad-1"):
            pass
        msg = str(info.value)
        assert "\n" not in msg and time.monotonic() - t0 < 5
        assert f"pid {proc.pid}" in msg and socket.gethostname() in msg and "--wait" in msg
        holder = read_holder(lock_path(tmp_path, "mad-1"))
        assert holder and holder["pid"] == proc.pid and holder_alive(holder) is True
        assert run_alive(tmp_path, "mad-1") is True
        with RunLock(tmp_path, "mad-2"):  # another run id in the same folder: side by side
            assert lock_path(tmp_path, "mad-2").exists()
        assert not lock_path(tmp_path, "mad-2").exists()
    finally:
        proc.kill()
        proc.wait()


def test_the_lock_of_a_sigkilled_holder_is_taken_over(tmp_path, caplog):
    proc = hold(tmp_path, "mad-1")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    path = lock_path(tmp_path, "mad-1")
    assert path.exists() and run_alive(tmp_path, "mad-1") is False  # left behind, but dead
    with RunLock(tmp_path, "mad-1"):
        assert read_holder(path)["pid"] == os.getpid()
        assert run_alive(tmp_path, "mad-1") is True
    assert "took over the lock" in caplog.text and f"pid {proc.pid}" in caplog.text
    assert not path.exists()
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]  # no temporary file left


def test_a_lock_written_on_another_host_is_never_taken_over(tmp_path):
    path = lock_path(tmp_path, "mad-1")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"host": "node-17.cluster", "pid": 4242, "since": "2026-11-27T10:00:00+00:00"}))
    assert run_alive(tmp_path, "mad-1") is None  # cannot tell from here
    with pytest.raises(RunLocked, match=rf"host node-17\.cluster, pid 4242.*delete {path}"):
        RunLock(tmp_path, "mad-1").acquire()
    assert path.exists()


def test_wait_starts_when_the_holder_ends(tmp_path):
    proc = hold(tmp_path, "mad-1")
    said: list[str] = []
    threading.Timer(0.6, proc.kill).start()
    t0 = time.monotonic()
    with RunLock(tmp_path, "mad-1", wait=True, poll_s=0.05, on_wait=said.append):
        waited = time.monotonic() - t0
        assert read_holder(lock_path(tmp_path, "mad-1"))["pid"] == os.getpid()
    proc.wait()
    assert waited >= 0.5, f"took the lock after {waited:.2f} s, while the holder still ran"
    assert len(said) == 1 and f"pid {proc.pid}" in said[0]


def test_the_lock_is_reentrant_in_one_process_and_released_by_the_outermost(tmp_path):
    path = lock_path(tmp_path, "r")
    with RunLock(tmp_path, "r"):
        with RunLock(tmp_path, "r"):
            assert path.exists()
        assert path.exists()  # the inner release keeps it
    assert not path.exists()
