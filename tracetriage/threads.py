"""Running work on the machine's cores with threads: the big reads and the numpy passes
release the GIL, so two threads on two cores take about half the time."""

from __future__ import annotations

import os


def thread_map(fn, items, most: int) -> list:
    """``[fn(x) for x in items]`` on up to ``most`` threads (never more than cores or items);
    in order, the first exception raised. One worker runs inline, without a pool."""
    items = list(items)
    workers = max(1, min(os.cpu_count() or 1, most, len(items)))
    if workers == 1:
        return [fn(x) for x in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(fn, items))
