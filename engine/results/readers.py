"""Reading one run directory's tables: :func:`read_table` and what it is made of.

A table is read from its part files (``OUT/<table>/*.parquet``, :mod:`engine.results.parquet`)
in its schema (:data:`engine.results.schema.SCHEMAS`): a column written before it existed reads
as null, question (and re-read answer) rows superseded by a later ``debate rescore`` are left out
(:func:`latest_grades`), a run left ``running`` by a process that ended reads ``interrupted``,
and the graphs table's older one-row-per-edge parts read in today's layout (:func:`graph_edges`
takes edges apart again). A part that cannot be read is named in one line
(:class:`ResultsError`), or left out with ``skip_bad_parts``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine.errors import UserError
from engine.results.schema import EDGES_SCHEMA, GRAPHS_SCHEMA, SCHEMAS, STREAMED
from engine.run_lock import run_alive

log = logging.getLogger(__name__)


class ResultsError(UserError, ValueError):
    """Bad input to a reader of result folders (``debate report``, ``rescore``, ``export``,
    :func:`load`): a missing directory, no results, a part file that cannot be read; the message
    names the path."""


def read_table(
    out_dir: str | Path,
    table: str,
    columns: list[str] | tuple[str, ...] | None = None,
    *,
    skip_bad_parts: bool = False,
    notes: list[str] | None = None,
) -> pa.Table:
    """Read one table of a run directory (empty table with the schema if nothing was written),
    projected to ``columns`` (those the schema knows; default all). Part files written before a
    column existed read it as null. Question (and re-read answer) rows superseded by a later
    ``debate rescore`` are left out (:func:`latest_grades`).

    A part file that cannot be read (truncated, not Parquet, a column of another type, no read
    permission) raises :class:`ResultsError` naming it; with ``skip_bad_parts`` it is left out
    and a line naming it goes to ``notes`` (to the log when ``notes`` is None)."""
    data, bad = _read_checked(Path(out_dir), table, columns, rest=skip_bad_parts)
    if bad and not skip_bad_parts:
        raise ResultsError(_unreadable_message(bad))
    for path, why in bad:
        _note(notes, f"{path}: unreadable Parquet part ({why}): left out (--skip-bad-parts)")
    return data


def unreadable_parts(
    out_dir: str | Path, table: str, columns: list[str] | tuple[str, ...] | None = None
) -> list[tuple[Path, str]]:
    """The part files of ``table`` in ``out_dir`` that cannot be read (projected to ``columns``),
    each with why in one line; empty when the table reads (one read of every part: the fast path)."""
    return _read_checked(Path(out_dir), table, columns, rest=False)[1]


def _read_checked(
    out_dir: Path, table: str, columns: list[str] | tuple[str, ...] | None, rest: bool = True
) -> tuple[pa.Table, list[tuple[Path, str]]]:
    """``table`` of ``out_dir`` as :func:`read_table` reads it, and its unreadable part files
    with why (:func:`_read_parts`); ``rest``: read the readable parts when some are not (else
    the table returned is empty)."""
    # function-level: importing pyarrow.dataset here keeps it off start-up
    import pyarrow.dataset as ds

    schema = SCHEMAS[table]
    cols = [c for c in (columns or schema.names) if c in schema.names]
    extra = [c for c in (*GRADED_KEYS.get(table, ()), "graded") if table in GRADED_KEYS and c not in cols]
    path = out_dir / table
    files = sorted(str(p) for p in path.glob("*.parquet")) if path.is_dir() else []

    def read(parts: list[str]) -> pa.Table:
        if table == "graphs":
            return _read_graphs(parts, cols)
        return ds.dataset(parts, schema=schema, format="parquet").to_table(columns=cols + extra)

    data, bad = _read_parts(files, read, rest)
    if data is None:
        return pa.schema([schema.field(c) for c in cols]).empty_table(), bad
    if table == "runs":
        return _live_status(out_dir, data), bad
    if table not in GRADED_KEYS:
        return data, bad
    return latest_grades(data, GRADED_KEYS[table]).drop_columns(extra), bad


# What reading a damaged or foreign file raises: pyarrow's errors (ArrowInvalid for a bad footer
# or a column that cannot be cast, ...) and the OS's (a corrupt page, no permission).
READ_ERRORS = (pa.ArrowException, OSError)


def _read_parts(
    files: list[str], read: Callable[[list[str]], pa.Table], rest: bool = True
) -> tuple[pa.Table | None, list[tuple[Path, str]]]:
    """``read(files)`` and the part files it could not read, with why.

    The fast path reads every part at once; only when that fails is each part read alone, to
    name the bad ones (then the readable ones are read together if ``rest``). A failure no single
    part causes is not a file's fault: it is raised as it came. None for no table (no files, or
    every part bad, or ``rest`` false)."""
    if not files:
        return None, []
    try:
        return read(files), []
    except READ_ERRORS:
        bad = [(Path(f), why) for f in files if (why := _read_problem(f, read)) is not None]
        if not bad:
            raise
    good = [f for f in files if Path(f) not in {p for p, _ in bad}]
    return (read(good) if rest and good else None), bad


def _read_problem(path: str, read: Callable[[list[str]], pa.Table]) -> str | None:
    """Why ``read([path])`` fails, in one line (None: it reads)."""
    try:
        read([path])
    except READ_ERRORS as exc:
        return _why(exc, path)
    return None


def _why(exc: BaseException, path: str) -> str:
    """A reader's error in one line, without the path (the caller names it once)."""
    if isinstance(exc, IsADirectoryError):
        return "a directory, not a file"
    if isinstance(exc, PermissionError):
        return "permission denied"
    text = (str(exc).strip().splitlines() or [""])[0]
    text = re.sub(r"^Could not open Parquet input source '.*?': ", "", text)
    text = text.replace(". Either the file is corrupted or this is not a parquet file.", ": truncated or not Parquet")
    return text.replace(f"'{path}'", "it").replace(path, "it").strip() or type(exc).__name__


def _unreadable_message(bad: list[tuple[Path, str]]) -> str:
    """The one-line error for unreadable part files: the first named, how many more."""
    path, why = bad[0]
    more = f" (and {len(bad) - 1} more part(s) like it)" if len(bad) > 1 else ""
    return (
        f"{path}: unreadable Parquet part ({why}){more}: pass --skip-bad-parts to read the rest (a resumed "
        "run sets it aside and debates its questions again)"
    )


def _note(notes: list[str] | None, line: str) -> None:
    if notes is None:
        log.warning("%s", line)
    else:
        notes.append(line)


def footer_problems(out_dir: str | Path, tables: Iterable[str] = STREAMED) -> list[tuple[Path, str]]:
    """The part files of ``tables`` in ``out_dir`` whose Parquet footer cannot be read (a
    truncated, empty or foreign file), with why: a cheap check (no data is read), for a status
    that must not read whole tables. A part with a good footer may still fail to read."""
    bad = []
    for table in tables:
        folder = Path(out_dir) / table
        for f in sorted(folder.glob("*.parquet")) if folder.is_dir() else []:
            try:
                pq.read_metadata(f)
            except READ_ERRORS as exc:
                bad.append((f, _why(exc, str(f))))
    return bad


def _live_status(run_dir: Path, runs: pa.Table) -> pa.Table:
    """``runs`` with the status of a run that no process runs any more read as ``interrupted``: its
    row still says ``running`` (it was killed, or stopped before it could rewrite the row) and its
    lock (:mod:`engine.run_lock`) is gone or left by a process that ended. A run whose lock was
    taken on another host stays ``running`` (cannot tell from here)."""
    if "status" not in runs.column_names or "run_id" not in runs.column_names:
        return runs
    status = runs.column("status").to_pylist()
    if "running" not in status:
        return runs
    ids = runs.column("run_id").to_pylist()
    fixed = [
        "interrupted" if st == "running" and run_alive(run_dir, run_id) is False else st
        for st, run_id in zip(status, ids)
    ]
    return runs.set_column(runs.column_names.index("status"), "status", pa.array(fixed, pa.string()))


def _read_graphs(files: list[str], cols: list[str]) -> pa.Table:
    """The graphs parts in :data:`GRAPHS_SCHEMA`; parts in the older one-row-per-edge layout
    (:data:`EDGES_SCHEMA`) follow, each edge a row with a one-source list (its weight list null
    where the weight is 1.0, as the writer stores it)."""
    # function-level: importing pyarrow.dataset here keeps it off start-up
    import pyarrow.dataset as ds

    schema = pa.schema([GRAPHS_SCHEMA.field(c) for c in cols])
    current = [f for f in files if "srcs" in pq.read_schema(f).names]
    older = [f for f in files if f not in set(current)]
    parts = [ds.dataset(current, schema=GRAPHS_SCHEMA, format="parquet").to_table(columns=cols)] if current else []
    if older:
        old = ds.dataset(older, schema=EDGES_SCHEMA, format="parquet").to_table()
        offsets = pa.array(np.arange(old.num_rows + 1, dtype=np.int32))
        weight = old.column("weight").combine_chunks()
        ones = pc.fill_null(pc.equal(weight, 1.0), True)
        converted = {
            **{n: old.column(n) for n in old.column_names},
            "srcs": pa.ListArray.from_arrays(offsets, old.column("src").combine_chunks()),
            "weights": pa.ListArray.from_arrays(offsets, weight, mask=ones),
            "dst_group": pa.nulls(old.num_rows, pa.int32()),
            "pruned": pa.nulls(old.num_rows, pa.list_(pa.bool_())),
        }
        parts.append(pa.Table.from_arrays([converted[c] for c in cols], schema=schema))
    return pa.concat_tables(parts)


def graph_edges(graphs: pa.Table) -> pa.Table:
    """The graphs table (:data:`GRAPHS_SCHEMA`) as one row per information edge, in
    :data:`EDGES_SCHEMA` (``src``, ``dst``, ``weight``: 1.0 where ``weights`` is null;
    ``pruned``: False where ``pruned`` is null), in row order and each row's sources in order.
    Vectorised (pyarrow), no Python object per edge."""
    srcs = graphs.column("srcs").combine_chunks()
    row = pc.list_parent_indices(srcs)
    weights = graphs.column("weights").combine_chunks()
    lengths = pc.fill_null(pc.list_value_length(srcs), 0)
    has = pc.is_valid(weights)
    # a null weights list stands for all 1.0: give it a list of ones of its sources' length
    ones = pa.ListArray.from_arrays(
        pa.array(np.concatenate([[0], np.cumsum(lengths.to_numpy())]).astype(np.int32)),
        pa.array(np.ones(len(row), dtype=np.float64)),
    )
    filled = pc.if_else(has, weights, ones)
    if "pruned" in graphs.column_names:
        flags = graphs.column("pruned").combine_chunks()
        falses = pa.ListArray.from_arrays(ones.offsets, pa.array(np.zeros(len(row), dtype=bool)))
        pruned = pc.list_flatten(pc.if_else(pc.is_valid(flags), flags, falses))
    else:
        pruned = pa.array(np.zeros(len(row), dtype=bool))
    out = {
        name: pc.take(graphs.column(name), row)
        for name in EDGES_SCHEMA.names
        if name in graphs.column_names and name not in ("srcs", "weights", "pruned")
    }
    out["src"] = pc.list_flatten(srcs)
    out["weight"] = pc.list_flatten(filled)
    out["pruned"] = pruned
    names = [n for n in EDGES_SCHEMA.names if n in out]
    return pa.Table.from_arrays([out[n] for n in names], schema=pa.schema([EDGES_SCHEMA.field(n) for n in names]))


def read_edges(out_dir: str | Path) -> pa.Table:
    """Every information edge of a run directory, one row each (:func:`graph_edges` of its graphs
    table; old one-row-per-edge parts included)."""
    return graph_edges(read_table(out_dir, "graphs"))


# Tables that `debate rescore` adds rows to, and what identifies a row: readers keep the newest.
GRADED_KEYS = {
    "questions": ("run_id", "question_id"),
    "answers": ("run_id", "question_id", "attempt", "round", "agent_id"),
}


def latest_grades(table: pa.Table, keys: tuple[str, ...] = GRADED_KEYS["questions"]) -> pa.Table:
    """The rows in force, one per ``keys`` (a question, or an agent call for ``answers``): the row
    graded last by ``debate rescore`` (``graded``), else a row the run wrote (``graded`` null).
    Whatever is on disk (two processes that debated the same run into one folder, a copied part),
    a key counts once: among equal grades the row read last wins, and :func:`complete_calls`
    then keeps only that attempt's calls. Row order is kept."""
    present = [k for k in keys if k in table.column_names]
    if table.num_rows < 2 or len(present) < len(keys):
        return table
    if table.select(present).group_by(present).aggregate([]).num_rows == table.num_rows:
        return table  # no key twice: nothing to choose (the common case, vectorised)
    graded = (
        table.column("graded").cast(pa.int64()).to_pylist() if "graded" in table.column_names else [None] * len(table)
    )
    best: dict[tuple[Any, ...], tuple[int, int]] = {}
    ids = zip(*(table.column(k).to_pylist() for k in keys))
    for i, (key, when) in enumerate(zip(ids, graded)):
        rank = -1 if when is None else when
        if key not in best or rank >= best[key][0]:
            best[key] = (rank, i)
    keep = sorted(i for _, i in best.values())
    return table.take(pa.array(keep, pa.int64()))
