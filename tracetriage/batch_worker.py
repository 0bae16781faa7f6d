"""The process one batch case runs in: ``python -m tracetriage.batch_worker REQUESTS REPLIES``.

It reads case requests (``analyze_case``'s keyword arguments) from the pipe whose file descriptor
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


def main(argv: list[str]) -> int:
    parent = os.getppid()
    _die_with_parent()
    if os.getppid() != parent:  # the parent ended before the death signal was armed
        return 0
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the batch's to handle: it stops this process
    requests, replies = Connection(int(argv[0]), writable=False), Connection(int(argv[1]), readable=False)
    import tracetriage.api  # noqa: F401 - imported before the first case, so its memory is the idle size
    import tracetriage.reports.html  # noqa: F401
    from tracetriage.batch_case import analyze_case
    from tracetriage.batch_store import is_uri, run_store_case

    replies.send(("ready", None))
    while True:
        try:
            request = requests.recv()
        except (EOFError, OSError):
            return 0
        on_store = is_uri(request["outdir"]) or any(is_uri(path) for path in request["spec"]["paths"])
        replies.send(("record", run_store_case(analyze_case, **request) if on_store else analyze_case(**request)))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
