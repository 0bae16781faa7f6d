"""rocprofv3 JSON output (--output-format json). The layout is the one rocprofiler-sdk writes
(source/lib/output/generateJSON.cpp) and validates (tests/rocprofv3/tracing/validate.py). No public
capture in that format was found, so the real MI300X rocpd database is rewritten here, with plain SQL,
into the JSON layout: both readers must then see the same capture."""

import json
import sqlite3

import numpy as np
import pytest
from conftest import real, run_cli, sql

from tracetriage import analyze, open_case
from tracetriage.case import detect

ROCPD = "rocprofv3_rocpd_v3_bmm_trace_mi300x.db"


def rocpd_to_json(db_path, out, wrap_list=True, dispatch_key="kernel_dispatch"):
    """The rocpd database as rocprofv3 would have written it with --output-format json
    (one process; kind/operation indices into strings.buffer_records; correlation_id.internal
    links each dispatch to its launching call, which rocpd keeps as rocpd_event.stack_id)."""
    con = sqlite3.connect(f"file:{db_path}?immutable=1", uri=True)
    q = lambda s: con.execute(s).fetchall()  # noqa: E731
    api_rows = q("SELECT r.id, r.tid, r.start, r.end, s.string FROM rocpd_region r JOIN rocpd_string s ON s.id = r.name_id")
    api_names = sorted({r[4] for r in api_rows})
    kinds = [{"kind": "NONE", "operations": []},
             {"kind": "HIP_RUNTIME_API", "operations": api_names},
             {"kind": "KERNEL_DISPATCH", "operations": ["KERNEL_DISPATCH_NONE", "KERNEL_DISPATCH_COMPLETE"]}]
    dispatches = [
        {"size": 1, "kind": 2, "operation": 1, "thread_id": tid,
         "correlation_id": {"internal": stack, "external": {"value": 0}},
         "start_timestamp": start, "end_timestamp": end, "stream_id": {"handle": stream},
         "dispatch_info": {"agent_id": {"handle": agent}, "queue_id": {"handle": queue}, "kernel_id": kid,
                           "dispatch_id": did, "grid_size": {"x": gx, "y": 1, "z": 1},
                           "workgroup_size": {"x": wx, "y": 1, "z": 1}}}
        for tid, start, end, stream, agent, queue, kid, did, gx, wx, stack in q(
            "SELECT k.tid, k.start, k.end, k.stream_id, k.agent_id, k.queue_id, k.kernel_id, k.dispatch_id, "
            "k.grid_size_x, k.workgroup_size_x, e.stack_id FROM rocpd_kernel_dispatch k JOIN rocpd_event e ON e.id = k.event_id")]
    hip = [{"size": 1, "kind": 1, "operation": api_names.index(name), "thread_id": tid,
            "correlation_id": {"internal": rid, "external": {"value": 0}}, "start_timestamp": s, "end_timestamp": e}
           for rid, tid, s, e, name in api_rows]
    agents = [{"id": {"handle": i}, "type": 2 if t == "GPU" else 1, "node_id": i, "logical_node_type_id": ti,
               "name": name, "product_name": product}
              for i, t, ti, name, product in q("SELECT id, type, type_index, name, product_name FROM rocpd_info_agent")]
    symbols = [{"kernel_id": i, "kernel_name": k, "formatted_kernel_name": d}
               for i, k, d in q("SELECT id, kernel_name, display_name FROM rocpd_info_kernel_symbol")]
    pid = q("SELECT pid FROM rocpd_info_process")[0][0]
    proc = {"metadata": {"pid": pid, "init_time": 0, "fini_time": 0, "command": ["./bmm"]}, "agents": agents,
            "strings": {"buffer_records": kinds, "marker_api": []}, "kernel_symbols": symbols,
            "buffer_records": {dispatch_key: dispatches, "hip_api": hip, "hsa_api": [], "marker_api": [], "memory_copy": []}}
    con.close()
    out.write_text(json.dumps({"rocprofiler-sdk-tool": [proc] if wrap_list else proc}))
    return out


@pytest.mark.parametrize("layout", [{}, {"wrap_list": False, "dispatch_key": "kernel_dispatches"}])
def test_same_capture_as_rocpd(tmp_path, layout):
    db = real("rocprof", ROCPD)
    path = rocpd_to_json(db, tmp_path / "bmm_results.json", **layout)
    assert detect(path) == "rocprof_json"
    a, b = open_case([db]).traces[0], open_case([path]).traces[0]
    assert b.counts()["kernels"] == a.counts()["kernels"] == 150
    assert b.counts()["memset"] == a.counts()["memset"] == 151
    assert b.counts()["api_calls"] == sql(db, "SELECT count(*) FROM rocpd_region")[0][0]
    for col in ("start", "end", "correlation"):
        assert np.array_equal(np.sort(a.gpu[col].to_numpy()), np.sort(b.gpu[col].to_numpy())), col
    assert b.devices["name"].tolist() == ["AMD Instinct MI300X"] and b.devices["gpu_index"].tolist() == [0]
    assert np.isin(b.gpu["correlation"], b.api["correlation"]).all()  # every dispatch finds its launch
    ra, rb = analyze(open_case([db])), analyze(open_case([path]))
    assert rb.data["window"]["duration_ns"] == ra.data["window"]["duration_ns"]
    assert rb.data["devices"][0]["busy_ns"] == ra.data["devices"][0]["busy_ns"]
    assert [f["id"] for f in rb.findings] == [f["id"] for f in ra.findings]


def test_copies_markers_and_directions(tmp_path):
    """A small capture in the shape of rocprofiler-sdk's own validate.py (matrixTranspose: one
    kernel, a host-to-device and a device-to-host copy, a roctx range)."""
    kinds = [{"kind": "NONE", "operations": []},
             {"kind": "HIP_RUNTIME_API", "operations": ["hipMemcpy", "hipLaunchKernel"]},
             {"kind": "KERNEL_DISPATCH", "operations": ["KERNEL_DISPATCH_COMPLETE"]},
             {"kind": "MEMORY_COPY", "operations": ["MEMORY_COPY_NONE", "MEMORY_COPY_HOST_TO_HOST",
                                                     "MEMORY_COPY_HOST_TO_DEVICE", "MEMORY_COPY_DEVICE_TO_HOST"]},
             {"kind": "MARKER_CORE_API", "operations": ["roctxRangePushA"]}]
    agents = [{"id": {"handle": 11}, "type": 1, "node_id": 0, "name": "EPYC"},
              {"id": {"handle": 22}, "type": 2, "node_id": 1, "logical_node_type_id": 0, "name": "gfx90a",
               "product_name": "AMD Instinct MI210"}]

    def rec(kind, op, corr, s, e, **kw):
        return {"kind": kind, "operation": op, "thread_id": 7, "correlation_id": {"internal": corr}, "start_timestamp": s,
                "end_timestamp": e, **kw}

    symbol = {"kernel_id": 1, "kernel_name": "_Z15matrixTransposePfS_i.kd",
              "formatted_kernel_name": "matrixTranspose(float*, float*, int)"}
    proc = {"metadata": {"pid": 4242}, "agents": agents, "kernel_symbols": [symbol],
            "strings": {"buffer_records": kinds, "marker_api": [{"key": 9, "value": "step"}]},
            "buffer_records": {
                "hip_api": [rec(1, 0, 1, 100, 5_000), rec(1, 1, 2, 5_100, 5_200), rec(1, 0, 3, 5_300, 20_000)],
                "memory_copy": [rec(3, 2, 1, 1_000, 4_000, src_agent_id={"handle": 11}, dst_agent_id={"handle": 22},
                                    bytes=4 << 20),
                                rec(3, 3, 3, 16_000, 19_000, src_agent_id={"handle": 22}, dst_agent_id={"handle": 11},
                                    bytes=4 << 20)],
                "kernel_dispatch": [rec(2, 0, 2, 5_500, 15_000, dispatch_info={"kernel_id": 1, "agent_id": {"handle": 22}},
                                        stream_id={"handle": 0})],
                "marker_api": [rec(4, 0, 9, 50, 20_500)]}}
    path = tmp_path / "mt_results.json"
    path.write_text(json.dumps({"rocprofiler-sdk-tool": [proc]}))
    t = open_case([path]).traces[0]
    g = t.gpu.sort_values("start")
    assert g["kind"].tolist() == ["memcpy", "kernel", "memcpy"]
    assert g["copy_kind"].tolist()[::2] == ["HtoD", "DtoH"] and g["bytes"].tolist()[::2] == [4 << 20, 4 << 20]
    assert g["name"].tolist()[1] == "matrixTranspose(float*, float*, int)"
    assert t.devices["name"].tolist() == ["AMD Instinct MI210"] and set(g["pid"]) == {4242}
    assert t.ranges["name"].tolist() == ["step"]
    assert sorted(t.api["name"].astype(str)) == ["hipLaunchKernel", "hipMemcpy", "hipMemcpy"]
    r = run_cli("analyze", path, "--format", "json", "--no-cache")
    assert r.returncode == 0, r.stderr
    import jsonschema
    from conftest import ROOT
    jsonschema.validate(json.loads(r.stdout), json.loads((ROOT / "reports" / "analysis.schema.json").read_text()))


@pytest.mark.parametrize("doc,code,words", [
    ({"rocprofiler-sdk-tool": [{"buffer_records": {"kernel_dispatch": []}}]}, 4, "no kernel dispatch"),
    ({"rocprofiler-sdk-tool": "oops"}, 3, "list of processes"),
    ({"rocprofiler-sdk-tool": [{"buffer_records": {"kernel_dispatch": [{"start_timestamp": "x", "end_timestamp": [],
                                                                         "dispatch_info": 5}]}}]}, 4, "nothing to analyze"),
])
def test_bad_rocprof_json_is_one_line(tmp_path, doc, code, words):
    f = tmp_path / "bad_results.json"
    f.write_text(json.dumps(doc))
    p = run_cli("analyze", f, "--no-cache")
    assert p.returncode == code, p.stderr
    assert words in p.stderr and p.stderr.count("\n") == 1


def test_correlation_ids_are_per_process(tmp_path):
    """Two processes in one file reuse correlation id 1: each kernel is matched to the launch of
    its own process (one is a graph launch, the other is not)."""
    kinds = [{"kind": "NONE", "operations": []}, {"kind": "HIP_RUNTIME_API", "operations": ["hipLaunchKernel", "hipGraphLaunch"]},
             {"kind": "KERNEL_DISPATCH", "operations": ["KERNEL_DISPATCH_COMPLETE"]}]

    def proc(pid, op, t0):
        return {"metadata": {"pid": pid}, "strings": {"buffer_records": kinds},
                "agents": [{"id": {"handle": 2}, "type": 2, "logical_node_type_id": 0, "name": "gfx942"}],
                "kernel_symbols": [{"kernel_id": 1, "formatted_kernel_name": "gemm"}],
                "buffer_records": {
                    "hip_api": [{"kind": 1, "operation": op, "thread_id": pid, "correlation_id": {"internal": 1},
                                 "start_timestamp": t0, "end_timestamp": t0 + 100}],
                    "kernel_dispatch": [{"kind": 2, "operation": 0, "thread_id": pid, "correlation_id": {"internal": 1},
                                         "start_timestamp": t0 + 200, "end_timestamp": t0 + 900,
                                         "dispatch_info": {"kernel_id": 1, "agent_id": {"handle": 2}}}]}}

    path = tmp_path / "two_results.json"
    path.write_text(json.dumps({"rocprofiler-sdk-tool": [proc(10, 1, 1000), proc(20, 0, 1050)]}))
    g = open_case([path]).traces[0].gpu
    assert dict(zip(g["pid"], g["in_graph"])) == {10: True, 20: False}
