"""The head of a file, as format detection reads it (``tracetriage/case.py``): no numpy, no pandas,
so opening a case that the analysis cache serves imports neither."""

from __future__ import annotations

HEAD_BYTES = 64 * 1024  # what detection reads of a file to tell its format


def read_head(path) -> bytes:
    """The first :data:`HEAD_BYTES` of a file (detection by content; an nsys report's header)."""
    with open(path, "rb") as fh:
        return fh.read(HEAD_BYTES)
