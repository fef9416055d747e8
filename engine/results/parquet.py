"""The Parquet sink (``--sink parquet``, the default): each batch an atomically renamed part file.

A run directory holds one sub-directory per table (:mod:`engine.results`'s docstring); a flushed
batch of a streamed table is ``OUT/<table>/part-<writer>-<n>.parquet`` and the run's row
``OUT/runs/<run_id>.parquet``, each written to a hidden temporary name, fsynced and renamed into
place (:func:`_atomic_write`), so a reader or a resumed run never sees a half-written file.
:func:`write_part` is the same write for ``debate rescore``'s rows.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from engine.results.schema import STREAMED, rows_table
from engine.results.sinks import Sink, register_sink, write_error


def _atomic_write(table: pa.Table, path: Path) -> None:
    """Write to a hidden temporary name, fsync, rename into place: a reader (or a resumed run)
    sees the whole part or nothing, whenever the writing process is killed. Leftover ``.*.tmp``
    files of a killed writer are never read (readers glob ``*.parquet``). A failed write removes
    its temporary file and raises :class:`engine.results.sinks.WriteFailed` naming ``path``."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        pq.write_table(table, tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)  # the data is on disk before the name is
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise write_error(exc, path) from exc


def write_part(path: Path, table: str, rows: list[dict[str, Any]]) -> None:
    """``rows`` of ``table`` as one Parquet file at ``path``, in the table's schema, atomically
    (:func:`_atomic_write`). Rows are checked by the caller (:func:`engine.results.schema.check_rows`)."""
    _atomic_write(rows_table(table, rows), path)


class ParquetSink(Sink):
    """Stores each batch as an atomically renamed Parquet part file, and the run's row as
    ``runs/<run_id>.parquet`` (the module docstring); the table folders are made at once (a
    folder that cannot be made raises :class:`engine.results.sinks.WriteFailed`)."""

    def __init__(self, out_dir: str | Path, flush_rows: int = 256, flush_seconds: float = 2.0, name: str | None = None):
        super().__init__(out_dir, flush_rows, flush_seconds, name)
        for t in (*STREAMED, "runs"):
            try:
                (self.out / t).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise write_error(exc, self.out / t) from exc

    def store_part(self, table: str, part: int, rows: list[dict[str, Any]]) -> None:
        write_part(self.out / table / f"part-{self.name}-{part:05d}.parquet", table, rows)

    def store_run(self, row: dict[str, Any]) -> None:
        write_part(self.out / "runs" / f"{row['run_id']}.parquet", "runs", [row])


register_sink("parquet", ParquetSink)
