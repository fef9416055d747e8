"""Reading result folders whole: :func:`load` (pandas DataFrames of every run under a folder,
de-duplicated, each run's options as columns) and :func:`export` (one of its tables to a file).
"""

from __future__ import annotations

import functools
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine.config import stored_config
from engine.results.readers import READ_ERRORS, ResultsError, read_table
from engine.results.schema import SCHEMAS

if TYPE_CHECKING:
    import pandas as pd

TABLES = ("calls", "questions", "graphs", "runs", "answers", "prompts")  # a run directory's table folders


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


@functools.lru_cache(maxsize=4096)
def _part_columns(path: str, mtime_ns: int, size: int) -> frozenset[str]:
    """The column names of one part file, cached by path, modification time and size (a part
    file is written once); raises what reading its footer raises."""
    return frozenset(pq.read_schema(path).names)


def _lacking(run_dir: Path, table: str) -> list[str]:
    """The columns of ``table`` that no part file in ``run_dir`` has (written before they existed);
    the older one-row-per-edge graphs parts count as having ``srcs`` and ``weights``."""
    files = sorted((run_dir / table).glob("*.parquet")) if (run_dir / table).is_dir() else []
    if not files:
        return []
    have: set[str] = set()
    for f in files:
        try:
            stat = f.stat()
            names = _part_columns(str(f), stat.st_mtime_ns, stat.st_size)
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


def _authority(row: dict[str, Any]) -> tuple:
    """A runs row's rank among the rows of its run id (higher counts): a finished run first,
    then by when it finished (else started; none lowest), then by folder name."""
    end = row["finished"] if row["finished"] is not None else row["started"]
    return (row["status"] == "finished", end is not None, end if end is not None else 0, row["run_dir"])


def _chosen(runs: pa.Table, questions: list[pa.Table]) -> tuple[dict[str, str], set[int]]:
    """Per run id, the run directory whose rows count, and the position (a row of ``runs``, every
    folder's runs rows in the order read) of the runs row in force of each run id: its most
    authoritative row (:func:`_authority`; a tie goes to the later row). A run id with question
    rows but no runs row: the last folder (by name) holding them."""
    rows = runs.select(["run_id", "run_dir", "status", "finished", "started"]).to_pylist()
    best: dict[str, int] = {}
    for i in sorted(range(len(rows)), key=lambda i: _authority(rows[i])):  # stable: ties keep row order
        best[rows[i]["run_id"]] = i
    chosen = {run_id: rows[i]["run_dir"] for run_id, i in best.items()}
    held: dict[str, str] = {}
    for t in questions:
        for run_id in pc.unique(t.column("run_id")).to_pylist():
            held[run_id] = max(held.get(run_id, ""), t.column("run_dir")[0].as_py())
    for run_id, run_dir in held.items():
        chosen.setdefault(run_id, run_dir)
    return chosen, set(best.values())


def _keep_chosen(parts: list[dict[str, pa.Table]], chosen: dict[str, str], notes: list[str]) -> dict[str, pa.Table]:
    """Each table of ``parts`` (one dict per run directory) but ``runs`` (:func:`load` keeps the
    runs row in force of each run id, :func:`_chosen`) concatenated, with only the rows of the
    run directory chosen for their run id; a note per run id left out of a folder's runs or
    questions."""
    kept: dict[str, list[pa.Table]] = {name: [] for name in LOADED if name != "runs"}
    for part in parts:
        for name in LOADED:
            t = part[name]
            ids = pc.unique(t.column("run_id")).to_pylist() if t.num_rows else []
            run_dir = t.column("run_dir")[0].as_py() if ids else None
            if name in ("runs", "questions"):
                notes.extend(
                    f"run {run_id} is also in {run_dir}: left out, the rows of {chosen[run_id]} count"
                    for run_id in ids
                    if chosen[run_id] != run_dir
                )
            if name != "runs":
                mine = [run_id for run_id in ids if chosen.get(run_id) == run_dir]
                kept[name].append(
                    t if len(mine) == len(ids) else t.filter(pc.is_in(t.column("run_id"), pa.array(mine, pa.string())))
                )
    return {name: pa.concat_tables(tables) for name, tables in kept.items()}


def load(path: str | Path, *, skip_bad_parts: bool = False) -> Results:
    """Every run under ``path`` (a run directory, an ``--out`` folder or a sweep folder: every
    folder at any depth with a ``runs/`` sub-folder, :func:`find_run_dirs`) as :class:`Results`,
    de-duplicated:

    * a run id in several folders (the same configuration run twice, a copied folder) counts
      once: the folder of its finished attempt (:func:`_chosen`); a note names the others;
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
    # function-level: importing pandas here keeps it off start-up
    import pandas as pd

    dirs = find_run_dirs(path)
    if not dirs:
        raise ResultsError(f"{path}: no results (no folder with a runs/ sub-folder)")
    notes: list[str] = []
    parts = [_read_dir(d, notes, skip_bad_parts) for d in dirs]
    runs_read = pa.concat_tables([p["runs"] for p in parts])
    chosen, in_force = _chosen(runs_read, [p["questions"] for p in parts])
    tables = _keep_chosen(parts, chosen, notes)
    # the runs row in force of each run id, in the order read
    tables["runs"] = runs_read.filter(pa.array([i in in_force for i in range(runs_read.num_rows)], pa.bool_()))
    frames = {name: t.to_pandas() for name, t in tables.items()}
    # a message stored by several attempts of a run (a resumed run) counts once
    frames["prompts"] = frames["prompts"].drop_duplicates(["run_id", "message"]).reset_index(drop=True)
    runs = frames["runs"]
    options = _one_type_per_column(pd.DataFrame([run_options(c) for c in runs["config"]], index=runs.index))
    options = options.drop(columns=["protocol"], errors="ignore").rename(
        columns={c: f"{OPTION_PREFIX}{c}" for c in options.columns if c in runs.columns}
    )
    frames["runs"] = pd.concat([runs, options], axis=1)
    joined = [c for c in options.columns if c not in frames["questions"].columns]
    per_question = frames["runs"].set_index("run_id")[joined].reindex(frames["questions"]["run_id"])
    frames["questions"] = pd.concat([frames["questions"], per_question.reset_index(drop=True)], axis=1)
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
