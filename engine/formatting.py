"""Number and label formatting shared by the report, the CLI, the transcripts and the protocols."""

from __future__ import annotations

from fractions import Fraction
from typing import Any


def fmt_num(x: Any) -> str:
    """0.4 -> '0.4', 0.6666666667 -> '2/3', 1.0 -> '1'."""
    try:
        f = float(x)
    except (TypeError, ValueError):
        return str(x)
    if abs(f * 100 - round(f * 100)) < 1e-6:
        return f"{f:g}"
    frac = Fraction(f).limit_denominator(12)
    if abs(float(frac) - f) < 1e-6:
        return f"{frac.numerator}/{frac.denominator}"
    return f"{f:.3g}"


SIMULATED_MODEL = "SIMULATED (no model)"


def shown_model(name: str | None, simulated: bool, several: bool = False) -> str | None:
    """The model name to display for a call or agent of a run.

    A run on the simulated backend stores the configured model name (the run id hashes it), yet
    no model answered: it shows :data:`SIMULATED_MODEL` instead, or ``simulated:NAME`` when the
    run has several models (``NAME`` then only tells its groups of simulated agents apart)."""
    if not simulated or name is None:
        return name
    return f"simulated:{name}" if several else SIMULATED_MODEL
