"""The process one batch case runs in: ``python -m tracetriage.batch_worker REQUESTS REPLIES``.

It reads case requests (:class:`~tracetriage.batch_records.CaseRequest`) from the pipe whose file descriptor
is REQUESTS and answers each with its record on REPLIES, until the requests' pipe closes. The
process that started it (:class:`tracetriage.batch_pool.CaseRunner`) watches it: its resident
memory against ``--case-memory``, its time against ``--case-timeout``, its death; so a case that
exhausts memory, crashes native code or hangs ends this process, never the batch.
"""

from __future__ import annotations

import os
import signal
import sys
from multiprocessing.connection import Connection


def _die_with_parent() -> None:
    """On Linux: this process gets SIGKILL when the one that started it ends (a Dask worker killed
    by its nanny, a batch killed with SIGKILL): no case goes on writing for a batch that is gone."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return


def _import_what_a_case_uses() -> None:
    """Import, before the first case, the modules any case loads (the analysis, its libraries, every
    parser, the report and its charts): imports are lazy for the CLI's fixed costs, and here their
    memory belongs to the worker's idle size, so ``--case-memory`` measures what a case itself grows."""
    import importlib
    import pkgutil

    import numpy  # noqa: F401
    import pandas  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    import tracetriage.analyzers.analysis  # noqa: F401
    import tracetriage.api  # noqa: F401
    import tracetriage.parsers
    import tracetriage.reports.charts  # noqa: F401
    import tracetriage.reports.html  # noqa: F401
    from tracetriage.reports.figures import lean_import, matplotlib_svg
    for module in pkgutil.iter_modules(tracetriage.parsers.__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"tracetriage.parsers.{module.name}")
    lean_import()  # this process is the batch's own
    matplotlib_svg()  # matplotlib imported and set up as the charts use it


def main(argv: list[str]) -> int:
    parent = os.getppid()
    _die_with_parent()
    if os.getppid() != parent:  # the parent ended before the death signal was armed
        return 0
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the batch's to handle: it stops this process
    requests, replies = Connection(int(argv[0]), writable=False), Connection(int(argv[1]), readable=False)
    _import_what_a_case_uses()
    from tracetriage.batch_case import analyze_case
    from tracetriage.batch_store import is_uri, run_store_case

    replies.send(("ready", None))
    while True:
        try:
            request = requests.recv()
        except (EOFError, OSError):
            return 0
        on_store = is_uri(request.outdir) or any(is_uri(path) for path in request.spec.paths)
        replies.send(("record", run_store_case(analyze_case, request) if on_store else analyze_case(request)))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
