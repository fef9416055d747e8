"""Results schema and a streaming Parquet sink.

A run directory holds one sub-directory per table, each a set of Parquet part files::

    OUT/calls/part-<writer>-00000.parquet     one row per LLM call
    OUT/questions/part-<writer>-00000.parquet one row per question
    OUT/graphs/part-<writer>-00000.parquet    one row per call that read other agents' outputs
    OUT/prompts/part-<writer>-00000.parquet   one row per distinct prompt message (--store-prompts)
    OUT/runs/<run_id>.parquet                 one row per run (rewritten at the end)

Read them all with :func:`load` (pandas DataFrames of every run under a folder, de-duplicated,
each run's options as columns), one run directory's table with :func:`read_table`, or the part
files with any Parquet reader (``pyarrow.dataset.dataset(OUT / "calls")``, DuckDB). Rows are
flushed as they are produced (every ``flush_rows`` rows or ``flush_seconds`` seconds), each part
written to a temporary name and renamed into place, so a reader never sees a half-written file.

What is stored in ``graphs`` (:data:`GRAPHS_SCHEMA`): the information edges of every round, one
row per call that read anybody — ``dst`` the reader (an agent id, or -1 for a summary call),
``srcs`` the agents it read (a list, in the order the call read them) and ``weights`` their edge
weights in the same order, null when they are all 1.0 (every protocol but CortexDebate). Row
``(round, dst, srcs=[a, b], weights=null)`` stands for the edges ``a -> dst`` and ``b -> dst``
of weight 1. ``pruned`` (CortexDebate's sparse graph only; null otherwise) flags, parallel to
``srcs``, the edges eq. 11 pruned: the reader did not read those sources, and ``weights`` holds
their eq. 9 weights too; the kept sources come first. A fully connected round of 1,000 agents
is 1,000 rows (not 10^6). A reader may have several rows in a round (PRD's reviews, one per
judged agent, then its revision). Take the edges apart with :func:`graph_edges` (or
:func:`read_edges`): one row per edge ``(round, src, dst, weight, pruned)``, as run directories
written before this layout stored them; those older parts (columns ``src``, ``dst``,
``weight``) are still read, by :func:`read_table` in this layout.

What is stored in ``prompts`` (:data:`PROMPTS_SCHEMA`): every distinct message the agents sent,
once per run, keyed by ``message`` (:func:`engine.messages.message_hash` of its role and text);
``calls.prompt`` lists a call's keys in order, so a system prompt, a question or a reply quoted in
every later transcript is stored once however many calls sent it. :meth:`Results.messages`
rebuilds a call's messages. Image parts are not stored (the question's image is
``questions.image``); a prompt the replica cut to fit (``calls.truncated_messages``) is stored
as the agent sent it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import math
import os
import re
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine.config import stored_config
from engine.errors import UserError
from engine.metrics import CACHED_SHARE, METRICS, RUNS_COLUMNS

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

CALLS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("question_id", pa.string()),
        ("round", pa.int32()),
        ("agent_id", pa.int32()),
        ("kind", pa.string()),
        ("model", pa.string()),
        ("backend", pa.string()),
        ("simulated", pa.bool_()),
        ("peers", pa.list_(pa.int32())),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("latency_s", pa.float64()),
        ("text", pa.string()),
        ("answer", pa.string()),
        ("finish_reason", pa.string()),
        ("error", pa.string()),
        ("seed", pa.int64()),
        ("temperature", pa.float64()),
        ("group", pa.int32()),
        ("reused", pa.bool_()),
        ("truncated_messages", pa.int32()),  # --context-overflow truncate: messages dropped from this prompt
        ("side", pa.bool_()),  # a side call (a review / score by agent_id of peers): not a turn, no answer
        ("attempt", pa.string()),
        # the call's messages in order, as keys of the prompts table; null with --no-store-prompts,
        # for a call that never reached an agent, and in parts written before the column existed
        ("prompt", pa.list_(pa.string())),
        # prompt tokens the serving engine took from its prefix cache; null when the backend cannot
        # say, for error rows and reused replies, and in parts written before the column existed
        ("cached_prompt_tokens", pa.int64()),
    ]
)

QUESTIONS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("question_id", pa.string()),
        ("protocol", pa.string()),
        ("task", pa.string()),
        # the question's text as the agents were given it (choices included); null in parts written
        # before the column existed. Its image, if any, is the `image` reference below.
        ("question", pa.string()),
        # the question's image (engine.tasks.Question.image_ref): an http(s) URL or "sha256:<16 hex>" of
        # the image's bytes; null for a text-only question (and in parts written before the column existed)
        ("image", pa.string()),
        ("n_agents", pa.int32()),
        ("rounds_run", pa.int32()),
        ("gold", pa.string()),
        # the question's metrics, declared in engine/metrics.py (final_answer ... consensus)
        *(m.field for m in METRICS),
        ("protocol_info", pa.string()),  # JSON: protocol-specific per-round state (e.g. CortexDebate weights)
        ("wall_s", pa.float64()),
        ("backend", pa.string()),
        ("simulated", pa.bool_()),
        ("attempt", pa.string()),
        # null for a row the run wrote; the time of `debate rescore` for a row that re-grades it.
        # Readers keep, per (run_id, question_id), the row graded last (latest_grades).
        ("graded", pa.timestamp("ms", tz="UTC")),
    ]
)

RUNS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("protocol", pa.string()),
        ("backend", pa.string()),  # the backend that ran (--backend auto resolved: vllm or transformers)
        ("simulated", pa.bool_()),
        ("dtype", pa.string()),  # the models' compute dtype(s) as the engine resolved them
        ("engine", pa.string()),  # JSON list: each model's resolved engine settings (device, dtype, context, ...)
        ("placement", pa.string()),  # JSON list: role, model, replica, node id/IP, GPU ids, resources of each actor
        ("config", pa.string()),
        ("status", pa.string()),
        ("started", pa.timestamp("ms", tz="UTC")),
        ("finished", pa.timestamp("ms", tz="UTC")),
        ("n_questions", pa.int64()),
        # the run aggregates of the metrics, declared in engine/metrics.py (accuracy ... accuracy_by_round)
        *((c.key, c.type) for c in RUNS_COLUMNS),
        ("wall_s", pa.float64()),
        # JSON: seconds spent starting the replicas (replicas_s) and the agent actors (agents_s),
        # and debating (debate_s)
        ("timings", pa.string()),
    ]
)

GRAPHS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("question_id", pa.string()),
        ("round", pa.int32()),
        ("dst", pa.int32()),  # the reader: an agent (>= 0), or a summary: -1 - its group (summary_node)
        ("srcs", pa.list_(pa.int32())),  # the nodes it read: one edge src -> dst each
        ("weights", pa.list_(pa.float64())),  # each edge's weight; null: all 1.0
        ("backend", pa.string()),
        ("simulated", pa.bool_()),
        ("attempt", pa.string()),
        # the reader's group: for a summary node (dst < 0) the group it summarises, for an agent its
        # group (GroupDebate, S2-MAD); null otherwise, and in parts written before the column
        # existed (where every summary of a round was the one node -1)
        ("dst_group", pa.int32()),
        # parallel to srcs: True for an edge CortexDebate's eq. 11 pruned (not read; its weight is
        # the eq. 9 weight before pruning); null when none of the row's edges was pruned
        ("pruned", pa.list_(pa.bool_())),
    ]
)

# The graphs table's layout before one row per call (parts written then are still read): one row
# per edge. Also the layout graph_edges returns.
EDGES_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("question_id", pa.string()),
        ("round", pa.int32()),
        ("src", pa.int32()),
        ("dst", pa.int32()),
        ("weight", pa.float64()),
        ("backend", pa.string()),
        ("simulated", pa.bool_()),
        ("attempt", pa.string()),
        ("pruned", pa.bool_()),  # graph_edges only: a pruned edge (graphs.pruned); False otherwise
    ]
)

# One row per distinct prompt message of a run (see the module docstring).
PROMPTS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("message", pa.string()),  # engine.messages.message_hash(role, content): calls.prompt's keys
        ("role", pa.string()),
        ("content", pa.string()),  # the message's text (image parts left out)
        ("backend", pa.string()),
        ("simulated", pa.bool_()),
        ("attempt", pa.string()),  # the attempt that stored it first (readers keep one row per key)
    ]
)

# Written by `debate rescore` only: the current grader's reading of every agent call (calls.answer
# keeps what the grader read during the run; model outputs are never rewritten).
ANSWERS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("question_id", pa.string()),
        ("attempt", pa.string()),
        ("round", pa.int32()),
        ("agent_id", pa.int32()),
        ("answer", pa.string()),
        ("previous_answer", pa.string()),  # calls.answer, or the answer of the previous rescore
        ("graded", pa.timestamp("ms", tz="UTC")),
    ]
)

SCHEMAS = {
    "calls": CALLS_SCHEMA,
    "questions": QUESTIONS_SCHEMA,
    "graphs": GRAPHS_SCHEMA,
    "runs": RUNS_SCHEMA,
    "answers": ANSWERS_SCHEMA,
    "prompts": PROMPTS_SCHEMA,
}
STREAMED = ("calls", "questions", "graphs", "prompts")


def _runs_column_help(key: str) -> str:
    """What a runs-table aggregate column holds, from the metric it aggregates."""
    if key == CACHED_SHARE.key:
        return (
            "cached_prompt_tokens / (cached_prompt_tokens + computed_prompt_tokens): the share of the prompt "
            "tokens the prefix cache served, over the calls that report it; null when none does"
        )
    metric = next(m for m in METRICS if m.runs is not None and m.runs.key == key)
    what = {
        "count": f"share of questions where questions.{metric.name} is true",
        "sum": f"sum over the questions of questions.{metric.name}",
        "mean": f"mean over the questions of questions.{metric.name}",
        "by_round": f"round-by-round mean of questions.{metric.name} (a question that stopped early carries "
        "its last value)",
        "known_sum": f"sum over the questions that know it of questions.{metric.name} (null when none does)",
    }[metric.agg or ""]
    return f"{what}: {metric.help}"


# One line per column of every table: what it holds (the docs site's results reference is made
# from this; tests/engine/test_results.py fails on a schema column it does not describe).
_SHARED_HELP = {
    "run_id": "the run's id: a hash of every option that changes results (the same config, the same id)",
    "question_id": "the question's id in its data set",
    "backend": "the backend that ran (--backend auto resolved: vllm or transformers)",
    "simulated": "true when the simulated backend (a fake model) produced the row",
    "attempt": "the attempt (one start of the run) that wrote the row; readers keep the attempt that "
    "finished each question, so a resumed run's interrupted attempts are left out",
}
COLUMN_HELP: dict[str, dict[str, str]] = {
    "calls": {
        **_SHARED_HELP,
        "round": "the round, from 0 (round 0: the first answers)",
        "agent_id": "the agent that made the call (0, 1, ...); -1 for a summary call",
        "kind": "the prompt stage the call was made from (engine.kinds.KINDS: first, debate, gd_summary, ...)",
        "model": "the model that served the call",
        "peers": "the agents whose replies the call read (a summary call: the agents summarised)",
        "prompt_tokens": "prompt length after the model's own chat template, in its own tokenizer's tokens",
        "completion_tokens": "generated tokens, the end-of-turn token included",
        "latency_s": "seconds from the replica receiving the request to its last token (queueing included)",
        "text": "the reply's text",
        "answer": "the answer the grader read from the reply during the run (null: none found)",
        "finish_reason": "why generation stopped: stop, length (hit --max-tokens) or error",
        "error": "why the call failed after the engine's retries; null for a call that succeeded",
        "seed": "the sampling seed of the call",
        "temperature": "the sampling temperature of the call",
        "group": "an agent's group (GroupDebate, S2-MAD), the summarised group of a summary call (MAD "
        "--memory summary: the agent the summary is for; ChatEval: 0); null otherwise",
        "reused": "a first-round reply served from the sweep cache (same text and token counts as the original)",
        "truncated_messages": "messages dropped from the prompt to fit the model's context "
        "(--context-overflow truncate)",
        "side": "a side call: a review or score by agent_id of its peers (PRD, CortexDebate's peer weights); "
        "no answer, not in the agent's transcript",
        "prompt": "the messages the call sent, in order, as keys of the prompts table; null with "
        "--no-store-prompts, for a call that never reached an agent, and in older folders",
        "cached_prompt_tokens": "of prompt_tokens, those the serving engine took from its prefix cache "
        "instead of computing them (vLLM's num_cached_tokens; an OpenAI-compatible server's "
        "usage.prompt_tokens_details.cached_tokens); null when the backend cannot say (transformers, "
        "simulated, a server that does not send it), for an error row, for a reused reply (no request "
        "was made) and in older folders; never 0 for unknown",
    },
    "questions": {
        **_SHARED_HELP,
        "protocol": "the --protocol of the run",
        "task": "the task: how answers are read and graded (numeric, math, choice or pair)",
        "question": "the question's text as the agents were given it (choices included); null in older folders",
        "image": "the question's image: an http(s) URL or sha256:<16 hex> of its bytes; null without one",
        "n_agents": "agents that debated the question",
        "rounds_run": "rounds run (fewer than --rounds when the protocol stopped early)",
        "gold": "the reference answer",
        **{m.name: m.help for m in METRICS},
        "protocol_info": "JSON: protocol-specific per-round state (e.g. CortexDebate's confidences and weights)",
        "wall_s": "seconds from the question's first call to its last",
        "graded": "null for a row the run wrote; the time of `debate rescore` for a row that re-grades it "
        "(readers keep the row graded last)",
    },
    "runs": {
        "run_id": _SHARED_HELP["run_id"],
        "protocol": "the --protocol of the run",
        "backend": _SHARED_HELP["backend"],
        "simulated": "true when the simulated backend (a fake model) ran",
        "dtype": "the models' compute dtype(s) as the engine resolved them",
        "engine": "JSON list: each model's resolved engine settings (device, dtype, context, batch, KV cache, "
        "vLLM version, a hub id's commit)",
        "placement": "JSON list: role, model, replica, node id/IP, GPU ids and resources of each actor",
        "config": "JSON: the run's whole configuration (every option)",
        "status": "running, finished, interrupted (Ctrl-C, SIGTERM, a writer that could not write, or a "
        "process that ended without saying: readers show a run left running whose lock is gone as "
        "interrupted) or stopped: <why> (--max-error-rate); rerun an unfinished run to resume",
        "started": "when the run (its latest attempt) started",
        "finished": "when it finished; null while it runs",
        "n_questions": "questions with a result row",
        **{c.key: _runs_column_help(c.key) for c in RUNS_COLUMNS},
        "wall_s": "seconds the run took",
        "timings": "JSON: seconds spent starting the replicas (replicas_s) and the agent actors (agents_s), "
        "and debating (debate_s)",
    },
    "graphs": {
        **_SHARED_HELP,
        "round": "the round, from 0",
        "dst": "the reader: an agent (>= 0), or a summary node: -1 - its group",
        "srcs": "the nodes it read, in the order the call read them: one edge src -> dst each",
        "weights": "each edge's weight, parallel to srcs (CortexDebate's trust weights); null: all 1.0",
        "dst_group": "the reader's group: the group a summary node summarises, an agent's group (GroupDebate, "
        "S2-MAD); null otherwise and in older folders",
        "pruned": "parallel to srcs: true for an edge CortexDebate's eq. 11 pruned (not read; listed after the "
        "kept ones, with its eq. 9 weight); null when none was pruned",
    },
    "answers": {
        **{k: _SHARED_HELP[k] for k in ("run_id", "question_id", "attempt")},
        "round": "the round of the agent call re-read",
        "agent_id": "the agent whose reply was re-read",
        "answer": "the current grader's reading of the reply",
        "previous_answer": "calls.answer, or the answer of the previous rescore",
        "graded": "the time of the `debate rescore` that wrote the row",
    },
    "prompts": {
        **{k: v for k, v in _SHARED_HELP.items() if k != "question_id"},
        "message": "the message's key, 16 hex of sha256 over role and text (engine.messages.message_hash): "
        "what calls.prompt lists",
        "role": "the message's role (system, user, assistant)",
        "content": "the message's text (image parts left out)",
        "attempt": "the attempt that stored it first (readers keep one row per key)",
    },
}


# Columns a writer may leave out (null): set later by someone else, or only for some rows.
OPTIONAL = {
    "questions": {
        "graded",  # set by `debate rescore` only
        "image",
    },  # questions with an image only
    "runs": {name for name in RUNS_SCHEMA.names if name not in ("run_id", "status")},
}


class SchemaError(ValueError):
    """A row does not fit its table: a column the schema does not have, or one it needs missing.
    A bug in the engine, never bad user input: the run stops."""


def check_rows(table: str, rows: list[dict[str, Any]]) -> None:
    """Raise :class:`SchemaError` for the first row with an unknown key or a missing column."""
    names = set(SCHEMAS[table].names)
    needed = names - OPTIONAL.get(table, set())
    for row in rows:
        unknown, missing = set(row) - names, needed - set(row)
        if unknown or missing:
            raise SchemaError(
                f"a {table} row does not fit the schema: unknown {sorted(unknown)}, missing "
                f"{sorted(missing)} (question {row.get('question_id')!r})"
            )


class WriteFailed(OSError):
    """A result file could not be written (a full disk, a folder gone read-only, an I/O error).
    The message is one line naming the file; nothing half-written is left, under a result name or
    a temporary one."""


def _mount_of(path: Path) -> tuple[str, str]:
    """The file system ``path`` is on: (its device or kind, where it is mounted)."""
    import psutil

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


def _atomic_write(table: pa.Table, path: Path) -> None:
    """Write to a hidden temporary name, fsync, rename into place: a reader (or a resumed run)
    sees the whole part or nothing, whenever the writing process is killed. Leftover ``.*.tmp``
    files of a killed writer are never read (readers glob ``*.parquet``). A failed write removes
    its temporary file and raises :class:`WriteFailed` naming ``path``."""
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


def _int_lists(values: list[Any], type_: pa.DataType) -> pa.Array:
    """A ``list<int>`` column from Python lists through numpy: pyarrow's own conversion of Python
    ints costs ~300 ns each, too slow for the 10^6 peers of a fully connected 1,000-agent round."""
    if any(v is None for v in values):
        return pa.array(values, type=type_)
    item = type_.value_type.to_pandas_dtype()
    parts = [np.asarray(v, dtype=item) for v in values]
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in parts], out=offsets[1:])
    flat = np.concatenate(parts) if parts else np.zeros(0, dtype=item)
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(flat, type=type_.value_type))


def rows_table(table: str, rows: list[dict[str, Any]]) -> pa.Table:
    """``rows`` of ``table`` in its schema, built column by column (a key a row lacks is null)."""
    schema = SCHEMAS[table]
    columns = []
    for f in schema:
        values = [r.get(f.name) for r in rows]
        int_list = pa.types.is_list(f.type) and pa.types.is_integer(f.type.value_type)
        columns.append(_int_lists(values, f.type) if int_list else pa.array(values, type=f.type))
    return pa.Table.from_arrays(columns, schema=schema)


def write_part(path: Path, table: str, rows: list[dict[str, Any]]) -> None:
    """``rows`` of ``table`` as one Parquet file at ``path``, in the table's schema, atomically
    (:func:`_atomic_write`). Rows are checked by the caller (:func:`check_rows`)."""
    _atomic_write(rows_table(table, rows), path)


class ParquetSink:
    """Buffers rows per table and writes them as atomically renamed Parquet part files."""

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
        for t in (*STREAMED, "runs"):
            try:
                (self.out / t).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise write_error(exc, self.out / t) from exc

    def write(self, table: str, rows: Iterable[dict[str, Any]]) -> None:
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
        for table, rows in self._buffers.items():
            if not rows:
                continue
            write_part(self.out / table / f"part-{self.name}-{self._parts[table]:05d}.parquet", table, rows)
            self._parts[table] += 1
            self.rows_written[table] += len(rows)
            rows.clear()
        self._last_flush = time.monotonic()

    def write_run(self, row: dict[str, Any]) -> None:
        """Write (or rewrite, atomically) the single row of a run."""
        check_rows("runs", [row])
        write_part(self.out / "runs" / f"{row['run_id']}.parquet", "runs", [row])


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
    import pyarrow.dataset as ds

    schema = SCHEMAS[table]
    cols = [c for c in (columns or schema.names) if c in schema.names]
    extra = [c for c in (*GRADED_KEYS.get(table, ()), "graded") if table in GRADED_KEYS and c not in cols]
    empty = pa.schema([schema.field(c) for c in cols]).empty_table()
    path = out_dir / table
    files = sorted(str(p) for p in path.glob("*.parquet")) if path.is_dir() else []

    def read(parts: list[str]) -> pa.Table:
        if table == "graphs":
            return _read_graphs(parts, cols)
        return ds.dataset(parts, schema=schema, format="parquet").to_table(columns=cols + extra)

    data, bad = _read_parts(files, read, rest)
    if data is None:
        return empty, bad
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
    from engine.run_lock import run_alive

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


# ----------------------------------------------------------------------------- reading result folders
TABLES = ("calls", "questions", "graphs", "runs", "answers", "prompts")  # a run directory's table folders


class ResultsError(UserError, ValueError):
    """Bad input to a reader of result folders (``debate report``, ``rescore``, ``export``,
    :func:`load`): a missing directory, no results, a part file that cannot be read; the message
    names the path."""


def find_run_dirs(path: str | Path) -> list[Path]:
    """Every folder at or below ``path`` that has a ``runs/`` sub-folder (sorted).

    Does not descend into a run directory's table folders or into hidden folders.
    """
    root = Path(path)
    if not root.exists():
        raise ResultsError(f"{root}: no such directory")
    if not root.is_dir():
        raise ResultsError(f"{root}: not a directory")
    found = []
    for cur, dirs, _files in os.walk(root):
        if "runs" in dirs and (Path(cur) / "runs").is_dir():
            found.append(Path(cur))
        dirs[:] = sorted(d for d in dirs if d not in TABLES and not d.startswith("."))
    return sorted(found)


def _as_arrow(t) -> tuple[pa.Table, bool]:
    if isinstance(t, pa.Table):
        return t, False
    return pa.Table.from_pandas(t, preserve_index=False), True  # a pandas DataFrame


def complete_calls(calls, questions):
    """Call rows of finished question attempts only.

    Keeps the rows of ``calls`` whose (run_id, question_id, attempt) equals that of a row of
    ``questions``; a null attempt matches a null attempt (rows written before the column
    existed). When either table lacks an ``attempt`` column, every call row is kept. Accepts
    and returns pyarrow Tables (or pandas DataFrames).
    """
    c, was_pandas = _as_arrow(calls)
    q, _ = _as_arrow(questions)
    if "attempt" not in c.column_names or "attempt" not in q.column_names:
        return calls
    keys = ["run_id", "question_id", "attempt"]

    def keyed(t: pa.Table) -> pa.Table:
        return t.set_column(
            t.column_names.index("attempt"), "attempt", pc.fill_null(t.column("attempt").cast(pa.string()), "\x00null")
        )

    index = pa.array(range(c.num_rows), pa.int64())
    ck = keyed(c.select(keys)).append_column("__row", index)
    qk = keyed(q.select(keys)).group_by(keys).aggregate([])
    kept = ck.join(qk, keys=keys, join_type="left semi").column("__row").combine_chunks()
    out = c.filter(pc.is_in(index, value_set=kept))  # original row order
    return out.to_pandas() if was_pandas else out


LOADED = ("runs", "questions", "calls", "graphs", "prompts")  # the tables load() returns, in this order
# Run options named like a runs column get this prefix (runs.backend is the backend that ran,
# config_backend the one asked for, e.g. auto); protocol is left out: the same value by construction.
OPTION_PREFIX = "config_"


@dataclass
class Results:
    """The result tables of one or many run directories as pandas DataFrames (:func:`load`).

    ``runs``: one row per run id, its stored columns and every run option parsed from its
    ``config`` JSON as a column (``agents``, ``rounds``, ``density``, ``seed``, ``models``, ...;
    list and dict options as JSON text, so they group and compare). ``questions``: one row per
    question of a run, with the run's options joined on (a question's own column wins: its
    ``protocol``, ``backend``). ``calls`` and ``graphs``: the rows of the finished attempt of
    each question. ``prompts``: one row per distinct prompt message of a run (``run_id``,
    ``message``); :meth:`messages` rebuilds a call's. Every frame has ``run_dir``, the folder the
    rows came from. ``notes``: what the folders lack (columns written before they existed read as
    null / NaN; tables written before they existed load empty), what was left out as a duplicate
    and the unreadable part files left out (``skip_bad_parts``)."""

    runs: pd.DataFrame
    questions: pd.DataFrame
    calls: pd.DataFrame
    graphs: pd.DataFrame
    prompts: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    skip_bad_parts: bool = False  # how load read the folders: readers of their other tables read them so

    def messages(self, call: Any) -> list[dict[str, str]]:
        """The messages one call sent, ``[{"role", "content"}, ...]`` in order: ``call`` is a row
        of :attr:`calls` (a pandas row or a dict with ``run_id`` and ``prompt``). Raises
        :class:`ResultsError` for a call stored without its prompt (``--no-store-prompts``, a
        call that never reached an agent, a folder written before prompts were stored) or one
        whose messages are missing from :attr:`prompts`."""
        return call_messages(self.prompts, call)

    def table(self, name: str) -> pd.DataFrame:
        """One of :data:`LOADED` by name; :class:`ResultsError` for another name."""
        if name not in LOADED:
            raise ResultsError(f"unknown table {name!r}: one of {', '.join(LOADED)}")
        frame: pd.DataFrame = getattr(self, name)
        return frame


def call_messages(prompts: pd.DataFrame, call: Any) -> list[dict[str, str]]:
    """A call's messages from a prompts frame (:meth:`Results.messages`, which see)."""
    keys = call["prompt"]
    if keys is None or (isinstance(keys, float) and np.isnan(keys)):
        raise ResultsError(
            f"run {call['run_id']}: this call was stored without its prompt (--no-store-prompts, a call "
            "that never reached an agent, or a folder written before prompts were stored)"
        )
    run = prompts[prompts["run_id"] == call["run_id"]]
    texts = dict(zip(run["message"], zip(run["role"], run["content"])))
    missing = [k for k in keys if k not in texts]
    if missing:
        raise ResultsError(f"run {call['run_id']}: prompt message {missing[0]} is not in the prompts table")
    return [{"role": texts[k][0], "content": texts[k][1]} for k in keys]


def run_options(config_json: str | None) -> dict[str, Any]:
    """The options of a runs row's ``config`` JSON, one value each: scalars as they are, lists
    and dicts as JSON text (sorted keys); ``{}`` for a missing or unreadable config. Options
    stored by an old name are under their names now (:func:`engine.config.stored_config`: an old
    folder's ``placement`` is ``strong_agents``)."""
    try:
        config = json.loads(config_json or "{}")
    except json.JSONDecodeError:
        return {}
    if not isinstance(config, dict):
        return {}
    return {
        k: json.dumps(v, sort_keys=True, default=str) if isinstance(v, (list, dict)) else v
        for k, v in stored_config(config).items()
    }


def _one_type_per_column(options: pd.DataFrame) -> pd.DataFrame:
    """``options`` with every column that mixes JSON text and other values (``--sim-accuracy 0.6``
    in one run, a per-model mapping in another) as text throughout, so it can be exported (a
    Parquet column has one type); missing values stay missing."""
    for col in options.columns:
        kinds = {type(v) for v in options[col] if not _missing(v)}
        if str in kinds and len(kinds) > 1:
            options[col] = [v if _missing(v) or isinstance(v, str) else json.dumps(v) for v in options[col]]
    return options


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _lacking(run_dir: Path, table: str) -> list[str]:
    """The columns of ``table`` that no part file in ``run_dir`` has (written before they existed);
    the older one-row-per-edge graphs parts count as having ``srcs`` and ``weights``."""
    files = sorted((run_dir / table).glob("*.parquet")) if (run_dir / table).is_dir() else []
    if not files:
        return []
    have: set[str] = set()
    for f in files:
        try:
            names = set(pq.read_schema(f).names)
        except READ_ERRORS:  # an unreadable part read_table left out (--skip-bad-parts) and said so
            continue
        have |= names | ({"srcs", "weights"} if "src" in names else set())
    return [c for c in SCHEMAS[table].names if c not in have] if have else []


def _read_dir(run_dir: Path, notes: list[str], skip_bad_parts: bool = False) -> dict[str, pa.Table]:
    """The tables of one run directory (:data:`LOADED`), each with a ``run_dir`` column: questions in force
    (:func:`latest_grades`), calls and graphs of finished question attempts (:func:`complete_calls`);
    ``skip_bad_parts``: see :func:`read_table`."""
    tables = {name: read_table(run_dir, name, skip_bad_parts=skip_bad_parts, notes=notes) for name in LOADED}
    tables["calls"] = complete_calls(tables["calls"], tables["questions"])
    tables["graphs"] = complete_calls(tables["graphs"], tables["questions"])
    if not (run_dir / "prompts").is_dir():
        notes.append(f"{run_dir}: no prompts table (written before prompts were stored): no call's messages")
    for name in LOADED:
        lacking = _lacking(run_dir, name)
        if lacking:
            notes.append(f"{run_dir}: {name} lacks {', '.join(lacking)} (written before they existed): read as null")
    return {
        name: t.append_column("run_dir", pa.array([str(run_dir)] * t.num_rows, pa.string()))
        for name, t in tables.items()
    }


def _ranked(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs rows from the least to the most authoritative row of a run id: a finished run last,
    then by when it finished (else started), then by folder name."""
    order = runs.assign(_finished=runs["status"].eq("finished"), _end=runs["finished"].fillna(runs["started"]))
    order = order.sort_values(["_finished", "_end", "run_dir"], na_position="first", kind="stable")
    return order.drop(columns=["_finished", "_end"])


def _chosen_dirs(runs: pd.DataFrame, questions: pd.DataFrame) -> dict[str, str]:
    """Per run id, the run directory whose rows count: that of its most authoritative runs row
    (:func:`_ranked`: the finished attempt); a run id with question rows but no runs row: the
    last folder (by name) holding them."""
    ranked = _ranked(runs)
    chosen = dict(zip(ranked["run_id"], ranked["run_dir"]))  # the last row of each run id wins
    for run_id, run_dir in questions.groupby("run_id")["run_dir"].max().items():
        chosen.setdefault(str(run_id), str(run_dir))
    return chosen


def load(path: str | Path, *, skip_bad_parts: bool = False) -> Results:
    """Every run under ``path`` (a run directory, an ``--out`` folder or a sweep folder: every
    folder at any depth with a ``runs/`` sub-folder, :func:`find_run_dirs`) as :class:`Results`,
    de-duplicated:

    * a run id in several folders (the same configuration run twice, a copied folder) counts
      once: the folder of its finished attempt (:func:`_chosen_dirs`); a note names the others;
    * questions: the row in force per question (the latest ``debate rescore`` grading);
    * calls and graphs: the rows of the attempt that finished each question (a resumed run
      re-debates the questions an interrupted attempt left; that attempt's rows are left out).

    One line per comparison::

        load("runs").questions.groupby(["protocol", "agents"]).correct.mean()

    Result folders written before a column existed load with it null (NaN), and a note.
    Raises :class:`ResultsError` when ``path`` is not a directory or holds no run directory, or
    names a part file that cannot be read; ``skip_bad_parts=True`` leaves such parts out, a note
    naming each (``--skip-bad-parts``).
    """
    import pandas as pd

    dirs = find_run_dirs(path)
    if not dirs:
        raise ResultsError(f"{path}: no results (no folder with a runs/ sub-folder)")
    notes: list[str] = []
    parts = [_read_dir(d, notes, skip_bad_parts) for d in dirs]
    frames = {name: pa.concat_tables([p[name] for p in parts]).to_pandas() for name in LOADED}
    runs, questions = frames["runs"], frames["questions"]
    chosen = _chosen_dirs(runs, questions)
    for name in LOADED:
        frame = frames[name]
        keep = frame["run_dir"].eq(frame["run_id"].map(chosen))
        if name in ("runs", "questions"):
            for run_id, run_dir in frame.loc[~keep, ["run_id", "run_dir"]].drop_duplicates().itertuples(index=False):
                notes.append(f"run {run_id} is also in {run_dir}: left out, the rows of {chosen[run_id]} count")
        frames[name] = frame[keep].reset_index(drop=True)
    # a message stored by several attempts of a run (a resumed run) counts once
    frames["prompts"] = frames["prompts"].drop_duplicates(["run_id", "message"]).reset_index(drop=True)
    runs = _ranked(frames["runs"]).drop_duplicates("run_id", keep="last").sort_index().reset_index(drop=True)
    options = _one_type_per_column(pd.DataFrame([run_options(c) for c in runs["config"]], index=runs.index))
    options = options.drop(columns=["protocol"], errors="ignore").rename(
        columns={c: f"{OPTION_PREFIX}{c}" for c in options.columns if c in runs.columns}
    )
    frames["runs"] = pd.concat([runs, options], axis=1)
    joined = [c for c in options.columns if c not in frames["questions"].columns]
    frames["questions"] = frames["questions"].merge(
        frames["runs"][["run_id", *joined]], on="run_id", how="left", validate="many_to_one"
    )
    return Results(
        runs=frames["runs"],
        questions=frames["questions"],
        calls=frames["calls"],
        graphs=frames["graphs"],
        prompts=frames["prompts"],
        notes=list(dict.fromkeys(notes)),
        skip_bad_parts=skip_bad_parts,
    )


EXPORT_FORMATS = (".parquet", ".csv")


def _csv_cell(value: Any) -> Any:
    """A cell as CSV can hold it: a list (numpy array) or dict as JSON text, anything else as is."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, dict)):
        return json.dumps(value, default=str)
    return value


def export(path: str | Path, to: str | Path, table: str = "questions", *, skip_bad_parts: bool = False) -> Results:
    """Write ``table`` of :func:`load` (``path``) to the file ``to``: Parquet for ``.parquet``,
    CSV for ``.csv`` (list columns as JSON text). Returns what was loaded (its ``notes`` say what
    the folders lack). :class:`ResultsError` for another extension, a missing folder for ``to``,
    an unknown table or a ``path`` without results; checked before anything is read. An
    unreadable part file: :func:`load` (``skip_bad_parts``)."""
    target = Path(to)
    if target.suffix.lower() not in EXPORT_FORMATS:
        raise ResultsError(f"{to}: the file must end in .parquet or .csv")
    if not target.parent.is_dir():
        raise ResultsError(f"{to}: no such directory {target.parent}")
    if table not in LOADED:
        raise ResultsError(f"unknown table {table!r}: one of {', '.join(LOADED)}")
    results = load(path, skip_bad_parts=skip_bad_parts)
    frame = results.table(table)
    if target.suffix.lower() == ".csv":
        frame.map(_csv_cell).to_csv(target, index=False)
    else:
        frame.to_parquet(target, index=False)
    return results
