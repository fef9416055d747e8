"""One data-set row as the question builders (:mod:`engine.tasks.builders`) read it: the record,
where it came from (file and row, for error messages) and the columns each of our field names is
looked for in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.tasks import DatasetError, Question, type_name
from engine.tasks.images import image_url

# The columns each of our field names is looked for in (the first present one wins).
ID_KEYS = ("id",)
QUESTION_KEYS = ("question", "problem", "input", "prompt")
ANSWER_KEYS = ("answer", "gold", "label", "target")
LABEL_KEYS = ("answer", "label", "winner", "preference")
SOLUTION_KEYS = ("solution",)
CHOICE_KEYS = ("choices", "options")
PAIR_KEYS = (
    ("conversation_a", "conversation_b"),
    ("dialogue_a", "dialogue_b"),
    ("response_a", "response_b"),
)
RANKED_KEYS = ("chosen", "rejected")
IMAGE_KEYS = ("image", "image_path", "image_url")

_SCALARS = (str, int, float, bool, type(None))


class Row:
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
            raise self.error(f"field {key!r} must be a string, got {type_name(value)}")
        s = value.strip()
        if not s:
            raise self.error(f"field {key!r} is empty")
        return s

    def qid(self) -> str:
        key, value = self.find("id", ID_KEYS)
        if key is None:
            return f"{self.stem}-{self.index:05d}"
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise self.error(f"field {key!r} must be a string or an integer, got {type_name(value)}")
        s = str(value).strip()
        if not s:
            raise self.error(f"field {key!r} is empty")
        return s

    def question_text(self) -> str:
        key, value = self.require("question", QUESTION_KEYS)
        self.used.add(key)
        return self.text(key, value)

    def meta(self) -> dict[str, Any]:
        skip = self.used | {self.overrides.get("solution", "solution")}
        return {str(k): v for k, v in self.rec.items() if k not in skip and isinstance(v, _SCALARS)}

    def image(self) -> str | None:
        """The row's image as a URL (see "Images" in the module docstring), or None."""
        self.used.update(k for k in IMAGE_KEYS if k in self.rec)  # never copied into meta
        key, value = self.find("image", IMAGE_KEYS)
        if key is None:
            return None
        self.used.add(key)
        return image_url(self, key, value)

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
