"""Fixed costs (issue 36): a command imports only what it needs. ``--version`` and ``compare`` of
two saved analyses load neither scipy nor matplotlib (nor pandas, the analyzers' frames), and
``trend`` finds its change points without the ruptures package (which loads scipy): each
checked in a fresh interpreter, where nothing else has imported them first."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import script_module

from tracetriage.analyzers.trend import pelt_l2

HEAVY = ("scipy", "matplotlib", "pandas", "ruptures", "pyarrow", "dask", "jinja2", "networkx")

_LOADED = """
import json, sys
from tracetriage.cli import main
sys.argv = ["tracetriage", *sys.argv[1:]]
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
heavy = sorted(({name.split(".")[0] for name in sys.modules} | set(sys.modules)) & set(json.loads(%r)))
sys.stdout.flush()
print("\\nLOADED " + json.dumps(heavy), file=sys.stderr)
raise SystemExit(code)
"""


def _loaded(*args, names=HEAVY) -> tuple[int, list[str]]:
    """Which of ``names`` (top-level packages, or modules by their full name) a fresh interpreter had
    imported when ``tracetriage ARGS`` ended."""
    proc = subprocess.run([sys.executable, "-c", _LOADED % json.dumps(names), *map(str, args)], capture_output=True,
                          text=True)
    line = [row for row in proc.stderr.splitlines() if row.startswith("LOADED ")]
    assert line, proc.stderr
    return proc.returncode, json.loads(line[-1][len("LOADED "):])


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    """bench_trend's archive of 60 cases: its tables, and good.json / bad.json, the saved analyses of the
    graph_decode and eager_decode bundles as ``analyze -f json`` writes them (the goldens lack tool_version,
    so compare refuses them before comparing anything)."""
    folder = tmp_path_factory.mktemp("fixed") / "archive"
    script_module("benchmarks", "bench_trend").write_archive(folder, 60)
    return folder


def test_version_imports_nothing_heavy():
    code, heavy = _loaded("--version")
    assert code == 0
    assert heavy == []


def test_compare_of_saved_analyses_loads_no_scipy_matplotlib_or_pandas(archive):
    before, after = archive / "good.json", archive / "bad.json"
    code, heavy = _loaded("compare", before, after, "-f", "json", "--no-cache")
    assert code == 0
    assert not {"scipy", "matplotlib", "pandas", "ruptures"} & set(heavy), heavy


# modules of tracetriage whose dataclasses cost ~1 ms each to create at import: loaded where a command uses them
PAIR_ONLY = ("tracetriage.analyzers.compare_serving", "tracetriage.analyzers.serving_metrics",
             "tracetriage.analyzers.compare_devices", "tracetriage.records.trend")


def test_trend_json_and_compare_without_serving_load_no_serving_comparison(archive):
    """trend -f json of an archive without serving blocks, and compare of two saved analyses without
    them, import neither the serving comparison (compare_serving, serving_metrics: 27 dataclasses) nor
    compare across devices, nor the trend's records (a JSON trend is written from its dict); a serving
    pair does import the serving comparison (the guard is not vacuous)."""
    code, loaded = _loaded("trend", archive, "-f", "json", "--no-cache", names=PAIR_ONLY)
    assert code == 0
    assert loaded == [], loaded
    code, loaded = _loaded("compare", archive / "good.json", archive / "bad.json", "-f", "json", "--no-cache",
                           names=PAIR_ONLY)
    assert code == 0
    assert loaded == [], loaded
    bundles = Path(__file__).parents[1] / "samples" / "bundles"
    _, loaded = _loaded("compare", bundles / "serving_healthy", bundles / "serving_at_capacity", "-f", "json",
                        "--no-cache", names=PAIR_ONLY)
    assert "tracetriage.analyzers.compare_serving" in loaded, loaded


def test_analyze_of_a_trace_alone_loads_no_graph_library_nor_plots():
    """networkx reads topology matrices (~0.13 s of import): a trace without one never pays it,
    nor matplotlib for a JSON answer."""
    code, heavy = _loaded("analyze", Path(__file__).parents[1] / "samples" / "bundles" / "eager_decode" / "trace.sqlite",
                          "-f", "json", "--no-cache")
    assert code == 0
    assert not {"networkx", "matplotlib", "scipy"} & set(heavy), heavy


def test_pelt_equals_ruptures_kernelcpd():
    """The compiled PELT trend calls directly gives ruptures' own breakpoints on level-shifted,
    noisy, constant and short series."""
    ruptures = pytest.importorskip("ruptures")
    rng = np.random.default_rng(36)
    series = [np.ones(40), np.r_[np.zeros(20), np.ones(20)], rng.normal(0, 1, 5), rng.normal(0, 1, 4)]
    for _ in range(60):
        size = int(rng.integers(6, 400))
        levels = np.repeat(rng.normal(0, 3, 4), -(-size // 4))[:size]
        series.append(levels + rng.normal(0, rng.uniform(0.1, 2.0), size))
    for values in series:
        for pen in (0.5, 5.0, 50.0):
            expected = ruptures.KernelCPD(kernel="linear", min_size=2, jump=1).fit(values.reshape(-1, 1)).predict(pen=pen)
            assert pelt_l2(values, pen) == [int(end) for end in expected]


def test_pelt_refuses_what_ruptures_refuses():
    with pytest.raises(ValueError):
        pelt_l2(np.arange(3.0), 1.0)  # no two segments of 2 points
    with pytest.raises(ValueError):
        pelt_l2(np.arange(10.0), 0.0)


_CHARTS = """
import inspect, json, sys
from tracetriage.api import analyze
from tracetriage.reports import charts, figures
if sys.argv[2] == "lean":
    figures.lean_import()
a = analyze(sys.argv[1])
svgs = [svg for _, svg in charts.serving_charts(a)]  # matplotlib's (a trace's charts are written from their data)
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
print(json.dumps({"svgs": svgs, "pyplot": "matplotlib.pyplot" in sys.modules,
                  "signature": [list(inspect.signature(cls.set).parameters)[:3] for cls in (Line2D, Rectangle)]}))
"""


def test_lean_matplotlib_draws_the_same_charts_and_a_library_caller_keeps_its_docs():
    """The CLI and the batch and MCP workers import matplotlib without the generated signatures of each
    artist's ``set()`` (figures.lean_import, ~0.2 s): every chart is the same bytes; a library caller's
    matplotlib keeps them (``Line2D.set``'s keyword parameters, as ``help()`` shows); no chart loads pyplot."""
    bundle = Path(__file__).parents[1] / "samples" / "bundles" / "serving_at_capacity"
    drawn = {}
    for mode in ("full", "lean"):
        proc = subprocess.run([sys.executable, "-c", _CHARTS, str(bundle), mode], capture_output=True, text=True, check=True)
        drawn[mode] = json.loads(proc.stdout)
    assert drawn["full"]["svgs"] and drawn["lean"]["svgs"] == drawn["full"]["svgs"]
    assert not drawn["full"]["pyplot"] and not drawn["lean"]["pyplot"]
    assert all(len(names) == 3 and names[0] != "kwargs" for names in drawn["full"]["signature"]), drawn["full"]["signature"]
    assert drawn["lean"]["signature"] != drawn["full"]["signature"]  # the lean import did skip them


def test_bootstrap_row_percentile_is_numpys_bit_for_bit():
    """compare's bootstrap reads each resample's percentile from rows sorted once (compare_steps._row_percentile):
    the same float64 bits as ``np.percentile(..., axis=1)`` on any row length, integer-valued (durations in ns)
    or not, at the percentiles compare uses and others, the ends included."""
    from tracetriage.analyzers.compare_steps import _row_percentile

    rng = np.random.default_rng(36)
    for trial in range(400):
        size, rows = int(rng.integers(1, 300)), int(rng.integers(1, 40))
        values = (rng.integers(1, 10**7, (rows, size)).astype(np.float64) if trial % 2 else
                  rng.normal(1e6, 1e5, (rows, size)))
        if trial % 7 == 0:
            values[:, : size // 2] = values[0, 0]  # ties
        for q in (0, 2.5, 50, 97.5, 99, 100, float(rng.uniform(0, 100))):
            assert _row_percentile(values, q).tobytes() == np.percentile(values, q, axis=1).tobytes(), (size, rows, q)


_COLLECTOR = """
import gc, io, json, sys
from tracetriage import memory
from tracetriage.cli import main
memory.defer_collection()  # as cli.run does for analyze, compare and trend
sys.stdout = io.StringIO()
code = main(sys.argv[1:])
sys.stdout = sys.__stdout__
print(json.dumps({"code": code, "enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}))
"""


def _collector_after(*args) -> dict:
    proc = subprocess.run([sys.executable, "-c", _COLLECTOR, *map(str, args)], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.splitlines()[-1])


def test_short_commands_resume_collection_where_they_read_their_data(archive):
    """The CLI defers garbage collection while analyze, compare and trend import their libraries
    (tracetriage/memory.py): each turns it back on, the imports' objects frozen, before it reads a
    trace, batch's tables or two saved analyses, so a large input is never read with the collector off."""
    bundles = Path(__file__).parents[1] / "samples" / "bundles"
    for args in (("analyze", bundles / "eager_decode" / "trace.sqlite", "-f", "json", "--no-cache"),
                 ("compare", archive / "good.json", archive / "bad.json", "-f", "json", "--no-cache"),
                 ("compare", bundles / "eager_decode", bundles / "graph_decode", "-f", "json", "--no-cache"),
                 ("trend", archive, "-f", "json", "--no-cache"),
                 ("analyze", bundles / "serving_healthy", "-f", "json", "--no-cache")):
        state = _collector_after(*args)
        assert state["code"] == 0 and state["enabled"] and state["frozen"] > 10_000, (args, state)


def test_collection_is_left_alone_for_a_library_caller():
    import gc

    from tracetriage import memory

    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    memory.collect_again()  # without defer_collection: nothing changes
    assert gc.isenabled() and gc.get_freeze_count() == frozen


def test_toml_files_kept_parsed_are_what_tomllib_parses(tmp_path, monkeypatch):
    """analyzers/tomlfiles.read_toml: the package's TOML files as tomllib parses them, read back from the kept
    parse in __pycache__ (marshal, with its text) once written; an edited file is parsed again, a damaged kept
    file too; nothing is written where bytecode may not be; a value marshal cannot write (a date) is parsed
    every time, never wrong."""
    import tomllib

    from tracetriage.analyzers import tomlfiles

    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    package = Path(tomlfiles.__file__).parent
    for name in ("findings.toml", "capture_hints.toml", "devices.toml"):
        expected = tomllib.loads((package / name).read_text(encoding="utf-8"))
        source = tmp_path / name
        source.write_text((package / name).read_text(encoding="utf-8"), encoding="utf-8")
        assert tomlfiles.read_toml(source) == expected  # parsed, kept
        kept = list((tmp_path / "__pycache__").glob(f"{name}.*.marshal"))
        assert len(kept) == 1
        assert tomlfiles.read_toml(source) == expected  # read back
    source = tmp_path / "edited.toml"
    source.write_text('[a]\nx = 1\n', encoding="utf-8")
    assert tomlfiles.read_toml(source) == {"a": {"x": 1}}
    source.write_text('[a]\nx = 2\n', encoding="utf-8")
    assert tomlfiles.read_toml(source) == {"a": {"x": 2}}
    next((tmp_path / "__pycache__").glob("edited.toml.*.marshal")).write_bytes(b"\x00damaged")
    assert tomlfiles.read_toml(source) == {"a": {"x": 2}}
    dated = tmp_path / "dated.toml"
    dated.write_text("when = 2026-12-03\n", encoding="utf-8")
    assert tomlfiles.read_toml(dated) == tomllib.loads("when = 2026-12-03\n")
    assert not list((tmp_path / "__pycache__").glob("dated.toml.*"))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    plain = tmp_path / "plain.toml"
    plain.write_text("y = 'z'\n", encoding="utf-8")
    assert tomlfiles.read_toml(plain) == {"y": "z"}
    assert not list((tmp_path / "__pycache__").glob("plain.toml.*"))


def test_a_command_with_the_catalog_kept_does_not_import_tomllib():
    """Once the catalog and the device peaks are kept parsed (the import before wrote them), analyze of a
    trace imports no TOML parser."""
    trace = Path(__file__).parents[1] / "samples" / "bundles" / "eager_decode" / "trace.sqlite"
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-c", "import tracetriage.analyzers.catalog, tracetriage.analyzers.peaks"], env=env,
                   check=True)
    proc = subprocess.run([sys.executable, "-c", _LOADED % json.dumps(["tomllib"]), "analyze", str(trace), "-f", "json",
                           "--no-cache"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert [row for row in proc.stderr.splitlines() if row.startswith("LOADED ")][-1] == "LOADED []"
