"""The compiled parts: the SQLite b-tree reader (parsers/_btree.c), the idle-time
sweep of the device timeline (analyzers/_sweep.c) and the byte join of the Perfetto
export's packets (reports/_protowire.c).

All three are optional: where no C compiler is at hand the install goes on without them, the
big tables are read through SQLite (ADBC), gaps are attributed and packets joined with numpy
and Python, the same numbers a few times slower on multi-GB exports. Everything else is in pyproject.toml.
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("tracetriage.parsers._btree", ["parsers/_btree.c"], optional=True, extra_compile_args=["-O2"]),
    Extension("tracetriage.analyzers._sweep", ["analyzers/_sweep.c"], optional=True, extra_compile_args=["-O2"]),
    Extension("tracetriage.reports._protowire", ["reports/_protowire.c"], optional=True, extra_compile_args=["-O2"]),
])
