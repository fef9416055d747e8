"""Dataset routing: which loader a ``--dataset`` value goes to.

``arithmetic`` is the generated task (:func:`engine.tasks.arithmetic_questions`),
``hf:NAME[:CONFIG][:SPLIT]`` a Hugging Face data set (:mod:`engine.hf_datasets`), anything
else a data file (:func:`engine.tasks.files.load_dataset`). It sits above both loaders so that
neither needs the other.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from engine import hf_datasets
from engine.tasks import TASKS, DatasetError, Question, arithmetic_questions, check_task
from engine.tasks.files import check_limit, check_offset, infer_task, load_dataset

__all__ = ["load_questions"]


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
    stream). ``hf:NAME[:CONFIG][:SPLIT]`` loads a Hugging Face data set
    (:mod:`engine.hf_datasets`). Anything else is a file path loaded with
    :func:`~engine.tasks.files.load_dataset`; when ``task`` is None it is guessed with
    :func:`~engine.tasks.files.infer_task`. ``seed`` only matters for arithmetic.
    """
    check_task(task, allow_none=True)
    check_limit(limit)
    check_offset(offset)
    if isinstance(dataset, str) and dataset == "arithmetic":
        if task not in (None, "numeric"):
            raise DatasetError(f"--task {task!r} does not fit the arithmetic dataset (it is 'numeric')")
        n = limit or 100
        return arithmetic_questions(offset + n, seed)[offset:]
    if isinstance(dataset, str) and dataset.startswith("hf:"):  # a Hugging Face data set by name
        return hf_datasets.load(dataset, task, limit, offset, fields)
    if task is None:
        task = infer_task(dataset)
        if task is None:
            raise DatasetError(
                f"{os.fspath(dataset)}: cannot tell the task from the first row; "
                f"pass --task (one of {', '.join(TASKS)})"
            )
    return load_dataset(dataset, task, limit=limit, offset=offset, fields=fields)
