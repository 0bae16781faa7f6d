"""What the reports say about the Perfetto export: the file written in this run, what it left
out, and under each finding which track and time range of the export shows it.

Computed from the Analysis alone (the ledger's claims and the longest gaps), so a report
written without an export can still say where to look in one. Light on purpose: the
``perfetto`` package is imported only by the export itself (reports/perfetto.py, perfetto_writer.py).
"""

from __future__ import annotations

from tracetriage.wording import fmt_ns

LONG_STEP_TRACK = "tracetriage: flags › worst step"
# A gap under this is "short" unless it follows a sync: the timeline analyzer's bound
# (analyzers.timeline.SHORT_GAP_NS, stated here so reports import no analyzer; a test checks they agree).
SHORT_GAP_NS = 1_000_000


def left_out_text(summary: dict) -> str:
    """One line: what the export holds and what it leaves out."""
    parts = []
    for t in summary["traces"]:
        out = ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in t["left_out"].items() if v)
        parts.append(t["what"] + (f"; left out {out} outside it (--perfetto-window all keeps everything)" if out
                                  else "; nothing left out"))
    return " | ".join(parts)


def _fits(gap: dict, slices) -> bool:
    """Whether one of the analysis's longest gaps can be in one of these accounting slices: its
    main cause is claimed, and a claim on short gaps only takes gaps under 1 ms."""
    idle = [s.split(":") for s in slices if s.startswith("idle:")]
    if not any(c in ("*", gap["cause"]) for _, _, c in idle):
        return False
    return any(cls != "short" or gap["length_ns"] < SHORT_GAP_NS for _, cls, c in idle if c in ("*", gap["cause"]))


def hints(analysis) -> dict[str, dict]:
    """Per finding: ``track`` (as the Perfetto UI nests it), ``start_ns`` / ``end_ns`` (the
    capture's clock) and ``what`` is there. With an export written in this run: the longest
    piece it drew of the finding's claim, the worst step of a tail finding. Otherwise, from the
    Analysis: the longest gap that can be in a slice the finding claims, else its claimed slices
    across the window; the window for a tail finding (the steps track flags the worst step)."""
    data = analysis.data
    series = analysis.series or {}
    claims = series.get("claims") or {}
    window = data.get("window") or {}
    devices = {d["id"]: d for d in data.get("devices", [])}
    exported = series.get("perfetto_export") or {}
    largest = {(dev, fid): piece for t in exported.get("traces", []) for dev, c in t.get("largest_claim", {}).items()
               for fid, piece in c.items()}
    worst = [(pid, se) for t in exported.get("traces", []) for pid, se in t.get("worst_step", {}).items()]
    out = {}
    for f in data.get("findings", []):
        fid = f["id"]
        best = max(((dev, sum(c[fid].values())) for dev, c in claims.items() if fid in c), key=lambda x: x[1], default=None)
        if best and best[1]:
            dev = best[0]
            top = [g for g in (devices.get(dev, {}).get("gaps", {}).get("top") or []) if _fits(g, claims[dev][fid])]
            track = f"{dev} › tracetriage: findings"
            if (dev, fid) in largest:
                a, b = largest[(dev, fid)]
                out[fid] = {"track": track, "start_ns": a, "end_ns": b,
                            "what": f"its longest claimed slice ({fmt_ns(b - a)}); the track holds every slice it claims"}
            elif top:
                g = top[0]
                out[fid] = {"track": track, "start_ns": int(g["start_ns"]), "end_ns": int(g["start_ns"]) + int(g["length_ns"]),
                            "what": f"the longest gap it claims ({g['cause']}, {fmt_ns(g['length_ns'])}); the track "
                                    "holds every slice it claims"}
            elif window:
                out[fid] = {"track": track, "start_ns": window["start_ns"], "end_ns": window["end_ns"],
                            "what": "the slices it claims, across the window"}
            continue
        if not window or not devices:
            continue
        if f["axis"] == "tail" and worst:
            pid, (a, b) = worst[0]
            out[fid] = {"track": f"tracetriage: verdict › {fid}, and pid {pid}'s {LONG_STEP_TRACK}",
                        "start_ns": a, "end_ns": b,
                        "what": f"the worst step ({fmt_ns(b - a)}); the verdict track marks every long step"}
        elif f["axis"] == "tail":
            out[fid] = {"track": f"tracetriage: verdict › {fid}, and each process's {LONG_STEP_TRACK}",
                        "start_ns": window["start_ns"], "end_ns": window["end_ns"], "what": "the long steps"}
        else:
            out[fid] = {"track": f"tracetriage: verdict › {fid}", "start_ns": window["start_ns"],
                        "end_ns": window["end_ns"], "what": "the analysis window"}
    return out


def view(analysis) -> dict:
    """For the templates: ``file`` (written in this run, or None), ``left_out`` and per finding
    a ``text`` saying where to look."""
    series = analysis.series or {}
    exported = series.get("perfetto_export")
    w0 = ((analysis.data.get("window") or {}).get("start_ns")) or 0
    texts = {}
    for fid, h in hints(analysis).items():
        texts[fid] = (f"track “{h['track']}”, {fmt_ns(h['start_ns'] - w0)} to {fmt_ns(h['end_ns'] - w0)} into the "
                      f"analysis window (capture clock {h['start_ns']:,} – {h['end_ns']:,} ns): {h['what']}")
    return {"file": exported["path"] if exported else None,
            "mode": exported["mode"] if exported else None,
            "left_out": exported.get("left_out_text") if exported else None,
            "hints": texts}
