"""The engine's grading, as one public API for researchers (and for re-grading stored replies).

    from engine.grading import extract_answer, is_correct
    ans = extract_answer(reply_text, "numeric")          # "18", or None when the reply has none
    is_correct(ans, "Janet sells ... #### 18", "numeric")  # gold as written in the dataset file

``extract_answer(text, task, n_choices=None)`` reads an agent's own final answer from a reply
(:mod:`engine.extract` documents the rules and their order) and returns its canonical string or
None. ``is_correct(predicted, gold, task)`` compares a predicted answer with a gold answer as a
dataset writes it: a GSM8K answer field with its ``#### N`` line, a MATH solution with its
``\\boxed{}``, a bare value, or a choice letter; ``math`` answers are compared by ``math-verify``
when their canonical strings differ (:mod:`engine.equivalence`). Tasks: ``numeric``, ``math``,
``choice``, ``pair``.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine import extract as _extract
from engine.latex import last_boxed
from engine.tasks import TASKS


def extract_answer(
    text: str | None,
    task: str,
    n_choices: int | None = None,
    truncated: bool = False,
    *,
    choices: Sequence[str] = (),
    question: str | None = None,
) -> str | None:
    """The reply's own final answer in canonical form, or None (see :mod:`engine.extract`).
    ``n_choices`` bounds the letters of a ``choice`` task (default 4; the number of ``choices``
    when they are given); ``truncated``: the reply stopped at the token limit (``finish_reason
    == "length"``), so only a marked answer counts; ``choices``: the option texts (an answer
    given as an option's text reads as its letter); ``question``: the question's text (a last
    sentence that restates its numbers is read at the answer)."""
    return _extract.extract_answer(
        text, task, n_choices or 4, marked_only=truncated, choices=choices, question=question
    )


def gold_answer(gold: str | None, task: str) -> str | None:
    """The answer part of a gold field as datasets write it: what follows the last ``####``
    (GSM8K), else the last ``\\boxed{}`` (MATH solutions), else the field itself."""
    if gold is None:
        return None
    g = str(gold)
    if "####" in g:
        return g.rsplit("####", 1)[1].strip() or None
    if task in ("math", "numeric") and ("\\boxed" in g or "\\fbox" in g):
        boxed = last_boxed(g)
        if boxed is not None:
            return boxed
    return g.strip() or None


def is_correct(predicted: str | None, gold: str | None, task: str) -> bool:
    """Whether ``predicted`` (an answer, e.g. from :func:`extract_answer`) equals the dataset's
    ``gold``; None (no answer) is never correct."""
    return _extract.answers_equal(predicted, gold_answer(gold, task), task)


__all__ = ["TASKS", "extract_answer", "gold_answer", "is_correct"]
