"""The one compiled part: the SQLite b-tree reader (parsers/_btree.c).

It is optional: where no C compiler is at hand the install goes on without it and the
big tables are read through SQLite (ADBC), a few times slower on multi-GB exports.
Everything else is declared in pyproject.toml.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("tracetriage.parsers._btree", ["parsers/_btree.c"], optional=True,
                             extra_compile_args=["-O2"])])
