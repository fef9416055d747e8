"""Dataset routing: which loader a ``--dataset`` value goes to.

``arithmetic`` is the generated task (:func:`engine.tasks.arithmetic_questions`),
``hf:NAME[:CONFIG][:SPLIT]`` a Hugging Face data set (:mod:`engine.hf_datasets`), anything
else a data file (:func:`engine.tasks.files.load_dataset`). It sits above both loaders so that
neither needs the other.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from engine import hf_datasets
from engine.inputs import bad_text
from engine.tasks import TASKS, DatasetError, Question, arithmetic_questions, check_task
from engine.tasks.files import check_limit, check_offset, infer_task, load_dataset

if TYPE_CHECKING:
    from engine.config.experiment import ExperimentConfig

__all__ = ["ARITHMETIC_LIMIT", "check_text", "load_questions"]

ARITHMETIC_LIMIT = 100  # arithmetic questions of a run without --limit


def experiment_questions(experiment: ExperimentConfig) -> list[Question]:
    """The questions a run's experiment part names (:func:`load_questions` of its data set,
    task, limit, seed and offset)."""
    ex = experiment
    return load_questions(ex.dataset, ex.task, ex.limit, ex.seed, offset=ex.offset)


def load_questions(
    dataset: str | os.PathLike,
    task: str | None,
    limit: int | None,
    seed: int,
    *,
    offset: int = 0,
    fields: Mapping[str, str] | None = None,
) -> list[Question]:
    """Front door used by the CLI.

    ``dataset == "arithmetic"`` gives ``arithmetic_questions(limit or 100, seed)`` (``task``
    must then be None or ``"numeric"``; ``offset`` skips the first questions of the seeded
    stream, drawn but never made). ``hf:NAME[:CONFIG][:SPLIT]`` loads a Hugging Face data set
    (:mod:`engine.hf_datasets`). Anything else is a file path loaded with
    :func:`~engine.tasks.files.load_dataset`; when ``task`` is None it is guessed with
    :func:`~engine.tasks.files.infer_task`. ``seed`` only matters for arithmetic. The questions'
    text is checked by :func:`check_text`.
    """
    check_task(task, allow_none=True)
    check_limit(limit)
    check_offset(offset)
    if isinstance(dataset, str) and dataset == "arithmetic":
        if task not in (None, "numeric"):
            raise DatasetError(f"--task {task!r} does not fit the arithmetic dataset (it is 'numeric')")
        return arithmetic_questions(limit or ARITHMETIC_LIMIT, seed, start=offset)
    if isinstance(dataset, str) and dataset.startswith("hf:"):  # a Hugging Face data set by name
        return check_text(hf_datasets.load(dataset, task, limit, offset, fields))
    if task is None:
        task = infer_task(dataset)
        if task is None:
            raise DatasetError(
                f"{os.fspath(dataset)}: cannot tell the task from the first row; "
                f"pass --task (one of {', '.join(TASKS)})"
            )
    return check_text(load_dataset(dataset, task, limit=limit, offset=offset, fields=fields))


def check_text(questions: Iterable[Question]) -> list[Question]:
    """``questions``, each of whose texts (id, question, answer, choices, image URL, text fields
    kept in ``meta``) can be written as UTF-8; else a DatasetError naming the file, the row and
    the field (a lone surrogate, e.g. from a JSON ``"\\ud800"`` escape, would pass every other
    check and stop the run when its rows are written)."""
    out = list(questions)
    for q in out:
        fields: list[tuple[object, object]] = [("id", q.qid), *((f"choices[{i}]", c) for i, c in enumerate(q.choices))]
        fields += [("answer", q.gold), ("image", q.image), *q.meta.items(), ("question", q.text)]  # text holds choices
        for name, value in fields:
            why = bad_text((name, value))
            if why is not None:
                raise DatasetError(f"{q.source}:{q.row}: field {name!r} cannot be written as UTF-8 text: {why}")
    return out
