"""The writer actor: the only process that writes the run's Parquet files.

It wraps :class:`engine.results.ParquetSink`; rows arrive as soon as the coordinator has them and
are flushed in small atomically renamed part files (every ``flush_rows`` rows or
``flush_seconds``), so a long run's results are on disk while it runs.

Rows arrive fire-and-forget (nobody waits on ``write``), so a row that does not fit its schema
(:class:`engine.results.SchemaError`, a bug) is kept as the writer's failure: every later call
raises it, the run's final ``flush`` included, which stops the run loudly. What was written
before stays whole and resumable.
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
            self.sink.flush()
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

    def write(self, table: str, rows: list[dict[str, Any]]) -> None:
        sink = self._check()
        try:
            sink.write(table, rows)
        except Exception as exc:
            self.failure = exc
            raise

    def write_run(self, row: dict[str, Any]) -> None:
        sink = self._check()
        sink.flush()
        sink.write_run(row)

    def where(self) -> dict[str, Any]:
        """Node id, node IP and GPU ids of this actor (the run's placement record)."""
        from actors.cluster import here

        return here()

    def flush(self) -> dict[str, int]:
        if self.sink is None:  # not pointed at a directory yet
            return {}
        sink = self._check()
        sink.flush()
        return dict(sink.rows_written)
