"""``--dataset hf:NAME[:CONFIG][:SPLIT]``: questions from a Hugging Face data set.

The set is loaded with Hugging Face ``datasets`` (``datasets.load_dataset(NAME, CONFIG,
split=SPLIT)``): from the hub, from the local cache when the hub is out of reach
(``HF_DATASETS_OFFLINE=1``), or from a local folder of JSON / JSONL / CSV / Parquet files given
as NAME (``hf:/data/gsm8k:test``). SPLIT defaults to ``test`` (the papers evaluate on test
splits); CONFIG is needed where the set has several (``hf:cais/mmlu:all:test``).

The rows then go through the engine's own question builders (:mod:`engine.tasks.builders`: the same
field names, gold-answer rules and one-line errors naming ``hf:NAME:row``). The papers' sets
whose columns are not those names are mapped here, by name (:data:`KNOWN_SETS`, the one
registration point; matched on the lower-cased NAME):

=================  ========  =====================================================================
set (NAME's last   task      mapping
part has)
=================  ========  =====================================================================
gsm-ic, gsm_ic     numeric   ``new_question`` is the question (the distractor version)
gsm8k              numeric   ``question``; gold after ``####`` in ``answer``
math-500, math500  math      ``problem``, ``answer``; ``unique_id`` is the id
competition_math,  math      ``problem``; gold is the last ``\\boxed{}`` of ``solution``
hendrycks_math
mmlu-pro           choice    ``question``, ``options`` (up to 10), ``answer`` letter; ``question_id``
mmlu               choice    ``question``, ``choices``, ``answer`` (0-based index)
gpqa               choice    ``Question``; choices = the correct and three incorrect answers in an
                             order drawn from a hash of the question (the file order would give the
                             answer away); ``Record ID`` is the id
ai2_arc, arc-chal. choice    ``question``, ``choices.text`` / ``choices.label``, ``answerKey``
hh-rlhf            pair      ``chosen`` / ``rejected`` (presented in a per-row hashed order)
mathvista          numeric   ``question`` with its image ``decoded_image``; ``pid`` is the id; only
                             the rows with ``question_type`` free_form and ``answer_type`` integer
                             or float (the sparse-topology paper's subset; split ``testmini``)
=================  ========  =====================================================================

Images: a column of the ``datasets`` type ``Image`` is read undecoded (the file's own bytes, no
re-encoding) and becomes the question's image through :mod:`engine.tasks.images`' image fields
(``image``, ``image_path``, ``image_url``, or the column ``--fields`` names); relative image paths
are read from NAME's folder when NAME is a local folder. A known set may keep only some rows
(``HFSet.where``): the others are skipped before ``--offset``/``--limit``, and errors still name
the row's position in the split.

Choices where the paper is vague (MathVista): the paper uses "the free_form question type" and a
system prompt asking for "an integer answer or a floating-point number"; we keep the free_form rows
whose answer is an integer or a float (a list answer is not a number the numeric grader can
check), and ask for the answer in the engine's numeric format (``\\boxed{}``), like every task.

Any other set is read with the generic field names; ``--task`` is then guessed from its first
row like a file's.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.tasks import DatasetError, Question
from engine.tasks.files import infer_task_of_record, questions_from_rows

PREFIX = "hf:"  # engine.dataset_routing.load_questions routes datasets starting with it here
DEFAULT_SPLIT = "test"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HFSet:
    """A known data set: the task and how its rows become the engine's field names."""

    match: tuple[str, ...]  # lower-case fragments of NAME
    task: str
    convert: Callable[[dict[str, Any]], dict[str, Any]] = lambda rec: rec
    # only the rows whose column holds one of the values are questions ({} = every row)
    where: Mapping[str, tuple[Any, ...]] = field(default_factory=dict, hash=False)


def _rename(**names: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def convert(rec: dict[str, Any]) -> dict[str, Any]:
        out = dict(rec)
        for ours, theirs in names.items():
            if theirs in out:
                out[ours] = out.pop(theirs)
        return out

    return convert


def _gpqa(rec: dict[str, Any]) -> dict[str, Any]:
    correct = rec.get("Correct Answer")
    wrong = [rec.get(f"Incorrect Answer {k}") for k in (1, 2, 3)]
    if correct is None or any(w is None for w in wrong):
        return rec  # the builder names the missing field
    options = [str(correct).strip()] + [str(w).strip() for w in wrong]
    order = list(range(4))
    seed = int.from_bytes(hashlib.sha1(str(rec.get("Question", "")).encode()).digest()[:8], "big")
    random.Random(seed).shuffle(order)
    out = {
        k: v
        for k, v in rec.items()
        if k not in ("Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3", "Explanation")
    }
    out["question"] = out.pop("Question", None)
    if "Record ID" in out:
        out["id"] = out.pop("Record ID")
    out["choices"] = [options[i] for i in order]
    out["answer"] = order.index(0)
    return out


def _arc(rec: dict[str, Any]) -> dict[str, Any]:
    choices = rec.get("choices")
    if not isinstance(choices, Mapping) or "text" not in choices or "label" not in choices:
        return rec
    labels = [str(x) for x in choices["label"]]
    out = {k: v for k, v in rec.items() if k not in ("choices", "answerKey")}
    out["choices"] = list(choices["text"])
    key = str(rec.get("answerKey", ""))
    out["answer"] = labels.index(key) if key in labels else key  # an unknown key is reported by the builder
    return out


def _mathvista(rec: dict[str, Any]) -> dict[str, Any]:
    # "image" is a path inside the hub repo's zip; the image itself is the Image column decoded_image
    out = {k: v for k, v in rec.items() if k not in ("image", "decoded_image", "query", "choices")}
    if "pid" in out:
        out["id"] = out.pop("pid")
    out["image"] = rec.get("decoded_image")
    return out


KNOWN_SETS: tuple[HFSet, ...] = (  # first match wins: more specific names first
    HFSet(("gsm-ic", "gsm_ic"), "numeric", _rename(question="new_question")),
    HFSet(("gsm8k",), "numeric"),
    HFSet(("math-500", "math500"), "math", _rename(id="unique_id")),
    HFSet(("competition_math", "hendrycks_math"), "math"),
    HFSet(("mmlu-pro", "mmlu_pro"), "choice", _rename(id="question_id")),
    HFSet(("mmlu",), "choice"),
    HFSet(("gpqa",), "choice", _gpqa),
    HFSet(("ai2_arc", "arc-challenge", "arc_challenge"), "choice", _arc),
    HFSet(("hh-rlhf", "hh_rlhf"), "pair"),
    HFSet(
        ("mathvista",),
        "numeric",
        _mathvista,
        where={"question_type": ("free_form",), "answer_type": ("integer", "float")},
    ),
)


def parse(spec: str) -> tuple[str, str | None, str]:
    """``hf:NAME[:CONFIG][:SPLIT]`` -> (NAME, CONFIG or None, SPLIT). With two parts after NAME
    they are CONFIG and SPLIT; with one it is SPLIT when it names a usual split (train,
    validation, test, testmini, dev, or one with a slice such as ``test[:100]``), else CONFIG."""
    parts = _split(spec[len(PREFIX) :])
    if not parts or not parts[0]:
        raise DatasetError(f"--dataset {spec}: give a data set name after hf: (hf:NAME[:CONFIG][:SPLIT])")
    if len(parts) > 3:
        raise DatasetError(f"--dataset {spec}: too many ':' parts (hf:NAME[:CONFIG][:SPLIT])")
    name = parts[0]
    if len(parts) == 3:
        return name, parts[1] or None, parts[2] or DEFAULT_SPLIT
    if len(parts) == 2:
        split_like = parts[1].split("[")[0] in ("train", "validation", "test", "testmini", "dev", "eval")
        return (name, None, parts[1]) if split_like else (name, parts[1], DEFAULT_SPLIT)
    return name, None, DEFAULT_SPLIT


def _split(rest: str) -> list[str]:
    """Split on ':' outside ``[...]`` (a split may carry a slice: ``test[:100]``)."""
    parts, depth, cur = [], 0, ""
    for ch in rest:
        depth += (ch == "[") - (ch == "]")
        if ch == ":" and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return parts + [cur]


def _last_part(name: str) -> str:
    """A hub repo's name (``openai/gsm8k`` -> ``gsm8k``) or a local folder's."""
    return name.rstrip("/").split("/")[-1]


def known_set(name: str) -> HFSet | None:
    """The known set whose fragment is in the last part of NAME (a hub repo's name or a folder's)."""
    low = _last_part(name).lower()
    return next((s for s in KNOWN_SETS if any(m in low for m in s.match)), None)


def load(
    spec: str, task: str | None, limit: int | None, offset: int = 0, fields: Mapping[str, str] | None = None
) -> list[Question]:
    """The questions of ``hf:NAME[:CONFIG][:SPLIT]`` (see the module docstring)."""
    name, config, split = parse(spec)
    try:
        # function-level: importing datasets here keeps it off start-up
        import datasets
    except ImportError:  # pragma: no cover - a dependency of the project
        raise DatasetError(f"--dataset {spec}: the 'datasets' package is not installed") from None
    known = known_set(name)
    datasets.disable_progress_bars()  # the engine prints its own progress
    try:
        ds = datasets.load_dataset(name, config, split=split)
    except Exception as exc:  # hub unreachable, unknown set / config / split, unreadable files
        log.debug("datasets.load_dataset(%r, %r, split=%r) failed", name, config, split, exc_info=True)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DatasetError(f"--dataset {spec}: cannot load with Hugging Face datasets: {first}") from None
    ds = _undecoded_images(ds, datasets)
    n = len(ds)
    if n == 0:
        raise DatasetError(f"--dataset {spec}: the split is empty")
    kept = _kept_rows(ds, known)
    if not kept:
        raise DatasetError(f"--dataset {spec}: no row of the split is a question of this set ({_where_text(known)})")
    if offset >= len(kept):
        raise DatasetError(f"--offset {offset} is past the end of {spec} ({len(kept)} rows)")
    chosen = kept[offset:] if limit is None else kept[offset : offset + limit]
    convert = known.convert if known else (lambda rec: rec)
    if task is None:
        task = known.task if known else infer_task_of_record(convert(dict(ds[chosen[0]])), name)
        if task is None:
            raise DatasetError(f"--dataset {spec}: cannot tell the task from the first row; pass --task")
    stem = _last_part(name) + (f"-{config}" if config else "") + f"-{split}"

    def record(i: int) -> dict[str, Any]:
        return convert(dict(ds[i]))

    rows = [(i, i + 1, functools.partial(record, i)) for i in chosen]
    folder = Path(name).expanduser()
    return questions_from_rows(rows, task, f"--dataset {spec}", stem, fields, base=folder if folder.is_dir() else None)


def _undecoded_images(ds: Any, datasets: Any) -> Any:
    """``ds`` with its ``Image`` columns read as ``{"bytes", "path"}`` (the file as stored) instead of
    decoded PIL images, which would have to be encoded again."""
    for column, feature in (getattr(ds, "features", None) or {}).items():
        if isinstance(feature, datasets.Image) and feature.decode:
            ds = ds.cast_column(column, datasets.Image(decode=False))
    return ds


def _kept_rows(ds: Any, known: HFSet | None) -> list[int]:
    """The split's row indices that are questions: all, or those a known set's ``where`` keeps
    (read column by column, without touching the other columns, images included)."""
    if known is None or not known.where:
        return list(range(len(ds)))
    columns = {c: list(ds.select_columns([c])[c]) if c in ds.column_names else [None] * len(ds) for c in known.where}
    return [i for i in range(len(ds)) if all(columns[c][i] in allowed for c, allowed in known.where.items())]


def _where_text(known: HFSet | None) -> str:
    return "; ".join(f"{c} in {', '.join(map(str, v))}" for c, v in (known.where if known else {}).items())


__all__ = ["DEFAULT_SPLIT", "KNOWN_SETS", "PREFIX", "HFSet", "known_set", "load", "parse"]
