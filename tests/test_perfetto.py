"""The Perfetto export (issue 24): every bundle and real capture exported, parsed back with the
perfetto package's protobuf classes and checked against the analysis and the model.

What each export must hold (measured here independently of reports/perfetto.py):
- per device, as many kernel slices as the model has kernels starting in the exported window;
- per device, ``idle: <cause>`` slices summing to the analysis' idle-by-cause (within 1 µs);
- every finding: slices named by its id carrying its id, severity, impact and evidence lines; a
  finding that claims window slices has, per device, slices summing to its ledger claim;
- slices that Perfetto can nest (per track, each begin closed by its own end once sorted by time);
- launch -> GPU flows with both ends present, each flow id ending once;
- names from the capture carried as data: a bundle with markup and control characters in kernel
  and range names round-trips unchanged.
"""

from __future__ import annotations

import random
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from conftest import BUNDLES, REAL, ROOT, run_cli
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TracePacket, TrackEvent

from tracetriage import analyze, open_case
from tracetriage.analyzers.tracks import build_tracks
from tracetriage.model import is_kind
from tracetriage.reports import perfetto as pf
from tracetriage.reports import protowire as pw
from tracetriage.reports.perfetto_writer import SEQUENCE_ID

REAL_CAPTURES = [
    "nsys/nsys2021.2_1xRTX6000_legacy_schema_no_metadata.sqlite",
    "nsys/nsys2024.6_1xH200_nvfuser_matmul.sqlite",
    "nsys/nsys2025.1_1xH200_nvfuser_pytorch_crossentropy.sqlite",
    "nsys/nsys2025.5_2xRTX3090_cuda_uvm_osrt_sampling.sqlite",
    "nsys/nsys2026.1_tiny_cuda_app_full_export.sqlite",
    "nsys/nsys2026.2_2xH100_fastvideo_sp2_pytorch_window1s.sqlite",
    "nsys/nsys2026.2_2xH100_torchrun_nccl_flashattn_window300ms.sqlite",
    "rocprof/rocprofv3_rocpd_v3_bmm_trace_mi300x.db",
    "rocprof/rocprofv3_rocpd_v3_ck_batched_gemm_mi300x.db",
    "rocprof/rpd_v2_pytorch_matmul.rpd",
    "rocprof/rpd_v2_vllm_hipgraph.rpd.gz",
    "kineto/tracelens_h100_qwen1.5-0.5b_chat.json.gz",
    "kineto/tracelens_vllm_decode_full_graph_execution.json.gz",
    "kineto/hta_critical_path_alexnet.json.gz",
]
EVIL_KERNEL = "</td><script>alert('k')</script>\"'{{ 7*7 }} \x1b[31mred\x1b[0m\ttab\x07bell \u202eevil"
EVIL_NVTX = "decode_step <img src=http://example.com/x.png> \r\n{{ 6*7 }} \x01\x7f &amp; ]]>"


# ---------------------------------------------------------------------------------------------
# Reading an export back


class Export:
    """A parsed export: tracks, and slices per track as (start, end, name, args, flows, terminating)."""

    def __init__(self, path: Path):
        trace = Trace()
        trace.ParseFromString(path.read_bytes())
        self.packets = len(trace.packet)
        names, arg_names, arg_strings = {}, {}, {}
        self.tracks = {}  # uuid -> (name, parent)
        self.slices = defaultdict(list)
        self.order = defaultdict(list)  # uuid -> [(ts, is_begin, slice index)] in file order
        open_begin = None
        for p in trace.packet:
            if p.HasField("interned_data"):
                for x in p.interned_data.event_names:
                    names[x.iid] = x.name
                for x in p.interned_data.debug_annotation_names:
                    arg_names[x.iid] = x.name
                for x in p.interned_data.debug_annotation_string_values:
                    arg_strings[x.iid] = x.str.decode("utf-8")
            if p.HasField("track_descriptor"):
                d = p.track_descriptor
                name = d.name or (d.thread.thread_name if d.HasField("thread") else "") or \
                    (d.process.process_name if d.HasField("process") else "")
                self.tracks[d.uuid] = (name, d.parent_uuid if d.HasField("parent_uuid") else None)
            if not p.HasField("track_event"):
                continue
            assert p.trusted_packet_sequence_id == SEQUENCE_ID
            ev = p.track_event
            assert ev.track_uuid in self.tracks, "an event on a track not described before it"
            if ev.type == TrackEvent.TYPE_SLICE_BEGIN:
                assert open_begin is None
                args = {}
                for a in ev.debug_annotations:
                    key = arg_names[a.name_iid]
                    which = a.WhichOneof("value")
                    args[key] = arg_strings[a.string_value_iid] if which == "string_value_iid" else getattr(a, which)
                open_begin = (p.timestamp, ev.track_uuid, names[ev.name_iid], args, list(ev.flow_ids),
                              list(ev.terminating_flow_ids))
            else:
                assert ev.type == TrackEvent.TYPE_SLICE_END and open_begin is not None
                ts, uuid, name, args, flows, term = open_begin
                assert uuid == ev.track_uuid and p.timestamp >= ts
                idx = len(self.slices[uuid])
                self.slices[uuid].append((ts, p.timestamp, name, args, flows, term))
                self.order[uuid] += [(ts, True, idx), (p.timestamp, False, idx)]
                open_begin = None
        assert open_begin is None

    def named(self, name: str, parent: int | None = None) -> list[int]:
        return [u for u, (n, par) in self.tracks.items() if n == name and (parent is None or par == parent)]

    def children(self, parent: int) -> list[int]:
        return [u for u, (_, par) in self.tracks.items() if par == parent]

    def device_track(self, device_id: str) -> int:
        got = [u for u, (n, par) in self.tracks.items() if par is None and n.startswith(device_id + " ")]
        assert len(got) == 1, (device_id, got)
        return got[0]

    def nesting_ok(self) -> list[str]:
        """Per track, after a stable sort by time (what Perfetto does), every end closes the
        innermost open slice: the slice it was written for."""
        bad = []
        for uuid, events in self.order.items():
            events = sorted(events, key=lambda x: x[0])  # stable: ties keep file order
            stack = []
            for ts, begin, idx in events:
                if begin:
                    stack.append(idx)
                    continue
                top = stack.pop()
                s = self.slices[uuid]
                if top != idx and s[top][1] != s[idx][1]:  # another slice closed here: only fine when both end now
                    bad.append(f"{self.tracks[uuid][0]}: slice {s[idx][:3]} closed {s[top][:3]}")
                    break
        return bad


def _export(path_or_case, tmp_path, mode="steady", n=3, name="case"):
    case = open_case([path_or_case]) if not hasattr(path_or_case, "traces") else path_or_case
    analysis = analyze(case)
    out = tmp_path / f"{name}.pftrace"
    summary = pf.export(build_tracks(case, analysis, mode=mode, worst_steps=n), analysis, out)
    return case, analysis, summary, Export(out)


def _device_ids(case):
    multi = len(case.traces) > 1
    return [(i, t, d, (f"{i}:" if multi else "") + t.device_label(d)) for i, t in enumerate(case.traces)
            for d in range(len(t.devices))]


def check_export(case, analysis, summary, ex: Export) -> None:
    assert not ex.nesting_ok()
    devices = {d["id"]: d for d in analysis.data["devices"]}
    windows = analysis.data.get("windows") or []
    for i, trace, d, did in _device_ids(case):
        dev_track = ex.device_track(did)
        kids = {ex.tracks[u][0]: u for u in ex.children(dev_track)}
        # kernels: the model's rows of this device starting in the exported spans
        g = trace.gpu
        s = g["start"].to_numpy()
        spans = summary["traces"][i]["spans"]
        in_spans = np.zeros(len(g), bool)
        for a, b in spans:
            in_spans |= (s >= a) & (s < b)
        want = int((in_spans & is_kind(g, "kernel") & (g["device"].to_numpy() == d)).sum())
        got = sum(1 for u in ex.children(dev_track) if ex.tracks[u][0].startswith("stream ")
                  for x in ex.slices[u] if x[3].get("kind") == "kernel")
        assert got == want, (did, got, want)
        if spans == [[windows[i]["start_ns"], windows[i]["end_ns"]]]:
            # the analysis window: the gaps' cause slices sum to the analysis' idle by cause
            gaps = ex.slices[kids["tracetriage: idle gaps"]]
            by_cause = defaultdict(int)
            for a, b, name, *_ in gaps:
                if name.startswith("idle: "):
                    by_cause[name[len("idle: "):]] += b - a
            for cause, ns in devices[did]["gaps"]["by_cause"].items():
                assert abs(by_cause[cause] - ns) <= 1000, (did, cause, by_cause[cause], ns)
            parents = sum(b - a for a, b, name, *_ in gaps if name.startswith("idle gap"))
            assert abs(parents - devices[did]["gaps"]["total_ns"]) <= 1000
            # each claim of the ledger drawn in full on the device's findings track
            drawn = defaultdict(int)
            for a, b, name, args, *_ in ex.slices[kids["tracetriage: findings"]]:
                assert args["finding"] == name
                drawn[name] += b - a
            for fid, slices in (analysis.series["claims"].get(did) or {}).items():
                want_ns = sum(slices.values())
                n_gaps = devices[did]["gaps"]["count"] + 1
                assert abs(drawn[fid] - want_ns) <= max(1000, n_gaps), (did, fid, drawn[fid], want_ns)
    # every finding: slices named by its id, with its arguments
    by_name = defaultdict(list)
    for uuid, slices in ex.slices.items():
        for x in slices:
            by_name[x[2]].append(x)
    for f in analysis.data["findings"]:
        got = by_name.get(f["id"])
        assert got, f"finding {f['id']} has no slice"
        args = got[0][3]
        assert args["finding"] == f["id"] and args["severity"] == f["severity"] and args["axis"] == f["axis"]
        assert args["impact_pct"] == pytest.approx(f["impact_pct"], abs=1e-3)
        for k, e in enumerate(f["evidence"][:pf.MAX_EVIDENCE_ARGS]):
            assert args[f"evidence {k + 1}"] == e["text"]
    # flows: each id leaves one launch call and ends on one GPU operation
    starts, ends = defaultdict(int), defaultdict(int)
    for slices in ex.slices.values():
        for *_, flows, term in slices:
            for x in flows:
                starts[x] += 1
            for x in term:
                ends[x] += 1
    assert set(starts) == set(ends) and all(v == 1 for v in starts.values()) and all(v == 1 for v in ends.values())
    # what was left out, counted
    for i, t in enumerate(summary["traces"]):
        tr = case.traces[i]
        assert t["gpu_ops"] + t["left_out"]["gpu_ops"] == len(tr.gpu)
        assert t["api_calls"] + t["left_out"]["api_calls"] == len(tr.api)


# ---------------------------------------------------------------------------------------------


def test_wire_format_is_what_the_classes_write():
    """The numpy packets parse to exactly the packets the protobuf classes build for the same slices."""
    rng = np.random.default_rng(3)
    n = 300
    b = np.sort(rng.integers(0, 1 << 50, n))
    e = b + rng.integers(0, 1 << 20, n)
    uuid = rng.integers(1, 1 << 40, n)
    name = rng.integers(1, 1 << 21, n)
    flow = rng.integers(1, 1 << 63, n, dtype=np.uint64)
    has_flow = rng.random(n) < 0.5
    value = rng.integers(-(1 << 40), 1 << 40, n)
    has_value = rng.random(n) < 0.7
    blob = pw.Column  # noqa: F841 - documented type
    args = TrackEvent()
    args.debug_annotations.add(name_iid=9, string_value_iid=4)
    seq = TracePacket(trusted_packet_sequence_id=5, sequence_flags=TracePacket.SEQ_NEEDS_INCREMENTAL_STATE).SerializeToString()
    data = pw.slices(b, e, uuid, name, seq,
                     begin_extra=[pw.choose([args.SerializeToString()], np.where(has_value, 0, -1)),
                                  pw.fixed64(flow, pw.TAG_FLOW, has_flow)] + pw.annotation_int(7, value, has_value),
                     end_extra=[pw.fixed64(flow, pw.TAG_TERMINATING_FLOW, ~has_flow)])
    want = Trace()
    for i in range(n):
        p = want.packet.add(timestamp=int(b[i]), trusted_packet_sequence_id=5,
                            sequence_flags=TracePacket.SEQ_NEEDS_INCREMENTAL_STATE)
        ev = p.track_event
        ev.type, ev.track_uuid, ev.name_iid = TrackEvent.TYPE_SLICE_BEGIN, int(uuid[i]), int(name[i])
        if has_value[i]:
            ev.debug_annotations.add(name_iid=9, string_value_iid=4)
        if has_flow[i]:
            ev.flow_ids.append(int(flow[i]))
        if has_value[i]:
            ev.debug_annotations.add(name_iid=7, int_value=int(value[i]))
        q = want.packet.add(timestamp=int(e[i]), trusted_packet_sequence_id=5,
                            sequence_flags=TracePacket.SEQ_NEEDS_INCREMENTAL_STATE)
        q.track_event.type, q.track_event.track_uuid = TrackEvent.TYPE_SLICE_END, int(uuid[i])
        if not has_flow[i]:
            q.track_event.terminating_flow_ids.append(int(flow[i]))
    got = Trace()
    got.ParseFromString(data)
    assert got == want


@pytest.mark.parametrize("seed", range(20))
def test_compiled_join_equals_numpy(seed):
    """The C join (reports/_protowire.c) writes the bytes numpy writes: columns of any width,
    lengths 0..width, broadcast constants, uniform and mixed length patterns."""
    if pw._protowire is None:
        pytest.skip("reports/_protowire.c was not built (no C compiler at install)")
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    cols = []
    for _ in range(int(rng.integers(1, 12))):
        kind = rng.integers(0, 4)
        if kind == 0:
            cols.append(pw.constant(bytes(rng.integers(0, 256, int(rng.integers(0, 9)), dtype=np.uint8)), n))
        elif kind == 1:
            cols.append(pw.varint(rng.integers(-(1 << 62), 1 << 62, n), b"\x08", rng.random(n) < 0.7))
        elif kind == 2:
            cols.append(pw.varint(np.full(n, int(rng.integers(0, 1 << 20)))))
        else:
            cols.append(pw.choose([bytes([k]) * k for k in range(1, 6)], rng.integers(-1, 5, n)))
    pw.NATIVE = False
    try:
        want = pw.join(cols)
    finally:
        pw.NATIVE = True
    assert pw.join(cols) == want


def test_varint_edges():
    for v in [0, 1, 127, 128, 16383, 16384, (1 << 63) - 1, -1, -(1 << 63)]:
        col = pw.varint(np.array([v], np.int64))
        assert bytes(col.mat[0, :col.len[0]]) == pw._varint_bytes(v)


ALL_BUNDLES = sorted(p.name for p in BUNDLES.iterdir() if p.is_dir())


@pytest.mark.parametrize("name", ALL_BUNDLES)
def test_bundle_export(name, tmp_path):
    if not open_case([BUNDLES / name]).traces:  # serving artifacts only: no timeline to draw
        from tracetriage.errors import MissingDataError

        with pytest.raises(MissingDataError, match="no profiler trace"):
            _export(BUNDLES / name, tmp_path)
        assert not (tmp_path / "case.pftrace").exists()
        return
    case, analysis, summary, ex = _export(BUNDLES / name, tmp_path)
    check_export(case, analysis, summary, ex)


@pytest.mark.parametrize("rel", REAL_CAPTURES)
def test_real_capture_export(rel, tmp_path):
    path = REAL / rel
    if not path.exists():
        pytest.skip(f"real sample {rel} not present (../shared/samples/real is absent in this checkout)")
    case, analysis, summary, ex = _export(path, tmp_path)
    check_export(case, analysis, summary, ex)


def test_window_modes(tmp_path):
    """all keeps every row; worst-steps N keeps the N slowest steps and their neighbours and says
    what it left out; the default is the analysis window."""
    path = BUNDLES / "prefill_stall"
    case, analysis, all_summary, ex_all = _export(path, tmp_path, "all", name="all")
    check_export(case, analysis, all_summary, ex_all)
    t = all_summary["traces"][0]
    assert t["left_out"] == {"gpu_ops": 0, "api_calls": 0, "ranges": 0}
    assert sum(t["kernels_by_device"].values()) == int(is_kind(case.traces[0].gpu, "kernel").sum())

    case, analysis, worst, ex = _export(path, tmp_path, "worst-steps", 2, name="worst")
    check_export(case, analysis, worst, ex)
    from tracetriage.analyzers import steps as st

    s = st.find_steps(case.traces[0], int(case.traces[0].gpu["pid"].iloc[0]), None)
    slowest = np.argsort(-s.durations, kind="stable")[:2]
    spans = worst["traces"][0]["spans"]
    for i in slowest:
        assert any(a <= s.starts[i] and s.ends[i] <= b for a, b in spans)
    assert worst["traces"][0]["left_out"]["gpu_ops"] > 0
    assert worst["mode"] == "worst-steps 2"
    step_slices = [x for u in ex.named("tracetriage: steps") for x in ex.slices[u]]
    assert 2 <= len(step_slices) <= 6
    export_args = [x[3] for u in ex.named("tracetriage: export") for x in ex.slices[u]]
    assert export_args and export_args[0]["left_out_gpu_ops"] == worst["traces"][0]["left_out"]["gpu_ops"]


def test_hostile_names_round_trip(tmp_path):
    sys.path.insert(0, str(ROOT / "samples"))
    import generate

    ranks, _ = generate.scenario_eager_decode(random.Random(1), nvtx=True)
    r = ranks[0]
    r.kernels = [(s, e, EVIL_KERNEL if i % 3 == 0 else n, c, col) for i, (s, e, n, c, col) in enumerate(r.kernels)]
    r.nvtx = [(s, e, EVIL_NVTX) for s, e, _ in r.nvtx]
    generate.write_nsys(tmp_path / "trace.sqlite", ranks, "evil")
    case, analysis, summary, ex = _export(tmp_path / "trace.sqlite", tmp_path, "all")
    check_export(case, analysis, summary, ex)
    model_kernels = set(case.traces[0].gpu["name"].astype(str))
    model_ranges = set(case.traces[0].ranges["name"].astype(str))
    assert EVIL_KERNEL in model_kernels and EVIL_NVTX in model_ranges  # the parser keeps them as they are
    exported = defaultdict(set)
    for uuid, slices in ex.slices.items():
        kind = ex.tracks[uuid][0].split(" ")[0]
        exported[kind] |= {x[2] for x in slices}
    assert model_kernels <= exported["stream"]
    assert model_ranges <= exported["ranges"]


def test_cli(tmp_path):
    bundle = BUNDLES / "eager_decode_nvtx"
    r = run_cli("analyze", bundle, "--format", "perfetto")
    assert r.returncode == 2 and "give -o FILE" in r.stderr and not r.stdout
    r = run_cli("analyze", bundle, "--perfetto-window", "nonsense", "-o", tmp_path / "x.pftrace")
    assert r.returncode == 2 and "--perfetto-window" in r.stderr
    out = tmp_path / "case.pftrace"
    r = run_cli("analyze", bundle, "-o", out, "--perfetto-window", "worst-steps", "2")
    assert r.returncode == 0, r.stderr
    assert "worst-steps 2" in r.stderr and "left out" in r.stderr and not r.stdout
    Export(out)
    r = run_cli("analyze", bundle, "--perfetto", tmp_path / "b.pftrace", "-f", "md")
    assert r.returncode == 0 and f"Timeline exported to {tmp_path / 'b.pftrace'}".replace("_", "\\_") in r.stdout \
        or str(tmp_path / "b.pftrace") in r.stdout.replace("\\", "")
    assert "On the timeline" in r.stdout
    r = run_cli("analyze", bundle, "--perfetto", tmp_path / "c.pftrace")
    assert "TIMELINE wrote" in r.stdout and "timeline:" in r.stdout
    html = tmp_path / "r.html"
    r = run_cli("analyze", bundle, "-o", html)
    text = html.read_text()
    assert "tracetriage: findings" in text and "On the timeline" in text


def test_flows_link_launch_calls_to_their_kernels(tmp_path):
    """Each launch call of the window starts one flow, ending on the kernel with its (pid,
    correlation): counted from the model's join, and checked end to end on the slices."""
    case, analysis, summary, ex = _export(BUNDLES / "eager_decode", tmp_path)
    trace = case.traces[0]
    lo, hi = summary["traces"][0]["spans"][0]
    g, a = trace.gpu, trace.api
    gw = g[(g["start"] >= lo) & (g["start"] < hi) & (g["correlation"] >= 0)]
    aw = a[(a["start"] >= lo) & (a["start"] < hi) & a["category"].isin(["launch", "graph_launch"])]
    joined = gw.merge(aw, on=["pid", "correlation"], suffixes=("", "_api")).drop_duplicates(["pid", "correlation"])
    starts = {f: x for sl in ex.slices.values() for x in sl for f in x[4]}
    ends = {f: x for sl in ex.slices.values() for x in sl for f in x[5]}
    assert len(starts) == len(joined) > 10_000
    for f, call in starts.items():
        kernel = ends[f]
        assert call[2] == "cudaLaunchKernel" and kernel[3]["kind"] == "kernel"
        assert call[3]["correlation"] == kernel[3]["correlation"] and call[0] <= kernel[0]


def test_export_without_the_compiled_join_is_the_same_file(tmp_path, monkeypatch):
    case = open_case([BUNDLES / "tp4_island"])
    analysis = analyze(case)
    tracks = build_tracks(case, analysis)
    pf.export(tracks, analysis, tmp_path / "c.pftrace")
    monkeypatch.setattr(pw, "NATIVE", False)
    pf.export(tracks, analysis, tmp_path / "numpy.pftrace")
    assert (tmp_path / "c.pftrace").read_bytes() == (tmp_path / "numpy.pftrace").read_bytes()


def test_batch_exports_each_case_timeline(tmp_path):
    """batch --perfetto: a timeline.pftrace per case with a trace, named by its report; a serving-only
    case gets none and still succeeds; a re-run without --perfetto is not served the old records."""
    from tracetriage.batches import run_batch
    from tracetriage.runtime import Runtime

    inputs = [str(BUNDLES / "tp4_island"), str(BUNDLES / "serving_healthy")]
    res = run_batch(inputs, str(tmp_path / "out"), runtime=Runtime(jobs=1), progress=False, perfetto_window=("steady", 0))
    assert res.failed == 0
    timelines = sorted((tmp_path / "out").rglob("timeline.pftrace"))
    assert len(timelines) == 1
    ex = Export(timelines[0])
    assert len([u for u, (n, par) in ex.tracks.items() if par is None and n.startswith("GPU")]) == 4
    assert "Timeline exported to timeline.pftrace" in (timelines[0].parent / "report.html").read_text()
    again = run_batch(inputs, str(tmp_path / "out"), runtime=Runtime(jobs=1), progress=False)
    assert again.reused == 0


def test_renderers_import_no_analyzer():
    """reports/perfetto*.py render the Analysis and its Tracks: none imports tracetriage.analyzers
    (at the top or inside a function)."""
    import ast

    for name in ("perfetto.py", "perfetto_writer.py", "perfetto_view.py"):
        tree = ast.parse((ROOT / "reports" / name).read_text(encoding="utf-8"))
        imported = [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module]
        imported += [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
        assert not [m for m in imported if m.startswith(("tracetriage.analyzers", "analyzers"))], (name, imported)


def test_short_gap_bound_is_the_timelines():
    from tracetriage.analyzers import timeline
    from tracetriage.reports import perfetto_view

    assert perfetto_view.SHORT_GAP_NS == timeline.SHORT_GAP_NS


class _Gone:
    """Stands for a trace table the export must not read: any use of it raises."""

    def __getattr__(self, name):
        raise AssertionError(f"the export read the trace ({name})")

    def __getitem__(self, key):
        raise AssertionError(f"the export read the trace ([{key!r}])")

    def __len__(self):
        raise AssertionError("the export read the trace (len)")


def test_export_renders_tracks_built_beforehand(tmp_path, monkeypatch):
    """Given the Tracks, the export reads neither the trace's tables nor runs an analyzer: the
    same file with every table of the case replaced by a sentinel and the analyzers disabled."""
    from dataclasses import fields

    from tracetriage.analyzers import steps, timeline, tracks

    case = open_case([BUNDLES / "tp4_island"])
    analysis = analyze(case)
    built = build_tracks(case, analysis, mode="worst-steps", worst_steps=2)
    pf.export(built, analysis, tmp_path / "before.pftrace")
    for trace in case.traces:
        for table in fields(trace):
            setattr(trace, table.name, _Gone())
    case.traces[:] = [_Gone()]
    for module, name in ((timeline, "device_timeline"), (steps, "find_steps"), (tracks, "build_tracks")):
        monkeypatch.setattr(module, name, _Gone())
    summary = pf.export(built, analysis, tmp_path / "after.pftrace")
    assert (tmp_path / "before.pftrace").read_bytes() == (tmp_path / "after.pftrace").read_bytes()
    assert summary["mode"] == "worst-steps 2" and summary["traces"][0]["gpu_ops"] > 0
