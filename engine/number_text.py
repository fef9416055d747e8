"""Numbers as replies write them besides plain digits, read exactly and never evaluated by Python.

* number words: ``"nineteen"``, ``"twenty-five"``, ``"one hundred and five"``, ``"three thousand
  two hundred"`` (:func:`word_numbers`);
* decimal commas, as German, French, Spanish, Italian and Portuguese write them: ``"3,5"``,
  ``"1.234,5"`` (:func:`decimal_comma_value`);
* an arithmetic expression of numbers, as a reply may leave one in its box: ``12*7``,
  ``12 \\times 7``, ``(2+3) \\cdot 4``, ``90 \\div 4``, ``2^{10}`` (:func:`arithmetic_value`),
  computed with :class:`fractions.Fraction` by a small parser of its own, within limits (at most
  :data:`MAX_TOKENS` tokens, integer powers up to :data:`MAX_POWER`, results up to
  :data:`MAX_DIGITS` digits), so no input can make it slow.
"""

from __future__ import annotations

import re
from fractions import Fraction

__all__ = ["arithmetic_value", "decimal_comma_value", "word_numbers"]

_UNITS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
}  # fmt: skip
_TENS = {
    "twenty": 20, "thirty": 30, "forty": 40, "fourty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
    "eighty": 80, "ninety": 90,
}  # fmt: skip
_SCALES = {"thousand": 1000, "million": 10**6, "billion": 10**9}
_WORD = r"(?:" + "|".join(sorted([*_UNITS, *_TENS, "hundred", *_SCALES], key=len, reverse=True)) + r")"
_WORD_RUN = re.compile(rf"(?i)(?<![\w-]){_WORD}(?:(?:[ \t]*-[ \t]*|[ \t]+(?:and[ \t]+)?){_WORD})*(?![\w-])")


def _words_value(words: list[str]) -> int | None:
    """The number that ``words`` (lower-case number words, in order) write, or None when they are
    no one number ("one two", "hundred", "twenty thirty", "thousand million")."""
    if "zero" in words:
        return 0 if words == ["zero"] else None
    total, current, last, scale_before = 0, 0, "", None
    for w in words:
        if w in _UNITS:
            if last == "unit" or (last == "ten" and _UNITS[w] >= 10):
                return None
            current, last = current + _UNITS[w], "unit"
        elif w in _TENS:
            if last in ("unit", "ten"):
                return None
            current, last = current + _TENS[w], "ten"
        elif w == "hundred":
            if last != "unit" or current >= 100:
                return None
            current, last = current * 100, "hundred"
        else:
            scale = _SCALES[w]
            if current == 0 or (scale_before is not None and scale >= scale_before):
                return None
            total, current, last, scale_before = total + current * scale, 0, "scale", scale
    return total + current


def word_numbers(text: str) -> list[tuple[int, int, Fraction]]:
    """``(start, end, value)`` of every number written in words in ``text`` ("nineteen",
    "twenty-five", "one hundred and five"); a run of number words that writes no one number
    ("one two three") gives none. A lone "one" is left out (it is a pronoun as often as a
    number: "each one", "one way"), as is a run ending in "and"."""
    out = []
    for m in _WORD_RUN.finditer(text):
        words = [w for w in re.split(r"[ \t-]+", m.group(0).lower()) if w and w != "and"]
        if words == ["one"]:
            continue
        value = _words_value(words)
        if value is not None:
            out.append((m.start(), m.end(), Fraction(value)))
    return out


_DECIMAL_COMMA = re.compile(r"(?<![\d.,])(?P<sign>[-+−])?(?P<int>\d{1,3}(?:\.\d{3})+|\d+)(?:,(?P<frac>\d+))?(?!\d|,\d)")


def decimal_comma_value(text: str) -> Fraction | None:
    """The first number of ``text`` read with a decimal comma and dots (or none) between thousands
    (``"3,5"`` is 7/2, ``"1.234,5"`` is 2469/2, ``"12"`` is 12); None when it has none."""
    m = _DECIMAL_COMMA.search(text)
    if m is None or len(m.group(0)) > 60:
        return None
    value = Fraction(m.group("int").replace(".", "") + ("." + m.group("frac") if m.group("frac") else ""))
    return -value if m.group("sign") in ("-", "−") else value


MAX_TOKENS = 64  # an expression of more tokens is not computed
MAX_POWER = 64  # the largest exponent computed (integers only)
MAX_DIGITS = 400  # a result (numerator or denominator) of more digits is none

_OPERATORS = {
    "\\times": "*", "\\cdot": "*", "\\ast": "*", "×": "*", "·": "*", "∙": "*", "*": "*",
    "\\div": "/", "÷": "/", "/": "/", "+": "+", "-": "-", "−": "-", "^": "^",
}  # fmt: skip
_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+(?:\.\d+)?|\.\d+)|(?P<op>\\times|\\cdot|\\ast|\\div|[×·∙*÷/+\-−^])|(?P<open>\\left\(|[({])"
    r"|(?P<close>\\right\)|[)}]))"
)


class _Unreadable(Exception):
    """The text is no arithmetic expression of numbers, or one too large to compute."""


def _tokens(text: str) -> list[str]:
    s = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text.strip())  # 1,000 -> 1000
    out: list[str] = []
    i = 0
    while i < len(s):
        m = _TOKEN.match(s, i)
        if m is None or m.end() == i:
            if s[i:].strip() == "":
                break
            raise _Unreadable
        if m.group("num"):
            out.append(m.group("num"))
        elif m.group("op"):
            out.append(_OPERATORS[m.group("op")])
        else:
            out.append("(" if m.group("open") else ")")
        i = m.end()
        if len(out) > MAX_TOKENS:
            raise _Unreadable
    return out


class _Parser:
    """expr := term (("+"|"-") term)*; term := factor (("*"|"/") factor)*;
    factor := ("+"|"-") factor | power; power := atom ("^" factor)?; atom := number | "(" expr ")"."""

    def __init__(self, tokens: list[str]):
        self.tokens, self.i = tokens, 0

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> str:
        tok = self.peek()
        if tok is None:
            raise _Unreadable
        self.i += 1
        return tok

    def expr(self) -> Fraction:
        value = self.term()
        while self.peek() in ("+", "-"):
            value = value + self.term() if self.take() == "+" else value - self.term()
        return _checked(value)

    def term(self) -> Fraction:
        value = self.factor()
        while self.peek() in ("*", "/"):
            op, right = self.take(), self.factor()
            if op == "/" and right == 0:
                raise _Unreadable
            value = _checked(value * right if op == "*" else value / right)
        return value

    def factor(self) -> Fraction:
        if self.peek() in ("+", "-"):
            return self.factor() if self.take() == "+" else -self.factor()
        return self.power()

    def power(self) -> Fraction:
        base = self.atom()
        if self.peek() != "^":
            return base
        self.take()
        exponent = self.factor()
        if exponent.denominator != 1 or abs(exponent) > MAX_POWER or (base == 0 and exponent < 0):
            raise _Unreadable
        return _checked(base ** int(exponent))

    def atom(self) -> Fraction:
        tok = self.take()
        if tok == "(":
            value = self.expr()
            if self.take() != ")":
                raise _Unreadable
            return value
        if tok[0].isdigit() or tok[0] == ".":
            return Fraction(tok)
        raise _Unreadable


def _checked(value: Fraction) -> Fraction:
    if max(len(str(abs(value.numerator))), len(str(value.denominator))) > MAX_DIGITS:
        raise _Unreadable
    return value


def arithmetic_value(text: str) -> Fraction | None:
    """The exact value of ``text`` when it is an arithmetic expression of numbers with at least
    one operator (``+ - * / ^``, ``\\times``, ``\\cdot``, ``\\div``, ``×``, ``÷``, parentheses or
    braces); None for anything else (a letter, a lone number, an unbalanced parenthesis) and for
    an expression past the limits of the module docstring."""
    try:
        tokens = _tokens(text)
        if not any(t in ("+", "-", "*", "/", "^") for t in tokens[1:]):
            return None
        parser = _Parser(tokens)
        value = parser.expr()
        if parser.peek() is not None:
            return None
        return value
    except (_Unreadable, ValueError, ZeroDivisionError, OverflowError):
        return None
