"""Exact conversions shared by literals in queries and values in tuple files."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is loaded when a FLOAT32 value is converted, not to parse a query
    from collections.abc import Sequence

    import numpy as np

__all__ = ["decimal_to_float32", "fix_float32_rounding"]


def decimal_to_float32(text: str) -> np.float32:
    """The float32 nearest to the decimal ``text`` (ties to even), without double rounding."""
    import numpy as np

    return fix_float32_rounding(np.array([text]), np.array([float(text)]))[0]


def fix_float32_rounding(texts: Sequence[str] | np.ndarray, doubles: np.ndarray) -> np.ndarray:
    """Round ``doubles`` (each the correctly rounded double of ``texts``) to float32 exactly.

    Rounding a decimal first to double and then to single is wrong only when the double lands
    exactly on a midpoint between two singles; those rare values are redone from the text.
    """
    import numpy as np

    with np.errstate(over="ignore", invalid="ignore"):
        singles = doubles.astype(np.float32)
        finite = np.isfinite(singles) & np.isfinite(doubles)
        up = np.nextafter(singles, np.float32(np.inf))
        down = np.nextafter(singles, np.float32(-np.inf))
        other = np.where(doubles.astype(np.float64) > singles.astype(np.float64), up, down)
        mid = (singles.astype(np.float64) + other.astype(np.float64)) / 2
        ties = finite & (doubles == mid) & (singles != other)
    for i in np.flatnonzero(ties):
        # via Decimal: Fraction(str) reads the digits with int(), which refuses more than
        # 4300 of them
        exact = Fraction(Decimal(str(texts[int(i)]).strip()))
        if exact == Fraction(float(doubles[i])):
            continue  # a true tie: ties-to-even as numpy already did
        above = exact > Fraction(float(doubles[i]))
        lo, hi = sorted((float(singles[i]), float(other[i])))
        singles[i] = np.float32(hi if above else lo)
    return singles
