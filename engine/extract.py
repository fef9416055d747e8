"""Answer extraction, canonicalisation, equivalence and majority vote.

Pure module (standard library; MATH equivalence also asks ``math-verify``, see
:mod:`engine.equivalence`): it reads the final answer out of a free-text LLM
reply, maps answers to one canonical string per task, compares them, and takes
majority votes.  Model text is only ever matched with regular expressions and
parsed with :class:`fractions.Fraction`; it is never evaluated.

Tasks (see :data:`engine.tasks.TASKS`)
--------------------------------------
``"numeric"``
    GSM8K-style numbers.  Canonical form: the exact rational value (parsed with
    ``fractions.Fraction``) written as a plain integer (``"1450000"``, ``"-3"``;
    ``"18.00"`` -> ``"18"``) or, when not integral, as a reduced fraction
    ``"p/q"`` (``"0.5"``, ``".5"``, ``"1/2"`` -> ``"1/2"``; ``"-2.25"`` ->
    ``"-9/4"``).  Accepted decorations: thousands commas *only* when every group
    after the first has exactly three digits (``"1,450,000"``; ``"1,2"`` is a
    list, not a number), likewise thousands separated by one space, no-break or
    thin space (``"$118 000"``), a leading ``+``/``-``/U+2212 minus sign, ``$``/``\\$``,
    a trailing ``%`` (dropped: ``"50%"`` -> ``"50"``), scientific notation
    (``"1.5e3"``), LaTeX fractions (``\\frac{1}{2}``; in free text a fraction
    of two plain numbers is one number, ``"$\\frac{3}{4}$ cup"`` -> ``"3/4"``)
    and surrounding words or units (``"18 dollars"``).  Words such as "million" are *not* applied as
    multipliers (``"1.5 million"`` -> ``"3/2"``).

``"math"``
    Hendrycks MATH answers.  Two answers are equal when their canonical strings
    (below) are equal or, failing that, when Hugging Face's ``math-verify`` finds
    them mathematically equal (:mod:`engine.equivalence`: sets and unordered
    solution lists, ``\\pm``, intervals and ``x \\in (a, b)``, matrices, mixed
    numbers, ``x+1`` = ``1+x``).  Votes compare canonical strings.  The canonical
    string is valid LaTeX (it is stored as ``final_answer``).
    Normalisation, in order: unwrap the last ``\\boxed{}``/``\\fbox{}`` if the
    answer still has one; drop ``$``, ``\\$``, ``\\(..\\)``/``\\[..\\]``,
    ``\\displaystyle``, ``\\left``/``\\right``, the spacing commands ``\\!``,
    ``\\,``, ``\\;``, ``\\:``, ``\\ ``, ``\\quad``, ``~`` (a matrix row break
    ``\\\\`` is kept); ``bmatrix`` -> ``pmatrix``; ``{,}`` -> ``,``;
    drop ``\\%``/``%``, ``^\\circ``/``^{\\circ}``/``\\degree``/``°``;
    ``\\dfrac``/``\\tfrac``/``\\cfrac`` -> ``\\frac``; a trailing
    ``\\text{..}`` (or ``\\mbox``/``\\mathrm``/...) after something containing a
    digit is a unit and is dropped (``575\\text{ students}`` -> ``575``, also
    with ``^2``), any other ``\\text{X}`` is unwrapped to ``X``; trailing ``.``;
    a number followed only by plain words (``"5 cm"``) -> the number; whitespace
    is removed except one space between a control word and a letter
    (``2\\pi r``); ``\\cdot`` between a number and a letter or command goes
    (``3\\cdot\\sqrt{13}`` -> ``3\\sqrt{13}``); ``_{8}``/``^{2}`` -> ``_8``/``^2``;
    ``\\frac``/``\\sqrt`` arguments get braces (``\\frac12`` ->
    ``\\frac{1}{2}``, ``\\sqrt2`` -> ``\\sqrt{2}``); one redundant outer brace
    pair is removed; a leading single-variable ``x=`` or ``x\\in`` is removed; a
    lone letter in parentheses (``\\text{(C)}``) -> the letter; a word of three
    or more letters is lower-cased (``\\text{Monday}`` -> ``monday``).
    If the result is a plain number, ``a/b``, ``[-]\\frac{a}{b}`` with numeric
    ``a``, ``b`` or a mixed number ``2\\frac{1}{2}`` it becomes the numeric
    canonical form above (so ``\\dfrac{9}{7}``, ``9/7`` and ``\\frac97`` are all
    ``"9/7"``, ``0.5`` and ``\\frac{1}{2}`` are both ``"1/2"``, ``\\$15,\\!000``
    is ``"15000"``; a list whose later items all have exactly 3 digits, e.g.
    ``"1, 234"``, is therefore read as a thousands number too).  A bare top-level
    comma list (the solutions of an equation) has each numeric element
    canonicalised and is sorted (``"1, -2"`` -> ``"-2,1"``); a list in one pair of
    ``()``/``[]`` keeps its order (``"(1,\\frac{9}{2})"`` -> ``"(1,9/2)"``).
    Anything else stays as the normalised LaTeX string.

``"choice"``
    Multiple choice: one upper-case letter among the first ``n_choices``
    letters (``"A"``..).

``"pair"``
    Pairwise preference: ``"A"`` or ``"B"`` (``n_choices`` is ignored).

Extraction precedence in :func:`extract_answer` (the first rule that yields a
parseable answer wins; within a rule the LAST occurrence in the text that
parses wins):

numeric / math
    1. the last ``\\boxed{...}`` / ``\\fbox{...}`` (nested braces matched) that is the writer's
       own: a box in a clause naming another agent ("Agent 3's \\boxed{11} double-counts") is
       skipped (see below). For numeric, an arithmetic expression of numbers in it is computed
       exactly (``\\boxed{12*7}`` is 84; :func:`engine.number_text.arithmetic_value`) and an
       expression of a variable (``\\boxed{x+1}``) or one too large to compute is no number;
    2. the last ``#### X`` line (for numeric X must start with a number, for
       math it must not start with a word, so markdown headings such as
       ``#### Step 2`` are ignored);
    3. the last explicit final statement ("final answer: X", "my final answer
       is X"), else the last "answer is X" / "answer: X" / "answer = X"
       ("answer must be X" too; case-insensitive; ``**`` bold, ``is:``, ``$`` allowed).  X runs to the
       end of the line (or the next line if that is empty; at most 300
       characters) and, for math, to the closing ``$`` when it starts with
       one, else to the end of the sentence and before an English connective
       ("because", "since", "so", ...); a math X of more than two words that
       still contains English words is prose and skipped.  For numeric, if X
       contains ``=`` the part after the last ``=`` is used, then the first
       number in it, unless that number is an operand of an expression left
       unevaluated ("the answer is the result of 8+16*15+12"); for a reply cut off
       at the token limit a statement that runs to the cut is skipped; then an answer
       sentence in German, French, Spanish, Portuguese, Italian or Dutch ("Die Antwort ist
       3,5": a decimal comma) or in Chinese or Japanese ("答案是 42。", "答えは 18 です。"),
       its first number;
    4. a line holding only an answer (bold, ``$..$`` allowed; numeric: a number and at
       most two unit words; math: no ``=`` and no word): the reply's last non-empty
       line, else its first ("**18**" followed by the explanation's other numbers);
    5. the last number in the text (math: the last number or ``\\frac``, or a later
       interval ``x \\in (a, b)`` / ``x \\in [a, b) \\cup (c, \\infty)``), skipping
       a number that is negated ("307, not 308", "rather than 12"), an operand of an
       unevaluated expression ("26 + 9*15": an echoed question) or part of the breakdown in
       brackets after an amount ("$2,050.75 ($1,900 rent and $150.75 fees)"). Numbers written
       in words count ("that leaves nineteen marbles") unless they follow a determiner or a
       preposition ("the two steps", "in two weeks") or an equation's result in the same
       sentence; a mixed number is one number ("3 3/4 cups" is 15/4). Given the question's text
       (``question=``), a last sentence that restates the question's numbers after the answer
       is read at the answer ("So Ann has 23 stamps left from her 4 books of 15." is 23). A
       last clause that states a quantity and ends with the count qualifying it is read at
       the quantity ("so he walks 35 miles over 7 days" is 35; not a time, a rate or one of
       the question's numbers: :func:`_stated_over_count`).
    No number anywhere -> ``None``.

choice / pair
    1. the last ``\\boxed{B}`` (also ``\\boxed{(B)}``, ``\\boxed{\\text{B}}``);
    2. the last "answer is B" / "answer: B" / "Answer: (C)" / "correct option
       is B" / "answer is option B" / "Final verdict: (A)" (an explicit final statement
       outranks the preference clauses before it); given the options (``choices=``), an
       option's text after an answer phrase is that option ("The answer is A rise in demand"
       is the letter of the option "A rise in demand", not (A));
    3. pair only: preference phrases ("Response A is better", "A is better",
       "Assistant A's response is better", "Assistant B provides a better response",
       "I prefer B", "better response is A", "[[A]]", "I choose B");
       choice and pair: "B is correct" / "B is the correct answer"
       (the last such phrase in the text wins);
    4. the last bold letter ``**B**`` (also ``**B) text**``);
    5. the last line consisting only of a letter: ``B``, ``B.``, ``B)``, ``(B)``; then the
       first line when it opens with an option (``(D) False, True`` followed by the
       explanation), unless the next line opens with one too (the options listed);
    6. the last ``(B)``, "option B", "choice B", "Response B" mention; then, given the options,
       the option whose text the reply names last ("... so it is the ribosome"), not negated
       ("not the nucleus") or named as wrong;
    7. weak fallback: the last standalone capital letter in range.  ``A``
       (and ``I``) is skipped here when followed by a word, so the article in
       "A robe takes ..." is never read as an answer.
    Lower-case letters are accepted only in the ``(b)`` form and after
    "answer:"/"answer is" when the letter ends the phrase (``answer: b.``).

In rules 4, 6 and 7 a letter named as wrong is skipped: "(A) and (B) are wrong", "C is too
narrow", "option D can be ruled out", "not (B)", "eliminate A".

Confidence statements ("Confidence: 0.9", "I am 90% confident"; see
:func:`engine.confidence.confidence_spans`) are blanked out before any rule runs: a
confidence is never the answer. So is a peer's reply the writer quotes as the debate prompts
show them, a fenced block after a label naming another agent or group ("One agent solution:
```...```", "Agent 2: ```...```"): a reply that echoes its prompt is read from its own words.

An answer the writer has given up never wins either (answer phrases, mentions and the
fallback numbers and letters): its clause says so in the first person ("Initially I thought the
answer was 12", "I first got 8", "My first answer was (B)") or the sentence goes on "which was
wrong". The story's own "initially" ("he initially had 5000 dollars") is not a retraction.

Statements reporting someone else's answer never win: an answer phrase, a
box, a choice mention or (in the fallbacks) a number or letter whose clause names
another agent, solution or group ("Agent 2 said the answer is 15", "The other
agents chose (D)", "One agent's answer was (C)", "Solution 3 gives 12") or
addresses a peer's answer ("Your answer was 30", "you said 30") is skipped unless
the writer speaks again after that name ("... but I get 8") or takes their answer
as its own ("Agents 2 and 3 are right: it comes to 17", "agreeing with agent 1, ...").
Pronouns such as "they" and a word problem's "you" ("you pay $20") are not agents.

At most the last 25 ``\\boxed``/``####``/answer-phrase occurrences are tried
and answer segments are cut at 300 characters, which keeps extraction fast on
pathological replies.

Voting: :func:`majority_vote` ignores ``None``; a tie is broken by a draw seeded
from the question's key (the engine's default, ``--tie-break random``) or, without
a key, in favour of the tied answer seen first (agent order, ``--tie-break first``).
:func:`weighted_vote` (RECONCILE) sums a weight per answer instead of counting, with the same
tie rule.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from typing import Any

from engine.confidence import confidence_spans
from engine.equivalence import math_equivalent
from engine.latex import boxed_contents, boxed_spans, brace_map
from engine.number_text import arithmetic_value, decimal_comma_value, word_numbers
from engine.tasks import LETTERS, TASKS

__all__ = [
    "extract_answer",
    "canonical_answer",
    "answers_equal",
    "majority_vote",
    "tied_answers",
    "vote_counts",
    "weighted_counts",
    "weighted_tied_answers",
    "weighted_vote",
]

_MAX_NUM_CHARS = 1000  # longer digit strings are refused (int() limits, DoS)
_MAX_EXPONENT = 400

# Unicode minus signs -> ASCII hyphen-minus; non-breaking/thin spaces -> space.
_UNICODE_FIX = str.maketrans(
    {
        "\u2212": "-",  # MINUS SIGN
        "\ufe63": "-",  # SMALL HYPHEN-MINUS
        "\uff0d": "-",  # FULLWIDTH HYPHEN-MINUS
        "\u00a0": " ",
        "\u2009": " ",
        "\u202f": " ",
        "\u2007": " ",
    }
)


def _check_task(task: str) -> None:
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; expected one of {TASKS}")


def _n_letters(task: str, n_choices: int) -> int:
    if task == "pair":
        return 2
    if not isinstance(n_choices, int) or not 1 <= n_choices <= 26:
        raise ValueError(f"n_choices must be an int in 1..26, got {n_choices!r}")
    return n_choices


# --------------------------------------------------------------------------
# numbers
# --------------------------------------------------------------------------

_NUMSTR = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?"

_STRICT_NUM = re.compile(
    rf"""
    (?P<s1>[-+])?\s*+(?:\\?\$)?\s*+(?P<s2>[-+])?\s*+
    (?P<num>{_NUMSTR})
    (?:\s*+/\s*+(?P<den>{_NUMSTR}))?
    \s*+(?:\\?%)?
    """,
    re.X,
)

# A number inside free text.  A '-' counts as a sign only when it cannot be a
# binary minus (not preceded by a word character or closing bracket).  Digits
# glued to a preceding letter ("H2O", "\frac12") or exponent ("m^2") are not
# numbers.  Commas are thousands separators only with 3-digit groups.
_NUM_TOKEN = re.compile(
    r"""
    (?:(?<![\w)\]}.^])(?P<sign>[-+]))?
    (?:\\?\$\s?)?
    (?<![\w.^])
    (?P<num>(?:\d{1,3}(?:,\d{3})+(?!\d)|\d{1,3}(?:[ \u00a0\u202f\u2009]\d{3})+(?![\d,]|\.\d{3})|\d+)
            (?:\.\d+)?(?:[eE][-+]?\d+(?![\w.]))?|\.\d+)
    (?:/(?P<den>(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?)(?![\w]))?
    """,
    re.X,
)


def _to_fraction(numstr: str) -> Fraction | None:
    s = re.sub(r"[, \u00a0\u202f\u2009]", "", numstr)  # thousands separators: commas or (thin) spaces
    if s.endswith("."):
        s = s[:-1]
    if not s or len(s) > _MAX_NUM_CHARS:
        return None
    m = re.search(r"[eE]([-+]?\d+)$", s)
    if m and abs(int(m.group(1))) > _MAX_EXPONENT:
        return None
    try:
        return Fraction(s)
    except (ValueError, ZeroDivisionError, OverflowError):
        return None


def _format_fraction(f: Fraction) -> str | None:
    try:
        if f.denominator == 1:
            return str(f.numerator)
        return f"{f.numerator}/{f.denominator}"
    except ValueError:  # exceeds int->str digit limit
        return None


def _parse_number_strict(s: str) -> Fraction | None:
    """Whole string must be one (optionally signed/currency/percent) number."""
    s = s.translate(_UNICODE_FIX).strip().strip("*").strip()
    s = s.rstrip(".,;:!?").strip()
    if not s or len(s) > _MAX_NUM_CHARS:
        return None
    m = _STRICT_NUM.fullmatch(s)
    if not m:
        return None
    if m.group("s1") and m.group("s2"):
        return None
    return _value(m.group("num"), m.group("den"), (m.group("s1") or m.group("s2")) == "-")


def _value(num: str, den: str | None, negative: bool) -> Fraction | None:
    """``num`` (over ``den``), negated if asked; None if either part is not a number or den is 0."""
    f = _to_fraction(num)
    if f is None:
        return None
    if den is not None:
        d = _to_fraction(den)
        if d is None or d == 0:
            return None
        f = f / d
    return -f if negative else f


def _token_value(m: re.Match) -> Fraction | None:
    return _value(m.group("num"), m.group("den"), m.group("sign") == "-")


# A LaTeX fraction of two plain numbers is ONE number in free text ("$\frac{3}{4}$ cup" is 3/4,
# not 3 and 4): \frac{a}{b}, \dfrac / \tfrac, \frac34, with an optional leading minus.
_LATEX_FRAC = re.compile(
    r"(?P<sign>-\s*)?\\[dt]?frac(?![A-Za-z])\s*(?:\{\s*(?P<a>\d+(?:\.\d+)?)\s*\}|(?P<a1>\d))"
    r"\s*(?:\{\s*(?P<b>\d+(?:\.\d+)?)\s*\}|(?P<b1>\d))"
)


# A mixed number: "3 3/4" is 15/4, not 3 and 3/4 (the fraction proper: "2 5/4" is two numbers).
_MIXED = re.compile(r"(?<![\w.,/^\-])(?P<sign>-[ \t]?)?(?P<w>\d{1,9})[ \t]+(?P<n>\d{1,9})/(?P<d>\d{1,9})(?![\w/.]|,\d)")


def _mixed_value(m: re.Match) -> Fraction | None:
    n, d = int(m.group("n")), int(m.group("d"))
    if d == 0 or n >= d:
        return None
    value = int(m.group("w")) + Fraction(n, d)
    return -value if m.group("sign") else value


def _numbers_in(text: str, words: bool = False) -> list[tuple[int, int, Fraction]]:
    """``(start, end, value)`` of every number in ``text``: LaTeX fractions of two numbers and
    mixed numbers as one number each, then plain numbers; with ``words``, numbers written in
    words too (:func:`engine.number_text.word_numbers`)."""
    out = []
    covered: list[tuple[int, int]] = []
    for m in _LATEX_FRAC.finditer(text):
        a, b = _to_fraction(m.group("a") or m.group("a1")), _to_fraction(m.group("b") or m.group("b1"))
        if a is None or b is None or b == 0:
            continue
        out.append((m.start(), m.end(), -a / b if m.group("sign") else a / b))
        covered.append((m.start(), m.end()))
    for m in _MIXED.finditer(text):
        mixed = _mixed_value(m)
        if mixed is not None and not any(s <= m.start() < e for s, e in covered):
            out.append((m.start(), m.end(), mixed))
            covered.append((m.start(), m.end()))
    if words:
        out += word_numbers(text)
    for m in _NUM_TOKEN.finditer(text):
        if any(s <= m.start() < e for s, e in covered):
            continue
        v = _token_value(m)
        if v is not None:
            out.append((m.start(), m.end(), v))
    out.sort()
    return out


def _numeric_from_segment(seg: str) -> str | None:
    """Numeric canonical value of an isolated answer segment.

    strict number -> LaTeX-normalised number/fraction -> right-hand side of the
    last '=' -> first number in what is left.
    """
    seg = seg.translate(_UNICODE_FIX)
    f = _parse_number_strict(seg)
    if f is not None:
        return _format_fraction(f)
    m = _MIXED.match(seg.strip().lstrip("$"))
    mixed = _mixed_value(m) if m is not None else None
    if mixed is not None:  # "2 1/2 hours"
        return _format_fraction(mixed)
    if len(seg) <= 2000:
        val = _math_numeric(_math_normalize(seg))
        if val is not None:
            return val
    if "=" in seg:
        seg = seg.rsplit("=", 1)[1]
    nums = _numbers_in(seg) or [x for x in word_numbers(seg) if not seg[: x[0]].strip(" \t*:$")]
    if nums:
        return _format_fraction(nums[0][2])
    return None


# --------------------------------------------------------------------------
# LaTeX helpers
# --------------------------------------------------------------------------


def _match_brace(s: str, i: int) -> int:
    """Index of the brace closing s[i] (an opening '{'), or -1.  '\\{' skipped."""
    depth = 0
    j = i
    n = len(s)
    while j < n:
        c = s[j]
        if c == "\\":
            j += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return -1


_TEXT_CMD = re.compile(r"\\(?:text|textrm|textbf|textit|textnormal|textup|mbox|mathrm|mathbf|mathit|operatorname)\s*\{")


_UNIT_TAIL = re.compile(r"\s*+(?:\^\s*+\{?\s*+\d\s*+\}?)?\s*+\.?\s*+")  # "^2" after a unit


def _unwrap_text_once(s: str) -> str:
    pairs = brace_map(s)
    out = []
    i = 0
    for m in _TEXT_CMD.finditer(s):
        if m.start() < i:  # nested inside an already unwrapped group
            continue
        out.append(s[i : m.start()])
        j = pairs.get(m.end() - 1)
        if j is None:  # unclosed: drop the command, keep the rest
            i = m.end()
        else:
            out.append(s[m.end() : j])
            i = j + 1
    out.append(s[i:])
    return "".join(out)


def _strip_text_cmds(s: str) -> str:
    # 1) a trailing \text{...} after something containing a digit is a unit
    for _ in range(3):
        pairs = brace_map(s)
        last = None
        for m in _TEXT_CMD.finditer(s):
            j = pairs.get(m.end() - 1)
            if j is not None:
                last = (m.start(), j + 1)
        if last is None:
            break
        start, end = last
        if _UNIT_TAIL.fullmatch(s, end) and re.search(r"\d", s[:start]):
            s = s[:start].rstrip()
        else:
            break
    # 2) unwrap every remaining \text{X} -> X (a few passes for nesting)
    for _ in range(5):
        t = _unwrap_text_once(s)
        if t == s:
            break
        s = t
    return s


_FRAC_SQRT = re.compile(r"\\(frac|sqrt)(?![A-Za-z])")


def _read_arg(s: str, i: int) -> tuple[str | None, int]:
    if i >= len(s):
        return None, i
    c = s[i]
    if c == "{":
        j = _match_brace(s, i)
        if j == -1:
            return None, i
        return s[i + 1 : j], j + 1
    if c == "\\":
        m = re.match(r"\\(?:[A-Za-z]+|.)", s[i:])
        if m:
            return m.group(0), i + len(m.group(0))
        return None, i
    if c in "}^_":
        return None, i
    return c, i + 1


def _brace_args(s: str, depth: int = 0) -> str:
    """\\frac12 -> \\frac{1}{2}, \\sqrt2 -> \\sqrt{2} (whitespace already gone)."""
    if depth > 50:
        return s
    out = []
    i = 0
    while True:
        m = _FRAC_SQRT.search(s, i)
        if not m:
            out.append(s[i:])
            break
        out.append(s[i : m.end()])
        i = m.end()
        if s.startswith(" ", i):  # "\\sqrt x": the space kept after a control word
            i += 1
        nargs = 2
        if m.group(1) == "sqrt":
            nargs = 1
            if i < len(s) and s[i] == "[":
                j = s.find("]", i)
                if j != -1:
                    out.append(s[i : j + 1])
                    i = j + 1
        for _ in range(nargs):
            arg, j = _read_arg(s, i)
            if arg is None:
                break
            out.append("{" + _brace_args(arg, depth + 1) + "}")
            i = j
    return "".join(out)


def _matching_close(s: str, i: int) -> int:
    """Index closing the bracket at s[i] counting (), [], {} together, or -1."""
    depth = 0
    for j in range(i, len(s)):
        c = s[j]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return j
    return -1


def _split_top(s: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for c in s:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return parts


_NUM_THEN_WORDS = re.compile(
    r"([-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+)\s+[A-Za-z]{2,}(?:\s+[A-Za-z]{2,})*"
)


def _math_normalize(raw: str) -> str:
    """String normalisation of a MATH answer (see module docstring)."""
    s = str(raw).translate(_UNICODE_FIX).strip()
    boxed = boxed_contents(s)
    if boxed:
        s = boxed[-1].strip()
    s = s.replace("\\$", "").replace("$", "")
    s = s.strip()
    for _ in range(3):  # \( .. \)  /  \[ .. \]
        m = re.fullmatch(r"\\\((.*)\\\)|\\\[(.*)\\\]", s, re.S)
        if not m:
            break
        s = (m.group(1) if m.group(1) is not None else m.group(2)).strip()
    s = s.replace("\\displaystyle", "")
    s = re.sub(r"\\(?:left|right|big|Big|bigg|Bigg)(?![A-Za-z])", "", s)
    s = s.replace("{,}", ",")
    s = _SPACING.sub(lambda m: m.group(0) if m.group(0) == "\\\\" else "", s)  # keeps the row break "\\"
    s = re.sub(r"\\begin\{bmatrix\}", r"\\begin{pmatrix}", s)
    s = re.sub(r"\\end\{bmatrix\}", r"\\end{pmatrix}", s)
    s = re.sub(r"\\q?quad(?![A-Za-z])", " ", s)
    s = s.replace("~", " ")
    s = s.replace("\\%", "").replace("%", "")
    s = re.sub(r"\^\s*\{?\s*\\circ\s*\}?", "", s)
    s = re.sub(r"\\degree(?![A-Za-z])", "", s).replace("°", "")
    s = re.sub(r"\\[dtc]frac(?![A-Za-z])", r"\\frac", s)
    s = _strip_text_cmds(s)
    s = s.strip()
    s = s.rstrip(" \t\r\n\f\v.")
    m = _NUM_THEN_WORDS.fullmatch(s)
    if m:
        s = m.group(1)
    s = _drop_spaces(s)
    s = re.sub(r"(?<=\d)\\cdot ?(?=\\[A-Za-z]|[A-Za-z])", "", s)  # 3\cdot\sqrt{13} is 3\sqrt{13}
    s = re.sub(r"([_^])\{([A-Za-z0-9])\}", r"\1\2", s)  # 52_{8} is 52_8, x^{2} is x^2
    try:
        s = _brace_args(s)
    except RecursionError:  # pragma: no cover - absurdly nested input
        pass
    if s.startswith("{"):
        pairs = brace_map(s)
        a, b = 0, len(s) - 1
        while a < b and pairs.get(a) == b:
            a, b = a + 1, b - 1
        s = s[a : b + 1]
    m = re.fullmatch(r"[A-Za-z](?:_\{?[A-Za-z0-9]+\}?)?(?:=|\\in(?![A-Za-z]))([^=]+)", s)
    if m:
        s = m.group(1)
    s = s.rstrip(".")
    m = re.fullmatch(r"\(([A-Za-z])\)", s)  # \text{(C)}: a choice letter
    if m:
        s = m.group(1)
    if re.fullmatch(r"[A-Za-z]{3,}", s):  # a word answer ("Monday"): case does not matter
        s = s.lower()
    return s


_SPACING = re.compile(r"\\\\|\\[!,;:> ]")
_CONTROL_WORD_THEN_LETTER = re.compile(r"(\\[A-Za-z]+)\s+(?=[A-Za-z])")


def _drop_spaces(s: str) -> str:
    """All whitespace removed, except one space after a control word followed by a letter
    (``\\pi r`` stays valid LaTeX, not ``\\pir``)."""
    s = _CONTROL_WORD_THEN_LETTER.sub(lambda m: m.group(1) + "\x00", s)
    return re.sub(r"\s+", "", s).replace("\x00", " ")


def _math_numeric(s: str) -> str | None:
    """Numeric canonical form of a normalised math string, or None."""
    if not s:
        return None
    f = _parse_number_strict(s)
    if f is None:
        m = re.fullmatch(r"([-+]?)(\d+)\\frac\{(\d+)\}\{(\d+)\}", s)  # a mixed number: 2\frac{1}{2} is 5/2
        whole, part = (_to_fraction(m.group(2)), _value(m.group(3), m.group(4), False)) if m else (None, None)
        if m and whole is not None and part is not None:
            f = -(whole + part) if m.group(1) == "-" else whole + part
    if f is None:
        m = re.fullmatch(r"([-+]?)\\frac\{([^{}]+)\}\{([^{}]+)\}", s)
        if m:
            a = _parse_number_strict(m.group(2))
            b = _parse_number_strict(m.group(3))
            if a is not None and b is not None and b != 0:
                f = a / b
                if m.group(1) == "-":
                    f = -f
    if f is None:
        return None
    return _format_fraction(f)


def _math_canon(raw: str) -> str | None:
    s = _math_normalize(raw)
    if not s:
        return None
    val = _math_numeric(s)
    if val is not None:
        return val
    parts = _split_top(s)
    if len(parts) > 1:  # a bare list: the solutions of an equation, in any order
        items = [_math_numeric(p) or p for p in parts]
        values = [_parse_number_strict(x) for x in items]
        if all(v is not None for v in values):
            items = [x for _, x in sorted(zip(values, items))]
        else:
            items.sort()
        return ",".join(items)
    if len(s) >= 2 and s[0] in "([" and s[-1] in ")]" and _matching_close(s, 0) == len(s) - 1:
        inner = _split_top(s[1:-1])
        if len(inner) > 1:
            return s[0] + ",".join(_math_numeric(p) or p for p in inner) + s[-1]
    return s


# --------------------------------------------------------------------------
# choice / pair canonical
# --------------------------------------------------------------------------

_LETTER_CANON = re.compile(
    r"(?i:option|choice|answer|response|dialogue|assistant|output|model|candidate)?[\s_:]*"
    r"[(\[]?\s*([A-Za-z])\s*[)\]]?(?:[.:)]?|[.:)]\s+.*)",
    re.S,
)


def _letter_canon(raw: str, n: int) -> str | None:
    s = str(raw).translate(_UNICODE_FIX).strip()
    boxed = boxed_contents(s)
    if boxed:
        s = boxed[-1]
    s = _strip_text_cmds(s.replace("$", "")).strip().strip("*").strip()
    m = _LETTER_CANON.fullmatch(s)
    if not m:
        return None
    letter = m.group(1).upper()
    return letter if letter in LETTERS[:n] else None


# --------------------------------------------------------------------------
# public: canonical_answer
# --------------------------------------------------------------------------


def canonical_answer(raw: str | None, task: str, n_choices: int = 4) -> str | None:
    """Canonical form of an answer given directly (gold label or isolated answer).

    ``'1,450,000' -> '1450000'``, ``'\\dfrac{9}{7}' -> '9/7'``, ``'b' -> 'B'``.
    Returns ``None`` when no answer of the task's kind can be read.
    Numbers (int/float/Fraction) are accepted and read via ``str()``.
    """
    _check_task(task)
    n = _n_letters(task, n_choices)
    if raw is None or isinstance(raw, bool):
        return None
    return _canonical_text(str(raw), task, n)


@functools.lru_cache(maxsize=8192)
def _canonical_text(s: str, task: str, n: int) -> str | None:
    """:func:`canonical_answer` of a text (cached: a debate compares the same few answers, and
    the gold, again and again)."""
    if not s.strip():
        return None
    if task == "numeric":
        return _numeric_from_segment(s)
    if task == "math":
        return _math_canon(s)
    return _letter_canon(s, n)


# --------------------------------------------------------------------------
# extraction: numeric / math
# --------------------------------------------------------------------------

_HASH_ANS = re.compile(r"####[ \t]*+([^\n]*)")
_ANS_PHRASE = re.compile(
    r"(?i)\banswer\b(?:[ \t]+(?:to|for)[ \t]+(?:the|this)[ \t]+(?:[a-z]+[ \t]+){0,2}?(?:problem|question))?[ \t*]*+"
    r"(?:(?:is|was|would[ \t]+be|will[ \t]+be|should[ \t]+be|must[ \t]+be|has[ \t]+to[ \t]+be|equals)\b[ \t*]*+:?|:|=)"
)
_MAX_SEGMENT = 300  # characters of an answer segment that are looked at
_MAX_TRIES = 25  # occurrences per rule tried, starting from the last
_SENTENCE_END = re.compile(r"\.(?=\s|$)")
# English words that end a math answer written in prose: "5 because ..."
_PROSE_CUT = re.compile(
    r"\s+(?i:because|since|as|so|which|where|when|therefore|thus|hence|for|if|with|but|"
    r"and[ \t]+(?:the|this|that|it|we|so|then)|or[ \t]+(?:the|we))\b"
)
_ENGLISH_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{4,}")
_ENVIRONMENT = re.compile(r"\\(?:begin|end)\{[A-Za-z*]+\}")  # \begin{pmatrix} is not prose
_FRAC_TOKEN = re.compile(r"(?:(?<![\w)\]}.^])-)?\\[dtc]?frac\s*(?:\{[^{}]*\}|[^{}\s\\])\s*(?:\{[^{}]*\}|[^{}\s\\])")


def _line_from(text: str, start: int) -> tuple[str, int]:
    """Up to _MAX_SEGMENT chars of the line starting at ``start``; index after it."""
    nl = text.find("\n", start, start + _MAX_SEGMENT + 1)
    if nl == -1:
        return text[start : start + _MAX_SEGMENT], -1
    return text[start:nl], nl + 1


def _phrase_segment(text: str, end: int, task: str) -> str:
    line, nxt = _line_from(text, end)
    if not line.strip("*: \t") and nxt != -1:
        line, _ = _line_from(text, nxt)
    seg = line.strip().lstrip("*:").strip()
    if task == "math":
        for opener, closer in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
            if seg.startswith(opener):
                j = seg.find(closer, len(opener))
                if j != -1:
                    return seg[len(opener) : j]
                break
    m = _SENTENCE_END.search(seg)
    if m:
        seg = seg[: m.start()]
    if task == "math":
        m = _PROSE_CUT.search(seg)
        if m:
            seg = seg[: m.start()]
    return seg.strip().rstrip("*").strip()


# A clause that reports someone else's answer ("Agent 2 said the answer is 15", "The other agents
# chose (D)", "One agent's answer was (C)", "Solution 3 gives 12"): its answer never wins.
_OTHERS = re.compile(
    r"(?i:\b(?:agents?|peers?|debaters?|"
    r"other[ \t]++(?:agents?|solutions?|responses?|replies|models?|answers?|participants?|groups?|debaters?)|"
    r"(?:solution|response|reply|opinion)s?[ \t]*+\#?\d+|"
    r"(?:one|two|three|four|five|six|both|all|most|some|many|several)[ \t]++(?:of[ \t]++the[ \t]++)?"
    r"(?:agents?|solutions?|responses?|peers?)|group[ \t]++(?:[a-z]|\d+)\b|(?:the|a|each|every)[ \t]++summary)\b)"
)
# Only agents (a box after "both solutions" may be the equation's): what a box is checked against.
_AGENTS = re.compile(
    r"(?i:\b(?:agents?|peers?|debaters?|other[ \t]++(?:agents?|models?|participants?|debaters?|responses?|replies))\b)"
)
# Pronouns ("they", "their") and "everyone" are not in the list: in word problems they name the
# problem's people ("they spent 12 dollars, so the answer is 12"). "You" is a peer only where it
# reports an answer ("you said 30", "your answer was 30"): a word problem's "you" buys and pays.
_YOU = re.compile(
    r"(?i:\byou[ \t]+(?:said|got|gave|answered|computed|calculated|found|claimed|wrote|stated|concluded|"
    r"arrived[ \t]+at|reached|chose|picked|counted|added|skipped|forgot|missed|reported)\b|"
    r"\byour[ \t]+(?:(?:final|initial|first|previous|original|own)[ \t]+)?"
    r"(?:answers?|solutions?|results?|totals?|calculations?|counts?|reasoning|work)[ \t]*+(?:was|were|of|from|\())"
)
# "Your answer was 30" is a peer's; "Your answer is 4" is how small models state their own
_YOUR_BEFORE = re.compile(r"(?i)\byour[ \t]+(?:(?:final|initial|first|previous|original|own)[ \t]+)?$")
_PAST_ANSWER = re.compile(r"(?i)answers?[ \t]+(?:was|were)\b")
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|[Mm]y|[Mm]e|[Mm]ine|[Ww]e|[Oo]ur|us)\b")
# (the lookahead names every first character a clause start can have: the same matches, and
# every other position fails at once)
_CLAUSE_START = re.compile(
    r"(?=[.!?;\n,bhw])(?:[.!?;](?=\s)|\n|\bbut\b|\bhowever\b|\bwhile\b|\bwhereas\b|,[ \t]+so\b)", re.I
)
# The writer takes the others' answer as its own: "Agents 2 and 3 are right: 17", "I agree with
# agent 1", "like agent 2, I get 17", "agent 3's reasoning is correct and the answer is 17".
_ENDORSED = re.compile(
    r"(?i)(?<!\bnot[ \t])(?<!n't[ \t])\b(?:(?:is|are|was|were)[ \t]+(?:(?:absolutely|completely|quite|entirely|"
    r"also)[ \t]+)?(?:right|correct)|got[ \t]+it[ \t]+right|agreeing[ \t]+with|in[ \t]+agreement[ \t]+with|"
    r"(?:as|just[ \t]+as|like)[ \t]+(?:agents?|the[ \t]+other))\b"
)
_NONE_OF = re.compile(r"(?i)\b(?:neither|none|no[ \t]+(?:other[ \t]+)?agents?)\b")


def _clause_before(text: str, pos: int) -> str:
    """The clause that ends at ``pos``: at most 200 characters, from the last sentence end,
    line break, "but", "however", "while" or "whereas" before ``pos``."""
    clause = text[max(0, pos - 200) : pos]
    cut = None
    for m in _CLAUSE_START.finditer(clause):
        cut = m.end()
    return clause if cut is None else clause[cut:]


def _is_report(text: str, pos: int, agents_only: bool = False) -> bool:
    """Whether the clause that ends at ``pos`` (an answer phrase, box or mention starting there)
    is about another agent's answer rather than the writer's own: it names another agent,
    solution or group ("agent 3", "the other agents", "solution 2") or addresses a peer's answer
    ("you said", "your answer") before ``pos``, the writer ("I", "my", "we") does not speak after
    that, and it does not take the others' answer as its own ("agents 2 and 3 are right: ...")."""
    clause = _clause_before(text, pos)
    if agents_only:  # a box: only agents named ("both solutions" may be the equation's)
        others = list(_AGENTS.finditer(clause))
    elif _YOUR_BEFORE.search(clause) and _PAST_ANSWER.match(text, pos):  # "your answer was 30": a peer's
        return True
    else:
        others = [*_OTHERS.finditer(clause), *_YOU.finditer(clause)]
    if not others:
        return False
    last = max(m.end() for m in others)
    # "after reviewing their solutions, my final answer is": the writer speaks again after them
    if _FIRST_PERSON.search(clause, last) is not None:
        return False
    return _ENDORSED.search(clause) is None or _NONE_OF.search(clause) is not None


# An answer the writer has given up: "Initially I thought the answer was 12", "My first answer
# was (B)", "I originally chose A", "the answer was 12, which was wrong".
_RETRACTED = re.compile(
    r"(?=[iIoOpPeEaAwmM])"  # the first letters of the alternatives below, for a fast scan
    r"\b(?:(?i:initially|originally|previously|earlier|at[ \t]+first),?[ \t]+(?:I|we)\b|"
    r"(?:I|we)[ \t]+(?i:initially|originally|previously|first|mistakenly|wrongly)\b|"
    r"(?i:my|our)[ \t]+(?i:initial|original|previous|earlier|old|first|prior|earlier)[ \t]+"
    r"(?i:answers?|guess|attempt|solution|thought|calculation|response|choice|pick)\b(?=[^.\n]*\b(?i:was|were)\b)|"
    r"I[ \t]+(?:had[ \t]+)?(?i:thought|assumed|guessed)\b(?=[^.\n]*\b(?i:was|were|would)\b))"
)
_RETRACTED_AFTER = re.compile(
    r"(?i)[^.;\n]{0,80}?\bwhich[ \t]+(?:was|is)[ \t]+(?:wrong|incorrect|a[ \t]+mistake|an[ \t]+error|mistaken)\b"
)


def _is_retracted(text: str, pos: int, end: int | None = None) -> bool:
    """Whether the answer stated at ``pos`` is one the writer has given up: its clause says it was
    the first, initial or previous answer ("Initially I thought the answer was 12", "I thought it
    was 12"), or the sentence goes on "which was wrong" (checked from ``end``, when given)."""
    if _RETRACTED.search(_clause_before(text, pos) + text[pos : pos + 30]):
        return True
    return end is not None and _RETRACTED_AFTER.match(text, end) is not None


_FINAL_WORD = re.compile(r"(?i)\bfinal\b[^\n.]{0,20}$")


def _final_first(matches: list[Any], text: str, start: Callable[[Any], int] = lambda m: m.start()) -> list[Any]:
    """Answer-phrase matches (latest first) with the explicit final statements ("Final answer:",
    "my final answer is") ahead of the rest: an agent's closing statement outranks an "the
    answer is" said on the way (the order of trust of rule 3). ``start``: where a match starts."""
    final = [m for m in matches if _FINAL_WORD.search(text, max(0, start(m) - 30), start(m))]
    return final + [m for m in matches if m not in final]


def _extract_number_like(text: str, task: str, marked_only: bool = False, question: str | None = None) -> str | None:
    """Rules 1-5 of the module docstring for ``numeric`` and ``math``, in order."""
    canon = _numeric_from_segment if task == "numeric" else _math_canon
    for rule in (_boxed_number, _hash_number, _phrase_number, _foreign_number):
        val = rule(text, task, canon, marked_only, question)
        if val is not None:
            return val
    if marked_only:  # a reply cut off at the token limit: its last number is not an answer
        return None
    # 4. a line that is only an answer: the last line, else the first ("18" then the explanation)
    lone = _lone_answer(text, task)
    if lone is not None:
        return lone
    return _last_number(text, task, question)


# an expression of a variable ("x + 1", "2n - 3"): no number for a numeric answer
_ALGEBRA = re.compile(r"(?<![\\A-Za-z])[A-Za-z](?![A-Za-z])[ \t]*[-+*/^]|[-+*/^][ \t]*\d*[A-Za-z](?![A-Za-z])")


def _boxed_number(text: str, task: str, canon, marked_only: bool, question: str | None) -> str | None:
    """1. the last box that is the writer's own (not another agent's quoted after it); for
    ``numeric``, an arithmetic expression in it is computed (``\\boxed{12*7}`` is 84) unless it is
    the question's own expression echoed or an answer statement follows it (then that statement
    is the answer), and one of a variable (``\\boxed{x+1}``) is no number."""
    for start, content in boxed_spans(text)[::-1][:_MAX_TRIES]:
        if not content.strip() or _is_report(text, start, agents_only=True) or _is_retracted(text, start):
            continue
        if task == "numeric":
            value = arithmetic_value(content)
            if value is not None:
                if _echoes(content, question) or _ANS_PHRASE.search(text, start + len(content)):
                    continue  # the question copied, or a box worked on before the answer is stated
                return _format_fraction(value)
            if "=" not in content and (
                _ALGEBRA.search(_strip_text_cmds(content)) or _starts_unevaluated(re.sub(r"[{}]", "", content))
            ):
                continue  # "x + 1", or an expression past what is computed: no number
        val = canon(content)
        if val is not None:
            return val
    return None


def _arith_key(s: str) -> str:
    """``s`` as an expression written one way: no spaces, ``*`` and ``/`` for every way of
    writing them, parentheses for braces."""
    for pattern, to in ((r"\\times|\\cdot|×|·", "*"), (r"\\div|÷", "/"), (r"[{\[]", "("), (r"[}\]]", ")")):
        s = re.sub(pattern, to, s)
    return re.sub(r"\s+|\\left|\\right", "", s)


def _echoes(expression: str, question: str | None) -> bool:
    """Whether ``expression`` is written in the question as it is (an arithmetic question's own
    expression copied into the answer, not worked out)."""
    return bool(question) and _arith_key(expression) in _arith_key(question or "")


def _hash_number(text: str, task: str, canon, marked_only: bool, question: str | None) -> str | None:
    """2. the last ``#### X`` line whose X reads as an answer (not a markdown heading)."""
    for m in list(_HASH_ANS.finditer(text))[::-1][:_MAX_TRIES]:
        seg = m.group(1)[:_MAX_SEGMENT].strip()
        if not seg:
            continue
        if task == "numeric":
            if not re.match(r"[-+]?\s*\\?\$?\s*[-+]?\s*\.?\d", seg.translate(_UNICODE_FIX)):
                continue
        elif re.match(r"[A-Za-z]{2,}\b", seg):
            continue
        if marked_only and _runs_to_cut(text, m.end()):
            continue
        val = canon(seg)
        if val is not None:
            return val
    return None


def _phrase_number(text: str, task: str, canon, marked_only: bool, question: str | None) -> str | None:
    """3. the last "final answer: X" / "my final answer is X", then the last "the answer is X" /
    "answer: X", that is the writer's own (a clause reporting another agent's answer is skipped:
    see :func:`_is_report`)."""
    for m in _final_first(list(_ANS_PHRASE.finditer(text))[::-1][:_MAX_TRIES], text):
        if _is_report(text, m.start()) or _is_retracted(text, m.start(), m.end()):
            continue
        if marked_only and _runs_to_cut(text, m.end()):
            continue
        seg = _phrase_segment(text, m.end(), task)
        if not seg:
            continue
        if task == "math":
            # accept math-looking text or a short phrase ("Monday"), not prose
            short = len(seg.split()) <= 2
            if short or re.search(r"[\d\\^_=+\-*/()\[\]{}]", seg):
                val = _math_canon(seg)
                # a long segment that still contains English words is prose
                if val is not None and (short or not _ENGLISH_WORD.search(_ENVIRONMENT.sub("", val))):
                    return val
        else:
            if _starts_unevaluated(seg.rsplit("=", 1)[-1]):
                continue  # "the answer is the result of 8+16*15+12" (or "= 8+16*15+12"): no value
            val = _numeric_from_segment(seg)
            if val is not None:
                return val
    return None


# Answer sentences in other languages: German, French, Spanish, Portuguese, Italian and Dutch
# (a decimal comma: "3,5"), then Chinese and Japanese ("答案是 42。", "答えは 18 です。").
_COMMA_LANGUAGE_ANS = re.compile(
    r"(?i:\b(?:endgültige[ \t]+)?antwort[ \t]*(?:ist|lautet|:)|\bergebnis[ \t]*(?:ist|lautet|:)|"
    r"\br[ée]ponse[ \t]+(?:finale[ \t]+)?(?:est\b|:)|\brespuesta[ \t]+(?:final[ \t]+)?(?:es\b|:)|"
    r"\bresposta[ \t]+(?:final[ \t]+)?(?:é|:)|\brisposta[ \t]+(?:finale[ \t]+)?(?:è|:)|"
    r"\bantwoord[ \t]+is\b)"
)
_CJK_ANS = re.compile(r"(?:最终答案|最終的な答え|最終解答|答案|答え|解答|正解|结果)[ \t]*(?:は|是|为|為|：|:)")
_CJK_END = re.compile(r"[。．，、；！？\n]|です|だ")
_COMMA_LANGUAGE_END = re.compile(r"[;\n]|[.!?](?=\s|$)|,(?=\s)")


def _foreign_number(text: str, task: str, canon, marked_only: bool, question: str | None) -> str | None:
    """3b. the last answer sentence in another language: its first number, read with a decimal
    comma where the language writes one ("Die Antwort ist 3,5." is 7/2)."""
    found = [(m.end(), True) for m in _COMMA_LANGUAGE_ANS.finditer(text)]
    found += [(m.end(), False) for m in _CJK_ANS.finditer(text)]
    for end, comma in sorted(found, reverse=True)[:_MAX_TRIES]:
        seg = text[end : end + _MAX_SEGMENT]
        cut = (_COMMA_LANGUAGE_END if comma else _CJK_END).search(seg)
        seg = seg[: cut.start()] if cut else seg
        if marked_only and cut is None:
            continue
        if comma:
            value = decimal_comma_value(seg)
            val = _format_fraction(value) if value is not None else None
        else:
            val = canon(seg.strip())
        if val is not None:
            return val
    return None


# A breakdown after an amount: "$2,050.75 ($1,900 rent and $150.75 fees)", "96 dollars (64 for
# adults and 32 for kids)": the numbers in the brackets are parts of the one before them.
_BRACKETS = re.compile(r"[(\[][^()\[\]\n]{1,200}[)\]]")
_AMOUNT_BEFORE = re.compile(r"\d(?:[ \t]+[A-Za-z]+){0,2}[ \t]*$")
# a number word that is no quantity of the answer: "the two steps", "two of the agents", "192 cows
# in eight stalls", "240 pages in two weeks" (after a preposition: when, where, per what)
_WORD_NOT_A_COUNT = re.compile(
    r"(?i)\b(?:the|these|those|its|their|his|her|my|our|your|all|both|each|every|first|last|next|other|"
    r"in|after|for|of|per|over|within|by|during|on|at|from|to|than|into|between|across|before|until)[ \t]+$"
)


def _breakdowns(text: str) -> list[tuple[int, int]]:
    """The spans of brackets right after a number whose contents hold numbers (its breakdown)."""
    return [
        m.span()
        for m in _BRACKETS.finditer(text)
        if _AMOUNT_BEFORE.search(text, max(0, m.start() - 40), m.start()) and re.search(r"\d", m.group(0))
    ]


def _fallback_numbers(text: str) -> list[tuple[int, int, Fraction]]:
    """The numbers the last-number rule may read: not in a clause reporting others or given up,
    not negated, not an operand of an unevaluated expression, not in an amount's breakdown, and a
    number word only where it counts something ("leaves nineteen", not "the two steps")."""
    spans = _breakdowns(text)
    out = []
    for x in _numbers_in(text, words=True):
        if any(a <= x[0] < b for a, b in spans) or not _counts_as_result(text, x[0], x[1]):
            continue
        if text[x[0]].isalpha() and (
            _WORD_NOT_A_COUNT.search(text, max(0, x[0] - 12), x[0]) or re.match(r"[ \t]+of\b", text[x[1] :])
        ):
            continue
        out.append(x)
    return out


def _past_the_question(text: str, nums: list, question: str | None) -> list:
    """``nums`` cut after the last number of the final sentence that is not one of the question's
    own numbers, when the sentence goes on to restate them ("So Ann has 23 stamps left from her
    4 books of 15." is 23); as given without a question or such a number."""
    if not question or not nums:
        return nums
    given = _given_numbers(question)
    if nums[-1][2] not in given:
        return nums
    start = _sentence_start(text, nums[-1][0])
    own = [i for i, x in enumerate(nums) if x[0] >= start and x[2] not in given]
    return nums[: own[-1] + 1] if own else nums


@functools.lru_cache(maxsize=256)
def _given_numbers(question: str) -> frozenset[Fraction]:
    """The numbers a question's text gives (words too): a debate reads many replies to one question."""
    return frozenset(v for _, _, v in _numbers_in(question, words=True))


_SENTENCE_OR_LINE = re.compile(r"(?<!\bMr)(?<!\bMrs)(?<!\bMs)(?<!\bDr)(?<!\bSt)(?<!\bvs)[.!?](?=\s)|\n")


def _sentence_start(text: str, pos: int) -> int:
    """Where the sentence (or line) holding ``pos`` starts."""
    return max((m.end() for m in _SENTENCE_OR_LINE.finditer(text, 0, pos)), default=0)


_RESULT_BEFORE = re.compile(r"=[ \t]*(?:<<[^<>\n]{0,80}>>)?[ \t]*(?:\\?\$)?[ \t]*$")


def _result_over_words(text: str, nums: list) -> list:
    """``nums`` cut after an equation's result when a number word follows it in the same sentence
    ("160+32 = 192 cows after he adds four": 192); as given otherwise."""
    if not nums or not text[nums[-1][0]].isalpha():
        return nums
    start = _sentence_start(text, nums[-1][0])
    results = [i for i, x in enumerate(nums) if x[0] >= start and _RESULT_BEFORE.search(text, max(0, x[0] - 100), x[0])]
    return nums[: results[-1] + 1] if results else nums


# "47 marbles across the 3 jars": a quantity, the words naming it, then the count qualifying it
_QUALIFIED_BY = re.compile(
    r"(?i)[ \t]+(?:[a-z]+[ \t]+){1,3}(?:in|for|over|across|from|during|within|among|between)[ \t]+"
    r"(?:(?:the|all|these|those|its|his|her|their|each|every)[ \t]+)?$"
)
# a stated quantity: right after a result word, or a conclusion earlier in its sentence, or "remain"
_RESULT_CUE = re.compile(
    r"(?i)(?:=|\b(?:is|are|was|were|makes?|making|gives?|giving|comes?[ \t]+(?:out[ \t]+)?to|totals?|"
    r"equals?|gets?|got)\b)[ \t]*(?:\\?\$)?[ \t]*$"
)
_CONCLUSION = re.compile(r"(?i)\b(?:so|thus|therefore|hence|altogether|overall|in[ \t]+total|in[ \t]+all)\b")
_REMAINS_AFTER = re.compile(r"(?i)[ \t]+[a-z]+[ \t]+(?:remains?|are[ \t]+left|left)\b")
_NOUN_AFTER = re.compile(r"[ \t]*[A-Za-z]")  # the count names what it counts ("3 jars")
_NO_QUANTITY = re.compile(r"(?i)\bat[ \t]+$")  # "leaves at 3": a time
_RATE_AFTER = re.compile(r"(?i)[ \t]+[a-z]+[ \t]+(?:a|an|per|each|every)\b")  # "20 pages a day": a rate


def _stated_over_count(text: str, nums: list, question: str | None) -> list:
    """``nums`` without their last number when the reply's last clause states a quantity and ends
    with the count that qualifies it ("so he walks 35 miles over 7 days", "gives 47 marbles
    across the 3 jars": 35, 47); as given otherwise. The quantity is stated: after a result word
    ("is", "makes", "gives", "="), in a sentence with a conclusion ("so", "altogether"), or before
    "remain"/"left"; a time ("at 3"), a rate ("20 pages a day") or one of the question's own
    numbers is no such quantity."""
    if len(nums) < 2:
        return nums
    (a, b, value), (count_start, count_end, _) = nums[-2], nums[-1]
    if not _QUALIFIED_BY.match(text[b:count_start]) or not _NOUN_AFTER.match(text, count_end):
        return nums
    if question and value in _given_numbers(question):
        return nums
    if _NO_QUANTITY.search(text, max(0, a - 8), a) or _RATE_AFTER.match(text, b):
        return nums
    stated = (
        _RESULT_CUE.search(text, max(0, a - 30), a)
        or _CONCLUSION.search(text, _sentence_start(text, a), a)
        or _REMAINS_AFTER.match(text, b)
    )
    return nums[:-1] if stated else nums


def _last_number(text: str, task: str, question: str | None) -> str | None:
    """5. the last number in the text (math: the last number or ``\\frac``, or a later interval
    ``x \\in (a, b)``) of :func:`_fallback_numbers`, past the question's restated numbers and a
    count qualifying the quantity stated before it (:func:`_stated_over_count`)."""
    nums = _past_the_question(text, _result_over_words(text, _fallback_numbers(text)), question)
    nums = _stated_over_count(text, nums, question)
    best_num = nums[-1] if nums else None
    if task == "math":
        intervals = list(_INTERVAL.finditer(text))
        if intervals and (best_num is None or intervals[-1].end() >= best_num[1]):
            val = _math_canon(intervals[-1].group(0))
            if val is not None:
                return val
        fracs = list(_FRAC_TOKEN.finditer(text))
        if fracs:
            fm = fracs[-1]
            if best_num is None or fm.end() >= best_num[1]:
                val = _math_canon(fm.group(0))
                if val is not None:
                    return val
    if best_num is not None:
        return _format_fraction(best_num[2])
    return None


def _runs_to_cut(text: str, end: int) -> bool:
    """Whether the statement from ``end`` runs to where a cut-off reply stops (no line break,
    no sentence end after it): its answer may be cut short ("the answer is 27 + 28 = 5")."""
    rest = text[end:].rstrip()
    return "\n" not in rest and _SENTENCE_END.search(rest) is None and not rest.endswith(("!", "?", "}", "$", "*"))


_NEGATED = re.compile(r"(?i)\b(?:not|n't|rather[ \t]+than|instead[ \t]+of)[ \t]+(?:\\?\$[ \t]*)?$")
_OPERATOR_BEFORE = re.compile(r"(?:[+*/×^]|\^\{|(?<=[\w)\s])-)[ \t]*(?:\\?\$)?$")
_OPERATOR_AFTER = re.compile(r"(?:[A-Za-z](?![A-Za-z]))?[ \t]*(?:[+*/×^]|-(?=[ \t]*[\d(]))")


def _counts_as_result(text: str, start: int, end: int) -> bool:
    """Whether the number at ``text[start:end]`` can be the reply's answer in the last-number
    fallback: not in a clause reporting another agent's answer or one given up, not negated
    ("307, not 308", "rather than 12"), not an operand of an expression left unevaluated
    ("26 + 9*15 + 11 - 18*28": an echoed question)."""
    before = text[max(0, start - 24) : start]
    if _NEGATED.search(before) or _OPERATOR_BEFORE.search(before) or _OPERATOR_AFTER.match(text, end):
        return False
    return not (_is_report(text, start) or _is_retracted(text, start))


def _starts_unevaluated(seg: str) -> bool:
    """Whether the first number of an answer segment is an operand of an expression
    ("8+16*15+12-29*25"), so the segment names no value."""
    nums = _numbers_in(seg)
    return bool(nums) and _OPERATOR_AFTER.match(seg, nums[0][1]) is not None


# "x \in (2, 5)", "x \in [-1, 3) \cup (4, \infty)": a solution set written as an interval
_INTERVAL_PART = r"[(\[][^()\[\]\n$]{1,60},[^()\[\]\n$]{1,60}[)\]]"
_INTERVAL = re.compile(
    r"\b[a-zA-Z][ \t]*\\in[ \t]*(?:\\left)?"
    + _INTERVAL_PART
    + r"(?:[ \t]*\\cup[ \t]*(?:\\left)?"
    + _INTERVAL_PART
    + r")*"
)


def _lone_answer(text: str, task: str) -> str | None:
    """The answer on a line that holds nothing else (bold, ``$..$`` and a trailing period allowed):
    the reply's last non-empty line, else its first, so an answer written first and explained
    after ("**18**" then "16 - 3 - 4 = 9 eggs ...") is not the explanation's last number.
    Numeric: a number, optionally followed by one or two words (a unit: "18 dollars"). Math: an
    expression with no English word of four letters or more and no ``=`` (after a leading
    ``x =``). A confidence line is not an answer (masked before)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return None
    for line in (lines[-1], lines[0]) if len(lines) > 1 else (lines[0],):
        seg = line.strip()
        if len(seg) > 120:
            continue
        seg = re.sub(r"^[-+][ \t]+", "", seg.lstrip(" \t>#*_")).rstrip(" \t*_").rstrip(".").strip()  # "- " bullet
        if not seg or len(seg) > 80:
            continue
        if task == "numeric":
            m = re.fullmatch(r"(?:\\?\$)?([-+]?[\d.,]+(?:/\d+)?)(?:[ \t]+[A-Za-z]{2,}){0,2}", seg.replace("$", ""))
            val = _numeric_from_segment(m.group(1)) if m else None
        else:
            body = re.sub(r"^[A-Za-z][ \t]*=", "", seg.replace("$", "")).strip()
            bare = re.sub(r"\\[A-Za-z]+", "", re.sub(r"\\(?:text|mbox|mathrm)\{[^{}]*\}", "", body))
            if not body or "=" in body or ":" in body or re.search(r"[A-Za-z]{2,}", bare):
                continue  # an equation or a sentence ("The sum is $-2$."), not an answer alone
            if not re.search(r"[\d\\]", body):
                continue
            val = _math_canon(seg)
        if val is not None:
            return val
    return None


# --------------------------------------------------------------------------
# extraction: choice / pair
# --------------------------------------------------------------------------

_L = r"(?P<body>\(\s*[A-Za-z]\s*\)|\[\s*[A-Za-z]\s*\]|[A-Za-z])"

_CHOICE_ANS = re.compile(
    r"(?i:\banswer\b|\bcorrect\s+(?:option|choice|response|letter)"
    r"|\bbest\s+(?:option|choice)|\bfinal\s+choice|\bverdict\b)"
    r"[ \t*]*+"
    r"(?P<sep>(?i:is\b|was\b|would[ \t]+be\b|will[ \t]+be\b|should[ \t]+be\b|must[ \t]+be\b"
    r"|has[ \t]+to[ \t]+be\b)|:|=)?"
    r"[ \t*:]*+(?:(?i:clearly|likely|probably|definitely|therefore|thus|indeed)[ \t]+)?"
    r"(?:(?i:option|choice|letter|response)[ \t]*+)?" + _L + r"(?![A-Za-z0-9])"
)

_REFS = (
    r"(?i:response|reply|dialogue|conversation|assistant|output|answer|option|model|candidate|summary|completion|"
    r"choice|text|version|translation)"
)

_PAIR_PHRASES = [
    # "Response A is better", "A is clearly better", "(B) is preferred"
    re.compile(
        r"(?:" + _REFS + r"[ \t]*+)?(?<![\w'’])\(?(?P<L>[AB])\)?"
        r"(?:['’]s(?:[ \t]+(?i:response|answer|reply|output|completion|summary|dialogue))?)?"
        r"[ \t]+(?i:is|was|seems|appears)[ \t]++"
        r"(?i:(?:clearly|much|slightly|significantly|far|definitely|the)[ \t]+)*"
        r"(?i:better|preferred|superior|stronger|best|more[ \t]+(?:helpful|accurate|relevant|informative|"
        r"complete|correct|appropriate|useful|harmless|honest|detailed|coherent|truthful|faithful))\b"
    ),
    # "Assistant A provides a better response", "Response B gives the more accurate answer"
    re.compile(
        r"(?:" + _REFS + r"[ \t]*+)(?P<L>[AB])(?![\w'’])[ \t]+"
        r"(?i:provides|gives|offers|has|writes|delivers|produces|is)[ \t]+(?i:a|an|the)[ \t]+"
        r"(?i:(?:clearly|much|slightly|far)[ \t]+)?"
        r"(?i:better|stronger|superior|more[ \t]+(?:helpful|accurate|relevant|informative|complete|correct|"
        r"appropriate|useful|detailed|coherent|truthful|faithful))\b"
    ),
    # "I prefer B", "preference: Response A"
    re.compile(
        r"(?i:\bprefer(?:s|red|ence)?)(?:[ \t]++(?i:is|for))?[ \t:]*+(?:" + _REFS + r"[ \t]*+)?"
        r"\(?(?P<L>[AB])\)?(?![\w'’])"
    ),
    # "the better response is A", "winner: B"
    re.compile(
        r"(?i:\b(?:better|best|winner|winning|preferred|chosen))[ \t]*+"
        r"(?:(?i:response|dialogue|assistant|output|option|one|answer|choice|model|candidate)[ \t]*+)?"
        r"(?i:is|:|would\s+be|=)[ \t*]*+(?:" + _REFS + r"[ \t]*+)?"
        r"\(?(?P<L>[AB])\)?(?![\w'’])"
    ),
    # "I choose B", "I'd go with Response A", "vote for A"
    re.compile(
        r"(?i:\b(?:choose|chose|pick|picked|select|selected|go\s+with|vote\s+for))[ \t]+"
        r"(?:" + _REFS + r"[ \t]*+)?"
        r"\(?(?P<L>[AB])\)?(?![\w'’])"
    ),
    # MT-bench style verdict "[[A]]"
    re.compile(r"\[\[(?P<L>[AB])\]\]"),
]

_IS_CORRECT = re.compile(
    r"(?<![\w'’])(?:" + _REFS + r"[ \t]*+)?\(?(?P<L>[A-Z])\)?[ \t]+(?i:is)[ \t]+(?i:the[ \t]+)?"
    r"(?i:correct|right|true|best)\b"
)
_BOLD = re.compile(r"\*\*[ \t]*+(?:\((?P<P>[A-Za-z])\)|(?P<L>[A-Z])\)?)(?:[.):][^*\n]*+)?[ \t]*+\*\*")
_LINE_ALONE = re.compile(r"^[ \t>#*\-]*(?:\((?P<P>[A-Za-z])\)|(?P<L>[A-Z])\)?)[.):]?[ \t*]*$", re.M)
_MENTION = re.compile(
    r"(?<!\w)\((?P<P>[A-Za-z])\)|(?i:\b(?:option|choice|response|dialogue|assistant|output|candidate))[ \t]+"
    r"\(?(?P<L>[A-Z])\)?(?![\w'’])"
)
_ENDS_PHRASE = re.compile(r"[ \t]*+(?:[.)\],;!*\n]|$)")
_FOLLOWED_BY_LOWER_WORD = re.compile(r"[ \t]++[a-z]")
_FOLLOWED_BY_WORD = re.compile(r"[ \t]++[A-Za-z]")
_STANDALONE = re.compile(r"(?<![\w'’\-./\\])(?P<L>[A-Z])(?![\w'’\-/])(?!\.[A-Za-z])")


# A letter named as wrong: "(A) and (B) are wrong", "C is too narrow", "option D can be ruled out";
# or after "not", "except", "rather than", "eliminate".
_DISMISSED_AFTER = re.compile(
    r"\)?(?:(?:[ \t]*+,[ \t]*+(?:(?:and|or|nor)[ \t]+)?|[ \t]++(?:and|or|nor)[ \t]+)"
    r"(?:(?i:option|choice)[ \t]+)?\(?[A-Z]\)?)*"
    r"(?:['’]s[ \t]+\w+)?[ \t]+(?i:(?:is|are|was|were|seems?|appears?|looks?)[ \t]+(?:also[ \t]+|clearly[ \t]+|"
    r"definitely[ \t]+|both[ \t]+|all[ \t]+|then[ \t]+)*(?:wrong|incorrect|false|not\b|too\b|unlikely|invalid|"
    r"irrelevant|inaccurate|incomplete|implausible|worse|weaker|eliminated|excluded|ruled[ \t]+out|a[ \t]+distractor|"
    r"only[ \t]+partially|partially)|(?:can|could|should|must)[ \t]+be[ \t]+(?:ruled[ \t]+out|eliminated|excluded|"
    r"discarded|dismissed|rejected)|(?:doesn't|does[ \t]+not|don't|do[ \t]+not|fails?[ \t]+to)\b)"
)
_DISMISSED_BEFORE = re.compile(
    r"(?i:\b(?:not|except|rather[ \t]+than|instead[ \t]+of|eliminat\w*|rul\w*[ \t]+out|exclud\w*|discard\w*|"
    r"reject\w*|against)[ \t]+(?:(?:options?|choices?|answers?)[ \t]+)?(?:\*\*)?\(?)$"
)


def _dismissed(text: str, start: int, end: int) -> bool:
    """Whether the letter mention at ``text[start:end]`` names an option as wrong rather than
    choosing it: "(A) and (B) are wrong", "C is too narrow", "not (B)", "we can rule out D"."""
    if _DISMISSED_AFTER.match(text, end):
        return True
    return _DISMISSED_BEFORE.search(text[max(0, start - 30) : start]) is not None


_OPTION_LINE = re.compile(r"[ \t>*#]*+(?:\((?P<P>[A-Za-z])\)|(?P<L>[A-Z])[).:])(?:[ \t]|$)")


def _first_line_option(text: str, n: int) -> str | None:
    """The letter a reply's first line opens with ("(D) False, True", "B) 4", "C. 2"), the
    answer written first; None when the second line opens with an option too (the options
    listed, not one chosen) or the line dismisses it ("(A) is incorrect, ...")."""
    lines = [ln for ln in text.splitlines()[:50] if ln.strip()]
    if not lines:
        return None
    m = _OPTION_LINE.match(lines[0])
    if (
        m is None
        or (len(lines) > 1 and _OPTION_LINE.match(lines[1]))
        or _dismissed(lines[0], m.start(), m.end(m.lastgroup or 0))
    ):
        return None
    letter = (m.group("P") or m.group("L")).upper()
    return letter if _in_range(letter, n) else None


def _letter_from_box(content: str, n: int) -> str | None:
    s = _strip_text_cmds(content.replace("$", "")).strip()
    m = re.fullmatch(r"\(\s*([A-Za-z])\s*\)|\(?\s*([A-Z])\s*\)?[.:]?(?:[.:)]\s+.*)?", s, re.S)
    if not m:
        return None
    letter = (m.group(1) or m.group(2)).upper()
    return letter if letter in LETTERS[:n] else None


def _in_range(letter: str, n: int) -> bool:
    return len(letter) == 1 and letter in LETTERS[:n]


def _extract_letter(text: str, task: str, n: int, marked_only: bool = False, options: Sequence[str] = ()) -> str | None:
    """Rules 1-7 of the module docstring for ``choice`` and ``pair``, in order."""
    for rule in (_boxed_letter, _phrase_letter, _preference_letter, _marked_letter):
        val = rule(text, task, n, marked_only, options)
        if val is not None:
            return val
    if marked_only:  # mentions and stray letters are not markers: skipped for a cut-off reply
        return None
    for rule in (_mentioned_letter, _option_text_letter, _standalone_letter):
        val = rule(text, task, n, marked_only, options)
        if val is not None:
            return val
    return None


def _boxed_letter(text: str, task: str, n: int, marked_only: bool, options: Sequence[str]) -> str | None:
    """1. the last ``\\boxed{B}`` that is the writer's own."""
    for start, content in boxed_spans(text)[::-1][:_MAX_TRIES]:
        if len(content) > 40 or _is_report(text, start, agents_only=True):
            continue
        val = _letter_from_box(content, n)
        if val is not None:
            return val
    return None


def _phrase_letter(text: str, task: str, n: int, marked_only: bool, options: Sequence[str]) -> str | None:
    """2. "final answer: B" / "verdict: (A)", then "answer is B" / "answer: (c)", or an option's
    text after an answer phrase ("the answer is the ribosome"); not in a clause reporting another
    agent's answer."""
    found = [(m.start(), m.end(), _phrase_choice(text, m, n, options)) for m in _CHOICE_ANS.finditer(text)]
    if options:
        found += [(m.start(), m.end(), _option_at(text, m.end(), options)) for m in _ANS_PHRASE.finditer(text)]
    by_start = {start: (end, letter) for start, end, letter in sorted(found) if letter is not None}
    latest_first = sorted(by_start.items(), reverse=True)  # (start, (end, letter))
    for start, (end, letter) in _final_first(latest_first, text, start=lambda item: item[0]):
        if not (_is_report(text, start) or _is_retracted(text, start, end)):
            return letter
    return None


def _phrase_choice(text: str, m: re.Match, n: int, options: Sequence[str]) -> str | None:
    """The letter an answer phrase of :data:`_CHOICE_ANS` names: an option's text when one starts
    where its letter does ("the answer is A rise in demand" is that option, not (A))."""
    body, sep = m.group("body"), m.group("sep")
    if options:
        named = _option_at(text, m.start("body"), options)
        if named is not None:
            return named
    if body.startswith(("(", "[")):
        letter = body.strip("()[] \t").upper()
    elif body.isupper():
        if not sep and _FOLLOWED_BY_LOWER_WORD.match(text, m.end()):
            return None  # "Answer B" without separator: reject an article "A word"
        letter = body
    else:
        if not sep or not _ENDS_PHRASE.match(text, m.end()):
            return None  # lower case only when the letter ends the phrase: "answer: b."
        letter = body.upper()
    return letter if _in_range(letter, n) else None


def _preference_letter(text: str, task: str, n: int, marked_only: bool, options: Sequence[str]) -> str | None:
    """3. the last preference ("Response A is better") or "B is correct" phrase."""
    best: tuple[int, str] | None = None
    for pat in (_PAIR_PHRASES if task == "pair" else []) + [_IS_CORRECT]:
        for m in pat.finditer(text):
            letter = m.group("L")
            if _is_report(text, m.start()) or _is_retracted(text, m.start(), m.end()):
                continue
            if _in_range(letter, n) and (best is None or m.start() >= best[0]):
                best = (m.start(), letter)
    return best[1] if best is not None else None


def _marked_letter(text: str, task: str, n: int, marked_only: bool, options: Sequence[str]) -> str | None:
    """4. ``**B**``, 5. a line that is just "B" / "B." / "(B)", then a first line opening with an
    option ("(D) False, True" then the explanation)."""
    for rule in (_BOLD, _LINE_ALONE):
        for m in reversed(list(rule.finditer(text))):
            letter = (m.group("P") or m.group("L") or "").upper()
            if _in_range(letter, n) and (rule is _LINE_ALONE or not _dismissed(text, m.start(), m.end())):
                return letter
    return _first_line_option(text, n)


def _mentioned_letter(text: str, task: str, n: int, marked_only: bool, options: Sequence[str]) -> str | None:
    """6. the last "(B)" / "option B" mention not named as wrong, reported or given up."""
    for m in reversed(list(_MENTION.finditer(text))):
        letter = (m.group("P") or m.group("L") or "").upper()
        if not _in_range(letter, n) or _dismissed(text, m.start(), m.end()):
            continue
        if _is_report(text, m.start()) or _is_retracted(text, m.start()):
            continue
        return letter
    return None


_OPTION_LEAD = re.compile(r"[ \t*:\"'“‘]*+(?:(?i:the|option|choice)[ \t]+)?")
_OPTION_NEGATED = re.compile(
    r"(?i)\b(?:not|isn't|except|rather[ \t]+than|instead[ \t]+of|eliminat\w*|rul\w*[ \t]+out|exclud\w*)"
    r"[ \t]+(?:the[ \t]+|an?[ \t]+)?$"
)


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s.strip().rstrip(".").strip()).casefold()


def _option_at(text: str, pos: int, options: Sequence[str]) -> str | None:
    """The letter of the longest option whose text starts at ``pos`` (after quotes, "the",
    "option"), as a whole phrase; None when none does."""
    lead = _OPTION_LEAD.match(text, pos)
    rest = _norm(text[lead.end() if lead else pos :][:_MAX_SEGMENT])
    best: tuple[int, int] | None = None
    for i, option in enumerate(options[:26]):
        o = _norm(str(option))
        if o and rest.startswith(o) and not rest[len(o) : len(o) + 1].isalnum() and (best is None or len(o) > best[1]):
            best = (i, len(o))
    return LETTERS[best[0]] if best is not None else None


def _option_text_letter(text: str, task: str, n: int, marked_only: bool, options: Sequence[str]) -> str | None:
    """6b. the option whose text the reply names last (at least three characters with a letter;
    the longest where several start at one place), not named as wrong, negated, reported or given
    up: "... so it is the ribosome" is the ribosome's letter."""
    spans: list[tuple[int, int, int]] = []
    for i, option in enumerate(options[:n]):
        o = re.sub(r"\s+", " ", str(option).strip().rstrip("."))
        if len(o) < 3 or not re.search(r"[A-Za-z]", o):
            continue
        pattern = r"(?<![\w])" + r"\s+".join(map(re.escape, o.split(" "))) + r"(?![\w])"
        spans += [(m.start(), -m.end(), i) for m in re.finditer(pattern, text, re.I)]
    for start, neg_end, i in sorted(spans, reverse=True):
        before = text[max(0, start - 30) : start]
        if _OPTION_NEGATED.search(before) or _DISMISSED_AFTER.match(text, -neg_end):
            continue
        if _is_report(text, start) or _is_retracted(text, start):
            continue
        return LETTERS[i]
    return None


def _standalone_letter(text: str, task: str, n: int, marked_only: bool, options: Sequence[str]) -> str | None:
    """7. weak fallback: the last standalone capital letter; "A"/"I" followed by a word are the
    article/pronoun, not an answer."""
    for m in reversed(list(_STANDALONE.finditer(text))):
        letter = m.group("L")
        if not _in_range(letter, n) or _is_report(text, m.start()) or _dismissed(text, m.start(), m.end()):
            continue
        if _is_retracted(text, m.start()):
            continue
        if letter in "AI" and _FOLLOWED_BY_WORD.match(text, m.end()):
            continue
        return letter
    return None


# --------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------


# a peer's reply quoted in a fenced block after a label naming another agent or group, as the
# debate prompts show them ("One agent solution: ```...```", "Agent 2: ```...```", "One group
# response: ```...```"); an unclosed block runs to the end of the text (the lookahead: the letters
# a match can start with, so that other positions fail at once)
_QUOTED_PEER = re.compile(
    r"(?is)(?=[oatgp])\b(?:(?:one|another|the\s+other|other)\s+)?(?:agent|group|peer)s?\b"
    r"[^\n`:]{0,30}:[ \t]*\n?[ \t]*```.*?(?:```|\Z)"
)


def _mask_not_answers(text: str) -> str:
    """``text`` with its confidence statements ("Confidence: 0.9", "I am 90% confident"; see
    :func:`engine.confidence.confidence_spans`) and the peers' replies it quotes (an echoed
    "One agent solution: ```...```" block) blanked out, positions kept: neither is the
    writer's answer."""
    spans = confidence_spans(text) + [m.span() for m in _QUOTED_PEER.finditer(text)]
    if not spans:
        return text
    pieces, done = [], 0  # done: how far text has been copied or blanked
    for a, b in sorted(spans):
        if b > done:
            pieces += [text[done:a], " " * (b - max(a, done))]  # text[done:a] is "" when a <= done
            done = b
    return "".join(pieces) + text[done:]


def extract_answer(
    text: str | None,
    task: str,
    n_choices: int = 4,
    marked_only: bool = False,
    *,
    choices: Sequence[str] = (),
    question: str | None = None,
) -> str | None:
    """Canonical answer string read from a model reply, or None if none can be read.

    See the module docstring for the precedence of the patterns. ``marked_only``: only marked
    answers count (``\\boxed``, ``####``, answer phrases, a bold or lone letter), not the last
    number or a mentioned letter: for a reply that stopped at the token limit, whose last
    number is wherever the reasoning was cut off. ``choices``: a ``choice`` question's option
    texts (then ``n_choices`` is their number), so an answer given as an option's text reads as
    its letter. ``question``: the question's text, so a last sentence that restates the
    question's numbers after the answer is read at the answer.
    """
    _check_task(task)
    n = _n_letters(task, len(choices) if choices and task == "choice" else n_choices)
    if text is None:
        return None
    text = str(text)
    options = tuple(choices) if task == "choice" else ()
    read = _read_reply if len(text) <= _CACHED_CHARS else _read_reply.__wrapped__
    return read(text, task, n, marked_only, options, question)


# Replies up to this long are remembered with their answer (a pure function of its arguments):
# rescoring, showing and simulated runs read the same replies again; the bound keeps the cache small.
_CACHED_CHARS = 4000


@functools.lru_cache(maxsize=4096)
def _read_reply(
    text: str, task: str, n: int, marked_only: bool, choices: tuple[str, ...], question: str | None
) -> str | None:
    """:func:`extract_answer` once the task and letter count are checked (which see)."""
    text = _mask_not_answers(text.translate(_UNICODE_FIX))
    if not text.strip():
        return None
    if task in ("numeric", "math"):
        return _extract_number_like(text, task, marked_only, question)
    return _extract_letter(text, task, n, marked_only, choices)


def answers_equal(pred: str | None, gold: str | None, task: str) -> bool:
    """True when both sides canonicalise to the same non-None string or, for ``math``, when
    math-verify finds them equal (:mod:`engine.equivalence`).

    ``pred`` None (unparseable) is never correct.  For choice tasks letters up
    to ``Z`` are accepted on both sides (the range check belongs to extraction).
    """
    _check_task(task)
    if pred is None or gold is None:
        return False
    p = canonical_answer(pred, task, 26)
    if p is None:
        return False
    g = canonical_answer(gold, task, 26)
    if g is None:
        return False
    if p == g:
        return True
    if task == "math":  # symbolic equivalence (sets, intervals, matrices, x+1 = 1+x): math-verify
        return math_equivalent(p, g)
    return False


def vote_counts(answers: Iterable[str | None]) -> dict[str, int]:
    """Counts of the non-None answers, keys in order of first occurrence.

    Empty / whitespace-only strings count as None.
    """
    counts: dict[str, int] = {}
    for a in answers:
        if a is None or (isinstance(a, str) and not a.strip()):
            continue
        counts[a] = counts.get(a, 0) + 1
    return counts


def tied_answers(answers: Sequence[str | None]) -> list[str]:
    """The most frequent non-None answers (more than one: the vote is a tie), in first-seen order."""
    counts = vote_counts(answers)
    if not counts:
        return []
    top = max(counts.values())
    return [a for a, c in counts.items() if c == top]


def majority_vote(answers: Sequence[str | None], tie_key: int | None = None) -> str | None:
    """Most frequent non-None answer; None if there is none.

    Answers are compared as given (pass canonical strings, e.g. the output of
    :func:`extract_answer`).  Tie-break among the tied most frequent answers:

    * ``tie_key`` given (the engine passes the question's key, from the run seed and question
      id): a draw seeded by it over the tied answers *sorted*, so neither agent order (where
      ``--strong-agents`` puts the strongest model first) nor answer order favours anyone;
    * ``tie_key`` None: the answer whose FIRST occurrence comes earliest (agent order), Du et
      al.'s rule (``--tie-break first``).
    """
    return _break_tie(tied_answers(answers), tie_key)


def _break_tie(top: list[str], tie_key: int | None) -> str | None:
    """One of the tied answers ``top`` (first-seen order): the first without a key, else the
    seeded draw over them sorted (:func:`majority_vote`'s rule)."""
    if not top:
        return None
    if len(top) == 1 or tie_key is None:
        return top[0]

    ordered = sorted(top)
    h = hashlib.sha1(f"tie:{tie_key}:{len(ordered)}".encode()).digest()
    return ordered[int.from_bytes(h[:8], "big") % len(ordered)]


WEIGHT_RTOL = 1e-9  # totals this close are equal (0.1 + 0.1 + 0.1 ties 0.3)


def weighted_counts(answers: Sequence[str | None], weights: Sequence[float]) -> dict[str, float]:
    """Total weight of each non-None answer (``weights[i]`` is answer i's), keys in order of
    first occurrence; empty / whitespace-only answers count as None, as in :func:`vote_counts`."""
    if len(answers) != len(weights):
        raise ValueError(f"{len(answers)} answers but {len(weights)} weights")
    totals: dict[str, float] = {}
    for a, w in zip(answers, weights):
        if a is None or (isinstance(a, str) and not a.strip()):
            continue
        totals[a] = totals.get(a, 0.0) + float(w)
    return totals


def weighted_tied_answers(answers: Sequence[str | None], weights: Sequence[float]) -> list[str]:
    """The non-None answers of the largest total weight (equal within :data:`WEIGHT_RTOL`), in
    first-seen order."""
    totals = weighted_counts(answers, weights)
    if not totals:
        return []
    top = max(totals.values())
    return [a for a, w in totals.items() if math.isclose(w, top, rel_tol=WEIGHT_RTOL, abs_tol=1e-12)]


def weighted_vote(answers: Sequence[str | None], weights: Sequence[float], tie_key: int | None = None) -> str | None:
    """The non-None answer of the largest total weight (RECONCILE's confidence-weighted vote);
    None if there is none. Ties (totals equal within :data:`WEIGHT_RTOL`) are broken as
    :func:`majority_vote` breaks them: a draw seeded by ``tie_key`` over the tied answers sorted,
    or without a key the tied answer seen first (agent order). Equal weights give the majority vote."""
    return _break_tie(weighted_tied_answers(answers, weights), tie_key)
