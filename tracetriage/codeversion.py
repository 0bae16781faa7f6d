"""A digest of the code that produces a kept result (a cached model, metrics, a chart, a batch
case): the key changes with any change to that code (an upgrade, a fix), so no one has to
remember to bump a version and nothing made by other code is ever served. Depends on no layer:
the cache, batch and the charts all key by it."""

from __future__ import annotations

import hashlib
from pathlib import Path

_DIGESTS: dict[str, str] = {}
# code, finding texts, templates, schema, and the compiled parts (their source where it ships, the
# built library itself: a rebuilt reader or sweep is other code)
_CODE_SUFFIXES = (".py", ".toml", ".j2", ".json", ".c", ".so")


def code_version(*packages: str) -> str:
    """12 hex digits over every code file of the packages, their subpackages included (a rule
    module in analyzers/rules/ is analyzer code)."""
    key = ",".join(packages)
    if key not in _DIGESTS:
        import importlib

        digest = hashlib.sha256()
        for name in packages:
            folder = Path(next(iter(importlib.import_module(name).__path__)))  # namespace packages too
            files = (f for f in folder.rglob("*") if f.suffix in _CODE_SUFFIXES and "__pycache__" not in f.parts)
            for path in sorted(files):
                digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
        _DIGESTS[key] = digest.hexdigest()[:12]
    return _DIGESTS[key]
