"""analyzers/ranktest.py: the Mann-Whitney U p-value compare uses, against scipy.stats.mannwhitneyu
(the reference: compare does not import scipy, ~1 s of a comparison of saved analyses)."""

import numpy as np
import pytest

from tracetriage.analyzers.ranktest import mannwhitney_p

stats = pytest.importorskip("scipy.stats")


def _samples():
    rng = np.random.default_rng(20261202)
    for trial in range(400):
        n1 = int(rng.integers(1, 30)) if trial % 3 else int(rng.integers(5, 9))
        n2 = int(rng.integers(1, 30)) if trial % 2 else int(rng.integers(5, 1500))
        kind = trial % 4
        if kind == 0:  # continuous, no ties: the exact distribution when a side has at most 8
            yield rng.normal(100, 10, n1), rng.normal(100 + rng.normal(0, 5), 10, n2)
        elif kind == 1:  # heavy ties: the normal approximation with the tie correction
            yield rng.integers(0, 20, n1).astype(float), rng.integers(0, 22, n2).astype(float)
        elif kind == 2:
            yield np.round(rng.lognormal(10, 1, n1)), np.round(rng.lognormal(10.1, 1, n2))
        else:  # step durations in ns, shifted
            yield (rng.integers(1_000_000, 1_100_000, n1).astype(float),
                   rng.integers(1_000_000, 1_100_000, n2).astype(float) + rng.integers(-5000, 20000))
    yield np.arange(5.0), np.arange(5.0, 3000.0)  # exact, one side long: counts beyond 64 bits
    yield np.ones(6), np.ones(7)  # all tied: no spread, p = 1
    yield np.arange(6.0), np.arange(6.0)


def test_p_values_equal_scipy_to_the_digits_the_contract_keeps():
    compared = 0
    for before, after in _samples():
        reference = float(stats.mannwhitneyu(before, after, alternative="two-sided").pvalue)
        ours = mannwhitney_p(before, after)
        assert f"{ours:.3g}" == f"{reference:.3g}", (before.size, after.size, reference, ours)
        assert ours == pytest.approx(reference, rel=1e-9, abs=1e-300)
        assert (ours < 0.05) == (reference < 0.05)
        compared += 1
    assert compared > 400


def test_a_nan_gives_nan_as_scipy():
    assert np.isnan(mannwhitney_p([1.0, np.nan, 3.0, 4.0, 5.0], [2.0, 3.0, 4.0, 5.0, 6.0]))
