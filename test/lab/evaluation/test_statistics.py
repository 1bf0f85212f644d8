"""The evaluation's statistics against published values (Newcombe 1998's worked examples)."""

from __future__ import annotations

import math

import pytest

from sequence_ai_lab.evaluation.statistics import (
    PairedTable,
    compare_paired,
    compare_unpaired,
    fisher_exact,
    mcnemar_exact,
    newcombe_paired,
    newcombe_unpaired,
    percentile,
    wilson,
)


@pytest.mark.parametrize(
    ("successes", "trials", "low", "high"),
    [
        # Newcombe (1998), single proportion, method 3 (score, no continuity correction).
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_interval_matches_newcombes_table(
    successes: int, trials: int, low: float, high: float
) -> None:
    interval = wilson(successes, trials)
    assert interval.estimate == pytest.approx(successes / trials)
    assert (round(interval.low, 4), round(interval.high, 4)) == (low, high)


def test_wilson_ends_at_the_estimate_for_all_or_nothing_and_is_open_without_trials() -> None:
    assert wilson(20, 20).high == 1.0 and wilson(20, 20).low < 1.0
    assert wilson(0, 20).low == 0.0
    empty = wilson(0, 0)
    assert math.isnan(empty.estimate) and (empty.low, empty.high) == (0.0, 1.0)


def test_bad_counts_are_refused_naming_them() -> None:
    with pytest.raises(ValueError, match="successes 4 of trials 3"):
        wilson(4, 3)


@pytest.mark.parametrize(
    ("a", "n_a", "b", "n_b", "low", "high"),
    [
        # Newcombe (1998), independent proportions, method 10 (hybrid score).
        (56, 70, 48, 80, 0.0524, 0.3339),
        (9, 10, 3, 10, 0.1705, 0.8090),
        (5, 56, 0, 29, -0.0381, 0.1926),
        (0, 10, 0, 20, -0.1611, 0.2775),
        (0, 10, 0, 10, -0.2775, 0.2775),
        (10, 10, 0, 20, 0.6791, 1.0),
        (10, 10, 0, 10, 0.6075, 1.0),
    ],
)
def test_unpaired_difference_matches_newcombes_method_10(
    a: int, n_a: int, b: int, n_b: int, low: float, high: float
) -> None:
    interval = newcombe_unpaired(a, n_a, b, n_b)
    assert interval.estimate == pytest.approx(a / n_a - b / n_b)
    assert (round(interval.low, 4), round(interval.high, 4)) == (low, high)


def test_paired_interval_without_correlation_is_the_unpaired_one_on_the_margins() -> None:
    # ad = bc: phi is 0 and the paired interval combines the margins' Wilson limits alone.
    uncorrelated = PairedTable(both=4, only_a=2, only_b=2, neither=1)
    paired = newcombe_paired(uncorrelated)
    unpaired = newcombe_unpaired(6, 9, 6, 9)
    assert (paired.low, paired.high) == pytest.approx((unpaired.low, unpaired.high))


def test_positively_correlated_pairs_give_a_narrower_interval_than_independent_trials() -> None:
    # Same margins (12/20 against 8/20), seeds that mostly agree: pairing removes their noise.
    paired = newcombe_paired(PairedTable(both=8, only_a=4, only_b=0, neither=8))
    unpaired = newcombe_unpaired(12, 20, 8, 20)
    assert paired.estimate == pytest.approx(unpaired.estimate) == pytest.approx(0.2)
    assert paired.high - paired.low < unpaired.high - unpaired.low
    assert paired.low > 0 > unpaired.low


def test_exact_mcnemar_is_the_binomial_test_of_the_discordant_pairs() -> None:
    # 1 against 7 discordant pairs: 2 * (1 + 8) / 2**8.
    assert mcnemar_exact(1, 7) == pytest.approx(18 / 256)
    assert mcnemar_exact(7, 1) == mcnemar_exact(1, 7)
    assert mcnemar_exact(3, 3) == 1.0 and mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(0, 10) == pytest.approx(2 / 1024)


def test_fisher_exact_two_sided_matches_known_tables() -> None:
    # Fisher's tea tasting: 3 of 4 against 1 of 4, two-sided p = 34/70.
    assert fisher_exact(3, 4, 1, 4) == pytest.approx(34 / 70)
    # 8 of 9 against 1 of 6: p = 1/91 (the tables at least as extreme).
    assert fisher_exact(8, 9, 1, 6) == pytest.approx(1 / 91)
    assert fisher_exact(5, 10, 5, 10) == pytest.approx(1.0)


def test_comparisons_name_their_test_and_count_the_trials() -> None:
    paired = compare_paired([(True, False)] * 5 + [(True, True)] * 5)
    assert (paired.test, paired.paired, paired.n_a) == ("exact McNemar", True, 10)
    assert paired.p_value == pytest.approx(2 / 32)
    unpaired = compare_unpaired(3, 4, 1, 4)
    assert (unpaired.test, unpaired.paired) == ("Fisher exact", False)


def test_percentile_is_nearest_rank_and_skips_missing_values() -> None:
    samples = [0.1 * k for k in range(1, 11)] + [math.nan]
    assert percentile(samples, 0.5) == pytest.approx(0.5)
    assert percentile(samples, 0.95) == pytest.approx(1.0)
    assert math.isnan(percentile([], 0.5))
