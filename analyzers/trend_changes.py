"""The changes of one series over time: its noise, its outliers and its level shifts (analyzers/trend.py
states the method: robust sigma from successive differences, outliers against the median of their
neighbours, PELT on the l2 cost with a BIC-scale penalty, a practical minimum for every kind of series)."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np

from tracetriage.analyzers.trend_records import Level, Outlier, Shift

MIN_SERIES = 4  # fewer cases than this: shown, not searched for changes

THRESHOLD_PCT = 5.0
OUTLIER_SIGMAS = 5.0
SHIFT_SPREAD_FACTOR = 2.0
PENALTY_SCALE = 3.0
SHARE_MIN_PTS = 5.0


def robust_sigma(x: np.ndarray) -> float:
    """Noise of a series from successive differences (robust to level shifts and outliers)."""
    d = np.diff(x[np.isfinite(x)])
    if d.size == 0:
        return 0.0
    return float(np.median(np.abs(d)) / 0.954)


def _spread(seg: np.ndarray) -> float:
    if seg.size < 2:
        return 0.0
    q75, q25 = np.percentile(seg, [75, 25])
    return float((q75 - q25) / 1.349)


def _row_nanmedian(rows: np.ndarray) -> np.ndarray:
    """``np.nanmedian(rows, axis=1)`` of a few columns, the same floats: each row's finite values sorted
    (NaN sorts last), the middle one or the two middle ones summed from 0 and halved, as numpy's masked median
    does for rows this short (``_nanmedian_small``); NaN for a row with none. numpy builds masked arrays
    for it: ~1 ms a series of 333 points, 54 series a trend of bench_trend's archive."""
    ordered = np.sort(rows, axis=1)
    counts = np.isfinite(rows).sum(axis=1)
    high = counts // 2
    low = np.where(counts % 2 == 1, high, high - 1)
    picked = np.arange(rows.shape[0])
    # summed from +0.0 as numpy's reduction of the pair is (a median of -0.0 and -0.0 is +0.0 there)
    out = (0.0 + ordered[picked, np.maximum(low, 0)] + ordered[picked, high.clip(0, rows.shape[1] - 1)]) / 2.0
    out[counts == 0] = np.nan
    return out


def practical_min(unit: str, level: float, step_p50_ms: float | None, threshold_pct: float) -> float:
    if unit == "%":
        return SHARE_MIN_PTS
    if unit == "ms/step" and step_p50_ms:
        return threshold_pct / 100.0 * step_p50_ms
    if unit.startswith("calls"):
        return max(0.5, threshold_pct / 100.0 * abs(level))
    return threshold_pct / 100.0 * abs(level) if level else 1e-9


def pelt_l2(series: np.ndarray, pen: float) -> list[int]:
    """The segment ends (the last is len(series)) of PELT on the l2 cost, penalty ``pen``, segments of 2
    points or more: ``ruptures.KernelCPD(kernel="linear", min_size=2).fit(series).predict(pen=pen)``,
    by the same compiled search without importing the ruptures package, which loads scipy.stats and
    scipy.spatial for costs trend never uses (1-3 s, most of a trend's time); else through ruptures."""
    signal = np.ascontiguousarray(series, dtype=np.double).reshape(-1, 1)
    pelt = _compiled_pelt_l2()
    if pelt is None:
        import ruptures

        return [int(end) for end in ruptures.KernelCPD(kernel="linear", min_size=2, jump=1).fit(signal).predict(pen=pen)]
    if signal.shape[0] < 4 or not pen > 0:  # ruptures: BadSegmentationParameters (no two segments of 2), or AssertionError
        raise ValueError(f"{signal.shape[0]} points, penalty {pen}: no search")
    path = pelt(signal, pen, 2)
    ends, end = [], signal.shape[0]
    while end > 0:
        ends.append(int(end))
        end = path[end]
    return ends[::-1]


@functools.cache
def _compiled_pelt_l2():
    """ruptures' ``ekcpd_pelt_L2`` (detection/_detection/ekcpd), loaded from its file alone; None if absent."""
    import importlib.machinery
    import importlib.util

    package = importlib.util.find_spec("ruptures")
    for root in (package.submodule_search_locations or []) if package else []:
        folder = Path(root) / "detection" / "_detection"
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = folder / f"ekcpd{suffix}"
            if path.is_file():
                name = "ruptures.detection._detection.ekcpd"
                spec = importlib.util.spec_from_loader(name, importlib.machinery.ExtensionFileLoader(name, str(path)))
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                return module.ekcpd_pelt_L2
    return None


def find_changes(x: np.ndarray, unit: str, step_p50_ms: float | None, threshold_pct: float) -> tuple[list[Outlier], list[Shift]]:
    """(outliers, level shifts) of one series, by index. Points that are NaN (not measured)
    are left out of the search and never named as last good or first bad."""
    idx = np.flatnonzero(np.isfinite(x))
    v = x[idx].astype(np.float64)
    if v.size < MIN_SERIES:
        return [], []
    sigma = robust_sigma(v)
    level = float(np.median(v))
    # Noise under a tenth of the practical minimum decides nothing; as a floor it keeps the
    # penalty meaningful where most successive differences are exactly 0 (counts, a finding
    # absent from most cases), which would otherwise split the series at every wiggle.
    scale = max(abs(level), float(np.mean(np.abs(v))))
    floor = max(sigma, 0.1 * practical_min(unit, scale, step_p50_ms, threshold_pct), 1e-9 * max(scale, 1e-9))
    outliers, clean = [], v.copy()
    # each point's neighbours, two on each side (NaN past the ends), as one matrix
    padded = np.r_[np.full(2, np.nan), v, np.full(2, np.nan)]
    nb = np.stack([padded[0:-4], padded[1:-3], padded[3:-1], padded[4:]], axis=1)
    with np.errstate(all="ignore"):
        med = _row_nanmedian(nb)
        width = np.nanmax(nb, axis=1) - np.nanmin(nb, axis=1)
    enough = np.isfinite(nb).sum(axis=1) >= 2
    enough[0] = False  # the first capture has no history: a one-off there cannot be told from where the series starts
    candidates = np.flatnonzero(enough & (np.abs(v - med) > OUTLIER_SIGMAS * floor))
    for i in candidates:  # few: the practical minimum depends on the local level
        limit = max(OUTLIER_SIGMAS * floor, practical_min(unit, float(med[i]), step_p50_ms, threshold_pct))
        if width[i] <= limit and abs(v[i] - med[i]) > limit:
            outliers.append(Outlier(int(idx[i]), float(v[i]), float(med[i])))
            clean[i] = med[i]
    pen = PENALTY_SCALE * floor ** 2 * math.log(max(v.size, 2))
    try:  # KernelCPD with a linear kernel is PELT on the l2 cost, in ruptures' compiled code
        bkps = pelt_l2(clean, pen)
    except Exception:  # noqa: BLE001 - a degenerate series: no change rather than a crash
        bkps = [v.size]
    shifts = []
    bounds = [0, *bkps]
    for k in range(1, len(bounds) - 1):
        a = clean[bounds[k - 1]:bounds[k]]
        b = clean[bounds[k]:bounds[k + 1]]
        before, after = float(np.median(a)), float(np.median(b))
        spread_a, spread_b = _spread(a), _spread(b)
        spread = max(spread_a, spread_b, sigma)
        minimum = practical_min(unit, before, step_p50_ms, threshold_pct)
        if abs(after - before) > SHIFT_SPREAD_FACTOR * spread and abs(after - before) >= minimum:
            shifts.append(Shift(int(idx[bounds[k]]), int(idx[bounds[k] - 1]), Level(before, spread_a, int(a.size)),
                                Level(after, spread_b, int(b.size))))
    return outliers, shifts

