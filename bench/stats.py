"""Summaries of repeated measurements and markdown tables for the report."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def percentile(samples: Sequence[float], fraction: float) -> float:
    """Linear-interpolated percentile (``fraction`` in [0, 1]); NaN without samples."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    if len(ordered) == 1:
        return float(ordered[0])
    position = fraction * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    weight = position - low
    return float(ordered[low] * (1.0 - weight) + ordered[high] * weight)


@dataclass(frozen=True)
class Summary:
    """Median, p99 and max of one set of samples."""

    n: int
    median: float
    p99: float
    max: float

    @classmethod
    def of(cls, samples: Iterable[float]) -> Summary:
        values = [float(v) for v in samples]
        if not values:
            return cls(0, math.nan, math.nan, math.nan)
        return cls(len(values), percentile(values, 0.5), percentile(values, 0.99), max(values))

    def scaled(self, factor: float) -> Summary:
        return Summary(self.n, self.median * factor, self.p99 * factor, self.max * factor)


def fmt(value: float | int | str | None, digits: int = 2) -> str:
    """A number for a table cell: fixed digits, 'n/a' for None/NaN, ints as they are."""
    if value is None:
        return "n/a"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return "n/a"
    return f"{value:.{digits}f}"


def times(value: float) -> str:
    """A ratio for a table cell: '1.51×', or 'n/a'."""
    text = fmt(value, 2)
    return text if text == "n/a" else f"{text}×"


def ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator, NaN when the denominator is zero or not finite."""
    if not math.isfinite(denominator) or denominator == 0 or not math.isfinite(numerator):
        return math.nan
    return numerator / denominator


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub markdown table; numeric-looking columns are right-aligned."""

    def numeric(text: str) -> bool:
        try:
            float(text.rstrip("%×x").replace(",", ""))
        except ValueError:
            return text == "n/a"
        return True

    align = []
    for col in range(len(header)):
        cells = [row[col] for row in rows if col < len(row)]
        align.append("---:" if cells and all(numeric(c) for c in cells) else "---")
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
