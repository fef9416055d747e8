"""The writer actor: the only process that writes the run's result files.

It is handed its sink (:mod:`engine.results.sinks`): the name of a registered one (``--sink``,
default ``parquet``: :class:`engine.results.ParquetSink`) or a :class:`~engine.results.sinks.Sink`
class (:func:`shipped_sink`), and makes one for each run directory it is pointed at
(:meth:`WriterActor.open`). Rows arrive as soon as the coordinator has them and the sink stores
them in small batches (every ``flush_rows`` rows or ``flush_seconds``; Parquet: atomically
renamed part files), so a long run's results are on disk while it runs.

Failures. Rows arrive without the sender blocking, but every call is acknowledged: the
coordinator awaits each write's result and calls :meth:`tick` every second, so it learns within
about a second that the writer died or failed. A failure is kept: a row that does not fit its
schema (:class:`engine.results.SchemaError`, a bug) or a file that cannot be written
(:class:`engine.results.WriteFailed`, which every sink raises: a full disk, a folder gone
read-only; one line naming the file) makes every later call raise it at once, so nothing is
retried against a full disk and the run stops with that line. What was written before stays
whole and resumable.
"""

from __future__ import annotations

from typing import Any

from actors.cluster import here
from actors.remote import actor, by_value
from engine.results.sinks import Sink, sink_class

# What names a writer's sink: a registered sink's name, or the Sink class itself (shipped_sink).
SinkKind = str | type[Sink]


def shipped_sink(name: str) -> SinkKind:
    """What the driver hands the writer for ``--sink name``: a sink of the engine's own by name
    (every node imports :mod:`engine.results`), any other registered sink as its class, its module
    pickled by value (:func:`actors.remote.by_value`), so a sink registered in the driver (a
    plug-in, a test) reaches the writer in another process without being registered there.
    Raises :class:`engine.results.UnknownSink` for a name not registered."""
    cls = sink_class(name)
    if cls.__module__.split(".")[0] == "engine":
        return name
    by_value(cls)
    return cls


@actor(num_cpus=0)
class WriterActor:
    """Kept by the engine across runs; :meth:`open` points it at the next run's directory.

    ``sink``: the name of a registered sink or a Sink class (:data:`SinkKind`); each
    :meth:`open` makes a new one for its directory."""

    def __init__(
        self, out_dir: str | None = None, flush_rows: int = 256, flush_seconds: float = 2.0, sink: SinkKind = "parquet"
    ):
        self.flush_rows, self.flush_seconds = flush_rows, flush_seconds
        self.failure: Exception | None = None
        self.kind = sink
        self.sink = self._new_sink(out_dir) if out_dir else None

    def _new_sink(self, out_dir: str) -> Sink:
        """A sink of this writer's kind writing to ``out_dir``."""
        cls = self.kind if isinstance(self.kind, type) else sink_class(self.kind)
        return cls(out_dir, flush_rows=self.flush_rows, flush_seconds=self.flush_seconds)

    def open(self, out_dir: str, sink: SinkKind | None = None) -> str:
        """Finish the current directory's rows and write the next ones to ``out_dir``, through
        ``sink`` from now on (None: the sink this writer has)."""
        if self.sink is not None and self.failure is None:
            self._guarded(self.sink.flush)
        self.failure = None
        self.kind = sink if sink is not None else self.kind
        self.sink = self._new_sink(out_dir)
        return out_dir

    def _check(self) -> Sink:
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
        return here()

    def flush(self) -> dict[str, int]:
        if self.sink is None:  # not pointed at a directory yet
            return {}
        sink = self._check()
        self._guarded(sink.flush)
        return dict(sink.rows_written)
