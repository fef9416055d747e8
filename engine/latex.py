"""LaTeX helpers shared by the gold reader and the answer extractor: brace matching, ``\\boxed{}``.

One parser of ``\\boxed{...}`` / ``\\fbox{...}`` for the whole engine: a data file's MATH
solution (:mod:`engine.tasks.builders`), a gold field being graded (:mod:`engine.grading`) and
an agent's reply (:mod:`engine.extract`) all read boxes with :func:`boxed_contents`, so a box
counts the same everywhere. The rules:

* the command is ``\\boxed`` or ``\\fbox`` not followed by a letter (``\\boxedfoo`` is no box);
* spaces or tabs may come before the ``{`` (``\\boxed\t{7}`` is 7);
* braces nest; escaped braces (``\\{``, ``\\}``) are not counted;
* an unclosed box is ignored (the box before it, if any, is the last one);
* the brace-less form ``\\boxed 5`` gives its single token.
"""

from __future__ import annotations

import re

__all__ = ["boxed_contents", "boxed_spans", "brace_map", "last_boxed"]

_BOX_START = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")


_BRACE_TOKEN = re.compile(r"\\.|[{}]", re.S)


def brace_map(s: str) -> dict[int, int]:
    """{index of '{': index of its matching '}'} for every matched pair (O(n))."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for m in _BRACE_TOKEN.finditer(s):
        c = m.group(0)
        if c == "{":
            stack.append(m.start())
        elif c == "}" and stack:
            pairs[stack.pop()] = m.start()
    return pairs


def boxed_spans(text: str) -> list[tuple[int, str]]:
    """``(start of the command, contents)`` of every \\boxed{..}/\\fbox{..} in order of appearance.

    Braces are matched with nesting; an unclosed box is ignored.  The
    brace-less form ``\\boxed 5`` yields its single token.
    """
    out = []
    pairs: dict[int, int] | None = None
    for m in _BOX_START.finditer(text):
        i = m.end()
        k = i
        while k < len(text) and text[k] in " \t":
            k += 1
        if k < len(text) and text[k] == "{":
            if pairs is None:
                pairs = brace_map(text)
            j = pairs.get(k)
            if j is not None:
                out.append((m.start(), text[k + 1 : j]))
        elif k > i:
            tok = re.match(r"[^\s${}]+", text[k:])
            if tok:
                out.append((m.start(), tok.group(0)))
    return out


def boxed_contents(text: str) -> list[str]:
    """Contents of every \\boxed{..}/\\fbox{..} in order of appearance (:func:`boxed_spans`)."""
    return [content for _, content in boxed_spans(text)]


def last_boxed(text: str) -> str | None:
    """The content of the last box in ``text``, stripped (see :func:`boxed_contents`); None when
    ``text`` has no (closed) box, ``""`` for an empty one."""
    boxes = boxed_contents(text)
    return boxes[-1].strip() if boxes else None
