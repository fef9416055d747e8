"""Questions and task kinds: :class:`Question`, :data:`TASKS` and the generated arithmetic task.

Everything a debate needs to know about a question is a :class:`Question`. There are
four task kinds (:data:`TASKS`):

``numeric``
    The gold answer is a number (GSM8K, the Du et al. arithmetic task).
``math``
    The gold answer is free-form LaTeX (Hendrycks MATH).
``choice``
    Multiple choice; the gold answer is a letter (MMLU, :data:`LETTERS`).
``pair``
    Pairwise preference between two dialogues; the gold answer is ``"A"`` or ``"B"``.

Data files are read by :mod:`engine.tasks.files` (formats, field names, gold-answer rules),
each row turned into a question by :mod:`engine.tasks.builders`; images by
:mod:`engine.tasks.images`. This module imports none of them but :mod:`engine.tasks.images`.
"""

from __future__ import annotations

import base64
import hashlib
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.errors import UserError

__all__ = [
    "TASKS",
    "LETTERS",
    "Question",
    "DatasetError",
    "arithmetic_questions",
    "check_task",
    "image_ref",
]

TASKS = ("numeric", "math", "choice", "pair")

#: A ``data:`` URL of an image: its MIME type and its base64 data.
DATA_URL_RE = re.compile(r"data:(image/[A-Za-z0-9.+-]+);base64,(.*)", re.S)
_REF_URL_CHARS = 300

#: The letters of a ``choice`` question's options, in order (at most 26 options).
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

ARITHMETIC_TEMPLATE = (
    "What is the result of {a}+{b}*{c}+{d}-{e}*{f}? Make sure to state your answer at the end of the response."
)


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


def image_ref(image: str | None) -> str | None:
    """:attr:`Question.image_ref` of an image URL."""
    if not image:
        return None
    m = DATA_URL_RE.fullmatch(image)
    if m:
        data = base64.b64decode(m.group(2))
        return "sha256:" + hashlib.sha256(data).hexdigest()[:16]
    if len(image) <= _REF_URL_CHARS:
        return image
    return "sha256:" + hashlib.sha256(image.encode()).hexdigest()[:16]


class DatasetError(UserError, ValueError):
    """A data file cannot be used. The message names the file and, for row problems,
    the 1-based row/line: ``"data.jsonl:17: missing field 'answer' (have: id, question)"``."""


def type_name(value: Any) -> str:
    """The JSON name of ``value``'s type for a :class:`DatasetError` message ("null", "object", "list", ...)."""
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, (list, tuple)):
        return "list"
    return type(value).__name__


def check_task(task: str | None, allow_none: bool = False) -> None:
    if task is None and allow_none:
        return
    if task not in TASKS:
        raise DatasetError(f"--task must be one of {', '.join(TASKS)} (got {task!r})")


# --------------------------------------------------------------------------- arithmetic


def arithmetic_questions(n: int, seed: int = 0, start: int = 0) -> list[Question]:
    """The Du et al. arithmetic task: ``a+b*c+d-e*f`` with six integers uniform in 0..29.

    The numbers come from ``random.Random(seed)``, six draws per question in the order
    a..f, so the first N questions of a seed never depend on ``n`` (a smaller ``n`` gives
    a prefix). ``meta`` holds the six numbers under keys ``"a"``..``"f"``. ``start``: the
    questions ``start .. start+n-1`` of the stream (the skipped ones are drawn, never made).
    """
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"n must be an int, got {type(n).__name__}")
    if n < 0:
        raise ValueError(f"n must be >= 0 (got {n})")
    rng = random.Random(seed)
    for _ in range(6 * start):
        rng.randint(0, 29)
    out = []
    for i in range(start, start + n):
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
