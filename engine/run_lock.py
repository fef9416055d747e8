"""One process per run id and results folder: the run lock.

A run writes its rows into ``--out`` for as long as it runs; a second process debating the same
run id into the same folder would debate every question again and write each row twice. So a
run first takes ``OUT/runs/<run_id>.lock``: a small JSON file naming its holder (host, pid, when
it started, the command) that exists only while the run runs. Runs of *different* run ids share
a folder freely, each with its own lock.

Taking it is atomic: the file is written whole under a temporary name, locked with ``flock`` and
linked into place (``link`` fails when the name exists), so another process sees either no lock
or a complete one that is already held. A process that dies in any way (SIGKILL, a crash, a lost
node) leaves the file behind but not its ``flock``: a later run on the same host finds the file
unlocked, takes it over (one warning line) and resumes. A lock written on another host cannot be
tested from here (``flock`` over network file systems is not to be trusted), so it counts as held
until that run ends or the user deletes the file; the error says which file and whose.

Within one process the lock is re-entrant: :func:`actors.driver.run` takes it before Ray starts
(a refusal costs no start-up) and the :class:`~actors.driver.DebateRunner` it calls takes it again.

Readers (``debate show``, ``report``, :func:`engine.results.load`) never take the lock; they ask
:func:`holder_alive` whether a runs row still marked ``running`` has a live writer, and show it
as ``interrupted`` when not.

POSIX only (``fcntl``): Linux and macOS, the machines the engine supports.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import json
import logging
import os
import socket
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from engine.errors import UserError

log = logging.getLogger(__name__)

LOCK_SUFFIX = ".lock"


class RunLocked(UserError, RuntimeError):
    """Another live process runs this run id in this folder (the message names it and the file)."""


def lock_path(out: str | Path, run_id: str) -> Path:
    """Where the lock of ``run_id`` in the results folder ``out`` lives."""
    return Path(out) / "runs" / f"{run_id}{LOCK_SUFFIX}"


def _process_start(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch), None if there is no such process."""
    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def _me() -> dict[str, Any]:
    """This process as a lock names it."""
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "pid_start": _process_start(os.getpid()),
        "since": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv)[:300],
    }


def read_holder(path: Path) -> dict[str, Any] | None:
    """The holder a lock file names; None when there is no file, {} when it cannot be read."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def holder_alive(holder: dict[str, Any] | None) -> bool | None:
    """Whether the process a lock names still runs: True/False for a holder on this host (its pid
    alive with the same start time), None for a holder on another host (cannot tell from here),
    False for no holder."""
    if holder is None:
        return False
    if holder.get("host") != socket.gethostname():
        return None
    pid, started = holder.get("pid"), holder.get("pid_start")
    if not isinstance(pid, int):
        return False
    now = _process_start(pid)
    return now is not None and (started is None or abs(now - float(started)) < 2.0)


def describe(holder: dict[str, Any] | None) -> str:
    """A holder in a few words: ``host H, pid P, since T``."""
    if not holder:
        return "a process that left no readable record"
    return f"host {holder.get('host', '?')}, pid {holder.get('pid', '?')}, since {holder.get('since', '?')}"


def _flocked_file(directory: Path, holder: dict[str, Any]) -> tuple[int, Path]:
    """A new file in ``directory`` holding ``holder`` as JSON, already ``flock``-ed: (fd, path)."""
    tmp = directory / f".lock-{uuid.uuid4().hex[:12]}.tmp"
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, json.dumps(holder).encode())
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    return fd, tmp


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file open as ``fd``."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


class RunLock:
    """The lock of one run id in one results folder; a context manager (:meth:`acquire` /
    :meth:`release`). ``wait``: while another live process holds it, wait (checking every
    ``poll_s`` seconds; ``on_wait`` is told the holder once) instead of raising :class:`RunLocked`."""

    _held: dict[Path, tuple[int, int]] = {}  # lock path -> (fd, depth): what this process holds

    def __init__(
        self,
        out: str | Path,
        run_id: str,
        wait: bool = False,
        poll_s: float = 1.0,
        on_wait: Callable[[str], None] | None = None,
    ):
        self.path = lock_path(out, run_id)
        self.run_id, self.wait, self.poll_s = run_id, wait, poll_s
        self.on_wait = on_wait or log.warning

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    @property
    def key(self) -> Path:
        return self.path.parent.resolve() / self.path.name

    def acquire(self) -> RunLock:
        """Take the lock (again, if this process holds it); see the class docstring."""
        key = self.key
        if key in RunLock._held:
            fd, depth = RunLock._held[key]
            RunLock._held[key] = (fd, depth + 1)
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        told = False
        while True:
            taken = self._try_take()
            if taken is not None:
                RunLock._held[key] = (taken, 1)
                return self
            holder = read_holder(self.path)
            if not self.wait:
                raise RunLocked(self._refusal(holder))
            if not told:
                self.on_wait(f"run {self.run_id} is running elsewhere ({describe(holder)}): waiting for it to end")
                told = True
            time.sleep(self.poll_s)

    def _refusal(self, holder: dict[str, Any] | None) -> str:
        gone = (
            f"if that process is gone, delete {self.path}"
            if holder_alive(holder) is None
            else "it is alive on this host"
        )
        return (
            f"run {self.run_id} is already running in {self.path.parent.parent} ({describe(holder)}): "
            f"wait for it, or give --wait to start when it ends ({gone})"
        )

    def _try_take(self) -> int | None:
        """The fd of the lock if this process now holds it, else None (a live holder has it)."""
        fd, tmp = _flocked_file(self.path.parent, _me())
        try:
            try:
                os.link(tmp, self.path)
                return fd
            except FileExistsError:
                pass
            if self._take_over(tmp):
                return fd
        except BaseException:
            os.close(fd)
            raise
        finally:
            tmp.unlink(missing_ok=True)
        os.close(fd)
        return None

    def _take_over(self, fresh: Path) -> bool:
        """Replace the lock file by ``fresh`` if its holder died on this host (its ``flock`` is
        free); False when it is held, or was written on another host."""
        try:
            old = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return False  # released meanwhile: the caller tries again
        try:
            try:
                fcntl.flock(old, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    return False
                raise
            holder = read_holder(self.path)
            if not _same_file(old, self.path) or (holder and holder.get("host") != socket.gethostname()):
                return False
            os.replace(fresh, self.path)
            log.warning("run %s: took over the lock of a process that ended (%s)", self.run_id, describe(holder))
            return True
        finally:
            os.close(old)

    def release(self) -> None:
        """Give the lock up (the file goes once the outermost holder in this process releases it)."""
        key = self.key
        if key not in RunLock._held:
            return
        fd, depth = RunLock._held[key]
        if depth > 1:
            RunLock._held[key] = (fd, depth - 1)
            return
        del RunLock._held[key]
        try:
            if _same_file(fd, self.path):
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()
        finally:
            os.close(fd)


def run_alive(out: str | Path, run_id: str) -> bool | None:
    """Whether a live process runs ``run_id`` in ``out`` now: True, False, or None when its lock was
    written on another host (cannot tell). For readers: they never take the lock."""
    key = lock_path(out, run_id)
    if key.parent.resolve() / key.name in RunLock._held:
        return True
    return holder_alive(read_holder(key))
