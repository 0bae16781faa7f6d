"""Process-wide allocator tuning for the command line and batch workers.

glibc raises its mmap threshold each time a large block is freed, after which blocks
of that size come from per-thread arenas and stay mapped after ``free``: on a
10M-kernel trace the 1M-row column chunks built by the reader threads then pinned
~170 MB after being concatenated. A fixed threshold keeps every block of 4 MiB and
more (whole columns) in its own mapping, returned to the system when freed, while the
analyzers' slice temporaries (256K rows: 2 MiB of int64) come from the heap and are
reused. With a 1 MiB threshold every such temporary was a fresh mapping whose pages the
kernel zeroes on first touch: on the 10M-kernel benchmark 4.0 s of system time against
2.1 s, the first read 5.4 s against 4.1 s, the peak the same (1.16-1.17 GB). Only the CLI
and batch workers call this; importing tracetriage as a library changes nothing.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import os

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3


@functools.cache
def _libc():
    """glibc, by its soname (find_library would run ``ldconfig -p`` in a subprocess at every
    start); None on other C libraries."""
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


def tune_allocator(threshold: int = 4 << 20) -> bool:
    """Fix glibc's mmap and trim thresholds; a no-op (False) on other C libraries."""
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is None:
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, threshold)) and bool(mallopt(M_TRIM_THRESHOLD, threshold))


def release_freed() -> None:
    """Hand the heap's free pages back to the system (glibc ``malloc_trim``). The reader
    threads' small Arrow buffers are freed into per-thread arenas that glibc does not trim
    on its own: 150 MB of RSS after reading a 10M-kernel export, held through the analysis."""
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is not None:
        trim(0)


def one_blas_thread() -> None:
    """numpy's BLAS with one thread, unless the user chose: tracetriage multiplies no matrices, and
    OpenBLAS starts a thread per core as numpy is imported (on 2 cores, 0.45 -> 0.37 CPU-s of a
    ``compare`` of two saved analyses). Only OpenBLAS's own variable: Arrow sizes its reader threads
    by OMP_NUM_THREADS. The CLI calls it before anything imports numpy; its workers inherit it."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


_DEFERRED = [False]  # defer_collection ran and collect_again has not yet


def defer_collection() -> None:
    """No cyclic garbage collection while a short command (analyze, compare, trend) imports its
    libraries, until :func:`collect_again`. Their imports create ~150K objects that live to the
    end; each collection of the young generations walks them again, and the full ones walk all of
    them: 300 collections took ~95 ms of a 0.85 CPU-s analysis of the 2xH100 300 ms export, 225
    collections ~64 ms of trend over 1,000 rows. Only the CLI calls this (cli.run)."""
    gc.disable()
    _DEFERRED[0] = True


def collect_again() -> None:
    """Where a command starts reading its data (a trace, batch's tables, a batch of captures, two
    saved analyses): the objects its imports made are frozen, never walked by a collection again
    (``gc.freeze``; freed as usual when their last reference goes), and collection resumes with
    its usual thresholds, so a large input's parse and analysis run with the collector on. A
    no-op unless :func:`defer_collection` ran: a library caller's collector is never touched."""
    if _DEFERRED[0]:
        _DEFERRED[0] = False
        gc.freeze()
        gc.enable()


def available_bytes() -> int | None:
    """The memory this process can still take: the system's available memory (``MemAvailable``:
    free pages plus the page cache it can drop), less what its cgroup's limit leaves (a container,
    a batch scheduler's job); None where neither can be read (not Linux)."""
    free = None
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    free = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    left = _cgroup_left()
    if left is not None:
        free = left if free is None else min(free, left)
    return free


def _cgroup_left() -> int | None:
    """What the process's cgroup limit leaves above its usage (v2 ``memory.max``, v1
    ``memory.limit_in_bytes``); None without a limit or where it cannot be read."""
    try:
        with open("/proc/self/cgroup", encoding="ascii") as fh:
            lines = [line.strip().split(":", 2) for line in fh]
    except OSError:
        return None
    for hierarchy, controllers, path in (line for line in lines if len(line) == 3):
        if hierarchy == "0" and not controllers:
            files = ("/sys/fs/cgroup", "memory.max", "memory.current")
        elif "memory" in controllers.split(","):
            files = ("/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        left = _limit_left(os.path.join(files[0], path.lstrip("/")), *files[1:])
        if left is not None:
            return left
    return None


def _limit_left(folder: str, limit_file: str, usage_file: str) -> int | None:
    try:
        with open(os.path.join(folder, limit_file), encoding="ascii") as fh:
            limit = fh.read().strip()
        with open(os.path.join(folder, usage_file), encoding="ascii") as fh:
            used = int(fh.read().strip())
    except (OSError, ValueError):
        return None
    if limit == "max" or not limit.isdigit() or int(limit) >= 1 << 60:  # v1 writes ~2^63 for no limit
        return None
    return max(0, int(limit) - used)
