"""Text from data or models made inert for a terminal: control characters shown, not obeyed.

A question, a gold answer, a question id, a run option or a model's reply can hold bytes a
terminal obeys: ESC sequences that set the window title (OSC 0), write the clipboard (OSC 52),
make hyperlinks (OSC 8) or clear the screen (CSI 2J), a BEL, C1 controls (``\\x9b`` is CSI on
some terminals), and Unicode bidi controls and invisible format characters that reorder or
hide what is shown. :func:`inert` shows each as a visible escape (``\\x1b``, ``\\u202e``);
everything the engine prints from data or models goes through it (``debate show``, ``report``,
``sweep``, error lines: :func:`print_error`, log records). Stdlib only.

It does not escape rich markup: print the result as a ``rich.text.Text`` (or with
``markup=False``) so that ``[bold]`` or ``[/]`` in data prints as it is.
"""

from __future__ import annotations

import re
import sys
from typing import Any

# Unicode categories Cc (C0, DEL, C1), Cf (format: bidi controls, zero-width space, word joiner,
# BOM, invisible operators, tags, ...), Zl and Zp (U+2028/2029), as of Unicode 15; kept: newline
# and tab (only where lines are kept) and ZWNJ / ZWJ (U+200C/D: they join letters of several
# scripts and the parts of emoji). tests/engine/test_terminal_safety.py checks this set against
# the running Python's unicodedata.
_FORMAT = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b\u200e\u200f\u2028-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
)
_UNSAFE_IN_LINES = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_FORMAT}]")
_UNSAFE_IN_ONE_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_FORMAT}]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def inert(text: Any, lines: bool = True) -> str:
    """``text`` (``str()`` of it) with every control and invisible format character shown as an
    escape: ``\\x1b``, ``\\x9b``, ``\\r``, ``\\u202e``, ``\\U000e0041``.

    ``lines=True`` keeps newline and tab (replies, questions, log records with a traceback: text
    whose layout counts); ``lines=False`` shows them too (``\\n``, ``\\t``: ids, error lines, one
    table cell). A backslash is left as it is, so the result is for reading, not for parsing
    back. Cheap: text without such characters is returned as it is after one C-speed check."""
    text = str(text)
    if text.isprintable():  # the usual case: no control or format character, no newline
        return text
    if lines and text.replace("\n", "").replace("\t", "").isprintable():
        return text
    return (_UNSAFE_IN_LINES if lines else _UNSAFE_IN_ONE_LINE).sub(_escape, text)


def print_error(message: Any, status: int = 2) -> int:
    """Print ``debate: error: MESSAGE`` to stderr as one inert line (a message can quote a file's
    row, an id or a model's text) and return ``status`` (the command's exit status)."""
    print(f"debate: error: {inert(message, lines=False)}", file=sys.stderr)
    return status
