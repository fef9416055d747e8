"""Data files of questions: :func:`load_dataset`, its readers and the rules for each field.

A question is a :class:`~engine.tasks.Question` of one of the task kinds :data:`~engine.tasks.TASKS`;
the rows are turned into questions by :mod:`engine.tasks.builders`.

Loaders
=======
:func:`load_dataset` reads ``.jsonl`` (also ``.ndjson``), ``.json`` (a list of objects),
``.parquet`` and ``.csv`` files, the text formats also gzipped (``.jsonl.gz``, ``.json.gz``,
``.csv.gz``: HH-RLHF ships so). Every problem with a file raises :class:`DatasetError`
whose message starts with ``"<path>:<row>: "`` (or ``"<path>: "`` for problems with the
whole file), e.g. ``data.jsonl:17: missing field 'answer' (have: id, question)``.

Row numbers are 1-based:

* ``.jsonl``: the line number in the file. Blank lines are skipped but counted.
* ``.json``: the position of the object in the top-level list (1 = first object).
* ``.parquet``: the row number in the table.
* ``.csv``: the data row number + 1 for the header, i.e. the row number a spreadsheet
  shows (header = row 1, first data row = row 2; blank lines are skipped but counted).
  This is the line number unless a quoted field spans several lines. CSV is read with
  the :mod:`csv` module, so all values are strings; an empty cell counts as a missing
  value.

Field names (the first one present with a non-null value wins; the ``fields`` argument
of :func:`load_dataset` maps one of our names to the file's column and then *only* that
column is used). Our names are listed in :data:`FIELD_NAMES`:

``id``
    ``id``. Without it the question id is ``f"{file_stem}-{row_index:05d}"`` where
    ``row_index`` is the 0-based index of the record in the file (independent of
    ``offset``), so ids are stable however the file is sliced.
``question``
    ``question``, ``problem``, ``input``, ``prompt``. Must be a non-empty string.
``answer``
    ``answer``, ``gold``, ``label``, ``target``. For the pair task also ``winner`` and
    ``preference``.
``solution``
    ``solution``. numeric: used when there is no answer field and it contains ``####``
    (the text after the last ``####`` is the gold). math: used when there is no answer
    field; the gold is the stripped content of the last closed ``\\boxed{...}`` (or
    ``\\fbox{...}``), read by :func:`engine.latex.last_boxed` as replies are. The solution
    is never copied into ``meta`` (it gives the answer away).
``choices``
    ``choices`` or ``options`` (a list, a JSON-encoded list in a string, or a mapping
    letter -> text), else consecutive columns ``A``, ``B``, ``C``, ... starting at ``A``.
``a`` / ``b``
    pair task: ``conversation_a``/``conversation_b``, ``dialogue_a``/``dialogue_b``,
    ``response_a``/``response_b``.
``chosen`` / ``rejected``
    pair task, used when none of the a/b pairs is present.

Gold answers
============
* numeric: a string, int or float. If it contains ``####`` the text after the last
  ``####`` is taken. The result (stripped) must be a plain number: optional sign,
  digits with optional thousands commas (``1,234``), optional decimal part, or a
  fraction ``3/4``. It is kept as that string -- no canonicalisation happens here.
* math: any non-empty string (ints/floats are converted with ``str``).
* choice: resolved to a letter, in this order: a letter ``A``..``Z`` (also ``a``,
  ``(A)``, ``A.``, ``A)``) within the number of choices; an int (not bool) as a
  **0-based** index; the text of one of the choices; a string of digits as a 0-based
  index. Anything else, or fewer than two choices, is an error.
* pair: ``A``/``B``/``a``/``b``/``model_a``/``model_b``/``0``/``1`` (0 -> A). Ties are
  not a preference and raise :class:`DatasetError`; filter them out beforehand.
  In the ``chosen``/``rejected`` format the file's order would leak the label, so the
  presentation order is randomised per row from a hash of the row's content (prompt,
  chosen, rejected: deterministic, independent of any run seed, of the row's position and
  of the file's name) and the gold is the letter under which the chosen dialogue is shown. Any label field is
  ignored for that format.

A dialogue is either a string (shown as is) or a list of messages ``{"role", "content"}``
(``{"from", "value"}`` also accepted), rendered as ``"role: content"`` lines.

``image``
    ``image``, ``image_path``, ``image_url`` (optional; see Images below).

``meta`` holds every other scalar field of the row (str, int, float, bool or None) --
``id``, ``subject``, ``level``, ``duplicate_of`` and so on -- except the fields used for
question, answer, solution, choices and dialogues.

Images
======
A question may carry one image (:attr:`Question.image`), for vision models: the first of the fields
``image``, ``image_path``, ``image_url`` with a non-empty value (or the column ``fields={"image": ...}``
names). The value may be

* an ``http(s)://`` URL: kept as it is (the model's server fetches it);
* a ``data:image/<type>;base64,...`` URL: kept (the base64 must decode);
* a file path, absolute or relative to the data file's folder (for ``hf:`` a local folder's): read
  now, at load time, and turned into a data URL, so agents on any node of the cluster get the image
  itself, not a path only the driver's node has. Its type is sniffed from its first bytes (PNG, JPEG,
  GIF, WebP, BMP), else taken from an ``image/*`` file extension (``.tiff``, ``.avif``, ...);
* raw bytes, an object ``{"bytes": ..., "path": ...}`` (a Parquet image struct, a Hugging Face
  ``Image`` column) or a PIL image: encoded as a data URL the same way.

A missing or unreadable file, an empty one, a type that is not an image, an unsupported URL scheme
or bad base64 is a :class:`DatasetError` naming the file and row, like every other row problem.
An empty string counts as no image. The image never goes into ``meta``.

``limit``/``offset`` select rows before they are converted: the first ``offset`` rows are
skipped, then at most ``limit`` rows are taken. Only the selected rows are checked (rows
after them are not even read, and skipped JSONL lines are not parsed).
"""

from __future__ import annotations

import codecs
import csv
import functools
import gzip
import json
import os
from collections.abc import Callable, Generator, Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.tasks import DatasetError, Question, check_task, type_name
from engine.tasks.builders import BUILDERS, is_number
from engine.tasks.row import (
    ANSWER_KEYS,
    CHOICE_KEYS,
    PAIR_KEYS,
    RANKED_KEYS,
    Row,
)

__all__ = [
    "FIELD_NAMES",
    "load_dataset",
    "infer_task",
    "infer_task_of_record",
    "questions_from_rows",
    "check_limit",
    "check_offset",
]

#: Names accepted as keys of the ``fields`` override of :func:`load_dataset`.
FIELD_NAMES = ("id", "question", "answer", "solution", "choices", "a", "b", "chosen", "rejected", "image")


def infer_task(path: str | os.PathLike) -> str | None:
    """Guess the task from the first row of a data file.

    In order: a ``choices``/``options`` field or columns ``A`` and ``B`` -> ``"choice"``;
    one of the dialogue pairs (``conversation_a``/``_b``, ``dialogue_a``/``_b``,
    ``response_a``/``_b``, ``chosen``/``rejected``) -> ``"pair"``; a file name containing
    ``math``, an answer that looks like LaTeX (contains ``\\``, ``{``, ``^`` or ``$``) or
    only a ``\\boxed`` solution -> ``"math"``; an answer (or ``####`` solution) that is a
    number -> ``"numeric"``; any other non-empty answer -> ``"math"`` (free-form).
    Returns None when the row has none of these fields. Raises :class:`DatasetError`
    when the file is missing, unreadable or empty.
    """
    display = os.fspath(path)
    rows = _iter_rows(Path(path), display)
    try:
        first = next(rows, None)
        if first is None:
            raise DatasetError(f"{display}: empty file (no rows)")
        row, get = first
        rec = get()
    finally:
        rows.close()
    return infer_task_of_record(rec, _data_stem(Path(path)))


def infer_task_of_record(rec: Mapping[str, Any], stem: str = "") -> str | None:
    """:func:`infer_task`'s rules applied to one record; ``stem`` is the data set's name."""
    present = {k for k, v in rec.items() if v is not None}
    if present & set(CHOICE_KEYS) or {"A", "B"} <= present:
        return "choice"
    for ka, kb in PAIR_KEYS + (RANKED_KEYS,):
        if ka in present and kb in present:
            return "pair"
    answer = next((rec[k] for k in ANSWER_KEYS if k in present), None)
    solution = rec.get("solution")
    solution = solution if isinstance(solution, str) else ""
    if "math" in stem.lower():
        return "math"
    if isinstance(answer, str):
        if "####" in answer:
            return "numeric"
        if any(ch in answer for ch in "\\{^$"):
            return "math"
        if is_number(answer.strip()):
            return "numeric"
        return "math" if answer.strip() else None
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        return "numeric"
    if answer is None:
        if "####" in solution:
            return "numeric"
        if "\\boxed" in solution or "\\fbox" in solution:
            return "math"
    return None


# --------------------------------------------------------------------------- loading


def load_dataset(
    path: str | os.PathLike,
    task: str,
    limit: int | None = None,
    offset: int = 0,
    fields: Mapping[str, str] | None = None,
) -> list[Question]:
    """Load questions of ``task`` from a ``.jsonl``/``.json``/``.parquet``/``.csv`` file.

    See the module docstring for the field names, gold-answer rules and row numbering.
    ``fields`` maps our field names (:data:`FIELD_NAMES`) to the file's column names.
    ``limit`` must be None or positive and ``offset`` >= 0 (else ValueError naming the
    flag); an offset past the last row is a ValueError too. Raises :class:`DatasetError`
    for every problem with the file or a selected row.
    """
    check_task(task)
    check_limit(limit)
    check_offset(offset)
    overrides = _check_fields(fields)
    display = os.fspath(path)
    stem = _data_stem(Path(path))

    selected: list[tuple[int, int, Callable[[], dict]]] = []
    count = 0
    rows = _iter_rows(Path(path), display)
    try:
        for row, get in rows:
            index = count
            count += 1
            if index < offset:
                continue
            selected.append((index, row, get))
            if limit is not None and len(selected) >= limit:
                break
    finally:
        rows.close()
    if count == 0:
        raise DatasetError(f"{display}: empty file (no rows)")
    if not selected:
        raise DatasetError(f"--offset {offset} is past the end of {display} ({count} rows)")
    return questions_from_rows(selected, task, display, stem, overrides, base=Path(path).parent)


def questions_from_rows(
    selected: Sequence[tuple[int, int, Callable[[], dict]]],
    task: str,
    display: str,
    stem: str,
    overrides: Mapping[str, str] | None = None,
    base: str | os.PathLike | None = None,
) -> list[Question]:
    """Questions from already selected rows ``(index, row number, get record)`` of a data set
    (a file, or a Hugging Face split: :mod:`engine.hf_datasets`), with the same rules and errors
    as :func:`load_dataset`. ``base``: the folder relative image paths are read from (None: only
    absolute paths and URLs)."""
    check_task(task)
    overrides = _check_fields(overrides)
    build = BUILDERS[task]
    out: list[Question] = []
    seen: dict[str, int] = {}
    for index, row, get in selected:
        r = Row(get(), display, row, index, stem, overrides, None if base is None else Path(base))
        q = build(r)
        if q.qid in seen:
            raise r.error(f"duplicate id {q.qid!r} (first at row {seen[q.qid]})")
        seen[q.qid] = row
        out.append(q)
    return out


# --------------------------------------------------------------------------- argument checks


def check_limit(limit: int | None) -> None:
    if limit is None:
        return
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise DatasetError(f"--limit must be a positive integer (got {limit!r})")
    if limit <= 0:
        raise DatasetError(f"--limit must be positive (got {limit})")


def check_offset(offset: int) -> None:
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise DatasetError(f"--offset must be a non-negative integer (got {offset!r})")
    if offset < 0:
        raise DatasetError(f"--offset must be >= 0 (got {offset})")


def _check_fields(fields: Mapping[str, str] | None) -> dict[str, str]:
    if not fields:
        return {}
    out = {}
    for ours, theirs in fields.items():
        if ours not in FIELD_NAMES:
            raise DatasetError(f"unknown field name {ours!r} in fields; use one of {', '.join(FIELD_NAMES)}")
        if not isinstance(theirs, str) or not theirs:
            raise DatasetError(f"fields[{ours!r}] must be a column name (got {theirs!r})")
        out[ours] = theirs
    return out


# --------------------------------------------------------------------------- file readers
#
# Each reader is a generator of (row_number, getter); calling getter() returns the row as
# a dict (and raises DatasetError if it is not one). Checks that must happen eagerly
# (file exists, extension known) are done in _iter_rows before the generator starts.

# a Generator (not just an Iterator): the callers close() it to release the file early
RowIter = Generator[tuple[int, Callable[[], dict]], None, None]


def _getter(rec: dict) -> Callable[[], dict]:
    """The getter of a record already read as a dict."""
    return lambda: rec


def _data_suffix(path: Path) -> str:
    """The data format's extension, under an optional ``.gz`` (``data.jsonl.gz`` -> ``.jsonl``)."""
    if path.suffix.lower() == ".gz":
        return Path(path.stem).suffix.lower()
    return path.suffix.lower()


def _data_stem(path: Path) -> str:
    """The file name without its data extension(s) (``hh.jsonl.gz`` -> ``hh``)."""
    return Path(path.stem).stem if path.suffix.lower() == ".gz" else path.stem


def _open(path: Path, mode: str, **kw):
    """``open``, or ``gzip.open`` for a ``.gz`` file (HH-RLHF and others ship gzipped)."""
    if path.suffix.lower() == ".gz":
        return gzip.open(path, mode if "b" in mode else mode.replace("r", "rt") if "t" not in mode else mode, **kw)
    return open(path, mode, **kw)


def _iter_rows(path: Path, display: str) -> RowIter:
    ext = _data_suffix(path)
    reader = _READERS.get(ext)
    if reader is None or (path.suffix.lower() == ".gz" and ext == ".parquet"):
        raise DatasetError(
            f"{display}: unknown file extension {ext or '(none)'!r}; "
            f"expected one of {', '.join(sorted(_READERS))} (optionally .gz, not for .parquet)"
        )
    if not path.exists():
        raise DatasetError(f"{display}: no such file")
    if not path.is_file():
        raise DatasetError(f"{display}: not a regular file")
    return reader(path, display)


def _as_object(value: Any, display: str, row: int) -> dict:
    if not isinstance(value, dict):
        raise DatasetError(f"{display}:{row}: row is not a JSON object (got {type_name(value)})")
    return value


def _read_jsonl(path: Path, display: str) -> RowIter:
    def parse(text: str, row: int) -> dict:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            raise DatasetError(f"{display}:{row}: invalid JSON: {e.msg} (column {e.colno})") from None
        return _as_object(value, display, row)

    with _open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if lineno == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8) :]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DatasetError(f"{display}:{lineno}: not valid UTF-8 ({e.reason})") from None
            if not text.strip():
                continue
            yield lineno, functools.partial(parse, text, lineno)


def _read_json(path: Path, display: str) -> RowIter:
    try:
        with _open(path, "rb") as fh:
            text = fh.read().decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DatasetError(f"{display}: not valid UTF-8 ({e.reason})") from None
    if not text.strip():
        return
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise DatasetError(f"{display}:{e.lineno}: invalid JSON: {e.msg} (column {e.colno})") from None
    if not isinstance(data, list):
        raise DatasetError(f"{display}: expected a JSON list of objects, got {type_name(data)}")
    for i, value in enumerate(data, 1):
        yield i, functools.partial(_as_object, value, display, i)


def _read_parquet(path: Path, display: str) -> RowIter:
    # function-level: importing pyarrow here keeps it off start-up
    import pyarrow as pa

    # function-level: importing pyarrow.parquet here keeps it off start-up
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
        batches = pf.iter_batches(batch_size=1024)
        row = 0
        for batch in batches:
            for rec in batch.to_pylist():
                row += 1
                yield row, _getter(rec)
    except (pa.ArrowException, OSError) as e:
        raise DatasetError(f"{display}: cannot read Parquet file: {e}") from None


def _read_csv(path: Path, display: str) -> RowIter:
    with _open(path, "rt", encoding="utf-8-sig", newline="") as fh:
        reader = csv.reader(fh)
        header: list[str] | None = None
        start = 0  # records read so far, blank ones included = spreadsheet row number
        while True:
            start += 1
            try:
                values = next(reader)
            except StopIteration:
                return
            except UnicodeDecodeError as e:
                raise DatasetError(f"{display}:{start}: not valid UTF-8 ({e.reason})") from None
            except csv.Error as e:
                raise DatasetError(f"{display}:{start}: bad CSV: {e}") from None
            if not values or all(not v.strip() for v in values):
                continue  # blank line
            if header is None:
                header = [h.strip() for h in values]
                dup = sorted({h for h in header if header.count(h) > 1})
                if dup:
                    raise DatasetError(f"{display}:{start}: duplicate column name(s) in header: {', '.join(dup)}")
                if any(not h for h in header):
                    raise DatasetError(f"{display}:{start}: empty column name in header")
                continue
            if len(values) != len(header):
                raise DatasetError(
                    f"{display}:{start}: row has {len(values)} values but the header has {len(header)} columns"
                )
            rec = {h: (v if v != "" else None) for h, v in zip(header, values)}
            yield start, _getter(rec)


_READERS: dict[str, Callable[[Path, str], RowIter]] = {
    ".jsonl": _read_jsonl,
    ".ndjson": _read_jsonl,
    ".json": _read_json,
    ".parquet": _read_parquet,
    ".csv": _read_csv,
}
