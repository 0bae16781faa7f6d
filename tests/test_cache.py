"""The analysis cache: a second analysis of a large capture reads the cached model and metrics,
gives the same answer, never serves a changed file, never writes beside the input, and stays
within its size bound."""

import json
import os
import sqlite3
import sys

import pytest
from conftest import ROOT, run_cli

sys.path.insert(0, str(ROOT / "benchmarks"))
import bench  # noqa: E402

from tracetriage import cache as cache_mod  # noqa: E402


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    d = tmp_path_factory.mktemp("big")
    path = d / "decode.sqlite"
    bench.build(path, 60_000)  # ~7 MB: above the cache's size floor
    assert path.stat().st_size > cache_mod.MIN_CACHED_BYTES
    return path


def analyze_json(path, cache_dir, *extra):
    p = run_cli("analyze", path, "-f", "json", "--cache-dir", cache_dir, *extra)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    d.pop("tool_version")
    return d


def test_second_analysis_comes_from_the_cache_and_is_identical(big, tmp_path):
    cdir = tmp_path / "cache"
    before = sorted(os.listdir(big.parent))
    first = analyze_json(big, cdir)
    assert (cdir / "model").is_dir() and (cdir / "metrics").is_dir()
    assert sorted(os.listdir(big.parent)) == before  # nothing written beside the input
    second = analyze_json(big, cdir)
    assert first == second
    uncached = analyze_json(big, tmp_path / "unused", "--no-cache")
    assert uncached == first and not (tmp_path / "unused").exists()
    # another symptom re-ranks from the cached metrics
    tail = analyze_json(big, cdir, "--symptom", "tail")
    assert tail["symptom"] == "tail" and tail["devices"] == first["devices"]


def test_cache_hit_reads_no_table(big, tmp_path):
    from tracetriage import Runtime, analyze, open_case

    runtime = Runtime(cache=cache_mod.Cache(tmp_path / "c"))
    analyze(open_case([big], runtime=runtime), runtime=runtime)
    again = open_case([big], runtime=runtime)
    trace = again.traces[0]
    assert isinstance(trace, cache_mod.CachedTrace)
    analyze(again, runtime=runtime)
    assert "gpu" not in vars(trace) and "api" not in vars(trace)  # metrics came from the cache
    assert runtime.cache.hits == {"model": 1, "metrics": 1}


def test_a_changed_file_is_never_served_from_the_cache(big, tmp_path):
    changed = tmp_path / "decode.sqlite"
    changed.write_bytes(big.read_bytes())
    cdir = tmp_path / "cache"
    first = analyze_json(changed, cdir)
    con = sqlite3.connect(changed)
    stamp = os.stat(changed)
    # one kernel stretched by 5 ms, in the middle of the file; size and mtime kept as they were
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = end + 5000000 WHERE rowid = 30000")
    con.commit()
    con.close()
    os.utime(changed, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert changed.stat().st_size == stamp.st_size
    second = analyze_json(changed, cdir)
    assert second["devices"][0]["busy_ns"] != first["devices"][0]["busy_ns"]
    assert len(list((cdir / "model").iterdir())) == 2


def test_lru_eviction_keeps_the_cache_within_its_bound(big, tmp_path):
    c = cache_mod.Cache(tmp_path / "c", max_bytes=1)
    from tracetriage.parsers import nsys

    trace = nsys.parse(str(big))
    c.put_model("a" * 32, trace)
    assert c.size() == 0  # one entry larger than the bound does not stay
    c = cache_mod.Cache(tmp_path / "c2", max_bytes=10**12)
    c.put_model("a" * 32, trace)
    c.put_metrics("a" * 32, {}, {"x": 1})
    assert c.size() > 0
    c.max_bytes = c.size() - 1
    c.evict()
    assert len(c.entries()) == 1  # the least recently used went first


def test_unwritable_cache_is_skipped(big, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        d = analyze_json(big, ro / "sub")
        assert d["devices"]
    finally:
        ro.chmod(0o700)


def test_cache_keys_follow_the_code(tmp_path, monkeypatch):
    """Entries are keyed by a digest of the code that made them: changing a source file changes
    the key, so an upgrade or a fix never reads entries written by other code."""
    import sys

    from tracetriage import cache as cache_mod

    pkg = tmp_path / "fakepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "rules.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(cache_mod, "_CODE_VERSIONS", {})
    before = cache_mod.code_version("fakepkg")
    (pkg / "rules.py").write_text("X = 2\n")
    monkeypatch.setattr(cache_mod, "_CODE_VERSIONS", {})
    assert cache_mod.code_version("fakepkg") != before
    sys.modules.pop("fakepkg", None)
    assert cache_mod.model_version() != cache_mod.metrics_version()
