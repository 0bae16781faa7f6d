"""Small look-up tables read over long code columns (categorical codes of the model's tables)."""

from __future__ import annotations

import numpy as np

FEW_CODES = 32  # a boolean look-up table this small is read by one compare per marked code (lookup)


def lookup(lut: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """``lut[codes]`` for categorical codes in [-1, lut.size - 2] (code -1 reads the last slot). A small
    boolean table over a long column (a mask of a few categories: cat_mask) is read as the compares with
    the codes it marks, or-ed: numpy's gather casts int8/int16 indices a buffer at a time, 54-118 ms
    against 6-25 ms on 10M int8 codes (min of 7, load ~10). A table of values stays a gather: setting
    them code by code (np.full, then copyto where equal) took 4-6x the gather."""
    codes = np.asarray(codes)
    small = lut.size <= FEW_CODES + 1 and codes.size >= 1 << 16 and codes.dtype.kind in "iu" and codes.ndim == 1
    marked = np.flatnonzero(lut[:-1]).tolist() if small and lut.dtype == bool and not lut[-1] else None
    if not marked:  # a table of values, a large one, a short column, or a mask marking nothing or code -1
        return lut[codes]
    out = codes == marked[0]
    for code in marked[1:]:
        out |= codes == code
    return out
