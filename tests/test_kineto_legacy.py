"""Formats the tool half-knows (issue 32, item 6): PyTorch 1.8–1.10 Kineto traces, a device it
does not model (MTIA), and rocprof v1's results.db.

Counts on the real captures are checked against a plain json/gzip pass over the file written
here, never against the parser; the generated traces know their own truth (the intervals they
were written from).
"""

import gzip
import json
import sqlite3
import statistics

import pytest
from conftest import real, run_cli

from tracetriage import analyze, open_case
from tracetriage.case import detect
from tracetriage.errors import EXIT_INPUT, MissingDataError, UnsupportedInputError

LEGACY = ["kineto_tb_plugin_resnet50_num_workers_0_pt1.8.json.gz", "kineto_tb_plugin_resnet50_num_workers_4_pt1.8.json.gz"]
GPU_CATEGORIES = {"Kernel": "kernel", "Memcpy": "memcpy", "Memset": "memset"}


def _events(path):
    with gzip.open(path, "rb") as fh:
        return json.load(fh)["traceEvents"]


def _plain_counts(events):
    """What a reader of the JSON counts by hand: complete events per category, the steps."""
    complete = [e for e in events if e.get("ph") == "X"]
    gpu = {kind: sum(1 for e in complete if e.get("cat") == cat) for cat, kind in GPU_CATEGORIES.items()}
    runtime = sum(1 for e in complete if e.get("cat") == "Runtime")
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in complete
                   if e.get("cat") == "Operator" and e["name"].startswith("ProfilerStep#"))
    return gpu, runtime, steps


def _busy_us(events, lo_us, hi_us):
    """The union of the GPU events' intervals inside [lo, hi], in µs."""
    spans = sorted((max(e["ts"], lo_us), min(e["ts"] + e["dur"], hi_us)) for e in events
                   if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES and e["ts"] < hi_us and e["ts"] + e["dur"] > lo_us)
    busy, end = 0.0, float("-inf")
    for start, stop in spans:
        if stop > end:
            busy += stop - max(start, end)
            end = stop
    return busy


@pytest.mark.parametrize("name", LEGACY)
def test_pytorch_1_8_trace_counts_equal_a_plain_count(name):
    path = real("kineto", name)
    events = _events(path)
    gpu, runtime, steps = _plain_counts(events)
    assert gpu["kernel"] > 9000  # the reason for this test: once refused as CPU-only
    assert detect(path) == "kineto"
    trace = open_case([path]).traces[0]
    assert trace.gpu["kind"].value_counts().to_dict() == {**gpu, "graph": 0}
    assert len(trace.api) == runtime
    step_ranges = trace.ranges[trace.ranges["name"].str.startswith("ProfilerStep#")]
    assert len(step_ranges) == len(steps) == 6
    # one GPU (args.device 0), one stream (args.stream 7, written as tid "stream 7"), one host process
    assert trace.devices[["ordinal"]].to_dict("records") == [{"ordinal": 0}]
    assert set(trace.gpu["stream"]) == {7}
    host_pids = {e["pid"] for e in events if e.get("cat") == "Runtime"}
    assert set(trace.gpu["pid"]) == host_pids
    # every launch call's correlation finds its GPU event, as in the JSON
    plain_links = {e["args"]["correlation"] for e in events if e.get("cat") == "Runtime"} & \
        {e["args"]["correlation"] for e in events if e.get("cat") in GPU_CATEGORIES}
    linked = set(trace.api["correlation"]) & set(trace.gpu["correlation"])
    assert linked == plain_links and len(linked) > 9000
    # what the old schema lacks is said, not guessed
    assert trace.devices["name"].tolist() == ["unknown GPU"] and trace.devices["sm_count"].tolist() == [-1]
    assert any("PyTorch 1.8–1.10" in w and "without deviceProperties" in w for w in trace.warnings)
    assert any("without input types" in w for w in trace.warnings)
    assert not any("tid" in w and "not valid numbers" in w for w in trace.warnings)


@pytest.mark.parametrize("name", LEGACY)
def test_pytorch_1_8_trace_is_analyzed_over_its_steps(name):
    path = real("kineto", name)
    events = _events(path)
    _, _, steps = _plain_counts(events)
    data = analyze(open_case([path])).data
    window = data["window"]
    # the window is the profiler's steps: from the first step's start to the last one's end
    assert window["source"].startswith("steps")
    assert abs(window["start_ns"] - steps[0][0] * 1000) <= 1000 and abs(window["end_ns"] - steps[-1][1] * 1000) <= 1000
    process = data["processes"][0]
    assert process["steps"]["count"] == 6
    assert process["steps"]["p50_ns"] == pytest.approx(statistics.median((b - a) * 1000 for a, b in steps), abs=1000)
    device = data["devices"][0]
    expected = 100 * _busy_us(events, window["start_ns"] / 1000, window["end_ns"] / 1000) / (window["duration_ns"] / 1000)
    assert device["busy_pct"] == pytest.approx(expected, abs=0.5)
    assert 50 < device["busy_pct"] < 100
    assert "CPU-only" not in data["headline"] and data["capture_kind"]["vendor"] == "cuda"


def test_pytorch_1_8_trace_cli_verdict_is_not_cpu_only():
    proc = run_cli("analyze", real("kineto", LEGACY[0]))
    assert proc.returncode == 0 and "CPU-only" not in proc.stdout + proc.stderr and "VERDICT" in proc.stdout


# --- generated: one trace written in the current and the PyTorch 1.8 spelling ---------------------

HOST_PID, HOST_TID, DEVICE, STREAM = 4242, 4243, 0, 7
KERNELS = [(1000 + 40 * i, 25) for i in range(50)]  # (ts µs, dur µs): 50 kernels, 15 µs gaps
STEPS = [(990, 1000), (1990, 1000)]  # ProfilerStep#1, #2 (µs): 25 kernels each


def _trace_events(legacy: bool, correlation_in_args: bool = True, flow: str = "ac2g"):
    """A small training-like trace: launch calls, their kernels, one copy, two profiler steps,
    spelled as PyTorch 2.x writes it, or as PyTorch 1.8 did (``legacy``). Without
    ``correlation_in_args`` the launch/kernel pairs are tied only by their flow events."""
    def cat(new, old):
        return old if legacy else new

    events = []
    for number, (start, end) in enumerate(STEPS, 1):
        events.append({"ph": "X", "cat": cat("user_annotation", "Operator"), "name": f"ProfilerStep#{number}",
                       "pid": HOST_PID, "tid": str(HOST_TID) if legacy else HOST_TID, "ts": start, "dur": end,
                       "args": {"External id": number}})
    for i, (ts, dur) in enumerate(KERNELS):
        corr = 100 + i
        launch_args = {"correlation": corr} if correlation_in_args else {}
        gpu_args = {"device": DEVICE, "stream": STREAM, **({"correlation": corr} if correlation_in_args else {})}
        gpu_args["external id" if legacy else "External id"] = 10 + i
        launch_args["external id" if legacy else "External id"] = 10 + i
        launch_ts = ts - 10
        events.append({"ph": "X", "cat": cat("cuda_runtime", "Runtime"), "name": "cudaLaunchKernel", "pid": HOST_PID,
                       "tid": str(HOST_TID) if legacy else HOST_TID, "ts": launch_ts, "dur": 4, "args": launch_args})
        events.append({"ph": "X", "cat": cat("kernel", "Kernel"), "name": f"gemm_{i % 3}", "pid": DEVICE,
                       "tid": f"stream {STREAM}" if legacy else STREAM, "ts": ts, "dur": dur, "args": gpu_args})
        flow_cat, flow_name = ("async", "launch") if legacy else (flow, flow)
        events.append({"ph": "s", "id": corr, "pid": HOST_PID, "tid": HOST_TID, "ts": launch_ts, "cat": flow_cat,
                       "name": flow_name})
        events.append({"ph": "f", "id": corr, "pid": DEVICE, "tid": f"stream {STREAM}" if legacy else STREAM, "ts": ts,
                       "cat": flow_cat, "name": flow_name, "bp": "e"})
    events.append({"ph": "X", "cat": cat("gpu_memcpy", "Memcpy"), "name": "Memcpy HtoD (Pinned -> Device)", "pid": DEVICE,
                   "tid": f"stream {STREAM}" if legacy else STREAM, "ts": 995, "dur": 5,
                   "args": {"device": DEVICE, "stream": STREAM, "correlation": 99, "bytes": 1 << 20}})
    doc = {"schemaVersion": 1, "traceEvents": events}
    if not legacy:
        doc["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132, "totalGlobalMem": 85 << 30}]
    return doc


def _write(tmp_path, name, doc):
    path = tmp_path / name
    with gzip.open(path, "wt") as fh:
        json.dump(doc, fh)
    return path


def test_pytorch_1_8_untyped_dims_say_why_efficiency_is_not_measured():
    """The 1.8 traces record "Input dims" without "Input type": efficiency says so and names the capture
    that records types, not "no operator input shapes ... record_shapes=True" (shapes were recorded)."""
    analysis = analyze(open_case([real("kineto", LEGACY[0])]))
    row = next(r for r in analysis.data["efficiency"]["not_measured"] if r["what"] == "operator shapes")
    assert "input dims without input types" in row["reason"] and "carries no operator input shapes" not in row["reason"]
    assert "Input type" in row["capture_hint"]


def test_generated_trace_reads_the_same_in_both_spellings(tmp_path):
    current = open_case([_write(tmp_path, "current.json.gz", _trace_events(legacy=False))]).traces[0]
    legacy = open_case([_write(tmp_path, "legacy.json.gz", _trace_events(legacy=True))]).traces[0]
    for trace in (current, legacy):
        assert trace.gpu["kind"].value_counts()[["kernel", "memcpy"]].tolist() == [len(KERNELS), 1]
        assert len(trace.api) == len(KERNELS)
        assert sorted(trace.ranges["name"]) == ["ProfilerStep#1", "ProfilerStep#2"]
        kernels = trace.gpu[trace.gpu["kind"] == "kernel"]
        assert set(kernels["pid"]) == {HOST_PID} and set(kernels["stream"]) == {STREAM}
    columns = ["kind", "start", "end", "stream", "correlation", "pid"]
    assert legacy.gpu[columns].astype(str).equals(current.gpu[columns].astype(str))
    assert legacy.api[["start", "end", "correlation", "tid"]].equals(current.api[["start", "end", "correlation", "tid"]])
    # the truth: busy is the written kernels' and copy's time inside the window, the same window both ways
    windows = []
    for path in ("current.json.gz", "legacy.json.gz"):
        data = analyze(open_case([tmp_path / path])).data
        lo, hi = data["window"]["start_ns"] / 1000, data["window"]["end_ns"] / 1000
        written = [*KERNELS, (995, 5)]
        busy = sum(max(0, min(ts + dur, hi) - max(ts, lo)) for ts, dur in written)
        assert data["devices"][0]["busy_pct"] == pytest.approx(100 * busy / (hi - lo), abs=0.01)
        windows.append((data["window"], data["processes"][0]["steps"], data["headline"]))
    assert windows[0] == windows[1]
    assert not any("deviceProperties" in w for w in current.warnings)
    assert any("deviceProperties" in w for w in legacy.warnings)


@pytest.mark.parametrize("legacy,flow", [(True, "async"), (False, "async_cpu_to_gpu"), (False, "ac2g")])
def test_launches_are_tied_by_flow_events_when_args_carry_no_correlation(tmp_path, legacy, flow):
    with_args = open_case([_write(tmp_path, "a.json.gz", _trace_events(legacy, True, flow))]).traces[0]
    by_flow = open_case([_write(tmp_path, "b.json.gz", _trace_events(legacy, False, flow))]).traces[0]
    kernels = by_flow.gpu[by_flow.gpu["kind"] == "kernel"]
    assert sorted(kernels["correlation"]) == list(range(100, 100 + len(KERNELS)))
    assert sorted(by_flow.api["correlation"]) == list(range(100, 100 + len(KERNELS)))
    assert by_flow.gpu["correlation"].tolist() == with_args.gpu["correlation"].tolist()


# --- a device the tool does not model -------------------------------------------------------------

def test_real_mtia_trace_names_its_device_not_cpu_only():
    path = real("kineto", "hta_mtia_inference_rank0.json.gz")
    events = _events(path)
    assert any(e.get("cat") == "mtia_ccp_events" for e in events)
    assert not any(e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") for e in events)
    proc = run_cli("analyze", path)
    assert proc.returncode == EXIT_INPUT  # an input of a kind the tool does not read, as README's exit 3 says
    assert "a device this tool does not model yet: MTIA" in proc.stderr
    assert "CPU-only" not in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and str(path) in proc.stderr


def _device_trace(host_cat, device_cat, device_event_name, with_cuda=False):
    """A minimal trace of the documented event shape: a host runtime call and the device event it
    launched (libkineto writes ``<device>_runtime`` on the host, its device activity beside it)."""
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "cat": host_cat, "name": "launch", "pid": 1, "tid": 1, "ts": 10, "dur": 2, "args": {"correlation": 5}},
        {"ph": "X", "cat": device_cat, "name": device_event_name, "pid": 9, "tid": 3, "ts": 20, "dur": 30,
         "args": {"correlation": 5, "device": 0}},
    ]
    if with_cuda:
        events += [
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 50, "dur": 3,
             "args": {"correlation": 7}},
            {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 60, "dur": 20,
             "args": {"correlation": 7, "device": 0, "stream": 7}},
        ]
    return {"schemaVersion": 1, "traceEvents": events}


@pytest.mark.parametrize("host_cat,device_cat,device", [
    ("mtia_runtime", "mtia_ccp_events", "MTIA"),
    ("xpu_runtime", "kernel", "XPU"),  # an Intel XPU's kernels share the kernel category: its runtime names it
    ("privateuse1_runtime", "privateuse1_driver", "PrivateUse1"),
])
def test_generated_trace_of_another_device_is_refused_naming_it(tmp_path, host_cat, device_cat, device):
    path = _write(tmp_path, "device.json.gz", _device_trace(host_cat, device_cat, "work"))
    with pytest.raises(UnsupportedInputError) as info:
        open_case([path])
    assert f"a device this tool does not model yet: {device}" in str(info.value)
    assert "CPU-only" not in str(info.value) and info.value.exit_code == EXIT_INPUT


def test_device_events_beside_cuda_work_are_left_out_with_a_warning(tmp_path):
    path = _write(tmp_path, "mixed.json.gz", _device_trace("mtia_runtime", "mtia_ccp_events", "work", with_cuda=True))
    trace = open_case([path]).traces[0]
    assert trace.gpu["kind"].value_counts()["kernel"] == 1
    assert any("does not model yet (MTIA) left out" in w for w in trace.warnings)


def test_a_trace_without_device_activity_is_still_cpu_only(tmp_path):
    doc = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0, "dur": 5}]}
    with pytest.raises(MissingDataError, match="CPU-only") as info:
        open_case([_write(tmp_path, "cpu.json.gz", doc)])
    assert "1 timed host events" in str(info.value) and "ProfilerActivity.CUDA" in str(info.value)


@pytest.mark.parametrize("events, said", [
    ([], "an empty profiler trace"),
    ([{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
      {"ph": "i", "name": "mark", "pid": 1, "tid": 1, "ts": 3, "s": "t"}], "without timed events (2 metadata"),
])
def test_a_trace_that_holds_no_activity_is_not_called_cpu_only(tmp_path, events, said):
    """Trial 49 item 4: an empty events array, or one of metadata only, was "CPU-only profiler
    trace": it holds no CPU activity either. Both still exit 4 (nothing to analyze), saying what the
    file holds; the plain and the tolerant reader (NaN makes the file non-strict JSON) agree."""
    for name, text in (("plain.json", json.dumps({"traceEvents": events})),
                       ("nonstrict.json", json.dumps({"traceEvents": events, "x": float("nan")}))):
        (tmp_path / name).write_text(text)
        proc = run_cli("analyze", tmp_path / name)
        assert proc.returncode == 4 and said in proc.stderr, (name, proc.stderr)
        assert "CPU-only" not in proc.stderr and "Traceback" not in proc.stderr


# --- rocprof v1 results.db ------------------------------------------------------------------------

# The tables rocprofiler v1's bin/tblextr.py creates (ROCm/rocprofiler at
# 7fa8139944668a80e94f45e97eda959e33474297: KERN, HIP, HSA, COPY, OPS, rocTX; before 2021 the
# kernel table was "A", b278dc452a9698d3cfe3017b9db787fb3910bd02), with their columns.
API_COLUMNS = '"BeginNs" INTEGER, "EndNs" INTEGER, "pid" INTEGER, "tid" INTEGER, "Name" TEXT, "args" TEXT, ' \
              '"Index" INTEGER, "Data" TEXT, "__section" INTEGER, "__lane" INTEGER'
OPS_COLUMNS = '"Index" INTEGER, "Name" TEXT, "args" TEXT, "BeginNs" INTEGER, "EndNs" INTEGER, "dev-id" INTEGER, ' \
              '"queue-id" INTEGER, "pid" INTEGER, "tid" INTEGER, "roctx-range" TEXT, "Data" TEXT, "stream-id" INTEGER, ' \
              '"__section" INTEGER, "__lane" INTEGER'


def _rocprof_v1_db(path, kernel_table="KERN", trace_tables=("HIP", "HSA", "COPY", "OPS")):
    db = sqlite3.connect(path)
    db.execute(f'CREATE TABLE {kernel_table} ("Index" INTEGER, "KernelName" TEXT, "gpu-id" INTEGER, "queue-id" INTEGER, '
               '"pid" INTEGER, "tid" INTEGER, "DispatchNs" INTEGER, "BeginNs" INTEGER, "EndNs" INTEGER, '
               '"CompleteNs" INTEGER, "DurationNs" INTEGER)')
    db.execute(f"INSERT INTO {kernel_table} VALUES (0, 'vector_add', 2, 0, 77, 77, 100, 200, 900, 950, 700)")
    for table in trace_tables:
        db.execute(f"CREATE TABLE {table} ({OPS_COLUMNS if table == 'OPS' else API_COLUMNS})")
    db.commit()
    db.close()
    return path


@pytest.mark.parametrize("kernel_table,trace_tables", [("KERN", ("HIP", "HSA", "COPY", "OPS")), ("A", ("HIP", "OPS")),
                                                       ("A", ())])
def test_rocprof_v1_results_db_is_named_with_the_rocprofv3_command(tmp_path, kernel_table, trace_tables):
    path = _rocprof_v1_db(tmp_path / "results.db", kernel_table, trace_tables)
    assert detect(path) == "rocprof_v1"
    proc = run_cli("analyze", path)
    assert proc.returncode == EXIT_INPUT and "Traceback" not in proc.stderr
    line, = proc.stderr.strip().splitlines()
    assert str(path) in line and "rocprof v1" in line and "not a supported input" not in line
    assert "rocprofv3 --kernel-trace --hip-runtime-trace --memory-copy-trace --output-format rocpd" in line
    assert kernel_table in line


def test_rocprof_v1_db_in_a_bundle_is_skipped_with_the_same_reason(tmp_path):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    _rocprof_v1_db(bundle / "results.db")
    _write(bundle, "trace.json.gz", _trace_events(legacy=False))
    case = open_case([bundle])
    assert len(case.traces) == 1
    reason, = [s["reason"] for s in case.skipped if s["path"].endswith("results.db")]
    assert "rocprof v1" in reason and "rocprofv3 --kernel-trace" in reason


def test_a_sqlite_file_with_an_unrelated_table_a_is_not_rocprof_v1(tmp_path):
    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    db.execute('CREATE TABLE A ("x" INTEGER)')
    db.commit()
    db.close()
    assert detect(path).startswith("unknown:SQLite database of another program")
    with pytest.raises(UnsupportedInputError, match="not a supported input"):
        open_case([path])
