"""Symbolic equivalence of MATH answers, by Hugging Face's ``math-verify`` (PyPI ``math-verify``).

:func:`math_equivalent` decides whether a predicted answer equals a gold answer the way
math-verify does: both are parsed from LaTeX into SymPy (sets, intervals, matrices, equations,
percentages, mixed numbers, base subscripts) and compared symbolically and numerically, with the
gold on the left (the library's comparison is not symmetric: ``x \\in (a, b)`` and ``y = 2x + 3``
are read as the gold's interval or right-hand side).

Runs inside Ray actors and threads. math-verify's own timeouts use ``signal.alarm``, which
only works in a process's main thread (a Ray actor's async methods and the coordinator's event
loop run elsewhere), so they are switched off here and every comparison runs in a short-lived
daemon thread that is given :data:`TIMEOUT_S` seconds; one that takes longer counts as *not
equivalent* and is logged (SymPy cannot be interrupted: the thread finishes, or dies with the
process, on its own). Inputs longer than :data:`MAX_CHARS` are not parsed at all.

The engine's own string normalisation (:mod:`engine.extract`) stays in front of the library:
canonical strings that are equal are equivalent without a parse (most gold/answer pairs), and it
covers what math-verify does not read (answers inside ``\\boxed{}`` are unwrapped before, units
in ``\\text{}`` are dropped before). Documented gaps of the library that the engine closes:

* a word answer's case: math-verify reads ``monday`` as a product of symbols; the canonical form
  lower-cases word answers, so ``\\text{Monday}`` and ``monday`` are the same string;
* a choice written ``\\text{(C)}`` is canonicalised to ``C`` before the library sees it.
"""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)

TIMEOUT_S = 5.0  # seconds one comparison (both parses and the verification) may take
MAX_CHARS = 400  # longer answers are compared as strings only


class _QuietTimeoutWarning(logging.Filter):
    """math-verify warns once per process that its timeout is off; here that is by design."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Timeout is disabled" not in record.getMessage()


_FILTER = _QuietTimeoutWarning()
for _name in ("math_verify.parser", "math_verify.grader"):
    logging.getLogger(_name).addFilter(_FILTER)


def _as_latex(s: str) -> str:
    s = s.strip()
    return s if s.startswith("$") or s.startswith("\\(") or s.startswith("\\[") else f"${s}$"


def _verify(gold: str, pred: str) -> bool:
    # function-level: importing math_verify here keeps it off start-up
    from math_verify import LatexExtractionConfig, parse, verify

    # LaTeX extraction only (an ANTLR grammar into SymPy): math-verify's plain-expression reader
    # hands text to SymPy's parse_expr, which evaluates Python; model text is never evaluated.
    only_latex = [LatexExtractionConfig()]
    g = parse(_as_latex(gold), extraction_config=only_latex, parsing_timeout=None)
    p = parse(_as_latex(pred), extraction_config=only_latex, parsing_timeout=None)
    if not g or not p:
        return False
    return bool(verify(g, p, timeout_seconds=None))


def math_equivalent(pred: str | None, gold: str | None, timeout_s: float = TIMEOUT_S) -> bool:
    """Whether ``pred`` is mathematically equal to ``gold`` (both LaTeX or plain answers), by
    math-verify. ``None`` or an empty answer is never equivalent; a comparison that fails to
    parse, raises or runs past ``timeout_s`` is not equivalent (the last two logged as warnings)."""
    if not pred or not gold or not str(pred).strip() or not str(gold).strip():
        return False
    pred, gold = str(pred), str(gold)
    if len(pred) > MAX_CHARS or len(gold) > MAX_CHARS:
        return False
    result: list[bool] = []

    def work() -> None:
        try:
            result.append(_verify(gold, pred))
        except Exception as exc:  # math-verify returns False on its own errors: anything that gets here is logged
            log.warning(
                "math-verify raised on %r vs gold %r (counted not equal): %s: %s", pred, gold, type(exc).__name__, exc
            )
            result.append(False)

    worker = threading.Thread(target=work, name="math-verify", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if not result:
        log.warning("math-verify took over %.0f s comparing %r with gold %r: counted not equal", timeout_s, pred, gold)
        return False
    return result[0]


__all__ = ["MAX_CHARS", "TIMEOUT_S", "math_equivalent"]
