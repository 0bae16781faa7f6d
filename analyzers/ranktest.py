"""Two rank and count tests compare needs, without importing scipy.stats (~1 s, most of a
comparison of two saved analyses): the two-sided Mann-Whitney U test (:func:`mannwhitney_p`) and
the two-sided Fisher exact test of a 2x2 table of counts (:func:`fisher_p`).

The two-sided Mann-Whitney U test of two samples, as ``scipy.stats.mannwhitneyu(x, y,
alternative="two-sided")`` computes it with its defaults (``method="auto"``, continuity
correction), without scipy.

Definitions (scipy's, so the p-values are the same to the last digit the contract keeps):
U1 = R1 - n1 (n1 + 1) / 2 with R1 the sum of the first sample's average ranks in the pooled
sample, U = max(U1, n1 n2 - U1). With both samples over 8 values, or any tie: the normal
approximation with the tie correction, z = (U - n1 n2 / 2 - 0.5) / sqrt(n1 n2 / 12 ((n + 1) -
sum(t^3 - t) / (n (n - 1)))) over the tie groups' sizes t, and p = 2 P(Z >= z). Otherwise the
exact null distribution of U (every split of the ranks counted), p = 2 P(U' <= n1 n2 - U).
p is clipped to [0, 1]; a NaN in either sample gives NaN. tests/test_ranktest.py checks it
against scipy on samples of every kind.

Fisher, as ``scipy.stats.fisher_exact(table).pvalue`` (two-sided): with the table's margins fixed, the
count in its first cell is hypergeometric; p is the sum of the probabilities of every table no more
likely than the one observed (within a relative 1e-7: log-gamma sums are exact to about 1e-13, scipy's own
tolerance is 1e-14), clipped to 1.
"""

from __future__ import annotations

import math

import numpy as np

EXACT_MAX = 8  # both samples at most this long and no ties: the exact distribution (scipy's choice)


def mannwhitney_p(before, after) -> float:
    """The two-sided p-value of the Mann-Whitney U test of ``before`` against ``after``."""
    first = np.asarray(before, np.float64).ravel()
    second = np.asarray(after, np.float64).ravel()
    n1, n2 = first.size, second.size
    pooled = np.concatenate([first, second])
    if np.isnan(pooled).any():
        return math.nan
    order = np.argsort(pooled, kind="stable")
    ordered = pooled[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    ties = np.diff(np.r_[starts, pooled.size]).astype(np.float64)
    ranks = np.empty(pooled.size, np.float64)
    ranks[order] = np.repeat(starts + (ties + 1.0) / 2.0, ties.astype(np.int64))
    u1 = np.sum(ranks[:n1]) - n1 * (n1 + 1) / 2
    u_stat = max(u1, n1 * n2 - u1)
    if (n1 <= EXACT_MAX or n2 <= EXACT_MAX) and not (ties > 1).any():
        p_value = 2.0 * _exact_cdf(min(n1, n2), max(n1, n2), int(n1 * n2 - u_stat))
    else:
        n = n1 + n2
        tie_term = np.sum(ties ** 3 - ties)
        spread = np.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))))
        with np.errstate(divide="ignore", invalid="ignore"):
            z = (u_stat - n1 * n2 / 2 - 0.5) / spread
        p_value = 2.0 * _normal_cdf(-float(z))
    return float(min(max(p_value, 0.0), 1.0))


def fisher_p(first_hits: int, first_total: int, second_hits: int, second_total: int) -> float:
    """The two-sided p-value of Fisher's exact test of ``first_hits`` of ``first_total`` against
    ``second_hits`` of ``second_total`` (the table [[first_hits, first misses], [second_hits, second
    misses]]): e.g. the long steps of each side over its steps."""
    hits = first_hits + second_hits
    total = first_total + second_total
    low, high = max(0, hits - second_total), min(hits, first_total)
    if low == high:
        return 1.0

    def log_pmf(count: int) -> float:  # P(first_hits = count) with the margins fixed, in logs
        return (_log_comb(first_total, count) + _log_comb(second_total, hits - count) - _log_comb(total, hits))

    logs = np.array([log_pmf(count) for count in range(low, high + 1)])
    observed = logs[first_hits - low]
    mass = np.exp(logs - logs.max())
    as_likely = mass <= np.exp(observed - logs.max()) * (1 + 1e-7)
    return float(min(np.sum(mass[as_likely]) / np.sum(mass), 1.0))


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def _normal_cdf(x: float) -> float:
    """P(Z <= x) of the standard normal, as the Cephes ``ndtr`` scipy uses evaluates it."""
    if math.isnan(x):
        return math.nan
    half = x * math.sqrt(0.5)
    if abs(half) < math.sqrt(0.5):
        return 0.5 + 0.5 * math.erf(half)
    tail = 0.5 * math.erfc(abs(half))
    return 1.0 - tail if half > 0 else tail


def _exact_cdf(small: int, large: int, u_value: int) -> float:
    """P(U <= u_value) under the null hypothesis for samples of ``small`` and ``large`` values:
    the share of the C(small + large, small) rank splits with U at most u_value, summed one U
    value at a time (each count / the total, as scipy sums them)."""
    total = float(math.comb(small + large, small))
    cdf = 0.0
    for count in _u_counts(small, large, u_value):
        cdf += count / total
    return cdf


def _u_counts(small: int, large: int, u_max: int) -> list[int]:
    """How many rank splits give each U = 0 .. u_max: the coefficients of the Gaussian binomial
    prod_{i=1..small} (1 - q^(large+i)) / (1 - q^i), in exact integers, kept to degree u_max."""
    counts = np.zeros(u_max + 1, dtype=object)
    counts[0] = 1
    for i in range(1, small + 1):
        shift = large + i
        if shift <= u_max:
            counts[shift:] = counts[shift:] - counts[:-shift]
        padded = np.zeros(-(-(u_max + 1) // i) * i, dtype=object)  # divide by (1 - q^i): a sum over each residue mod i
        padded[:u_max + 1] = counts
        counts = np.cumsum(padded.reshape(-1, i), axis=0).ravel()[:u_max + 1]
    return [int(count) for count in counts]
