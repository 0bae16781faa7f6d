"""The package's TOML files (findings.toml, capture_hints.toml, devices.toml), parsed once per install
and kept: parsing them cost every command ~20 ms (tomllib's import ~10 ms, findings.toml's 72 KB
~10 ms), more than reading them back.

A parsed file is kept as Python keeps a module's bytecode, by ``marshal``: in
``__pycache__/NAME.<implementation>.marshal`` beside it, with the text it was parsed from (a kept
parse of another text, an edited file, is parsed again); written only where bytecode may be
(``PYTHONDONTWRITEBYTECODE`` unset), never an error in a read-only install. A kept file that cannot
be read back is parsed again; a TOML value marshal does not write (a date) is never kept.
"""

from __future__ import annotations

import marshal
import os
import sys
from pathlib import Path


def read_toml(path: Path) -> dict:
    """``tomllib.loads`` of the file at ``path`` (UTF-8, read as text), from its kept parse when there is one."""
    text = path.read_text(encoding="utf-8")
    kept = path.parent / "__pycache__" / f"{path.name}.{sys.implementation.cache_tag}.marshal"
    try:
        source, data = marshal.loads(kept.read_bytes())
        if source == text and isinstance(data, dict):
            return data
    except Exception:  # noqa: BLE001 - absent, truncated or foreign: parsed again
        pass
    import tomllib

    data = tomllib.loads(text)
    if not sys.dont_write_bytecode:
        try:
            blob = marshal.dumps((text, data))
            kept.parent.mkdir(exist_ok=True)
            partial = kept.with_name(f"{kept.name}.{os.getpid()}.tmp")
            partial.write_bytes(blob)
            os.replace(partial, kept)  # whole or not at all: a reader never sees half a file
        except (OSError, ValueError):  # a read-only install, or a value marshal does not write: parsed again next time
            pass
    return data
