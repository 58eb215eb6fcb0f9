"""One way to write a cost for the owner, everywhere a page shows one (Usage, run history and detail, Context panel,
the chat's request view)."""

from __future__ import annotations

import math
from decimal import Decimal


def usd(value: float | Decimal | None) -> str:
    """Dollars with four decimals; below a hundredth of a cent, two significant digits (so a tiny cost is not shown
    as $0.0000); "unknown" when there is no price."""
    if value is None:
        return "unknown"
    value = float(value)
    if 0 < value < 0.0001:
        return f"${value:.{1 - math.floor(math.log10(value))}f}"
    return f"${value:.4f}"
