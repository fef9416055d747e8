"""The results layer: the tables' schema, the sinks that write them, the readers.

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

The layer, one module each (every name is importable from :mod:`engine.results` as well):

* :mod:`engine.results.schema`: the tables (:data:`SCHEMAS`, :data:`COLUMN_HELP`), the questions
  table's metric columns from :mod:`engine.metrics` (:func:`questions_schema`), the checks a row
  must pass (:func:`check_rows`) and rows as an Arrow table (:func:`rows_table`);
* :mod:`engine.results.sinks`: :class:`Sink`, what the writer actor writes through, and the
  sinks registered by name (:func:`register_sink`, :func:`sink_class`; ``--sink``);
* :mod:`engine.results.parquet`: :class:`ParquetSink`, the built-in sink (``parquet``);
* :mod:`engine.results.readers`: one run directory's tables (:func:`read_table`,
  :func:`read_edges`, :func:`latest_grades`, ...);
* :mod:`engine.results.loader`: whole result folders (:func:`load`, :func:`export`).
"""

from __future__ import annotations

from engine.results.loader import (
    EXPORT_FORMATS,
    LOADED,
    OPTION_PREFIX,
    TABLES,
    Results,
    call_messages,
    complete_calls,
    export,
    find_run_dirs,
    load,
    run_options,
)
from engine.results.parquet import ParquetSink, write_part
from engine.results.readers import (
    GRADED_KEYS,
    READ_ERRORS,
    ResultsError,
    footer_problems,
    graph_edges,
    latest_grades,
    read_edges,
    read_table,
    unreadable_parts,
)
from engine.results.schema import (
    ANSWERS_SCHEMA,
    CALLS_SCHEMA,
    COLUMN_HELP,
    EDGES_SCHEMA,
    GRAPHS_SCHEMA,
    OPTIONAL,
    PROMPTS_SCHEMA,
    QUESTIONS_SCHEMA,
    RUNS_SCHEMA,
    SCHEMAS,
    STREAMED,
    SchemaError,
    check_rows,
    questions_schema,
    rows_table,
)
from engine.results.sinks import (
    Sink,
    UnknownSink,
    WriteFailed,
    register_sink,
    sink_class,
    sink_names,
    unregister_sink,
    write_error,
)

__all__ = [
    "ANSWERS_SCHEMA",
    "CALLS_SCHEMA",
    "COLUMN_HELP",
    "EDGES_SCHEMA",
    "EXPORT_FORMATS",
    "GRADED_KEYS",
    "GRAPHS_SCHEMA",
    "LOADED",
    "OPTIONAL",
    "OPTION_PREFIX",
    "PROMPTS_SCHEMA",
    "QUESTIONS_SCHEMA",
    "READ_ERRORS",
    "RUNS_SCHEMA",
    "SCHEMAS",
    "STREAMED",
    "TABLES",
    "ParquetSink",
    "Results",
    "ResultsError",
    "SchemaError",
    "Sink",
    "UnknownSink",
    "WriteFailed",
    "call_messages",
    "check_rows",
    "complete_calls",
    "export",
    "find_run_dirs",
    "footer_problems",
    "graph_edges",
    "latest_grades",
    "load",
    "questions_schema",
    "read_edges",
    "read_table",
    "register_sink",
    "rows_table",
    "run_options",
    "sink_class",
    "sink_names",
    "unregister_sink",
    "unreadable_parts",
    "write_error",
    "write_part",
]
