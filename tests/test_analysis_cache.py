"""The analysis cache (issue 36 item 1, tracetriage/cache.py ``analysis/``): a case of plain files
analyzed before with the same options by the same code is answered from the cache without
opening it, and the answer is the same bytes; any change of input, option or need misses."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from test_fixed_costs import _loaded

BUNDLE = Path(__file__).parents[1] / "samples" / "bundles" / "eager_decode" / "trace.sqlite"


def _cli(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracetriage", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, check=False)


def _analysis_entries(cache: Path) -> int:
    return len(list((cache / "analysis").glob("*"))) if (cache / "analysis").is_dir() else 0


def test_a_cached_analysis_is_the_same_bytes_and_opens_nothing(tmp_path):
    trace = tmp_path / "trace.sqlite"
    shutil.copy(BUNDLE, trace)
    cache = tmp_path / "cache"
    fresh = {fmt: _cli("analyze", trace, "-f", fmt, "--no-cache").stdout for fmt in ("json", "html")}
    first = {fmt: _cli("analyze", trace, "-f", fmt, "--cache-dir", cache).stdout for fmt in ("json", "html")}
    assert _analysis_entries(cache) == 1  # one key: the format is rendering, not analysis
    second = {fmt: _cli("analyze", trace, "-f", fmt, "--cache-dir", cache).stdout for fmt in ("json", "html")}
    assert second == first == fresh
    assert json.loads(second["json"])["findings"]
    code, heavy = _loaded("analyze", trace, "-f", "html", "--cache-dir", cache)
    assert code == 0
    assert not {"pandas", "pyarrow", "scipy", "matplotlib"} & set(heavy), heavy


def test_a_changed_input_option_or_place_is_a_miss(tmp_path):
    trace = tmp_path / "trace.sqlite"
    shutil.copy(BUNDLE, trace)
    cache = tmp_path / "cache"
    base = _cli("analyze", trace, "-f", "json", "--cache-dir", cache).stdout
    tail = _cli("analyze", trace, "-f", "json", "--symptom", "tail", "--cache-dir", cache).stdout
    assert _analysis_entries(cache) == 2
    assert json.loads(tail)["symptom"] != json.loads(base)["symptom"]
    st = trace.stat()
    os.utime(trace, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # rewritten in place: another identity
    _cli("analyze", trace, "-f", "json", "--cache-dir", cache)
    assert _analysis_entries(cache) == 3
    # the same file by another relative name, from another folder: the contract names inputs as given
    (tmp_path / "sub").mkdir()
    other = _cli("analyze", "../trace.sqlite", "-f", "json", "--cache-dir", cache, cwd=tmp_path / "sub")
    assert other.returncode == 0, other.stderr
    assert _analysis_entries(cache) == 4


def test_a_small_capture_is_kept_too(tmp_path):
    """Under the 1 MiB below which a trace's model is not kept, its whole analysis still is: a
    small capture's analysis costs more than its key."""
    from conftest import real

    small = real("kineto", "tracelens_h100_bert_small.json.gz")
    assert small.stat().st_size < 1024 * 1024
    trace = tmp_path / small.name
    shutil.copy(small, trace)
    cache = tmp_path / "cache"
    first = _cli("analyze", trace, "-f", "json", "--cache-dir", cache)
    assert first.returncode == 0, first.stderr
    assert _analysis_entries(cache) == 1
    assert _cli("analyze", trace, "-f", "json", "--cache-dir", cache).stdout == first.stdout


def test_a_folder_is_keyed_by_every_file_in_it(tmp_path):
    """A bundle folder (README's first command) is kept by the files the case finds in it: the same
    bytes again, and a miss when a file is added beside the trace or one of them changes."""
    bundle = tmp_path / "bundle"
    shutil.copytree(BUNDLE.parent, bundle)
    cache = tmp_path / "cache"
    fresh = _cli("analyze", bundle, "-f", "json", "--no-cache").stdout
    assert _cli("analyze", bundle, "-f", "json", "--cache-dir", cache).stdout == fresh
    assert _analysis_entries(cache) == 1
    assert _cli("analyze", bundle, "-f", "json", "--cache-dir", cache).stdout == fresh
    assert _analysis_entries(cache) == 1
    (bundle / "notes.txt").write_text("what was run\n")
    with_notes = _cli("analyze", bundle, "-f", "json", "--cache-dir", cache)
    assert with_notes.returncode == 0 and _analysis_entries(cache) == 2
    assert "notes.txt" in with_notes.stdout  # the case says what it set aside: not the kept answer
    trace = bundle / "trace.sqlite"
    st = trace.stat()
    os.utime(trace, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    _cli("analyze", bundle, "-f", "json", "--cache-dir", cache)
    assert _analysis_entries(cache) == 3


def test_a_perfetto_export_opens_the_case_even_when_its_analysis_is_kept(tmp_path):
    trace = tmp_path / "trace.sqlite"
    shutil.copy(BUNDLE, trace)
    cache = tmp_path / "cache"
    _cli("analyze", trace, "-f", "json", "--cache-dir", cache)
    out = tmp_path / "out.pftrace"
    proc = _cli("analyze", trace, "-f", "json", "--perfetto", out, "--cache-dir", cache)
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_size > 1000
