"""Where a run's rows go: the :class:`Sink` interface and the sinks registered by name.

The writer actor (:mod:`actors.writer_actor`) is handed a sink's name (``--sink``, default
``parquet``) and makes ``sink_class(name)(out_dir, flush_rows=..., flush_seconds=...)`` for each
run directory; :func:`actors.local_run.run_local` does the same in-process. A sink is one class
and one registration::

    class JsonlSink(Sink):
        def store_part(self, table, part, rows): ...   # one flushed batch of a streamed table
        def store_run(self, row): ...                  # the run's one row, replaced each time

    register_sink("jsonl", JsonlSink)

:class:`Sink` does the rest the writer relies on: rows are checked against their table's schema
before they are taken (:func:`engine.results.schema.check_rows`, a bug otherwise), prompt
messages are taken once per run, and rows are flushed every ``flush_rows`` rows or
``flush_seconds`` seconds. A sink that cannot write raises :class:`WriteFailed` (one line naming
what it could not write, :func:`write_error`), which stops the run resumably; its batch stays
buffered. The built-in sink is :class:`engine.results.parquet.ParquetSink` (``parquet``), the
layout every reader reads (:func:`engine.results.read_table`, resume, ``debate report``).
"""

from __future__ import annotations

import errno
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import psutil

from engine.errors import UserError
from engine.results.schema import STREAMED, check_rows


class WriteFailed(OSError):
    """A result file could not be written (a full disk, a folder gone read-only, an I/O error).
    The message is one line naming the file; nothing half-written is left, under a result name or
    a temporary one."""


def _mount_of(path: Path) -> tuple[str, str]:
    """The file system ``path`` is on: (its device or kind, where it is mounted)."""
    best = ("", "/")
    target = str(path.resolve())
    for part in psutil.disk_partitions(all=True):
        mount = part.mountpoint.rstrip("/") or "/"
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best[1]):
            best = (part.device or part.fstype, mount)
    return best


def write_error(exc: OSError, path: Path) -> WriteFailed:
    """One line for a failed write of ``path``: ``no space left on DEVICE (mounted on M) writing
    PATH`` for a full disk, else the system's reason and the path."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT) or "No space left" in str(exc):
        device, mount = _mount_of(path.parent)
        return WriteFailed(f"no space left on {device or 'the device'} (mounted on {mount}) writing {path}")
    text = str(exc).strip()
    reason = exc.strerror or (text.splitlines()[0] if text else type(exc).__name__)
    return WriteFailed(f"cannot write {path}: {reason}")


class Sink(ABC):
    """Takes a run's rows, buffered per streamed table (:data:`engine.results.schema.STREAMED`),
    and stores them in batches (see the module docstring).

    ``out_dir``: the run directory. ``name``: this writer's id (default: 8 random hex), so that
    several writers of one directory never store under the same name. ``rows_written``: rows
    stored so far, per streamed table. A subclass stores: :meth:`store_part` and :meth:`store_run`.
    """

    def __init__(self, out_dir: str | Path, flush_rows: int = 256, flush_seconds: float = 2.0, name: str | None = None):
        self.out = Path(out_dir)
        self.flush_rows = flush_rows
        self.flush_seconds = flush_seconds
        self.name = name or uuid.uuid4().hex[:8]
        self._buffers: dict[str, list[dict[str, Any]]] = {t: [] for t in STREAMED}
        self._parts: dict[str, int] = {t: 0 for t in STREAMED}
        self._last_flush = time.monotonic()
        self.rows_written: dict[str, int] = {t: 0 for t in STREAMED}
        self._messages: set[tuple[str, str]] = set()  # (run_id, message) of prompts rows taken

    @abstractmethod
    def store_part(self, table: str, part: int, rows: list[dict[str, Any]]) -> None:
        """Store ``rows`` of ``table`` for good: one flushed batch, ``part`` its number in this
        sink (0, 1, ...). Raises :class:`WriteFailed` when it cannot; nothing of the batch may then
        be left where a reader reads."""

    @abstractmethod
    def store_run(self, row: dict[str, Any]) -> None:
        """Store the run's one row, replacing the one stored before (atomically: a reader sees the
        old row or the new one). Raises :class:`WriteFailed` when it cannot."""

    def write(self, table: str, rows: Iterable[dict[str, Any]]) -> None:
        """Take ``rows`` of a streamed table; flushes when :meth:`due` or a table holds
        ``flush_rows`` rows. Raises :class:`engine.results.schema.SchemaError` for a row that
        does not fit (a bug) and ValueError for a table that is not streamed."""
        if table not in self._buffers:
            raise ValueError(f"unknown table {table!r}")
        rows = list(rows)
        check_rows(table, rows)
        if table == "prompts":
            rows = self._new_messages(rows)
        self._buffers[table].extend(rows)
        if self.due() or any(len(b) >= self.flush_rows for b in self._buffers.values()):
            self.flush()

    def due(self) -> bool:
        """Whether ``flush_seconds`` have passed since the last flush."""
        return time.monotonic() - self._last_flush >= self.flush_seconds

    def _new_messages(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The prompts rows whose (run_id, message) this sink has not taken before: each message
        once per run, however many senders shipped it."""
        fresh = []
        for r in rows:
            key = (r["run_id"], r["message"])
            if key not in self._messages:
                self._messages.add(key)
                fresh.append(r)
        return fresh

    def flush(self) -> None:
        """Store every buffered row (:meth:`store_part`, one batch per table)."""
        for table, rows in self._buffers.items():
            if not rows:
                continue
            self.store_part(table, self._parts[table], rows)
            self._parts[table] += 1
            self.rows_written[table] += len(rows)
            rows.clear()
        self._last_flush = time.monotonic()

    def write_run(self, row: dict[str, Any]) -> None:
        """Write (or rewrite) the single row of a run, checked against the runs schema."""
        check_rows("runs", [row])
        self.store_run(row)


class UnknownSink(UserError, ValueError):
    """``--sink`` names no registered sink; the message lists the known ones."""


_SINKS: dict[str, type[Sink]] = {}


def register_sink(name: str, cls: type[Sink], replace: bool = False) -> type[Sink]:
    """Make ``cls`` the sink called ``name`` (``--sink name``); a second registration of a name
    fails unless ``replace``. Returns ``cls``; :func:`unregister_sink` undoes it."""
    if not name:
        raise ValueError("a sink needs a name")
    if not (isinstance(cls, type) and issubclass(cls, Sink)):
        raise TypeError(f"sink {name!r}: {cls!r} is not a Sink subclass")
    if name in _SINKS and not replace and _SINKS[name] is not cls:
        raise ValueError(f"sink {name!r} is already registered")
    _SINKS[name] = cls
    return cls


def unregister_sink(name: str) -> None:
    """Remove a registered sink (tests)."""
    _SINKS.pop(name, None)


def sink_names() -> tuple[str, ...]:
    """Every registered sink, in registration order."""
    return tuple(_SINKS)


def sink_class(name: str) -> type[Sink]:
    """The sink registered as ``name``; :class:`UnknownSink` (one line naming the known ones) for
    any other name."""
    try:
        return _SINKS[name]
    except KeyError:
        raise UnknownSink(f"--sink {name!r}: no such results sink (known: {', '.join(sink_names())})") from None
