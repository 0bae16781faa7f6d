"""Which async copy calls of a process staged through pageable host memory (the timeline's hidden-sync cause)."""

from __future__ import annotations

import numpy as np

from tracetriage.model import Trace, cat_mask, is_kind


def pageable_async_calls(trace: Trace, pid: int, mine: np.ndarray | None) -> np.ndarray:
    """Mask over the process's API rows (``mine`` picks them from the table; None: all rows are
    its) of the async copy calls whose GPU copy has a pageable host side: the copy carries the
    call's correlation and the model's ``pageable`` flag (nsys srcKind/dstKind 0, Kineto
    'Memcpy DtoH (Device -> Pageable)'). Copy calls are few: the join runs on them only."""
    api, gpu = trace.api, trace.gpu
    is_async = cat_mask(api, "category", "memcpy_async")
    if mine is not None:
        is_async = is_async[mine]
    out = np.zeros(is_async.size, bool)
    pageable = gpu["pageable"].to_numpy() & is_kind(gpu, "memcpy") & (gpu["pid"].to_numpy() == pid)
    if not (pageable.any() and is_async.any()):
        return out
    correlations = api["correlation"].to_numpy() if mine is None else api["correlation"].to_numpy()[mine]
    rows = np.flatnonzero(is_async)
    out[rows[np.isin(correlations[rows], gpu["correlation"].to_numpy()[pageable])]] = True
    return out
