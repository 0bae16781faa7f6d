"""The head of a file, as format detection reads it (``tracetriage/case.py``), and whether files are
copies of one another (their bytes' digest): no numpy, no pandas, so opening a case that the analysis
cache serves, or comparing two saved analyses, imports neither."""

from __future__ import annotations

HEAD_BYTES = 64 * 1024  # what detection reads of a file to tell its format


def read_head(path) -> bytes:
    """The first :data:`HEAD_BYTES` of a file (detection by content; an nsys report's header)."""
    with open(path, "rb") as fh:
        return fh.read(HEAD_BYTES)


def same_content(paths: list[str]) -> tuple[str, str] | None:
    """The first two files that hold the same bytes (copies of one capture, whatever the format
    records), or None. Only files of the same size are read whole (a copy has its original's size;
    two ranks' exports seldom share a size to the byte); files that cannot be read are left to the case."""
    import hashlib
    import os

    sizes: dict[int, list[str]] = {}
    for path in paths:
        try:
            sizes.setdefault(os.path.getsize(path), []).append(path)
        except OSError:
            continue
    for group in (g for g in sizes.values() if len(g) > 1):
        seen: dict[str, str] = {}
        for path in group:
            try:
                with open(path, "rb") as fh:
                    digest = hashlib.file_digest(fh, "blake2b").hexdigest()
            except OSError:
                continue
            if digest in seen:
                return seen[digest], path
            seen[digest] = path
    return None
