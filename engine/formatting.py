"""Number formatting shared by the report and the protocols' report labels."""

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
