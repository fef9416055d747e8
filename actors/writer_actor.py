"""The writer actor: the only process that writes the run's Parquet files.

It wraps :class:`engine.results.ParquetSink`; rows arrive as soon as the coordinator has them and
are flushed in small atomically renamed part files (every ``flush_rows`` rows or
``flush_seconds``), so a long run's results are on disk while it runs.

Failures. Rows arrive without the sender blocking, but every call is acknowledged: the
coordinator awaits each write's result and calls :meth:`tick` every second, so it learns within
about a second that the writer died or failed. A failure is kept: a row that does not fit its
schema (:class:`engine.results.SchemaError`, a bug) or a file that cannot be written
(:class:`engine.results.WriteFailed`: a full disk, a folder gone read-only; one line naming the
file) makes every later call raise it at once, so nothing is retried against a full disk and
the run stops with that line. What was written before stays whole and resumable.
"""

from __future__ import annotations

from typing import Any

from actors.remote import actor
from engine.results import ParquetSink


@actor(num_cpus=0)
class WriterActor:
    """Kept by the engine across runs; :meth:`open` points it at the next run's directory."""

    def __init__(self, out_dir: str | None = None, flush_rows: int = 256, flush_seconds: float = 2.0):
        self.flush_rows, self.flush_seconds = flush_rows, flush_seconds
        self.failure: Exception | None = None
        self.sink = ParquetSink(out_dir, flush_rows=flush_rows, flush_seconds=flush_seconds) if out_dir else None

    def open(self, out_dir: str) -> str:
        """Finish the current directory's parts and write the next ones to ``out_dir``."""
        if self.sink is not None and self.failure is None:
            self._guarded(self.sink.flush)
        self.failure = None
        self.sink = ParquetSink(out_dir, flush_rows=self.flush_rows, flush_seconds=self.flush_seconds)
        return out_dir

    def _check(self) -> ParquetSink:
        """The sink to write to; raises the kept failure, or a ``RuntimeError`` before :meth:`open`."""
        if self.failure is not None:
            raise self.failure
        if self.sink is None:
            raise RuntimeError("WriterActor: rows written before open() named the run's directory")
        return self.sink

    def _guarded(self, step, *args) -> Any:
        """``step(*args)``, keeping any exception it raises as the writer's failure."""
        try:
            return step(*args)
        except Exception as exc:
            self.failure = exc
            raise

    def write(self, table: str, rows: list[dict[str, Any]]) -> None:
        self._guarded(self._check().write, table, rows)

    def write_run(self, row: dict[str, Any], after_failure: bool = False) -> None:
        """Write (rewrite) the run's row, flushing the rows before it. ``after_failure``: the last
        word of a run that stopped on the writer's failure (its status), written if the disk
        lets it, without the rows that could not be written."""
        if after_failure and self.sink is not None:
            self.sink.write_run(row)
            return
        sink = self._check()
        self._guarded(sink.flush)
        self._guarded(sink.write_run, row)

    def tick(self) -> dict[str, int]:
        """The health check the coordinator makes every second: flush if ``flush_seconds`` passed
        since the last flush; the rows written so far per table (raises the kept failure)."""
        if self.sink is None:
            return {}
        sink = self._check()
        if sink.due():
            self._guarded(sink.flush)
        return dict(sink.rows_written)

    def where(self) -> dict[str, Any]:
        """Node id, node IP and GPU ids of this actor (the run's placement record)."""
        from actors.cluster import here

        return here()

    def flush(self) -> dict[str, int]:
        if self.sink is None:  # not pointed at a directory yet
            return {}
        sink = self._check()
        self._guarded(sink.flush)
        return dict(sink.rows_written)
