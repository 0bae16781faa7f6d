"""PyTorch profiler (Kineto) traces: counts pinned against a plain JSON pass (SOURCES.md)."""

import pytest
from conftest import real, run_cli

from tracetriage import analyze, open_case
from tracetriage.case import detect
from tracetriage.errors import EXIT_NOTHING

# file: (kernels, NCCL kernels, rank)
KINETO = {
    "hta_nccl_parser_config_nccl_data.json.gz": (2700, 21, 0),
    "hta_df_index_resolver.json.gz": (19370, 2020, 1),
    "hta_trace_diff_control.json.gz": (8568, 60, 3),
    "hta_ns_resolution_rank0.json.gz": (4350, 0, 0),
    "hta_amd_mi250_minitoy_train_rocm6.2.json.gz": (14, 0, None),
    "hta_trace_filter_sampled_rank1.json.gz": (1104, 10, 1),
    "tracelens_vllm_decode_full_graph_execution.json.gz": (425, 0, 0),
    "tracelens_h100_qwen1.5-0.5b_chat.json.gz": (1465, 0, None),
}


@pytest.mark.parametrize("name", sorted(KINETO))
def test_kineto_counts(name):
    path = real("kineto", name)
    assert detect(path) == "kineto"
    kernels, nccl, rank = KINETO[name]
    t = open_case([path]).traces[0]
    k = t.gpu[t.gpu["kind"] == "kernel"]
    assert len(k) == kernels
    assert int(k["collective"].notna().sum()) == nccl
    assert t.meta["rank"] == rank
    if rank is None:  # a rank-less file is not silently rank 0
        assert any("rank is unknown" in w for w in t.warnings)


def test_nccl_ops_from_kineto():
    t = open_case([real("kineto", "hta_nccl_parser_config_nccl_data.json.gz")]).traces[0]
    ops = t.gpu["collective"].value_counts()
    assert ops["AllReduce"] == 15 and ops["Broadcast"] == 6


def test_vllm_full_graph_decode_is_busy():
    a = analyze(open_case([real("kineto", "tracelens_vllm_decode_full_graph_execution.json.gz")]))
    assert a.data["devices"][0]["busy_pct"] > 99
    t = open_case([real("kineto", "tracelens_vllm_decode_full_graph_execution.json.gz")]).traces[0]
    # 421 kernels link to the one hipGraphLaunch; 4 are eager (hipLaunchKernel / hipExtModuleLaunchKernel)
    assert int(t.gpu["in_graph"].sum()) == 421
    assert int((t.api["name"] == "hipGraphLaunch").sum()) == 1


@pytest.mark.parametrize("name", ["hta_bad_cpu_only_rank34.json.gz", "hta_bad_rank_unavailable.json.gz",
                                  "hta_bad_distributed_info_unavailable.json.gz"])
def test_cpu_only_traces_say_nothing_to_analyze(name):
    proc = run_cli("analyze", real("kineto", name))
    assert proc.returncode == EXIT_NOTHING and "CPU-only" in proc.stderr and "Traceback" not in proc.stderr


def test_profiler_steps_are_steps():
    a = analyze(open_case([real("kineto", "hta_ns_resolution_rank0.json.gz")]))
    p = a.data["processes"][0]
    assert p["steps"]["source"] == "nvtx" and p["steps"]["range_name"].startswith("ProfilerStep")


def _plain_rows(path):
    """The kept events by the plain json.loads reader, as rows of FIELDS."""
    import gzip
    import json

    from tracetriage.parsers import kineto_events
    opener = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
    with opener(path, "rb") as fh:
        events = json.load(fh)["traceEvents"]
    rows = []
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in kineto_events.KEPT_CATS:
            a = e.get("args") if isinstance(e.get("args"), dict) else {}
            rows.append((e["cat"], e.get("name"), e.get("pid"), e.get("tid"), e.get("ts"), e.get("dur"),
                         a.get("correlation"), a.get("device"), a.get("stream"), a.get("bytes")))
    return rows


def _streamed_rows(events):
    """The streaming reader's typed columns back as rows of the same fields (None where missing)."""
    df, ts, dur = events.frame([])
    ids = [[None if v != v else int(v) for v in df[c]] for c in ("pid", "tid", "correlation", "device", "stream", "bytes")]
    return [(c, n, pid, tid, float(t), None if d != d else float(d), corr, dev, stream, nb)
            for c, n, t, d, (pid, tid, corr, dev, stream, nb) in zip(df["cat"], df["name"], ts, dur, zip(*ids))]


def _normal(row):
    """A plain row as the model reads it: ids as ints (numeric text too, ROCm's "0x0" streams), else None."""
    def as_id(v):
        if isinstance(v, str):
            try:
                return int(v, 0)
            except ValueError:
                return None
        return None if v is None else int(v)
    c, n, pid, tid, t, d, *rest = row
    return (c, n, as_id(pid), as_id(tid), float(t), None if d is None else float(d), *map(as_id, rest))


@pytest.mark.parametrize("name", sorted(KINETO))
def test_streaming_reader_keeps_exactly_the_used_events(name):
    """The event-by-event reader is the path real files take (not a silent fallback), and it
    keeps the same events, field for field, as a plain JSON pass."""
    from tracetriage.parsers import kineto_file
    path = real("kineto", name)
    doc = kineto_file.stream_json(path)
    assert doc is not None, "strict JSON must be read event by event"
    assert _streamed_rows(doc["traceEvents"]) == [_normal(r) for r in _plain_rows(path)]


def test_streaming_reader_on_a_multi_megabyte_file_and_fallback_on_nan(tmp_path):
    import json

    from tracetriage.parsers import kineto_file
    events = []
    for i in range(20000):  # ~3 MB: several reads of the streaming reader
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10 * i, "dur": 3,
                       "args": {"Input Dims": [[64, 64]]}})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": 10 * i + 1, "dur": 2, "args": {"correlation": i}})
        events.append({"ph": "X", "cat": "kernel", "name": f"k{i % 7}", "pid": 0, "tid": 7, "ts": 10 * i + 4,
                       "dur": 4.5, "args": {"device": 0, "stream": 7, "correlation": i}})
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events, "distributedInfo": {"rank": 2}}))
    assert path.stat().st_size > 2 << 20
    doc = kineto_file.stream_json(str(path))
    assert doc is not None and doc["distributedInfo"] == {"rank": 2}  # a key after the events is found
    assert len(doc["traceEvents"]) == 40000  # the cpu_op events are not held
    t = open_case([str(path)]).traces[0]
    assert len(t.gpu) == 20000 and t.meta["rank"] == 2
    assert int(t.gpu["end"].sum() - t.gpu["start"].sum()) == 20000 * 4500
    # NaN is not strict JSON: the streaming reader declines and the tolerant reader decides
    bad = tmp_path / "nan.json"
    bad.write_text(path.read_text().replace('"dur": 4.5', "\"dur\": NaN", 1))
    assert kineto_file.stream_json(str(bad)) is None
    t = open_case([str(bad)]).traces[0]
    assert len(t.gpu) == 20000


def test_nesting_watch_matches_a_plain_count(monkeypatch):
    """The streaming reader's vectorized nesting watch (max(0, depth + step), carried across
    reads) alarms exactly when a byte-by-byte count exceeds the limit."""
    import io
    import random

    from tracetriage.parsers import common
    rng = random.Random(7)
    for _ in range(300):
        data = bytes(rng.choice(b"[]{}a,") for _ in range(rng.randint(1, 400)))
        depth = peak = 0
        for ch in data:
            depth = max(0, depth + (ch in b"[{") - (ch in b"]}"))
            peak = max(peak, depth)
        for limit, alarm in ((peak, False), (peak - 1, True))[: 1 + (peak > 0)]:
            monkeypatch.setattr(common, "MAX_DEPTH", limit)
            reader = common.BoundedReader(io.BytesIO(data), "x", depth=True)
            try:
                while reader.read(rng.randint(1, 50)):
                    pass
                raised = False
            except common.TooDeep:
                raised = True
            assert raised == alarm, (data, limit)


def test_keys_after_the_events_cost_no_extra_pass(tmp_path, monkeypatch):
    """A trace without distributedInfo (single process) or with it after the events is opened
    twice (head, events), never re-read to look for the missing keys."""
    import json

    from tracetriage.parsers import kineto_file
    events = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10 * i, "dur": 4,
               "args": {"device": 0, "correlation": i}} for i in range(5000)]
    opened = []
    real = kineto_file.gzip_opener

    def counting(path):
        gz, opener = real(path)
        return gz, lambda *a, **k: (opened.append(path), opener(*a, **k))[1]

    monkeypatch.setattr(kineto_file, "gzip_opener", counting)
    for name, doc in (("none.json", {"traceEvents": events}),
                      ("after.json", {"traceEvents": events, "deviceProperties": [{"id": 0, "name": "GPU X"}],
                                      "distributedInfo": {"rank": 3, "world_size": 4}})):
        opened.clear()
        (tmp_path / name).write_text(json.dumps(doc))
        got = kineto_file.stream_json(str(tmp_path / name))
        assert len(opened) == 2
        assert got.get("distributedInfo") == doc.get("distributedInfo")
        assert got.get("deviceProperties") == doc.get("deviceProperties")
