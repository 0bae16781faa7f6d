"""Gzipped JSON past its limit is refused before it is parsed. A 0.85 MB .json.gz of ~1.3M identical valid
kernel events (210 MB, 257x) was refused only once the event parser had read 163 MiB of it (25-45 s on a
loaded machine); it is now decompressed without parsing, stopping at the limit (the gzip trailer's size
alone cannot decide: several members or >4 GiB make it say less, a truncated file has no trailer). What a
check costs is counted in bytes decompressed and bytes handed to the parsers, not timed. A trace within
the limit reads as before."""

from __future__ import annotations

import gzip
import json
import random

import pytest
from conftest import run_cli

from tracetriage import errors
from tracetriage.parsers import common

EVENT = (b'{"ph": "X", "cat": "kernel", "name": "void gemm_kernel<float>", "pid": 0, "tid": 7, "ts": 1700000000000000, '
         b'"dur": 5, "args": {"device": 0, "stream": 7, "correlation": 1}}')


def repeated_trace(n: int) -> bytes:
    """A strict Kineto JSON document of ``n`` identical kernel events (valid, and compressing ~250x)."""
    return b'{"schemaVersion": 1, "traceEvents": [\n' + (EVENT + b",\n") * (n - 1) + EVENT + b'\n], "traceName": "x"}\n'


def varied_trace(n_steps: int, seed: int = 3) -> bytes:
    """A small trace as a profiler writes it: steps of launches and their kernels, times that vary."""
    rng, events, ts, c = random.Random(seed), [], 1_700_000_000_000_000, 0
    for step in range(n_steps):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 100, "tid": 100,
                       "ts": ts, "dur": 2000})
        for _ in range(100):
            c += 1
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 100,
                           "ts": ts, "dur": rng.randint(3, 8), "args": {"correlation": c}})
            events.append({"ph": "X", "cat": "kernel", "name": rng.choice(["gemm", "softmax", "layernorm"]), "pid": 0,
                           "tid": 7, "ts": ts + 5, "dur": rng.randint(2, 12),
                           "args": {"device": 0, "stream": 7, "correlation": c}})
            ts += 20
    return json.dumps({"schemaVersion": 1, "distributedInfo": {"rank": 0}, "traceEvents": events}).encode()


@pytest.fixture
def counted(monkeypatch):
    """Bytes decompressed from any gzip stream, and bytes handed to the parsers by BoundedReader."""
    seen = {"decompressed": 0, "parsed": 0}
    gz_read, bounded_read = gzip.GzipFile.read, common.BoundedReader.read

    def decompressed(self, *a, **k):
        data = gz_read(self, *a, **k)
        seen["decompressed"] += len(data)
        return data

    def parsed(self, *a, **k):
        data = bounded_read(self, *a, **k)
        seen["parsed"] += len(data)
        return data

    monkeypatch.setattr(gzip.GzipFile, "read", decompressed)
    monkeypatch.setattr(common.BoundedReader, "read", parsed)
    return seen


def bound_of(path) -> int:
    """The limit as the docs state it: 200x the file's size, never under 64 MiB (nor over 4 GiB)."""
    return min(4 << 30, max(64 << 20, 200 * path.stat().st_size))


def test_a_bomb_of_valid_events_is_refused_at_the_limit_before_a_byte_is_parsed(tmp_path, counted):
    """Decompressed without parsing until it passes the limit; the size its trailer records is named."""
    raw = repeated_trace(600_000)
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(gzip.compress(raw, 6))
    bound = bound_of(path)
    assert len(raw) > bound  # past its limit: the refusal is due
    proc = run_cli("analyze", path)
    assert proc.returncode == errors.EXIT_INPUT, proc.stderr
    assert counted["parsed"] == 0  # the parser was handed nothing (it used to read up to the limit)
    assert (f"tracetriage: error: {path}: its gzip stream expands past {bound / 2**20:,.0f} MiB "
            f"(its gzip trailer records {len(raw):,} bytes), the limit for a file of "
            f"{path.stat().st_size:,} bytes") in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert counted["decompressed"] <= bound + (1 << 20) + 2 * common.HEAD_BYTES  # one chunk past it; detection


def test_a_bomb_whose_trailer_says_little_is_refused_at_the_limit_unparsed(tmp_path, counted):
    """Two gzip members: the trailer read records only the last, small one. The stream is measured
    by decompressing it, which stops as soon as it passes the limit; the parser never starts."""
    raw = repeated_trace(600_000)
    cut = raw.rindex(b"]")
    path = tmp_path / "two_members.json.gz"
    path.write_bytes(gzip.compress(raw[:cut], 6) + gzip.compress(raw[cut:], 6))
    assert int.from_bytes(path.read_bytes()[-4:], "little") == len(raw) - cut  # the trailer cannot tell
    bound = bound_of(path)
    assert len(raw) > bound
    proc = run_cli("analyze", path)
    assert proc.returncode == errors.EXIT_INPUT, proc.stderr
    assert counted["parsed"] == 0
    assert f"{path}: its gzip stream expands past {bound / 2**20:,.0f} MiB, the limit for a file of" in proc.stderr
    assert counted["decompressed"] <= bound + (1 << 20) + 2 * common.HEAD_BYTES


def test_a_truncated_gzip_trace_is_refused_unparsed(tmp_path, counted):
    data = gzip.compress(varied_trace(40), 6)
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: len(data) // 2])
    proc = run_cli("analyze", path)
    assert proc.returncode == errors.EXIT_INPUT, proc.stderr
    assert f"{path}: unreadable (corrupt gzip stream: Compressed file ended before the end-of-stream marker" \
        in proc.stderr
    assert counted["parsed"] == 0


def test_a_plain_file_past_the_json_limit_is_refused_from_its_size(tmp_path, monkeypatch, counted):
    monkeypatch.setattr(common, "MAX_JSON_BYTES", 1 << 20)  # the 4 GiB limit, scaled down to a test's file
    path = tmp_path / "big.json"
    path.write_bytes(varied_trace(40))
    assert path.stat().st_size > 1 << 20
    proc = run_cli("analyze", path)
    assert proc.returncode == errors.EXIT_INPUT, proc.stderr
    assert f"{path}: JSON larger than 1 MiB ({path.stat().st_size:,} bytes): refused" in proc.stderr
    assert counted["parsed"] == 0


@pytest.mark.parametrize("ratio, refused", [(150, False), (250, True)])
def test_the_ratio_bound_holds_on_either_side(tmp_path, ratio, refused):
    """Past the 64 MiB floor, a stream 150x its file's size is within the limit and one 250x is not
    (real traces: 10-30x). Random bytes (incompressible) then zeros (~1000x), in the proportion
    that gives the ratio."""
    expanded = 96 << 20
    random_part = int(expanded / ratio - expanded / 1000)  # zeros deflate ~1000x
    raw = random.Random(ratio).randbytes(random_part) + bytes(expanded - random_part)
    path = tmp_path / f"r{ratio}.gz"
    path.write_bytes(gzip.compress(raw, 6))
    got = expanded / path.stat().st_size
    assert (got > 200) == refused and abs(got - ratio) < 0.1 * ratio  # the file is what the case says
    with open(path, "rb") as raw_fh, gzip.GzipFile(fileobj=raw_fh) as fh:
        if refused:
            with pytest.raises(errors.TraceFormatError, match="compression bomb"):
                common.check_size(fh, str(path))
        else:
            common.check_size(fh, str(path))


def _numbers(proc, *paths) -> str:
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    for p in paths:
        text = text.replace(str(p), "TRACE").replace(p.name, "TRACE")
    doc = json.loads(text)
    for entry in doc.get("inputs", []):
        entry.pop("bytes", None)
        entry.pop("size", None)
    doc.pop("cache", None)
    return json.dumps(doc, sort_keys=True)


def test_a_gzipped_trace_within_the_limit_reads_as_its_plain_copy(tmp_path, monkeypatch):
    """One member or two, a gzipped trace gives the plain file's analysis, and it is measured once
    (for its head and its events both)."""
    raw = varied_trace(40)
    plain = tmp_path / "plain" / "trace.json"
    one = tmp_path / "one" / "trace.json.gz"
    two = tmp_path / "two" / "trace.json.gz"
    for p in (plain, one, two):
        p.parent.mkdir()
    plain.write_bytes(raw)
    one.write_bytes(gzip.compress(raw, 6))
    half = len(raw) // 2
    two.write_bytes(gzip.compress(raw[:half], 6) + gzip.compress(raw[half:], 6))
    measured = []
    real_measure = common._measure_gzip
    monkeypatch.setattr(common, "_measure_gzip", lambda path, packed: (measured.append(path), real_measure(path, packed))[1])
    want = _numbers(run_cli("analyze", plain, "--format", "json", "--no-cache"), plain)
    kernels = [e for e in json.loads(raw)["traceEvents"] if e["cat"] == "kernel"]  # one stream, none overlapping
    doc = json.loads(want)
    assert doc["inputs"][0]["counts"]["kernels"] == len(kernels)
    assert doc["devices"][0]["busy_ns"] == 1000 * sum(e["dur"] for e in kernels)
    for p in (one, two):
        assert _numbers(run_cli("analyze", p, "--format", "json", "--no-cache"), p) == want
    assert measured == [str(one), str(two)]
