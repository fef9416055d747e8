"""Self-confidence and rating scores stated in model replies ("Confidence: 0.8", "I am 90%
confident", "Score: 7/10").

Pure module (regular expressions only; model text is never evaluated). CortexDebate and RECONCILE
read an agent's confidence with :func:`parse_confidence`, PRD a reviewer's rating with
:func:`parse_score`; answer extraction (:mod:`engine.extract`) masks the spans
:func:`confidence_spans` finds, so a confidence is never read as the answer.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

_NUM = r"(\d+(?:\.\d+)?|\.\d+)"
_SCALE = r"(?:[ \t]*(%)|[ \t]*(?:/|out[ \t]+of)[ \t]*" + _NUM + r")?"


@functools.cache
def _rating_pattern(keyword: str) -> re.Pattern[str]:
    """A number stated right after ``keyword`` (a regex), with its optional scale: the group 1
    number, group 2 a ``%``, group 3 the denominator of ``x/10`` or ``x out of 10``."""
    # a keyword starting with a letter: a lookahead for it skips every other position at once
    # (the same matches)
    first = f"(?={keyword[0]})" if keyword[0].isalpha() else ""
    return re.compile(
        r"(?i)" + first + r"\b" + keyword + r"[ \t*_]*"
        r"(?:\((?:from[ \t]+)?(?:0(?:\.0)?|1)[ \t]*(?:-|–|to|and)[ \t]*(?:1(?:\.0)?|10|100)\)[ \t*_]*)?"  # "(0-1)"
        r"(?:is|of|=|:|-|–)?[ \t*_:]*\n?[ \t*_]*"
        r"[(\[]?[ \t]*" + _NUM + _SCALE
    )


# "Confidence Score: 0.8", "**Confidence:** 80%", "confidence level of 8/10", "Confidence (0-1): 0.7",
# "Confidence score is 0.9", "Confidence = .75", "Confidence Score: (0.8)", "Confidence:\n0.6"
CONFIDENCE_KEYWORD = r"confidence(?:[ \t]+(?:score|level|rating|value))?"
SCORE_KEYWORD = r"(?:score|rating)"
_CONF_KEYWORD = _rating_pattern(CONFIDENCE_KEYWORD)
# "I am 90% confident" (percentages only: "2 confident agents" is not a score)
_CONFIDENT = re.compile(r"(?i)(?=[\d.])" + _NUM + r"[ \t]*(%)[ \t]+confident\b")


def _scale(value: str, pct: str | None, denom: str | None) -> float | None:
    x = float(value)
    if pct:
        return x / 100 if x <= 100 else None
    if denom is not None:
        b = float(denom)
        return x / b if 0 < b and x <= b else None
    if x <= 1:
        return x
    if x <= 10:
        return x / 10
    if x <= 100:
        return x / 100
    return None


def _scale10(value: str, pct: str | None, denom: str | None) -> float | None:
    """A rating on a 1-10 scale: ``7``, ``7/10``, ``3 out of 5`` (-> 6), ``70%`` (-> 7); a bare
    number above 10 and up to 100 is a percentage (``85`` -> 8.5)."""
    x = float(value)
    if pct:
        return x / 10 if x <= 100 else None
    if denom is not None:
        b = float(denom)
        return 10 * x / b if 0 < b and x <= b else None
    if x <= 10:
        return x
    return x / 10 if x <= 100 else None


def _last(readings: Iterable[tuple[int, float | None]]) -> float | None:
    """The value of the reading that starts last in the text (``(start, value or None)`` pairs)."""
    best: tuple[int, float] | None = None
    for start, value in readings:
        if value is not None and (best is None or start >= best[0]):
            best = (start, value)
    return None if best is None else best[1]


def parse_confidence(text: str | None) -> float | None:
    """The self-confidence score in a reply, in [0, 1], or None if there is none.

    Accepted (case-insensitive; the LAST readable occurrence in the text wins):

    * ``Confidence Score: 0.8``, ``Confidence: 0.8``, ``confidence level of 0.8``,
      ``Confidence score is 0.8``, ``Confidence = .8``, ``**Confidence Score:** (0.8)``,
      ``Confidence (0-1): 0.8``, ``Confidence (1-10): 8``, the number on the next line;
    * percentages ``Confidence: 80%``, ``confidence 80 %``;
    * fractions ``Confidence: 8/10``, ``confidence 4 out of 5`` (numerator <= denominator);
    * ``I am 90% confident`` (a percentage right before "confident");
    * a bare number above 1 is read as a 1-10 scale if <= 10 (``Confidence: 8`` -> 0.8) and as
      a percentage if <= 100 (``Confidence: 85`` -> 0.85); above 100 it is unreadable.

    Words ("high"), an empty ``Confidence Score: ()`` or the echoed instruction ("confidence score
    should be between 0 and 1") are not read: only a number right after the keyword counts.
    """
    if not text:
        return None
    return _last(
        [(m.start(), _scale(m.group(1), m.group(2), m.group(3))) for m in _CONF_KEYWORD.finditer(text)]
        + [(m.start(), _scale(m.group(1), m.group(2), None)) for m in _CONFIDENT.finditer(text)]
    )


def parse_score(text: str | None, keyword: str = SCORE_KEYWORD) -> float | None:
    """A rating on a 1-10 scale stated in a reply (a peer's score of an answer, a reviewer's
    confidence in its feedback), as a number in [0, 10], or None if there is none.

    The number right after ``keyword`` (a regex; default "score" or "rating"; PRD's review
    confidence uses :data:`CONFIDENCE_KEYWORD`), read like :func:`parse_confidence` reads one
    (``Score: 7``, ``**Score:** 8/10``, ``score of 3 out of 5`` -> 6, ``Rating (1-10): 9``,
    ``Score: 70%`` -> 7; the LAST readable one wins) but on the 1-10 scale: a bare number up to 10
    is the rating itself (``Score: 1`` is the lowest, not 100%), above 10 and up to 100 a percentage.
    """
    if not text:
        return None
    return _last(
        (m.start(), _scale10(m.group(1), m.group(2), m.group(3))) for m in _rating_pattern(keyword).finditer(text)
    )


def confidence_spans(text: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` spans of the confidence statements :func:`parse_confidence` reads
    ("Confidence: 0.9", "confidence level of 8/10", "I am 90% confident"), in text order."""
    spans = [m.span() for m in _CONF_KEYWORD.finditer(text)] + [m.span() for m in _CONFIDENT.finditer(text)]
    return sorted(spans)


__all__ = ["CONFIDENCE_KEYWORD", "SCORE_KEYWORD", "confidence_spans", "parse_confidence", "parse_score"]
