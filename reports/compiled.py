"""Where an environment's compiled templates are kept (Jinja's bytecode cache): compiling a report's
template costs more than rendering it (cProfile of the 2xH100 export's HTML: 0.29 s of 0.36 s).

With the analysis cache, in its ``templates/`` (html.py); without one (``--no-cache``, a library caller
without a cache), once per install, as Python keeps a module's bytecode: in ``templates/__pycache__/NAME``
beside the templates' source, one folder per environment (Jinja keys a compiled template by its name and
source, not by the environment's options), when that folder can be written and bytecode may be
(``PYTHONDONTWRITEBYTECODE`` unset); else it is compiled again next time. Jinja checks a kept template
against its source before it uses it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from jinja2 import FileSystemBytecodeCache

TEMPLATES = Path(__file__).with_name("templates")


class BesideTheSource(FileSystemBytecodeCache):
    """Jinja's file cache that writes only where bytecode may be written, and never fails a report."""

    def dump_bytecode(self, bucket) -> None:
        if sys.dont_write_bytecode:
            return
        try:
            os.makedirs(self.directory, exist_ok=True)
            super().dump_bytecode(bucket)
        except OSError:  # a read-only install: compiled again next time
            pass


def compiled_templates(environment: str, templates_dir: str | None = None) -> FileSystemBytecodeCache:
    """The bytecode cache of the environment named ``environment`` (html, text, markdown): in the analysis
    cache's ``templates_dir`` when given, else beside the templates."""
    if templates_dir is not None:
        return FileSystemBytecodeCache(templates_dir)
    return BesideTheSource(str(TEMPLATES / "__pycache__" / environment))
