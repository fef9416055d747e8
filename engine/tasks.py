"""Benchmark questions: the generated arithmetic task and loaders for data files.

Everything a debate needs to know about a question is a :class:`Question`. There are
four task kinds (:data:`TASKS`):

``numeric``
    The gold answer is a number (GSM8K, the Du et al. arithmetic task).
``math``
    The gold answer is free-form LaTeX (Hendrycks MATH).
``choice``
    Multiple choice; the gold answer is a letter (MMLU).
``pair``
    Pairwise preference between two dialogues; the gold answer is ``"A"`` or ``"B"``.

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
    field; the gold is the content of the last ``\\boxed{...}`` (or ``\\fbox{...}``),
    found by brace matching. The solution is never copied into ``meta`` (it gives the
    answer away).
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

import base64
import binascii
import codecs
import csv
import hashlib
import io
import json
import math
import mimetypes
import os
import random
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import UserError

__all__ = [
    "TASKS",
    "FIELD_NAMES",
    "Question",
    "DatasetError",
    "arithmetic_questions",
    "load_dataset",
    "infer_task",
    "infer_task_of_record",
    "questions_from_rows",
    "image_mime",
    "image_ref",
]

TASKS = ("numeric", "math", "choice", "pair")

#: Names accepted as keys of the ``fields`` override of :func:`load_dataset`.
FIELD_NAMES = ("id", "question", "answer", "solution", "choices", "a", "b", "chosen", "rejected", "image")

_ID_KEYS = ("id",)
_QUESTION_KEYS = ("question", "problem", "input", "prompt")
_ANSWER_KEYS = ("answer", "gold", "label", "target")
_LABEL_KEYS = ("answer", "label", "winner", "preference")
_SOLUTION_KEYS = ("solution",)
_CHOICE_KEYS = ("choices", "options")
_PAIR_KEYS = (
    ("conversation_a", "conversation_b"),
    ("dialogue_a", "dialogue_b"),
    ("response_a", "response_b"),
)
_RANKED_KEYS = ("chosen", "rejected")
_IMAGE_KEYS = ("image", "image_path", "image_url")

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

ARITHMETIC_TEMPLATE = (
    "What is the result of {a}+{b}*{c}+{d}-{e}*{f}? Make sure to state your answer at the end of the response."
)

PAIR_QUESTION = "Which dialogue is better, A or B?"


@dataclass(frozen=True)
class Question:
    """One benchmark question. Hashable (``meta`` and ``image`` are left out of the hash) and picklable.

    ``image``: None, or the question's image as a URL a chat API takes: ``data:image/...;base64,...``
    (a local file, read at load time) or ``http(s)://...``. It can be long (a base64 image), so it is
    left out of the hash and the repr; outputs store :attr:`image_ref` instead.
    """

    qid: str
    task: str
    text: str
    gold: str
    choices: tuple[str, ...] = ()
    source: str = ""
    row: int = 0
    meta: Mapping[str, Any] = field(default_factory=dict, hash=False)
    image: str | None = field(default=None, hash=False, repr=False)

    @property
    def image_ref(self) -> str | None:
        """A short reference to the image for outputs and logs: an http(s) URL as it is (up to 300
        characters), else ``sha256:`` and the first 16 hex digits of the image's bytes (of the URL
        for a longer one); None without an image."""
        return image_ref(self.image)


class DatasetError(UserError, ValueError):
    """A data file cannot be used. The message names the file and, for row problems,
    the 1-based row/line: ``"data.jsonl:17: missing field 'answer' (have: id, question)"``."""


# --------------------------------------------------------------------------- arithmetic


def arithmetic_questions(n: int, seed: int = 0) -> list[Question]:
    """The Du et al. arithmetic task: ``a+b*c+d-e*f`` with six integers uniform in 0..29.

    The numbers come from ``random.Random(seed)``, six draws per question in the order
    a..f, so the first N questions of a seed never depend on ``n`` (a smaller ``n`` gives
    a prefix). ``meta`` holds the six numbers under keys ``"a"``..``"f"``.
    """
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"n must be an int, got {type(n).__name__}")
    if n < 0:
        raise ValueError(f"n must be >= 0 (got {n})")
    rng = random.Random(seed)
    out = []
    for i in range(n):
        a, b, c, d, e, f = (rng.randint(0, 29) for _ in range(6))
        out.append(
            Question(
                qid=f"arith-{seed}-{i:05d}",
                task="numeric",
                text=ARITHMETIC_TEMPLATE.format(a=a, b=b, c=c, d=d, e=e, f=f),
                gold=str(a + b * c + d - e * f),
                source="arithmetic",
                row=0,
                meta={"a": a, "b": b, "c": c, "d": d, "e": e, "f": f},
            )
        )
    return out


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
    if present & set(_CHOICE_KEYS) or {"A", "B"} <= present:
        return "choice"
    for ka, kb in _PAIR_KEYS + (_RANKED_KEYS,):
        if ka in present and kb in present:
            return "pair"
    answer = next((rec[k] for k in _ANSWER_KEYS if k in present), None)
    solution = rec.get("solution")
    solution = solution if isinstance(solution, str) else ""
    if "math" in stem.lower():
        return "math"
    if isinstance(answer, str):
        if "####" in answer:
            return "numeric"
        if any(ch in answer for ch in "\\{^$"):
            return "math"
        if _is_number(answer.strip()):
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
    selected: list[tuple[int, int, Callable[[], dict]]],
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
    build = _BUILDERS[task]
    out: list[Question] = []
    seen: dict[str, int] = {}
    for index, row, get in selected:
        r = _Row(get(), display, row, index, stem, overrides, None if base is None else Path(base))
        q = build(r)
        if q.qid in seen:
            raise r.error(f"duplicate id {q.qid!r} (first at row {seen[q.qid]})")
        seen[q.qid] = row
        out.append(q)
    return out


# --------------------------------------------------------------------------- argument checks


def check_task(task: str | None, allow_none: bool = False) -> None:
    if task is None and allow_none:
        return
    if task not in TASKS:
        raise DatasetError(f"--task must be one of {', '.join(TASKS)} (got {task!r})")


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

RowIter = Iterator[tuple[int, Callable[[], dict]]]


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
        import gzip

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
        raise DatasetError(f"{display}:{row}: row is not a JSON object (got {_type_name(value)})")
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
            yield lineno, (lambda text=text, row=lineno: parse(text, row))


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
        raise DatasetError(f"{display}: expected a JSON list of objects, got {_type_name(data)}")
    for i, value in enumerate(data, 1):
        yield i, (lambda value=value, row=i: _as_object(value, display, row))


def _read_parquet(path: Path, display: str) -> RowIter:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
        batches = pf.iter_batches(batch_size=1024)
        row = 0
        for batch in batches:
            for rec in batch.to_pylist():
                row += 1
                yield row, (lambda rec=rec: rec)
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
            yield start, (lambda rec=rec: rec)


_READERS: dict[str, Callable[[Path, str], RowIter]] = {
    ".jsonl": _read_jsonl,
    ".ndjson": _read_jsonl,
    ".json": _read_json,
    ".parquet": _read_parquet,
    ".csv": _read_csv,
}


# --------------------------------------------------------------------------- row helpers


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, (list, tuple)):
        return "list"
    return type(value).__name__


_SCALARS = (str, int, float, bool, type(None))


class _Row:
    """One record plus where it came from; knows how to complain about it."""

    def __init__(
        self,
        rec: dict,
        display: str,
        row: int,
        index: int,
        stem: str,
        overrides: dict[str, str],
        base: Path | None = None,
    ):
        self.rec = rec
        self.display = display
        self.row = row
        self.index = index
        self.stem = stem
        self.overrides = overrides
        self.base = base  # the folder relative image paths are read from (None: only absolute ones)
        self.used: set[str] = set()

    def error(self, msg: str) -> DatasetError:
        return DatasetError(f"{self.display}:{self.row}: {msg}")

    def have(self) -> str:
        return ", ".join(str(k) for k in self.rec) or "no fields"

    def find(self, name: str, candidates: tuple[str, ...]) -> tuple[str | None, Any]:
        """First present (non-null) column for our field ``name``; (None, None) if none."""
        keys = (self.overrides[name],) if name in self.overrides else candidates
        for k in keys:
            if self.rec.get(k) is not None:
                return k, self.rec[k]
        return None, None

    def tried(self, name: str, candidates: tuple[str, ...]) -> tuple[str, ...]:
        return (self.overrides[name],) if name in self.overrides else candidates

    def missing(self, name: str, candidates: tuple[str, ...], extra: str = "") -> DatasetError:
        keys = self.tried(name, candidates)
        also = f"; also looked for {', '.join(keys[1:])}" if len(keys) > 1 else ""
        return self.error(f"missing field {keys[0]!r} (have: {self.have()}{also}){extra}")

    def require(self, name: str, candidates: tuple[str, ...]) -> tuple[str, Any]:
        key, value = self.find(name, candidates)
        if key is None:
            raise self.missing(name, candidates)
        return key, value

    def text(self, key: str, value: Any) -> str:
        if not isinstance(value, str):
            raise self.error(f"field {key!r} must be a string, got {_type_name(value)}")
        s = value.strip()
        if not s:
            raise self.error(f"field {key!r} is empty")
        return s

    def qid(self) -> str:
        key, value = self.find("id", _ID_KEYS)
        if key is None:
            return f"{self.stem}-{self.index:05d}"
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise self.error(f"field {key!r} must be a string or an integer, got {_type_name(value)}")
        s = str(value).strip()
        if not s:
            raise self.error(f"field {key!r} is empty")
        return s

    def question_text(self) -> str:
        key, value = self.require("question", _QUESTION_KEYS)
        self.used.add(key)
        return self.text(key, value)

    def meta(self) -> dict[str, Any]:
        skip = self.used | {self.overrides.get("solution", "solution")}
        return {str(k): v for k, v in self.rec.items() if k not in skip and isinstance(v, _SCALARS)}

    def image(self) -> str | None:
        """The row's image as a URL (see "Images" in the module docstring), or None."""
        self.used.update(k for k in _IMAGE_KEYS if k in self.rec)  # never copied into meta
        key, value = self.find("image", _IMAGE_KEYS)
        if key is None:
            return None
        self.used.add(key)
        return _image_url(self, key, value)

    def question(self, task: str, text: str, gold: str, choices: tuple[str, ...] = ()) -> Question:
        image = self.image()
        return Question(
            qid=self.qid(),
            task=task,
            text=text,
            gold=gold,
            choices=choices,
            source=self.display,
            row=self.row,
            meta=self.meta(),
            image=image,
        )


# --------------------------------------------------------------------------- images

# Types told by their first bytes (the extension alone is not trusted for these).
_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"BM", "image/bmp"),
)
_SNIFFED = frozenset(m for _, m in _SIGNATURES) | {"image/webp"}
_DATA_URL_RE = re.compile(r"data:(image/[A-Za-z0-9.+-]+);base64,(.*)", re.S)
_REF_URL_CHARS = 300


def _sniff(data: bytes) -> str | None:
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return next((mime for sig, mime in _SIGNATURES if data.startswith(sig)), None)


def image_mime(data: bytes, name: str = "") -> str | None:
    """An image's MIME type: sniffed from its first bytes (PNG, JPEG, GIF, WebP, BMP), else from an
    ``image/*`` extension of ``name`` that is not one of those (a ``.png`` that is not a PNG is not
    taken on its word); None when it is neither."""
    sniffed = _sniff(data)
    if sniffed:
        return sniffed
    guessed = mimetypes.guess_type(name)[0] if name else None
    if guessed and guessed.startswith("image/") and guessed not in _SNIFFED:
        return guessed
    return None


def image_ref(image: str | None) -> str | None:
    """:attr:`Question.image_ref` of an image URL."""
    if not image:
        return None
    m = _DATA_URL_RE.fullmatch(image)
    if m:
        data = base64.b64decode(m.group(2))
        return "sha256:" + hashlib.sha256(data).hexdigest()[:16]
    if len(image) <= _REF_URL_CHARS:
        return image
    return "sha256:" + hashlib.sha256(image.encode()).hexdigest()[:16]


def _data_url(r: _Row, key: str, data: bytes, name: str, shown: str) -> str:
    if not data:
        raise r.error(f"image {shown} (field {key!r}) is empty")
    mime = image_mime(data, name)
    if mime is None:
        raise r.error(
            f"image {shown} (field {key!r}) is not an image type we know "
            f"(PNG, JPEG, GIF, WebP, BMP by content, or an image/* file extension)"
        )
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _read_image_file(r: _Row, key: str, value: str) -> str:
    path = Path(value).expanduser()
    if not path.is_absolute():
        if r.base is None:
            raise r.error(
                f"image path {value!r} (field {key!r}) is relative and this data set has no folder "
                f"to read it from; give an absolute path or a URL"
            )
        path = r.base / path
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise r.error(
            f"image file {value!r} (field {key!r}): cannot read {path}: {exc.strerror or type(exc).__name__}"
        ) from None
    return _data_url(r, key, data, path.name, f"file {value!r}")


def _image_url(r: _Row, key: str, value: Any) -> str | None:
    """The image of field ``key`` as an http(s) or data URL (module docstring, "Images")."""
    if isinstance(value, str):
        s = value.strip()
        if not s:
            return None
        if s[:5].lower() == "data:":
            m = _DATA_URL_RE.fullmatch(s)
            if not m:
                raise r.error(f"field {key!r} is a data URL that is not data:image/<type>;base64,...")
            try:
                base64.b64decode(m.group(2), validate=True)
            except (binascii.Error, ValueError):
                raise r.error(f"field {key!r} is a data URL whose base64 does not decode") from None
            return s
        if s[:8].lower().startswith(("http://", "https://")):
            return s
        if re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", s):
            raise r.error(
                f"field {key!r}: unsupported URL {s[:80]!r}; give an http(s) URL, a data:image URL or a file path"
            )
        return _read_image_file(r, key, s)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _data_url(r, key, bytes(value), "", "bytes")
    if isinstance(value, Mapping):  # a Parquet image struct / Hugging Face Image column: {bytes, path}
        data, path = value.get("bytes"), value.get("path")
        if data:
            return _data_url(r, key, bytes(data), str(path or ""), f"bytes of {path!r}" if path else "bytes")
        if isinstance(path, str) and path.strip():
            return _image_url(r, key, path)
        raise r.error(f"field {key!r} is an object without image 'bytes' or a 'path'")
    if hasattr(value, "save") and hasattr(value, "size") and hasattr(value, "mode"):  # a PIL image
        buf = io.BytesIO()
        try:
            value.save(buf, format=getattr(value, "format", None) or "PNG")
        except Exception as exc:  # noqa: BLE001 - any encoder failure is this row's problem
            raise r.error(f"field {key!r}: cannot encode the image: {type(exc).__name__}: {exc}") from None
        return _data_url(r, key, buf.getvalue(), "", "PIL image")
    raise r.error(f"field {key!r} must be a file path, an http(s) URL or a data:image URL, got {_type_name(value)}")


def _scalar_text(r: _Row, key: str, value: Any) -> str:
    """A gold value as a stripped string; ints and finite floats are accepted."""
    if isinstance(value, bool):
        raise r.error(f"field {key!r} must be a string or a number, got bool")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise r.error(f"field {key!r} is {value!r}, not a usable answer")
        return repr(value)
    if not isinstance(value, str):
        raise r.error(f"field {key!r} must be a string or a number, got {_type_name(value)}")
    s = value.strip()
    if not s:
        raise r.error(f"field {key!r} is empty")
    return s


# --------------------------------------------------------------------------- numbers & boxes

_NUMBER_RE = re.compile(r"[+-]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)")
_FRACTION_RE = re.compile(r"[+-]?\d+\s*/\s*(\d+)")


def _is_number(s: str) -> bool:
    """Plain number: sign, digits (thousands commas allowed), decimals, or a fraction a/b."""
    if _NUMBER_RE.fullmatch(s):
        return True
    m = _FRACTION_RE.fullmatch(s)
    return bool(m) and int(m.group(1)) != 0


def _last_boxed(s: str) -> str | None:
    """Content of the last ``\\boxed{...}`` / ``\\fbox{...}`` in ``s`` (brace matched).

    ``\\boxed 5`` (no braces) gives the token after the space. Escaped braces ``\\{``
    ``\\}`` are not counted. Returns None if there is no box or it is unbalanced.
    """
    start = max(s.rfind("\\boxed"), s.rfind("\\fbox"))
    if start < 0:
        return None
    i = start + (len("\\boxed") if s.startswith("\\boxed", start) else len("\\fbox"))
    if i < len(s) and s[i] == " ":
        m = re.match(r" +([^\s$]+)", s[i:])
        return m.group(1) if m else None
    if i >= len(s) or s[i] != "{":
        return None
    depth = 0
    j = i
    while j < len(s):
        ch = s[j]
        if ch == "\\":
            j += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return s[i + 1 : j].strip()
        j += 1
    return None


# --------------------------------------------------------------------------- builders


def _build_numeric(r: _Row) -> Question:
    text = r.question_text()
    key, value = r.find("answer", _ANSWER_KEYS)
    if key is not None:
        r.used.add(key)
        gold = _scalar_text(r, key, value)
        if "####" in gold:
            gold = gold.rsplit("####", 1)[1].strip()
            if not gold:
                raise r.error(f"field {key!r} has nothing after '####'")
    else:
        skey, solution = r.find("solution", _SOLUTION_KEYS)
        if not isinstance(solution, str) or "####" not in solution:
            raise r.missing(
                "answer", _ANSWER_KEYS, "" if skey is None else f" and field {skey!r} has no '####' answer line"
            )
        key = skey
        gold = solution.rsplit("####", 1)[1].strip()
        if not gold:
            raise r.error(f"field {key!r} has nothing after '####'")
    if not _is_number(gold):
        raise r.error(f"numeric gold answer {gold!r} (field {key!r}) is not a number")
    return r.question("numeric", text, gold)


def _build_math(r: _Row) -> Question:
    text = r.question_text()
    key, value = r.find("answer", _ANSWER_KEYS)
    if key is not None:
        r.used.add(key)
        gold = _scalar_text(r, key, value)
    else:
        skey, solution = r.find("solution", _SOLUTION_KEYS)
        if skey is None:
            raise r.missing("answer", _ANSWER_KEYS)
        if not isinstance(solution, str):
            raise r.error(f"field {skey!r} must be a string, got {_type_name(solution)}")
        boxed = _last_boxed(solution)
        if not boxed:
            raise r.missing("answer", _ANSWER_KEYS, f" and field {skey!r} has no complete \\boxed{{...}}")
        gold = boxed
    return r.question("math", text, gold)


def _choice_list(r: _Row) -> tuple[str, ...]:
    key, value = r.find("choices", _CHOICE_KEYS)
    if key is None:
        if "choices" in r.overrides:
            raise r.missing("choices", _CHOICE_KEYS)
        items = []
        for letter in _LETTERS:
            if r.rec.get(letter) is None:
                break
            items.append((letter, r.rec[letter]))
            r.used.add(letter)
        if not items:
            raise r.error(f"missing field 'choices' (have: {r.have()}; also looked for options and columns A, B, ...)")
    else:
        r.used.add(key)
        if isinstance(value, str) and value.lstrip().startswith(("[", "{")):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                raise r.error(f"field {key!r} is a string that is not a JSON list") from None
        if isinstance(value, Mapping):
            keys = [str(k).strip().upper() for k in value]
            if keys != list(_LETTERS[: len(keys)]):
                raise r.error(f"field {key!r} is a mapping whose keys are not A, B, C, ... in order")
            items = [(k, v) for k, v in zip(keys, value.values())]
        elif isinstance(value, (list, tuple)):
            items = [(f"{key}[{i}]", v) for i, v in enumerate(value)]
        else:
            raise r.error(f"field {key!r} must be a list of choices, got {_type_name(value)}")
    choices = []
    for where, v in items:
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise r.error(f"choice {where} must be a string, got {_type_name(v)}")
        choices.append(v.strip() if isinstance(v, str) else str(v))
    if len(choices) < 2:
        raise r.error(f"need at least 2 choices, got {len(choices)}")
    if len(choices) > len(_LETTERS):
        raise r.error(f"at most {len(_LETTERS)} choices are supported, got {len(choices)}")
    return tuple(choices)


_LETTER_RE = re.compile(r"\(?([A-Za-z])[).:]?")


def _choice_gold(r: _Row, key: str, value: Any, choices: tuple[str, ...]) -> str:
    n = len(choices)
    valid = f"{_LETTERS[0]}-{_LETTERS[n - 1]}"
    if isinstance(value, bool):
        raise r.error(f"answer field {key!r} must be a letter or an index, got bool")
    if isinstance(value, int):
        if 0 <= value < n:
            return _LETTERS[value]
        raise r.error(f"answer index {value} (field {key!r}) is out of range for {n} choices (0-based)")
    if not isinstance(value, str):
        raise r.error(f"answer field {key!r} must be a letter or an index, got {_type_name(value)}")
    s = value.strip()
    m = _LETTER_RE.fullmatch(s)
    if m and m.group(1).upper() in _LETTERS[:n]:
        return m.group(1).upper()
    if s in choices:
        return _LETTERS[choices.index(s)]
    if s.isdigit():
        if int(s) < n:
            return _LETTERS[int(s)]
        raise r.error(f"answer index {s} (field {key!r}) is out of range for {n} choices (0-based)")
    if m:
        raise r.error(f"answer {s!r} (field {key!r}) is not one of the {n} choices {valid}")
    raise r.error(f"answer {s!r} (field {key!r}) is not a letter {valid}, a 0-based index or a choice text")


def _build_choice(r: _Row) -> Question:
    question = r.question_text()
    choices = _choice_list(r)
    key, value = r.require("answer", _ANSWER_KEYS)
    r.used.add(key)
    gold = _choice_gold(r, key, value, choices)
    lines = "\n".join(f"({_LETTERS[i]}) {c}" for i, c in enumerate(choices))
    return r.question("choice", f"{question}\n{lines}", gold, choices)


def _dialogue(r: _Row, key: str, value: Any) -> str:
    if isinstance(value, str):
        return r.text(key, value)
    if isinstance(value, (list, tuple)):
        if not value:
            raise r.error(f"field {key!r} is an empty dialogue")
        lines = []
        for i, msg in enumerate(value, 1):
            if not isinstance(msg, Mapping):
                raise r.error(f"field {key!r}: message {i} is not a {{role, content}} object (got {_type_name(msg)})")
            role = msg.get("role", msg.get("from"))
            content = msg.get("content", msg.get("value"))
            if not isinstance(role, str) or not isinstance(content, str):
                raise r.error(f"field {key!r}: message {i} needs string 'role' and 'content'")
            lines.append(f"{role.strip()}: {content.strip()}")
        return "\n".join(lines)
    raise r.error(f"field {key!r} must be a string or a list of messages, got {_type_name(value)}")


_PAIR_LABELS = {"a": "A", "b": "B", "model_a": "A", "model_b": "B", "0": "A", "1": "B"}


def _pair_label(r: _Row, key: str, value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
        return "AB"[value]
    if isinstance(value, str) and value.strip().lower() in _PAIR_LABELS:
        return _PAIR_LABELS[value.strip().lower()]
    raise r.error(
        f"label {value!r} (field {key!r}) is not a preference for A or B "
        "(expected A/B, model_a/model_b or 0/1; ties must be filtered out)"
    )


def _build_pair(r: _Row) -> Question:
    prompt_key, prompt = r.find("question", _QUESTION_KEYS)
    if prompt_key is not None:
        r.used.add(prompt_key)
        if not isinstance(prompt, str):
            raise r.error(f"field {prompt_key!r} must be a string, got {_type_name(prompt)}")
        prompt = prompt.strip()

    if "a" in r.overrides or "b" in r.overrides:
        pairs: tuple[tuple[str, str], ...] = ((r.overrides.get("a", "a"), r.overrides.get("b", "b")),)
    elif "chosen" in r.overrides or "rejected" in r.overrides:
        pairs = ()
    else:
        pairs = _PAIR_KEYS
    ranked = (r.overrides.get("chosen", "chosen"), r.overrides.get("rejected", "rejected"))

    def present(k: str) -> bool:
        return r.rec.get(k) is not None

    found = None
    for ka, kb in pairs:
        if present(ka) or present(kb):
            if not (present(ka) and present(kb)):
                have, miss = (ka, kb) if present(ka) else (kb, ka)
                raise r.error(f"field {have!r} has no partner {miss!r} (have: {r.have()})")
            found = (ka, kb)
            break

    if found is not None:
        ka, kb = found
        r.used.update(found)
        a = _dialogue(r, ka, r.rec[ka])
        b = _dialogue(r, kb, r.rec[kb])
        lkey, lvalue = r.require("answer", _LABEL_KEYS)
        r.used.add(lkey)
        gold = _pair_label(r, lkey, lvalue)
    else:
        kc, kr = ranked
        if not (present(kc) and present(kr)):
            wanted = [f"{x}/{y}" for x, y in pairs] + [f"{kc}/{kr}"]
            raise r.error(f"missing dialogue fields (looked for {', '.join(wanted)}; have: {r.have()})")
        r.used.update(ranked)
        chosen = _dialogue(r, kc, r.rec[kc])
        rejected = _dialogue(r, kr, r.rec[kr])
        # The file order (chosen first) would leak the label: shuffle per question, from the
        # row's content (not its id, which may come from the file name: renaming the file must
        # not change the gold letters).
        digest = hashlib.sha256(json.dumps([prompt or "", chosen, rejected]).encode()).digest()
        if digest[0] < 128:
            a, b, gold = chosen, rejected, "A"
        else:
            a, b, gold = rejected, chosen, "B"

    parts = [prompt] if prompt else []
    parts += [f"Dialogue A:\n{a}", f"Dialogue B:\n{b}", PAIR_QUESTION]
    return r.question("pair", "\n\n".join(parts), gold)


_BUILDERS: dict[str, Callable[[_Row], Question]] = {
    "numeric": _build_numeric,
    "math": _build_math,
    "choice": _build_choice,
    "pair": _build_pair,
}
