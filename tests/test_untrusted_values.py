"""parsers/coerce.py on the value classes that were internal errors (issue 25): text with a
flipped high bit through the Arrow path, CSV cells past int64, JSON numbers written as text,
and archives recognised by content."""

import io
import tarfile
import zipfile

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import BUNDLES, run_cli

from tracetriage.parsers import coerce


def test_utf8_columns_replaces_invalid_sequences_only_where_needed():
    good = pa.array(["gemm", None, "norm"])
    bad = pa.array([b"ok", b"\xc3\x28\xff", None], type=pa.binary()).cast(pa.string(), safe=False)
    t = coerce.utf8_columns(pa.table({"a": good, "b": bad, "n": pa.array([1, 2, 3])}))
    assert t.column("a").to_pylist() == ["gemm", None, "norm"]
    assert t.column("b").to_pylist() == ["ok", "\ufffd(\ufffd", None]
    t.to_pandas()  # would raise on the invalid bytes
    assert t.column("n").to_pylist() == [1, 2, 3]


def test_int64_text_keeps_nanoseconds_and_drops_what_is_past_int64():
    w = []
    cells = pd.Series(["1700000000000000001", "9" * 25, "-5", "", None, "abc", "4611686018427387904", "Agent 4", "1e308"])
    out = coerce.int64_text(cells, "Start_Timestamp", w)
    assert out.dtype == np.int64
    assert out.tolist() == [1700000000000000001, -1, -5, -1, -1, -1, -1, 4, 1]
    assert w == ["Start_Timestamp: 2 values that are not valid numbers set to -1"]


@pytest.mark.parametrize("raw, want", [("12", 12), (" 3.5 ", 3.5), ("12ms", None), ("nan", None), ("Infinity", None),
                                        (True, None), (None, None), ([1], None), (float("inf"), None), (7, 7),
                                        (10**30, None)])
def test_number(raw, want):
    assert coerce.number(raw) == want


def test_zip_with_a_64k_comment_and_no_suffix_in_a_folder_is_analyzed(tmp_path):
    d = tmp_path / "incident"
    d.mkdir()
    with zipfile.ZipFile(d / "capture", "w") as z:
        z.write(BUNDLES / "eager_decode" / "trace.sqlite", "trace.sqlite")
        z.comment = b"c" * 65535
    p = run_cli("analyze", d, "-f", "json", "--no-cache")
    assert p.returncode == 0, p.stderr
    assert '"launch_bound"' in p.stdout
    assert str(d / "capture") + "!" in p.stdout  # the member named through the archive, not a temporary path


def test_corrupt_tar_gz_is_an_input_error_named_by_the_archive(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        t.add(BUNDLES / "eager_decode" / "trace.sqlite", arcname="trace.sqlite")
    raw = bytearray(buf.getvalue())
    raw[100:300] = bytes(200)
    (tmp_path / "cap.tar.gz").write_bytes(bytes(raw))
    for target in (tmp_path / "cap.tar.gz", tmp_path):
        p = run_cli("analyze", target, "--no-cache")
        assert p.returncode == 3, p.stderr
        assert p.stderr.count("\n") == 1 and "cap.tar.gz: corrupt or unsupported archive" in p.stderr
        assert "tracetriage-" not in p.stderr  # never the temporary directory
