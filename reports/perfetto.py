"""The capture and its verdict on one timeline: a Perfetto trace (``--format perfetto``).

Renders the Analysis and its ``Tracks`` (analyzers/tracks.py: what the export holds, the idle
gaps as the analysis attributed them, the findings' claimed slices, the steps, the flows),
written by :mod:`perfetto_writer`; nothing here computes a metric or reads the trace. Nothing
is held per event: memory is one slice of rows (CHUNK_ROWS) plus the name tables.

Times are the capture's own clock (ns), so a timestamp reads the same in Nsight Systems,
rocprofv3 or the PyTorch trace. Tracks:

* per device ``<device id> <GPU name>``: ``stream N`` (kernels, copies with direction and
  bytes, memsets, graph replays; collectives carry ``collective``), and tracetriage's own
  ``tracetriage: idle gaps`` (each gap a slice ``idle gap (<class>)`` holding one slice
  ``idle: <cause>`` per cause, laid end to end), ``tracetriage: findings`` (each finding's
  claimed nanoseconds, from the same ledger the verdict uses) and ``tracetriage: flags``
  (the longest gaps of the analysis);
* per process: one thread track per host thread (runtime/driver calls), ``ranges <domain>
  (tid N)`` (NVTX / roctx / user annotations), ``tracetriage: steps`` with the worst step
  flagged;
* ``tracetriage: window`` (the analysis window, the excluded warm-up / set-up and tail),
  ``tracetriage: export`` (what this file holds and what it leaves out, as arguments) and
  ``tracetriage: verdict`` (findings with no slice of a device window: tail, serving, errors);
* flows from each launch call to the first GPU operation with its (pid, correlation).
"""

from __future__ import annotations

import numpy as np

from tracetriage.reports import protowire as pw
from tracetriage.reports.perfetto_writer import CHUNK_ROWS, Lanes, NameTable, Writer

GAP_CLASS_NAMES = {"after_sync": "idle gap (after sync)", "short": "idle gap (short)", "long": "idle gap (long)"}
MAX_EVIDENCE_ARGS = 12


def export(tracks, analysis, path) -> dict:
    """Write ``tracks`` (an analyzers.tracks.Tracks) with ``analysis``'s annotations to ``path``
    (a Perfetto protobuf trace). Returns what was written and what was left out (also in the
    trace, on ``tracetriage: export``)."""
    findings = analysis.data.get("findings", [])
    with open(path, "wb", buffering=1 << 20) as fh:
        writer = Writer(fh)
        for trace in tracks.traces:
            _TraceExport(writer, tracks, trace, findings).run()
        _verdict_track(writer, findings, tracks.traces)
        summary = _summary(tracks)
        info = writer.track(name="tracetriage: export", rank=-3)
        for trace, written in zip(tracks.traces, summary["traces"]):
            for a, b in trace.spans:
                writer.slice(info, a, b, "exported span", {
                    "trace": written["path"], "mode": summary["mode"], "what": trace.spans_text,
                    "left_out_gpu_ops": written["left_out"]["gpu_ops"], "left_out_api_calls": written["left_out"]["api_calls"],
                    "left_out_ranges": written["left_out"]["ranges"], "clock": "the capture's own (ns)"})
        writer.flush_interned()
    return summary


def _summary(tracks) -> dict:
    traces = []
    for trace in tracks.traces:
        traces.append({"path": trace.path, "spans": [list(span) for span in trace.spans], "what": trace.spans_text,
                       "kernels_by_device": trace.gpu.kernels_by_device, "gpu_ops": trace.gpu.rows.count,
                       "api_calls": trace.api.rows.count, "ranges": trace.ranges.rows.count,
                       "gap_ns_by_cause": {device.label: device.gap_ns_by_cause for device in trace.devices},
                       "claimed_ns": {device.label: device.claimed_ns for device in trace.devices
                                      if device.claimed_ns is not None},
                       "largest_claim": {device.label: device.largest_claim for device in trace.devices
                                         if device.largest_claim is not None},
                       "worst_step": {steps.pid: (int(steps.starts[steps.worst]), int(steps.ends[steps.worst]))
                                      for steps in trace.steps if steps.worst_exported},
                       "left_out": {name: table.rows.total - table.rows.count
                                    for name, table in (("gpu_ops", trace.gpu), ("api_calls", trace.api),
                                                        ("ranges", trace.ranges))}})
    mode = f"worst-steps {tracks.worst_steps}" if tracks.mode == "worst-steps" else tracks.mode
    return {"mode": mode, "traces": traces}


def _finding_args(finding: dict, slice_name: str | None = None) -> dict:
    args = {"finding": finding["id"], "severity": finding["severity"], "axis": finding["axis"],
            "impact_pct": round(float(finding.get("impact_pct") or 0.0), 3),
            "impact_denominator": finding.get("impact_denominator"), "title": finding.get("title")}
    if slice_name:
        args["claims"] = slice_name
    for k, evidence in enumerate((finding.get("evidence") or [])[:MAX_EVIDENCE_ARGS]):
        args[f"evidence {k + 1}"] = evidence.get("text") or ""
    return args


def _chunks(ranges):
    for first, last in ranges:
        for k in range(first, last, CHUNK_ROWS):
            yield slice(k, min(k + CHUNK_ROWS, last))


def _rows(selected) -> list:
    """The selected rows, CHUNK_ROWS at a time, in start order (slices, or row arrays)."""
    if selected.order is None:
        return list(_chunks(selected.ranges))
    return [selected.order[chunk] for chunk in _chunks(selected.ranges)]


def _flow_column(flows, rows: np.ndarray, tag: bytes):
    """The flow ids of these rows that start (or end) a flow, as a TrackEvent field; None if none does."""
    if not flows.rows.size:
        return None
    at = np.minimum(np.searchsorted(flows.rows, rows), flows.rows.size - 1)
    present = flows.rows[at] == rows
    if not present.any():
        return None
    return pw.fixed64(np.where(present, flows.ids[at], 0), tag, present)


def _pair_key(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.astype(np.int64) << 32) | (b.astype(np.int64) & 0xFFFFFFFF)


def _split_key(key: int) -> tuple[int, int]:
    high, low = int(key) >> 32, int(key) & 0xFFFFFFFF
    return high, low - (1 << 32) if low >= 1 << 31 else low


class _TraceExport:
    """One trace's tracks, written in a fixed order (device tracks, GPU operations, host calls,
    ranges, steps, the window, then each device's tracetriage tracks)."""

    def __init__(self, writer: Writer, tracks, trace, findings: list[dict]):
        self.w, self.trace = writer, trace
        self.multi = len(tracks.traces) > 1
        self.gap_classes, self.causes = tracks.gap_classes, tracks.causes
        self.findings = {finding["id"]: finding for finding in findings}
        self.process_tracks: dict[int, int] = {}
        self.device_tracks: dict[int, int] = {}

    def process_track(self, pid: int) -> int:
        got = self.process_tracks.get(pid)
        if got is None:
            name = str(self.trace.process_names.get(pid, f"pid {pid}"))
            got = self.process_tracks[pid] = self.w.track(pid=pid, process_name=f"{self.trace.prefix}{name}" if self.multi
                                                          else name)
        return got

    def run(self) -> None:
        for device in self.trace.devices:
            self.device_tracks[device.index] = self.w.track(name=f"{device.label} {device.name}", rank=device.index,
                                                            ordered=True)
        self.gpu()
        self.api()
        self.ranges()
        self.steps_tracks()
        self.window_tracks()
        for device in self.trace.devices:
            self.device_slices(device)

    # -- the capture ---------------------------------------------------------------------------
    def gpu(self) -> None:
        w, ops = self.w, self.trace.gpu
        if not ops.rows.total:
            return
        kinds, colls, cks = ops.kind.categories, ops.collective.categories, ops.copy_kind.categories
        kind_codes, coll_codes, ck_codes = ops.kind.codes, ops.collective.codes, ops.copy_kind.codes
        names = NameTable(w, ops.name, "(unnamed)")
        n_kinds = len(kinds) + 1
        blob_index: dict[int, int] = {}
        blobs: list[bytes] = []
        bytes_iid, corr_iid = w.arg_name("bytes"), w.arg_name("correlation")

        def make(key, lane):
            device, stream = _split_key(key)
            label = f"stream {stream}" if stream >= 0 else "stream unknown"
            return w.track(name=label + (" (overlapping)" if lane else ""), parent=self.device_tracks[device],
                           rank=2 * (stream & 0xFFFF) + lane + 10)

        lanes = Lanes(make)
        for rows in _chunks(ops.rows.ranges):
            s, e = ops.start[rows], np.maximum(ops.end[rows], ops.start[rows])
            keys = _pair_key(ops.device[rows], ops.stream[rows])
            track = lanes.assign(keys, s, e)
            combo = ((kind_codes[rows].astype(np.int64) + 1) * (len(colls) + 1) + coll_codes[rows] + 1) * (len(cks) + 1) \
                + ck_codes[rows] + 1
            combo = (combo * 2 + ops.pageable[rows]) * 2 + ops.in_graph[rows]
            uniq, inv = np.unique(combo, return_inverse=True)
            for c in uniq.tolist():
                if c not in blob_index:
                    x = c
                    graph_node, x = x % 2, x // 2
                    page, x = x % 2, x // 2
                    ck, x = x % (len(cks) + 1) - 1, x // (len(cks) + 1)
                    co, x = x % (len(colls) + 1) - 1, x // (len(colls) + 1)
                    kd = x - 1
                    kind = str(kinds[kd]) if 0 <= kd < n_kinds - 1 else "unknown"
                    args = {"kind": kind}
                    if co >= 0:
                        args["collective"] = str(colls[co])
                    if kind in ("memcpy", "memset"):
                        other = "set" if kind == "memset" else "other"
                        args["direction"] = str(cks[ck]) if ck >= 0 and kind == "memcpy" else other
                        args["pageable"] = bool(page)
                    if graph_node:
                        args["in_graph"] = True
                    blob_index[c] = len(blobs)
                    blobs.append(w.annotations(args))
            blob_rows = np.array([blob_index[c] for c in uniq.tolist()], np.int64)[inv]
            corr = ops.correlation[rows]
            extra = [pw.choose(blobs, blob_rows)]
            extra += pw.annotation_int(bytes_iid, ops.nbytes[rows], ops.is_copy[rows] & (ops.nbytes[rows] >= 0))
            extra += pw.annotation_int(corr_iid, corr, corr >= 0)
            flow = _flow_column(ops.flows, np.arange(rows.start, rows.stop), pw.TAG_TERMINATING_FLOW)
            if flow is not None:
                extra.append(flow)
            w.raw(pw.slices(s, e, track, names(rows), w.sequence, begin_extra=extra))

    def api(self) -> None:
        w, calls = self.w, self.trace.api
        if not calls.rows.total:
            return
        names = NameTable(w, calls.name, "(unnamed call)")
        blobs = [w.annotations({"category": str(c)}) for c in calls.group.categories]
        corr_iid = w.arg_name("correlation")

        def make(key, lane):
            pid, tid = _split_key(key)
            self.process_track(pid)
            if not lane:
                return w.track(name=f"thread {tid}", pid=pid, tid=tid)
            return w.track(name=f"CUDA/HIP calls (tid {tid}, overlapping)", parent=self.process_track(pid))

        lanes = Lanes(make)
        for rows in _rows(calls.rows):
            s, e = calls.start[rows], np.maximum(calls.end[rows], calls.start[rows])
            track = lanes.assign(_pair_key(calls.pid[rows], calls.tid[rows]), s, e)
            corr = calls.correlation[rows]
            extra = [pw.choose(blobs, calls.group.codes[rows].astype(np.int64))]
            extra += pw.annotation_int(corr_iid, corr, corr >= 0)
            at = np.arange(rows.start, rows.stop) if isinstance(rows, slice) else rows
            flow = _flow_column(calls.flows, at, pw.TAG_FLOW)
            if flow is not None:
                extra.append(flow)
            w.raw(pw.slices(s, e, track, names(rows), w.sequence, begin_extra=extra))

    def ranges(self) -> None:
        w, ranges = self.w, self.trace.ranges
        if not ranges.rows.total:
            return
        names = NameTable(w, ranges.name, "(unnamed range)")
        domain_codes, domains = ranges.group.codes, ranges.group.categories

        owners: list[tuple[int, int, int]] = []  # a track's key -> its (pid, tid, domain code)
        ids: dict = {}  # (pid, tid, domain code) -> key of its track

        def make(key, lane):
            pid, tid, code = owners[key]
            domain = str(domains[code]) if code >= 0 else "default"
            return w.track(name=f"ranges {domain} (tid {tid})" + (" (overlapping)" if lane else ""),
                           parent=self.process_track(pid))

        lanes = Lanes(make)
        for rows in _rows(ranges.rows):
            s, e = ranges.start[rows], np.maximum(ranges.end[rows], ranges.start[rows])
            cols = np.stack([ranges.pid[rows].astype(np.int64), ranges.tid[rows].astype(np.int64),
                             domain_codes[rows].astype(np.int64)])
            uniq, inv = np.unique(cols, axis=1, return_inverse=True)
            ids_here = []
            for j in range(uniq.shape[1]):
                owner = tuple(int(x) for x in uniq[:, j])
                if owner not in ids:
                    ids[owner] = len(owners)
                    owners.append(owner)
                ids_here.append(ids[owner])
            keys = np.array(ids_here, np.int64)[inv.ravel()]
            track = lanes.assign(keys, s, e)
            w.raw(pw.slices(s, e, track, names(rows), w.sequence))

    # -- tracetriage's own tracks ------------------------------------------------------------------
    def steps_tracks(self) -> None:
        w = self.w
        for steps in self.trace.steps:
            track = w.track(name="tracetriage: steps", parent=self.process_track(steps.pid))
            blobs = [w.annotations({"source": steps.source, "kind": "decode"}),
                     w.annotations({"source": steps.source, "kind": "prefill"})]
            idx = steps.exported
            labelled = steps.is_prefill.size > 0
            name = np.where(steps.is_prefill[idx], w.name("prefill step"), w.name("step")) if labelled else w.name("step")
            which = steps.is_prefill[idx].astype(np.int64) if labelled else np.zeros(idx.size, np.int64)
            extra = [pw.choose(blobs, which)] + pw.annotation_int(w.arg_name("step"), idx)
            w.raw(pw.slices(steps.starts[idx], steps.ends[idx], track, name, w.sequence, begin_extra=extra))
            flags = w.track(name="tracetriage: flags", parent=self.process_track(steps.pid))
            if steps.worst_exported:
                worst = steps.worst
                w.slice(flags, int(steps.starts[worst]), int(steps.ends[worst]), "worst step",
                        {"step": worst, "duration_ns": steps.worst_duration_ns, "x_median": round(steps.worst_x_median, 2),
                         "steps_source": steps.source})

    def window_tracks(self) -> None:
        w, window = self.w, self.trace.window
        lo, hi = window.start_ns, window.end_ns
        track = w.track(name=f"{self.trace.prefix}tracetriage: window", rank=-2)
        if window.first_ns < lo:
            warmup = window.warmup_steps_excluded
            what = f"{warmup:,} warm-up step{'' if warmup == 1 else 's'}" if warmup else "set-up before the window"
            w.slice(track, window.first_ns, lo, "excluded: warm-up / set-up",
                    {"what": what, "setup_excluded_ns": window.setup_excluded_ns})
        w.slice(track, lo, hi, "analysis window", {"source": window.source, "duration_ns": hi - lo,
                                                  "warmup_steps_excluded": window.warmup_steps_excluded})
        if window.last_ns > hi:
            w.slice(track, hi, window.last_ns, "excluded: after the window", {"what": "activity after the last steady step"})

    def device_slices(self, device) -> None:
        """The device's gaps, as the analysis attributed them, and the findings' claims, in the
        batches the tracks hold them in."""
        w = self.w
        parent = self.device_tracks[device.index]
        gaps_track = w.track(name="tracetriage: idle gaps", parent=parent, rank=1)
        find_track = w.track(name="tracetriage: findings", parent=parent, rank=2)
        flag_track = w.track(name="tracetriage: flags", parent=parent, rank=3)
        class_iid = np.array([w.name(GAP_CLASS_NAMES[name]) for name in self.gap_classes], np.int64)
        cause_iid = np.array([w.name(f"idle: {cause}") for cause in self.causes], np.int64)
        claim_blobs, claim_iid = [], np.empty(0, np.int64)
        if device.claimed:
            for fid, claimed in device.claimed.items():
                text = ", ".join(f"{name} {ns / 1e6:.3f} ms" for name, ns in claimed.items())
                claim_blobs.append(w.annotations(_finding_args(self.findings[fid], text)))
            claim_iid = np.array([w.name(fid) for fid in device.claimed], np.int64)
        done = np.zeros(3, np.int64)
        for batch in device.batches:
            c0, g0, k0 = done
            c1, g1, k1 = batch
            claims, gaps, causes = device.claims, device.gaps, device.causes
            if c1 > c0:
                who = claims.code[c0:c1]
                w.raw(pw.slices(claims.start[c0:c1], claims.end[c0:c1], find_track, claim_iid[who], w.sequence,
                                begin_extra=[pw.choose(claim_blobs, who.astype(np.int64))]))
            if g1 > g0:
                w.raw(pw.slices(gaps.start[g0:g1], gaps.end[g0:g1], gaps_track, class_iid[gaps.code[g0:g1]], w.sequence))
            if k1 > k0:
                w.raw(pw.slices(causes.start[k0:k1], causes.end[k0:k1], gaps_track, cause_iid[causes.code[k0:k1]],
                                w.sequence))
            done = batch
        for gap in device.longest_gaps:
            w.slice(flag_track, gap.start_ns, gap.start_ns + gap.length_ns, f"longest gap #{gap.rank}",
                    {"length_ns": gap.length_ns, "cause": gap.cause, "rank": gap.rank})


def _verdict_track(w: Writer, findings: list[dict], traces) -> None:
    """Findings that claim no device slice (tail, serving, errors, healthy) on their own tracks,
    over what they are about: the long steps of a tail finding, else the exported span."""
    drawn = {fid for trace in traces for device in trace.devices for fid, ns in (device.claimed_ns or {}).items() if ns}
    rest = [finding for finding in findings if finding["id"] not in drawn]
    if not rest or not traces:
        return
    group = w.track(name="tracetriage: verdict", rank=-1)
    first, last = traces[0].spans[0][0], traces[0].spans[-1][1]
    for finding in rest:
        track = w.track(name=f"{finding['id']} ({finding['severity']})", parent=group)
        args = _finding_args(finding)
        spans = []
        if finding["axis"] == "tail":
            spans = [(int(steps.starts[i]), int(steps.ends[i])) for trace in traces for steps in trace.steps
                     for i in steps.long_exported]
        for a, b in sorted(spans or [(first, last)]):
            w.slice(track, a, b, finding["id"], args)
