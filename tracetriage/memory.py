"""Process-wide allocator tuning for the command line and batch workers.

glibc raises its mmap threshold each time a large block is freed, after which blocks
of that size come from per-thread arenas and stay mapped after ``free``: on a
10M-kernel trace the 1M-row column chunks built by the reader threads then pinned
~170 MB after being concatenated. A fixed threshold keeps every block of 1 MiB and
more in its own mapping, returned to the system when freed. Only the CLI and batch
workers call this; importing tracetriage as a library changes nothing.
"""

from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3


def tune_allocator(threshold: int = 1 << 20) -> bool:
    """Fix glibc's mmap and trim thresholds; a no-op (False) on other C libraries."""
    try:
        # glibc's soname: find_library would run ``ldconfig -p`` in a subprocess at every start
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, threshold)) and bool(mallopt(M_TRIM_THRESHOLD, threshold))


_LIBC = []


def release_freed() -> None:
    """Hand the heap's free pages back to the system (glibc ``malloc_trim``). The reader
    threads' small Arrow buffers are freed into per-thread arenas that glibc does not trim
    on its own: 150 MB of RSS after reading a 10M-kernel export, held through the analysis."""
    if not _LIBC:
        try:
            _LIBC.append(ctypes.CDLL("libc.so.6").malloc_trim)
        except (OSError, AttributeError):
            _LIBC.append(None)
    if _LIBC[0] is not None:
        _LIBC[0](0)
