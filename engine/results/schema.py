"""The result tables' schemas, one line of help per column, and the row checks every sink makes.

Six tables (:data:`SCHEMAS`): ``calls``, ``questions``, ``graphs``, ``prompts`` (streamed while
a run runs, :data:`STREAMED`), ``runs`` (one row per run, rewritten), ``answers`` (``debate
rescore``'s re-read answers); :data:`EDGES_SCHEMA` is the graphs table's older one-row-per-edge
layout. The questions table's metric columns come from the metric declarations
(:mod:`engine.metrics`): :data:`QUESTIONS_SCHEMA` those of the built-in metrics, what run
directories hold; :func:`questions_schema` (and ``SCHEMAS["questions"]``) adds the columns of
metrics registered since. The runs table's aggregate columns are fixed (:data:`RUNS_SCHEMA`).
:func:`check_rows` is what a row must satisfy before any sink takes it; :func:`rows_table`
makes rows an Arrow table in their table's schema.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from engine.metrics import CACHED_SHARE, METRICS, RUNS_COLUMNS, Metric, metrics

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

# The questions table's own columns, before and after its metric columns (questions_schema).
_QUESTIONS_HEAD = [
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
]
_QUESTIONS_TAIL = [
    ("protocol_info", pa.string()),  # JSON: protocol-specific per-round state (e.g. CortexDebate weights)
    ("wall_s", pa.float64()),
    ("backend", pa.string()),
    ("simulated", pa.bool_()),
    ("attempt", pa.string()),
    # null for a row the run wrote; the time of `debate rescore` for a row that re-grades it.
    # Readers keep, per (run_id, question_id), the row graded last (latest_grades).
    ("graded", pa.timestamp("ms", tz="UTC")),
]


@functools.lru_cache(maxsize=8)
def _questions_schema(declared: tuple[Metric, ...]) -> pa.Schema:
    """The questions table with the metric columns ``declared``, where its metrics go."""
    own = {name for name, _ in (*_QUESTIONS_HEAD, *_QUESTIONS_TAIL)}
    clash = [m.name for m in declared if m.name in own]
    if clash:
        raise ValueError(f"metric {clash[0]!r} is named like a column of the questions table")
    return pa.schema([*_QUESTIONS_HEAD, *(m.field for m in declared), *_QUESTIONS_TAIL])


def questions_schema() -> pa.Schema:
    """The questions table's schema now: its own columns and, between them, every metric's
    (:func:`engine.metrics.metrics`: the built-in ones, then those registered)."""
    return _questions_schema(metrics())


# The questions table of the built-in metrics (engine/metrics.py, METRICS): what run directories
# hold. SCHEMAS["questions"] adds the columns of metrics registered since (questions_schema).
QUESTIONS_SCHEMA = _questions_schema(METRICS)

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

_FIXED = {
    "calls": CALLS_SCHEMA,
    "questions": QUESTIONS_SCHEMA,  # read through questions_schema()
    "graphs": GRAPHS_SCHEMA,
    "runs": RUNS_SCHEMA,
    "answers": ANSWERS_SCHEMA,
    "prompts": PROMPTS_SCHEMA,
}


class _Schemas(Mapping[str, pa.Schema]):
    """Every table's schema by name, in this order; the questions table's follows the metrics
    registered (:func:`questions_schema`), so writers and readers take a registered metric's column."""

    def __getitem__(self, table: str) -> pa.Schema:
        return questions_schema() if table == "questions" else _FIXED[table]

    def __iter__(self) -> Iterator[str]:
        return iter(_FIXED)

    def __len__(self) -> int:
        return len(_FIXED)


SCHEMAS: Mapping[str, pa.Schema] = _Schemas()
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
