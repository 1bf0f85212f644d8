"""Success rates and their comparisons: Wilson intervals, Newcombe differences, exact tests.

Pure Python. A success rate from a few dozen trials is uncertain by tens of percent; every
figure here comes with its 95 % interval or an exact p-value, never a bare ratio.
References: Wilson (1927); Newcombe (1998) "Two-sided confidence intervals for the single
proportion", "Interval estimation for the difference between independent proportions" (method
10), "Improved confidence intervals for the difference between binomial proportions based on
paired data" (method 10); McNemar's test as an exact binomial test on the discordant pairs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# The 0.975 quantile of the standard normal: two-sided 95 %.
Z_95 = 1.959963984540054
# Tables whose probability is within this relative margin of the observed one count as "as
# extreme" (the floating-point sums of equal probabilities differ in their last bits).
_TIE = 1e-7


@dataclass(frozen=True)
class Interval:
    """A point estimate and its two-sided interval."""

    estimate: float
    low: float
    high: float


@dataclass(frozen=True)
class Comparison:
    """Condition A against condition B: the difference of success rates (A − B), its interval,
    the exact test's two-sided p-value, and how the trials were matched."""

    difference: Interval
    p_value: float
    test: str
    paired: bool
    n_a: int
    n_b: int


def _check_counts(successes: int, trials: int) -> None:
    if trials < 0 or not 0 <= successes <= max(trials, 0):
        raise ValueError(
            f"successes {successes} of trials {trials}: expected 0 <= successes <= trials"
        )


def wilson(successes: int, trials: int, z: float = Z_95) -> Interval:
    """Wilson's score interval for a proportion (no continuity correction); (0, 1) without
    trials."""
    _check_counts(successes, trials)
    if trials == 0:
        return Interval(math.nan, 0.0, 1.0)
    p = successes / trials
    z2 = z * z
    denominator = 1.0 + z2 / trials
    centre = (p + z2 / (2 * trials)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials))
    # At 0 or n successes one limit is the estimate itself; rounding must not cross it.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)
    return Interval(p, low, high)


def newcombe_unpaired(
    successes_a: int, trials_a: int, successes_b: int, trials_b: int, z: float = Z_95
) -> Interval:
    """The difference p_A − p_B of two independent proportions with Newcombe's hybrid score
    interval (his method 10: the Wilson limits of each, combined)."""
    a, b = wilson(successes_a, trials_a, z), wilson(successes_b, trials_b, z)
    if trials_a == 0 or trials_b == 0:
        return Interval(math.nan, -1.0, 1.0)
    d = a.estimate - b.estimate
    low = d - math.hypot(a.estimate - a.low, b.high - b.estimate)
    high = d + math.hypot(a.high - a.estimate, b.estimate - b.low)
    return Interval(d, max(-1.0, low), min(1.0, high))


@dataclass(frozen=True)
class PairedTable:
    """Outcomes of two conditions on the same seeds: both succeeded, only A, only B, neither."""

    both: int
    only_a: int
    only_b: int
    neither: int

    @classmethod
    def of(cls, pairs: Sequence[tuple[bool, bool]]) -> PairedTable:
        """From (A succeeded, B succeeded) per shared seed."""
        return cls(
            sum(1 for x, y in pairs if x and y),
            sum(1 for x, y in pairs if x and not y),
            sum(1 for x, y in pairs if y and not x),
            sum(1 for x, y in pairs if not x and not y),
        )

    @property
    def n(self) -> int:
        return self.both + self.only_a + self.only_b + self.neither


def newcombe_paired(table: PairedTable, z: float = Z_95) -> Interval:
    """The difference p_A − p_B of paired proportions with Newcombe's score interval for paired
    data (his method 10: each margin's Wilson limits, combined through the phi correlation)."""
    n = table.n
    if n == 0:
        return Interval(math.nan, -1.0, 1.0)
    a, b, c, d = table.both, table.only_a, table.only_b, table.neither
    first, second = wilson(a + b, n, z), wilson(a + c, n, z)
    p1, p2 = first.estimate, second.estimate
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    phi = 0.0 if margins == 0 else (a * d - b * c) / math.sqrt(margins)
    down_1, up_1 = p1 - first.low, first.high - p1
    down_2, up_2 = p2 - second.low, second.high - p2
    below = down_1**2 - 2 * phi * down_1 * up_2 + up_2**2
    above = up_1**2 - 2 * phi * up_1 * down_2 + down_2**2
    difference = (b - c) / n
    low = difference - math.sqrt(max(below, 0.0))
    high = difference + math.sqrt(max(above, 0.0))
    return Interval(difference, max(-1.0, low), min(1.0, high))


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value: the discordant pairs as a binomial test at 1/2."""
    if only_a < 0 or only_b < 0:
        raise ValueError(f"discordant pairs {only_a}, {only_b}: expected counts >= 0")
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n
    return min(1.0, 2.0 * tail)


def fisher_exact(successes_a: int, trials_a: int, successes_b: int, trials_b: int) -> float:
    """Two-sided Fisher's exact p-value for two independent proportions: the probability of
    every table with the same margins at most as likely as the observed one."""
    _check_counts(successes_a, trials_a)
    _check_counts(successes_b, trials_b)
    total_successes = successes_a + successes_b
    n = trials_a + trials_b
    if n == 0:
        return 1.0
    denominator = math.comb(n, total_successes)

    def probability(x: int) -> float:
        return math.comb(trials_a, x) * math.comb(trials_b, total_successes - x) / denominator

    observed = probability(successes_a)
    lowest = max(0, total_successes - trials_b)
    highest = min(trials_a, total_successes)
    p = sum(
        q for x in range(lowest, highest + 1)
        if (q := probability(x)) <= observed * (1 + _TIE)
    )
    return min(1.0, p)


def compare_paired(pairs: Sequence[tuple[bool, bool]], z: float = Z_95) -> Comparison:
    """A against B on the same seeds: Newcombe's paired interval and the exact McNemar test."""
    table = PairedTable.of(pairs)
    return Comparison(
        newcombe_paired(table, z), mcnemar_exact(table.only_a, table.only_b),
        "exact McNemar", True, table.n, table.n,
    )


def compare_unpaired(
    successes_a: int, trials_a: int, successes_b: int, trials_b: int, z: float = Z_95
) -> Comparison:
    """A against B on different trials: Newcombe's hybrid score interval and Fisher's test."""
    return Comparison(
        newcombe_unpaired(successes_a, trials_a, successes_b, trials_b, z),
        fisher_exact(successes_a, trials_a, successes_b, trials_b),
        "Fisher exact", False, trials_a, trials_b,
    )


def percentile(samples: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (as the node's diagnostics compute it); NaN without samples."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction {fraction}: expected 0 < fraction <= 1")
    finite = sorted(s for s in samples if math.isfinite(s))
    if not finite:
        return math.nan
    return finite[max(1, math.ceil(fraction * len(finite))) - 1]
