"""Unreadable Parquet parts of a run directory, set aside by the run that resumes in it.

A part file that cannot be read (truncated by a copy or a full disk, emptied, overwritten, a
column of another type) stops every reader with one line naming it (:class:`engine.results.ResultsError`);
``--skip-bad-parts`` reads around it. Readers never move a file. The run that owns the folder
does, when it resumes there (:func:`set_aside`, called by :func:`actors.driver._resume_state`),
so that later reads work without the flag and nothing is lost:

* each unreadable part of the streamed tables (questions, calls, graphs, prompts), and the run's
  own ``runs/<run_id>.parquet``, is renamed to ``NAME.parquet.unreadable`` (readers glob
  ``*.parquet``; the bytes are kept), with a warning naming both names;
* a questions part: the questions whose rows it held have no row any more, so they are debated again;
* a calls, graphs or prompts part: it was written by one attempt (``part-<writer>-NNNNN.parquet``
  names the attempt's writer), and which of its questions it held cannot be read. A question
  row says the question finished while some of its calls (graphs, prompts) are gone, so every
  question that attempt finished (its rows in ``questions/part-<writer>-*.parquet``) is debated
  again and its calls are whole again. Their old rows (the attempt's, and any ``debate
  rescore`` re-grading of them) are superseded: each questions part holding some is kept as
  ``NAME.parquet.superseded`` and rewritten without them, so each question ends with exactly one
  row. That attempt's other calls, graphs and prompts rows stay on disk; readers leave out the
  calls and graphs of an attempt that has no question row (:func:`engine.results.complete_calls`).

A part whose other parts (same writer) name another run id is that run's: it is left in place,
and this run reads around it, for that run to set aside when it resumes.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine.results import READ_ERRORS, STREAMED, unreadable_parts
from engine.results.parquet import _atomic_write

log = logging.getLogger(__name__)

# The columns read to find unreadable parts: what a resume reads of each table (a resume does not
# read the replies' texts, so a damaged page of another column is found by the reader that reads it).
_KEYS = {
    "questions": None,  # all: the resume keeps the rows of the questions already done
    "calls": ["run_id", "question_id", "attempt"],
    "graphs": ["run_id", "question_id", "attempt"],
    "prompts": ["run_id", "message", "attempt"],
}
_WRITER = re.compile(r"^part-(.+)-\d{5}\.parquet$")  # engine.results.ParquetSink's part names


def set_aside(out: Path, run_id: str) -> set[str]:
    """Set aside the unreadable parts of ``out`` that run ``run_id`` owns (see the module
    docstring) and supersede the rows of the questions they leave incomplete; returns the ids of
    those questions (their rows gone: debated again). Logs one warning per file moved."""
    redo_writers: set[str] = set()
    for table in STREAMED:
        for path, why in unreadable_parts(out, table, _KEYS[table]):
            writer = _writer(path)
            owners = _writer_runs(out, writer) if writer else set()
            if owners - {run_id}:
                log.warning("%s: unreadable Parquet part (%s): left in place, run %s wrote it", path, why, min(owners))
                continue
            _rename(path, ".unreadable", f"unreadable Parquet part ({why})", "its questions are debated again")
            if table != "questions" and writer:
                redo_writers.add(writer)
    own = out / "runs" / f"{run_id}.parquet"
    for path, why in unreadable_parts(out, "runs"):
        if path == own:
            _rename(path, ".unreadable", f"unreadable Parquet part ({why})", "the run writes its row again")
    return _supersede(out, run_id, _finished_by(out, run_id, redo_writers))


def _writer(path: Path) -> str | None:
    """The writer (one attempt's sink) that wrote a part, from its name; None for another name."""
    m = _WRITER.match(path.name)
    return m.group(1) if m else None


def _writer_parts(out: Path, table: str, writer: str) -> list[Path]:
    folder = out / table
    return sorted(folder.glob(f"part-{writer}-*.parquet")) if folder.is_dir() else []


def _run_ids(path: Path) -> set[str]:
    """The run ids of one part file; empty when it cannot be read."""
    try:
        return set(pq.read_table(path, columns=["run_id"]).column("run_id").unique().to_pylist())
    except READ_ERRORS:
        return set()


def _writer_runs(out: Path, writer: str) -> set[str]:
    """The run ids in the readable parts ``writer`` wrote (one run's attempt: one id, or none)."""
    return {r for table in STREAMED for p in _writer_parts(out, table, writer) for r in _run_ids(p)}


def _finished_by(out: Path, run_id: str, writers: set[str]) -> set[str]:
    """The questions of ``run_id`` that the attempts of ``writers`` finished (their question rows)."""
    qids: set[str] = set()
    for writer in writers:
        for path in _writer_parts(out, "questions", writer):
            rows = pq.read_table(path, columns=["run_id", "question_id"]).to_pylist()
            qids |= {r["question_id"] for r in rows if r["run_id"] == run_id}
    return qids


def _supersede(out: Path, run_id: str, qids: set[str]) -> set[str]:
    """Remove the rows of questions ``qids`` of ``run_id`` from every questions part holding
    some: the part is kept as ``NAME.parquet.superseded`` and rewritten without them (renamed
    aside when nothing is left). Returns ``qids``."""
    folder = out / "questions"
    if not qids or not folder.is_dir():
        return qids
    value_set = pa.array(sorted(qids), pa.string())
    for path in sorted(folder.glob("*.parquet")):
        table = pq.read_table(path)
        ours = pc.and_(pc.equal(table.column("run_id"), run_id), pc.is_in(table.column("question_id"), value_set))
        kept = table.filter(pc.invert(pc.fill_null(ours, False)))
        if kept.num_rows == table.num_rows:
            continue
        what = f"{table.num_rows - kept.num_rows} row(s) of questions debated again"
        if not kept.num_rows:
            _rename(path, ".superseded", what, "the questions are debated again")
            continue
        aside = _free_name(path, ".superseded")
        shutil.copy2(path, aside)  # the old bytes first: a crash before the rewrite leaves the old part in force
        _atomic_write(kept, path)
        log.warning("%s: %s: rewritten without them, the old part kept as %s", path, what, aside.name)
    return qids


def _free_name(path: Path, suffix: str) -> Path:
    """``path`` + ``suffix``, or with ``.1``, ``.2``, ... added when that name is taken."""
    target, n = path.with_name(path.name + suffix), 0
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}{suffix}.{n}")
    return target


def _rename(path: Path, suffix: str, what: str, then: str) -> None:
    """Rename ``path`` aside (readers glob ``*.parquet``: they skip it; its bytes are kept), warning
    with both names: ``what`` is wrong with it, ``then`` what the run does about it."""
    target = _free_name(path, suffix)
    os.replace(path, target)
    log.warning("%s: %s: renamed to %s; %s", path, what, target.name, then)
