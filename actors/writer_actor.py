"""The writer actor: the only process that writes the run's Parquet files.

It wraps :class:`engine.results.ParquetSink`; rows arrive as soon as the coordinator has them and
are flushed in small atomically renamed part files (every ``flush_rows`` rows or
``flush_seconds``), so a long run's results are on disk while it runs.
"""

from __future__ import annotations

from typing import Any

import ray

from engine.results import ParquetSink


@ray.remote(num_cpus=0)
class WriterActor:
    """Kept by the engine across runs; :meth:`open` points it at the next run's directory."""

    def __init__(self, out_dir: str | None = None, flush_rows: int = 256, flush_seconds: float = 2.0):
        self.flush_rows, self.flush_seconds = flush_rows, flush_seconds
        self.sink = ParquetSink(out_dir, flush_rows=flush_rows, flush_seconds=flush_seconds) if out_dir else None

    def open(self, out_dir: str) -> str:
        """Finish the current directory's parts and write the next ones to ``out_dir``."""
        if self.sink is not None:
            self.sink.flush()
        self.sink = ParquetSink(out_dir, flush_rows=self.flush_rows, flush_seconds=self.flush_seconds)
        return out_dir

    def write(self, table: str, rows: list[dict[str, Any]]) -> None:
        self.sink.write(table, rows)

    def write_run(self, row: dict[str, Any]) -> None:
        self.sink.flush()
        self.sink.write_run(row)

    def where(self) -> dict[str, Any]:
        """Node id, node IP and GPU ids of this actor (the run's placement record)."""
        from actors.cluster import here

        return here()

    def flush(self) -> dict[str, int]:
        if self.sink is None:  # not pointed at a directory yet
            return {}
        self.sink.flush()
        return dict(self.sink.rows_written)
