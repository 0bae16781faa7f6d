"""Before/after comparison of two analyses (``tracetriage compare``): the method's confirm /
falsify step. Schema ``tracetriage.compare/2`` (``reports/compare.schema.json``).

Absolute time per step first. A share of a window never judges a change on its own: a
step three times shorter makes every remaining cost a bigger share. So:

* **Comparability before judgement** (:func:`comparability`): the same device models and
  count, the same world size (processes driving GPUs), the same program (its executable and
  script or module, flags aside: the fix may be a flag), and enough steps on both sides.
  Any of these failing makes the pair incomparable: the verdict is ``inconclusive`` and the
  reason names the difference. The time-weighted overlap of kernel names, NVTX step-range
  names and the capture format only move the confidence: the change under test may change
  the kernels (graphs turned on), and a graph-level capture records replays without their
  kernels (overlap not measured, and said so).
* **Step time per rank** (:func:`step_test`): ranks are matched in order (lowest GPU index
  first). ``ratio`` = after p50 / before p50; its 95% interval is a percentile bootstrap of
  the ratio of medians over the two step-duration samples, and the change is ``significant``
  when a two-sided Mann-Whitney U test rejects "same distribution" at :data:`ALPHA`, the
  interval excludes 1, *and* the change is at least the practical threshold (default 5% of
  the step). Two captures of one workload always differ a little: within noise is no change.
* **Per-step figures**: each device's window decomposition (``devices[].accounting``) is
  turned into ms per step (slice ns / the owning process's steps); a metric's change counts
  when it is at least the threshold x the before step p50 (ms figures), 5 points (shares)
  or the threshold in relative terms (counts per step).
* **Findings**: each finding of the before side gets a status from its catalog check
  (``[<id>.compare]`` in findings.toml: ``slices``, ``applied``, ``confirm``, ``falsifier``,
  ``evidence``): ``fixed`` (confirm met), ``falsified`` (the fix was applied, its falsifier
  met), else ``better`` / ``worse`` / ``persists`` by the ms per step of the slices it
  claims; findings only on the after side are ``new``. ``healthy`` is a state, never a finding.
* **Verdict**: ``inconclusive`` (not comparable, or nothing to judge per step or per
  request), else from the budgets (step p50, step p99, the serving percentiles and
  throughput): ``improved``, ``regressed``, ``mixed`` (some better, some worse) or
  ``unchanged``.
"""

from __future__ import annotations

import functools
import re
import statistics
from collections import Counter

import numpy as np

from tracetriage import __version__
from tracetriage.analyzers import conditions
from tracetriage.analyzers.accounting import matching
from tracetriage.analyzers.catalog import CATALOG
from tracetriage.analyzers.timeline import CAUSES
from tracetriage.errors import EXIT_INCONCLUSIVE, EXIT_REGRESSED

SCHEMA = "tracetriage.compare/2"
THRESHOLD_PCT = 5.0  # the practical minimum: a change under 5% of the step is no change (--gate-threshold)
ALPHA = 0.05  # Mann-Whitney U, two-sided
RESAMPLES = 999  # bootstrap resamples of the median ratio (percentile interval)
BOOT_MAX = 1000  # steps per side fed to the bootstrap (evenly spaced); the test uses all of them
MIN_STEPS = 5  # fewer steps on a rank than this: no distribution to compare
SHARE_NOISE_PTS = 5.0  # a change of a share (busy %) under this many points is no change
TOP_KERNELS = 10  # kernels per device in the output: the largest movers in ms per step



# ---------------------------------------------------------------------------
# One side: the analysis reduced to what the comparison reads


def program_key(command: str) -> str:
    """The program a process runs, flags aside: the executable's base name and the script or
    ``-m`` module (``python3 -m vllm.worker rank0`` -> ``python3 vllm.worker``). Flags are what
    a fix changes (``--enforce-eager``), so they do not make another program."""
    tokens = str(command or "").split()
    if not tokens or re.fullmatch(r"pid \d+", " ".join(tokens)):  # a name made up from the pid: no program known
        return ""
    exe = tokens[0].rsplit("/", 1)[-1]
    exe = re.sub(r"\d+(\.\d+)*$", "", exe) or exe  # python3.11 -> python
    rest = ""
    it = iter(tokens[1:])
    for tok in it:
        if tok == "-m":
            rest = next(it, "")
            break
        if tok.startswith("-"):
            continue
        rest = tok.rsplit("/", 1)[-1]
        break
    return f"{exe} {rest}".strip()


@functools.lru_cache(maxsize=1)
def _analysis_validator():
    """The analysis JSON schema's validator, built once per process."""
    import json
    from importlib.resources import files

    import jsonschema

    schema = json.loads((files("tracetriage.reports") / "analysis.schema.json").read_text(encoding="utf-8"))
    return jsonschema.validators.validator_for(schema)(schema)


SCHEMA_MESSAGE_CHARS = 200  # a one-line error: longer rule texts end at a word, with "..."


def _schema_problem(data: dict) -> str | None:
    """Where ``data`` breaks the analysis JSON schema (the contract) and which rule, or None.
    jsonschema's best match descends into oneOf/anyOf, so a bad leaf under a nullable object
    is named by its own path (``window/duration_ns: -5 is less than the minimum of 1``), not
    by the whole object; a long value is shown shortened, never the message cut mid-word."""
    import reprlib

    from jsonschema.exceptions import best_match

    error = best_match(_analysis_validator().iter_errors(data))
    if error is None:
        return None
    while error.validator in ("oneOf", "anyOf") and error.context:
        # best_match stops where branches tie; a branch refused only for its type (null for an
        # object) says least, so the deepest error of the other branches names the place
        told = [e for e in error.context if not (e.validator == "type" and not e.relative_path)] or list(error.context)
        error = max(told, key=lambda e: len(e.absolute_path))
    where = "/".join(str(p) for p in error.absolute_path) or "the top level"
    message = error.message
    whole = repr(error.instance)
    if message.startswith(whole) and len(whole) > 60:
        short = reprlib.Repr()
        short.maxstring, short.maxother, short.maxdict, short.maxlist, short.maxlevel = 40, 40, 3, 3, 1
        message = short.repr(error.instance) + message[len(whole):]
    if len(message) > SCHEMA_MESSAGE_CHARS:
        message = message[:SCHEMA_MESSAGE_CHARS].rsplit(" ", 1)[0] + " ..."
    return f"{where}: {message}"


def check_saved(data: dict) -> str | None:
    """What makes a saved analysis.json unusable as a side of a comparison (None: usable).
    The file is untrusted; the analysis schema is closed and types every key compare reads
    (step durations above 0 ns, kernels' kind, accounting values), so it is the whole check."""
    return _schema_problem(data)


class Side:
    """The figures of one analysis that a comparison reads (all from the JSON contract)."""

    def __init__(self, data: dict, label: str):
        self.data = data
        self.label = label
        self.devices = list(data.get("devices") or [])
        procs = {(p.get("trace"), p["pid"]): p for p in data.get("processes") or []}
        by_proc: dict = {}
        for d in self.devices:
            by_proc.setdefault((d.get("trace"), d["pid"]), []).append(d)
        ranks = []
        for key, devs in by_proc.items():
            p = procs.get(key)
            if p is None:
                continue
            ranks.append({"pid": p["pid"], "name": p.get("name") or "", "trace": key[0], "process": p,
                          "devices": sorted(devs, key=lambda d: d.get("gpu_index", 0)),
                          "steps": p["steps"], "durations": np.asarray(p["steps"].get("durations_ns") or [], np.int64)})
        order = {t: i for i, t in enumerate(dict.fromkeys(d.get("trace") for d in self.devices))}
        ranks.sort(key=lambda r: (min(d.get("gpu_index", 0) for d in r["devices"]), order.get(r["trace"], 0), r["pid"]))
        self.ranks = ranks
        self.steps_of = {(r["trace"], r["pid"]): int(r["steps"]["count"] or 0) for r in ranks}
        self.findings = {f["id"]: f for f in data.get("findings") or [] if f["id"] not in ("healthy",)}
        self.serving = data.get("serving") or None
        self.graph_level = any(k.get("kind") == "graph" for d in self.devices for k in d.get("kernels") or [])

    def devices_in_rank_order(self) -> list[dict]:
        """The devices rank by rank (ranks in the order they are matched), each rank's by GPU index:
        what kernel_rows pairs and trend_record numbers."""
        return [d for r in self.ranks for d in r["devices"]]

    # -- per device, per step
    def device_steps(self, d: dict) -> int:
        return self.steps_of.get((d.get("trace"), d["pid"]), 0)

    def slice_ms(self, d: dict, patterns) -> float | None:
        """ms per step on device ``d`` of the accounting slices matching ``patterns``."""
        n = self.device_steps(d)
        if not n:
            return None
        pct = (d.get("accounting") or {}).get("slices_pct") or {}
        share = sum(pct.get(s, 0.0) for s in matching(patterns))
        return share / 100.0 * d["window_ns"] / n / 1e6

    def mean_slice_ms(self, patterns) -> float | None:
        vals = [self.slice_ms(d, patterns) for d in self.devices]
        vals = [v for v in vals if v is not None]
        return float(np.mean(vals)) if vals else None

    def finding_ms(self, finding_id: str) -> float | None:
        """ms per step of the time a finding is about: its catalog slices (the same measure on both
        sides, whether or not it fires there), else what it claimed here."""
        slices = check_of(finding_id).get("slices")
        return self.mean_slice_ms(slices) if slices else self.claim_ms(finding_id)

    def claim_ms(self, finding_id: str) -> float | None:
        vals = []
        for d in self.devices:
            n = self.device_steps(d)
            claims = (d.get("accounting") or {}).get("claims_pct") or {}
            if n and finding_id in claims:
                vals.append(claims[finding_id] / 100.0 * d["window_ns"] / n / 1e6)
        return float(np.mean(vals)) if vals else None

    # -- the figures conditions and metrics read
    def figures(self) -> dict:
        ranks = [r for r in self.ranks if r["steps"]["count"]]

        def med(values):
            vals = [v for v in values if v is not None]
            return float(statistics.median(vals)) if vals else None

        out = {
            "steps": sum(int(r["steps"]["count"]) for r in ranks) if ranks else 0,
            "step_p50_ms": med([r["steps"]["p50_ns"] / 1e6 if r["steps"]["p50_ns"] is not None else None for r in ranks]),
            "step_p99_ms": med([r["steps"]["p99_ns"] / 1e6 if r["steps"]["p99_ns"] is not None else None for r in ranks]),
            "launches_per_step": med([r["process"].get("launches_per_step") for r in ranks]),
            "graph_launches_per_step": med([r["process"].get("graph_launches_per_step") for r in ranks]),
            "syncs_per_step": med([r["process"].get("syncs_per_step") for r in ranks]),
            "dtoh_copies_per_step": med([r["process"].get("dtoh_copies_per_step") for r in ranks]),
            "busy_pct": float(np.mean([d["busy_pct"] for d in self.devices])) if self.devices else None,
            "compute_ms": self.mean_slice_ms(["compute"]),
            "collective_ms": self.mean_slice_ms(["collective"]),
            "copy_ms": self.mean_slice_ms(["copy"]),
            "idle_ms": self.mean_slice_ms(["idle:*:*"]),
        }
        out["idle_pct"] = None if out["busy_pct"] is None else 100.0 - out["busy_pct"]
        out["tail_ms"] = (out["step_p99_ms"] - out["step_p50_ms"]
                          if out["step_p99_ms"] is not None and out["step_p50_ms"] is not None else None)
        for cause in CAUSES:
            out[f"idle_{cause}_ms"] = self.mean_slice_ms([f"idle:*:{cause}"])
        pageable = ((self.data.get("copies") or {}).get("pageable_async") or {}).get("count")
        out["pageable_copies_per_step"] = (pageable / out["steps"]) if pageable is not None and out["steps"] else None
        out.update(serving_figures(self.serving))
        return out


def serving_figures(serving: dict | None) -> dict:
    """Client-side latency percentiles (ms) and throughput of the serving artifacts, if any."""
    keys = ("ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "itl_p50_ms", "itl_p99_ms", "e2el_p50_ms",
            "throughput_rps", "request_rate")
    out = dict.fromkeys(keys)
    if not serving:
        return out
    client = ((serving.get("latency") or {}).get("client")) or {}
    for m in ("ttft", "tpot", "itl", "e2el"):
        block = client.get(m) or {}
        out[f"{m}_p50_ms"] = _num(block.get("median"))
        if m != "e2el":
            out[f"{m}_p99_ms"] = _num(block.get("p99"))
    record = client.get("record") or {}
    out["throughput_rps"] = _num(record.get("request_throughput"))
    out["request_rate"] = _num(record.get("request_rate"))
    return out


def _num(v):
    """An untrusted serving figure as a float (parsers/coerce.number decides what a number is)."""
    from tracetriage.parsers.coerce import number

    n = number(v)
    return None if n is None else float(n)


# ---------------------------------------------------------------------------
# Comparability


def comparability(b: Side, a: Side) -> dict:
    """``{ok, confidence, reasons}``: whether the two captures are runs of one program on the
    same hardware shape, and how much the rest of their signature agrees."""
    reasons, ok, confidence = [], True, 1.0
    serving_ok, serving_why = _serving_comparable(b, a)
    names_b, names_a = Counter(d.get("name") for d in b.devices), Counter(d.get("name") for d in a.devices)
    if names_b != names_a:
        ok = False
        reasons.append(f"devices differ: {_devices_text(names_b)} before, {_devices_text(names_a)} after")
    if len(b.ranks) != len(a.ranks):
        ok = False
        reasons.append(f"world size differs: {len(b.ranks)} GPU processes before, {len(a.ranks)} after: "
                       "per-step times of different parallel layouts do not compare (compare throughput per GPU "
                       "from serving benchmarks instead)")
    keys_b = {k for k in (program_key(r["name"]) for r in b.ranks) if k}
    keys_a = {k for k in (program_key(r["name"]) for r in a.ranks) if k}
    if keys_b and keys_a:
        if not keys_b & keys_a:
            ok = False
            reasons.append(f"another program: {', '.join(sorted(keys_b))} before, {', '.join(sorted(keys_a))} after")
        elif keys_b != keys_a:
            confidence *= 0.8
            reasons.append(f"the programs overlap only in part ({', '.join(sorted(keys_b ^ keys_a))} on one side)")
    judge_steps = bool(b.ranks or a.ranks)
    if judge_steps:
        few = [(s.label, r) for s in (b, a) for r in s.ranks if len(r["durations"]) < MIN_STEPS]
        old_json = [(s.label, r) for s, r in ((s, r) for s in (b, a) for r in s.ranks)
                    if (r["steps"].get("count") or 0) >= MIN_STEPS and "durations_ns" not in r["steps"]]
        if old_json:
            ok = False
            reasons.append(f"{old_json[0][0]} is a saved analysis without step durations (written by an older "
                           "tracetriage): analyze the capture again, or save a new analysis.json")
            few = []
        if few:
            side, r = few[0]
            if not serving_ok:
                ok = False
            reasons.append(f"too few steps: {side} pid {r['pid']} has {len(r['durations'])} measured steps "
                           f"(at least {MIN_STEPS} are needed for a step-time distribution)"
                           + ("; judged on the serving artifacts only" if serving_ok else ""))
    elif not (b.serving and a.serving):
        ok = False
        reasons.append("nothing to judge: neither a GPU trace with steps nor serving artifacts on both sides")
    rn_b = {r["steps"].get("range_name") for r in b.ranks if r["steps"].get("source") == "nvtx"} - {None}
    rn_a = {r["steps"].get("range_name") for r in a.ranks if r["steps"].get("source") == "nvtx"} - {None}
    if rn_b and rn_a and rn_b != rn_a:
        confidence *= 0.8
        reasons.append(f"steps marked by other ranges: {', '.join(sorted(rn_b))} before, {', '.join(sorted(rn_a))} after")
    fmt_b = {i.get("kind") for i in b.data.get("inputs") or []}
    fmt_a = {i.get("kind") for i in a.data.get("inputs") or []}
    if fmt_b and fmt_a and not fmt_b & fmt_a:
        confidence *= 0.9
        reasons.append(f"captured by other tools ({', '.join(sorted(map(str, fmt_b)))} vs {', '.join(sorted(map(str, fmt_a)))})")
    if b.devices and a.devices:
        if b.graph_level or a.graph_level:
            which = " and ".join(dict.fromkeys(s.label for s in (b, a) if s.graph_level))
            reasons.append(f"kernel overlap not measured: {which} {'are' if b.graph_level and a.graph_level else 'is'} a graph-level CUDA-graph capture (replays recorded "
                           "without their kernels); compared on the rest of the signature")
        else:
            overlap = kernel_overlap(b, a)
            if overlap is not None:
                confidence *= 0.5 + 0.5 * overlap
                reasons.append(f"kernel time overlap {100 * overlap:.0f}% (names weighted by their share of kernel time)")
    if serving_why:
        reasons.append(serving_why)
    paths_b = {str(i.get("path")) for i in b.data.get("inputs") or []}
    if paths_b and paths_b == {str(i.get("path")) for i in a.data.get("inputs") or []}:
        reasons.append("BEFORE and AFTER are the same capture: what differs is only the method's own resampling")
    if ok and not reasons:
        reasons.append("same devices, world size and program")
    return {"ok": ok, "confidence": round(confidence if ok else 0.0, 3), "reasons": reasons}


def _serving_comparable(b: Side, a: Side) -> tuple[bool, str | None]:
    if not (b.serving and a.serving):
        return False, None
    fb, fa = serving_figures(b.serving), serving_figures(a.serving)
    if fb["ttft_p50_ms"] is None or fa["ttft_p50_ms"] is None:
        return False, None
    rb, ra = fb["request_rate"], fa["request_rate"]
    if rb is not None and ra is not None and abs(rb - ra) > 0.05 * max(rb, ra):
        return False, (f"serving benchmarks ran at other request rates ({rb:g} vs {ra:g} req/s): their latencies are "
                       "not compared")
    return True, None


def _devices_text(names: Counter) -> str:
    return ", ".join(f"{n}x {name}" for name, n in sorted(names.items(), key=lambda kv: str(kv[0]))) or "no GPU"


def kernel_overlap(b: Side, a: Side) -> float | None:
    """Sum over kernel names of min(share before, share after), shares of all kernel time on
    all devices of the side (1 = the same kernels in the same proportions)."""
    def shares(side):
        tot = Counter()
        for d in side.devices:
            for k in d.get("kernels") or []:
                tot[k["name"]] += k["total_ns"]
        s = sum(tot.values())
        return {n: v / s for n, v in tot.items()} if s else None
    sb, sa = shares(b), shares(a)
    if not sb or not sa:
        return None
    return float(sum(min(v, sa.get(n, 0.0)) for n, v in sb.items()))


# ---------------------------------------------------------------------------
# Step time


def _spaced(x: np.ndarray, n: int) -> np.ndarray:
    return x if x.size <= n else x[np.linspace(0, x.size - 1, n).astype(np.int64)]


def step_test(before: np.ndarray, after: np.ndarray, threshold_pct: float) -> dict:
    """p50 and p99 before -> after with bootstrap intervals of their ratios (after / before),
    a Mann-Whitney U test, and whether the change is beyond noise and the threshold."""
    from scipy import stats

    b = np.asarray(before, np.float64)
    a = np.asarray(after, np.float64)
    out = {"before_count": int(b.size), "after_count": int(a.size),
           "before_p50_ns": int(np.median(b)) if b.size else None, "after_p50_ns": int(np.median(a)) if a.size else None,
           "before_p99_ns": int(np.percentile(b, 99)) if b.size else None,
           "after_p99_ns": int(np.percentile(a, 99)) if a.size else None,
           "ratio": None, "ci95": None, "p_value": None, "significant": False, "status": "not measured",
           "p99_ratio": None, "p99_ci95": None, "p99_significant": False, "p99_status": "not measured"}
    if b.size < MIN_STEPS or a.size < MIN_STEPS or not np.median(b) > 0:
        return out
    rng = np.random.default_rng(20261201)  # fixed: the same inputs give the same interval
    bb, ab = _spaced(b, BOOT_MAX), _spaced(a, BOOT_MAX)

    def interval(q):
        ib = rng.integers(0, bb.size, (RESAMPLES, bb.size))
        ia = rng.integers(0, ab.size, (RESAMPLES, ab.size))
        ratios = np.percentile(ab[ia], q, axis=1) / np.maximum(np.percentile(bb[ib], q, axis=1), 1.0)
        lo, hi = np.percentile(ratios, [2.5, 97.5])
        return [round(float(lo), 4), round(float(hi), 4)]

    p = float(stats.mannwhitneyu(b, a, alternative="two-sided").pvalue)
    ratio = float(np.median(a) / np.median(b))
    ci = interval(50)
    practical = abs(ratio - 1.0) * 100.0 >= threshold_pct
    sig = bool(p < ALPHA and (ci[0] > 1.0 or ci[1] < 1.0) and practical)
    p99_ratio = float(np.percentile(a, 99) / max(np.percentile(b, 99), 1.0))
    ci99 = interval(99)
    sig99 = bool((ci99[0] > 1.0 or ci99[1] < 1.0) and abs(p99_ratio - 1.0) * 100.0 >= threshold_pct)
    out.update({
        "ratio": round(ratio, 4), "ci95": ci, "p_value": float(f"{p:.3g}"), "significant": sig,
        "status": ("improved" if ratio < 1 else "regressed") if sig else "unchanged",
        "p99_ratio": round(p99_ratio, 4), "p99_ci95": ci99, "p99_significant": sig99,
        "p99_status": ("improved" if p99_ratio < 1 else "regressed") if sig99 else "unchanged",
    })
    return out


def _overall(statuses: list[str]) -> str:
    judged = [s for s in statuses if s != "not measured"]
    if not judged:
        return "not measured"
    up, down = "improved" in judged, "regressed" in judged
    return "mixed" if up and down else "improved" if up else "regressed" if down else "unchanged"


# ---------------------------------------------------------------------------
# Metrics


METRICS = [
    # name, unit, lower is better, figure key
    ("step_p50_ms", "ms", True), ("step_p99_ms", "ms", True),
    # more compute per step is more work, or slower kernels: a change, neither better nor worse by itself
    ("compute_ms", "ms/step", None), ("collective_ms", "ms/step", True), ("copy_ms", "ms/step", True),
    ("idle_ms", "ms/step", True), *[(f"idle_{c}_ms", "ms/step", True) for c in CAUSES],
    ("busy_pct", "%", False),
    ("launches_per_step", "calls/step", True), ("graph_launches_per_step", "calls/step", None),
    ("syncs_per_step", "calls/step", True), ("dtoh_copies_per_step", "copies/step", True),
    ("ttft_p50_ms", "ms", True), ("ttft_p99_ms", "ms", True), ("tpot_p50_ms", "ms", True), ("tpot_p99_ms", "ms", True),
    ("itl_p50_ms", "ms", True), ("itl_p99_ms", "ms", True), ("e2el_p50_ms", "ms", True), ("throughput_rps", "req/s", False),
]
SERVING_BUDGETS = ("ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "itl_p99_ms", "throughput_rps")


def metric_rows(fb: dict, fa: dict, noise_ms: float | None, threshold_pct: float) -> list[dict]:
    rows = []
    for name, unit, lower_better in METRICS:
        before, after = fb.get(name), fa.get(name)
        if before is None and after is None:
            continue
        change = None if before is None or after is None else after - before
        if change is None:
            significant = False
        elif unit == "%":
            significant = abs(change) >= SHARE_NOISE_PTS
        elif unit == "ms/step" and noise_ms is not None:
            significant = abs(change) >= noise_ms
        else:  # a percentile, a rate or a count: relative to its own size
            significant = abs(change) >= threshold_pct / 100.0 * max(abs(before), 1e-12) and abs(change) >= (
                0.5 if unit.startswith(("calls", "copies")) else 0.0)
        if change is None:
            direction = "n/a"
        elif not significant:
            direction = "unchanged"
        elif lower_better is None:  # neither better nor worse by itself
            direction = "changed"
        else:
            direction = "improved" if (change < 0) == lower_better else "regressed"
        rows.append({"name": name, "unit": unit, "before": _round(before), "after": _round(after),
                     "change": _round(change), "direction": direction, "significant": significant})
    return rows


def _round(v):
    return None if v is None else round(float(v), 4)


# ---------------------------------------------------------------------------
# Findings


def check_of(finding_id: str) -> dict:
    """The catalog's compare check of a finding (``[<id>.compare]``), or the default one."""
    entry = CATALOG.get(finding_id) or {}
    check = dict(entry.get("compare") or {})
    check.setdefault("confirm", "not after.present")
    check.setdefault("evidence", [])
    return check


def ms_decimals(v: float) -> int:
    """The one precision rule for milliseconds in compare's results and views: four
    significant figures, at most three decimals (0.606, 70.35, 680.2, 13,396)."""
    a = abs(v)
    return 0 if a >= 1000 else 1 if a >= 100 else 2 if a >= 10 else 3


def ms_text(v: float, decimals: int | None = None, sign: str = "") -> str:
    """``v`` ms by :func:`ms_decimals` (or ``decimals``); ``sign="+"`` for a change."""
    return f"{v:{sign},.{ms_decimals(v) if decimals is None else decimals}f} ms"


def _fmt(v, unit=""):
    if v is None:
        return "not measured"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if unit.startswith("ms"):
        return ms_text(v)
    if unit == "%":
        return f"{v:.1f}%"
    return f"{v:,.3g}" if isinstance(v, float) else f"{v:,}"


FIGURE_UNITS = {name: unit for name, unit, _ in METRICS} | {"cause_ms": "ms/step", "idle_pct": "%",
                                                            "pageable_copies_per_step": "copies/step"}
FIGURE_TEXT = {"cause_ms": "its slices, ms per step", "step_p50_ms": "step p50", "step_p99_ms": "step p99",
               "launches_per_step": "kernel launches per step", "graph_launches_per_step": "graph launches per step",
               "syncs_per_step": "blocking syncs per step", "busy_pct": "GPU busy", "idle_ms": "GPU idle per step",
               "idle_pct": "GPU idle", "copy_ms": "copy-only time per step", "collective_ms": "exposed collective per step",
               "compute_ms": "compute per step", "tail_ms": "step p99 - p50",
               "pageable_copies_per_step": "pageable async copies per step"}


def finding_rows(b: Side, a: Side, fb: dict, fa: dict, step: dict, noise_ms: float | None, judged: bool,
                 threshold_pct: float = THRESHOLD_PCT) -> list[dict]:
    rows = []
    for fid, f in b.findings.items():
        check = check_of(fid)
        cause_b, cause_a = b.finding_ms(fid), a.finding_ms(fid)
        names = {
            "before": {**fb, "present": True, "cause_ms": cause_b},
            "after": {**fa, "present": fid in a.findings, "cause_ms": cause_a},
            "step": step, "noise_ms": noise_ms,
        }
        applied = conditions.holds(check.get("applied"), names)
        names["applied"] = applied
        confirm = conditions.holds(check.get("confirm"), names)
        falsifier = conditions.holds(check.get("falsifier"), names)
        delta = None if cause_b is None or cause_a is None else cause_a - cause_b
        if not judged:
            status, decided = None, "not judged: the captures are not comparable"
        elif confirm:
            status = "fixed"
            decided = f"confirmed: {check.get('confirm_says') or 'it is no longer reported after the change'}"
        elif falsifier:
            status = "falsified"
            decided = f"the fix was applied but its falsifier holds: {check.get('falsifier_says') or check['falsifier']}"
        elif delta is not None and noise_ms is not None and abs(delta) >= noise_ms:
            status = "better" if delta < 0 else "worse"
            decided = (f"the time it claims moved {ms_text(delta, sign='+')} per step, beyond the threshold of {ms_text(noise_ms)} "
                       f"({threshold_pct:g}% of the before step)")
        else:
            status = "persists"
            decided = (f"the time it claims moved less than the threshold of {ms_text(noise_ms)} per step"
                       if delta is not None and noise_ms is not None else
                       "still reported after" if fid in a.findings else "no per-step measure on both sides")
        evidence = []
        for key in ["cause_ms", *check.get("evidence", [])]:
            vb, va = names["before"].get(key), names["after"].get(key)
            if vb is None and va is None:
                continue
            unit = FIGURE_UNITS.get(key, "")
            evidence.append({"name": key, "before": _round(vb), "after": _round(va), "unit": unit,
                             "text": f"{FIGURE_TEXT.get(key, key.replace('_', ' '))}: {_fmt(vb, unit)} -> {_fmt(va, unit)}"})
        if step.get("ratio") is not None and judged:
            evidence.append({"name": "step_ratio", "before": None, "after": step["ratio"], "unit": "ratio",
                             "text": f"step p50 after/before {step['ratio']:.3f} ({step['status']})"})
        rows.append({"id": fid, "axis": f.get("axis"), "status": status, "decided_by": decided,
                     "applied": applied, "before_severity": f.get("severity"),
                     "after_severity": a.findings[fid]["severity"] if fid in a.findings else None,
                     "before_ms_per_step": _round(cause_b), "after_ms_per_step": _round(cause_a), "evidence": evidence})
    for fid, f in a.findings.items():
        if fid in b.findings:
            continue
        cause_b, cause_a = b.finding_ms(fid), a.finding_ms(fid)
        rows.append({"id": fid, "axis": f.get("axis"), "status": "new" if judged else None,
                     "decided_by": "reported after only" if judged else "not judged: the captures are not comparable",
                     "applied": None, "before_severity": None, "after_severity": f.get("severity"),
                     "before_ms_per_step": _round(cause_b), "after_ms_per_step": _round(cause_a),
                     "evidence": [{"name": "cause_ms", "before": _round(cause_b), "after": _round(cause_a), "unit": "ms/step",
                                   "text": f"its slices, ms per step: {_fmt(cause_b, 'ms')} -> {_fmt(cause_a, 'ms')}"}]})
    return rows


# ---------------------------------------------------------------------------
# Kernels


def kernel_rows(b: Side, a: Side) -> list[dict]:
    """Per matched device (rank order): each kernel's ms per step and share of that device's
    window on both sides; the largest movers first. A kernel missing from a graph-level side
    ran inside graph replays whose kernels were not recorded: not measured, never zero."""
    db, da = b.devices_in_rank_order(), a.devices_in_rank_order()
    rows = []
    for rank, (x, y) in enumerate(zip(db, da)):
        nx, ny = b.device_steps(x), a.device_steps(y)
        kx = {k["name"]: k for k in x.get("kernels") or []}
        ky = {k["name"]: k for k in y.get("kernels") or []}
        gx = any(k["kind"] == "graph" for k in kx.values())
        gy = any(k["kind"] == "graph" for k in ky.values())
        per = []
        for name in dict.fromkeys([*kx, *ky]):
            def one(k, n, window, graph_level):
                if k is None:
                    return (None, None) if graph_level else (0.0, 0.0)
                return (k["total_ns"] / n / 1e6 if n else None, min(100.0, 100.0 * k["total_ns"] / window) if window else None)
            bm, bs = one(kx.get(name), nx, x["window_ns"], gx)
            am, as_ = one(ky.get(name), ny, y["window_ns"], gy)
            kind = (kx.get(name) or ky.get(name))["kind"]
            per.append({"device": f"rank{rank}: {x['id']} -> {y['id']}", "name": name, "kind": kind,
                        "before_ms_per_step": _round(bm), "after_ms_per_step": _round(am),
                        "change_ms_per_step": _round(am - bm) if am is not None and bm is not None else None,
                        "before_share_pct": _round(bs), "after_share_pct": _round(as_)})
        per.sort(key=lambda r: (-abs(r["change_ms_per_step"] if r["change_ms_per_step"] is not None else
                                     (r["before_ms_per_step"] or r["after_ms_per_step"] or 0.0)), r["name"]))
        rows.extend(per[:TOP_KERNELS])
    return rows


# ---------------------------------------------------------------------------
# The comparison


def compare(before: dict, after: dict, before_label: str = "before", after_label: str = "after",
            threshold_pct: float = THRESHOLD_PCT, slo: dict | None = None) -> dict:
    b, a = Side(before, before_label), Side(after, after_label)
    comp = comparability(b, a)
    fb, fa = b.figures(), a.figures()
    step_rows = []
    for i, (rb, ra) in enumerate(zip(b.ranks, a.ranks)):
        t = step_test(rb["durations"], ra["durations"], threshold_pct)
        step_rows.append({"rank": i, "before_pid": rb["pid"], "after_pid": ra["pid"], **t})
    if not comp["ok"]:  # the numbers are shown, but nothing is judged on them
        for r in step_rows:
            r.update(significant=False, status="not judged", p99_significant=False, p99_status="not judged")
    step_status = _overall([r["status"] for r in step_rows]) if comp["ok"] else "not measured"
    p99_status = _overall([r["p99_status"] for r in step_rows]) if comp["ok"] else "not measured"
    ratios = [r["ratio"] for r in step_rows if r["ratio"] is not None]
    step = {"status": step_status, "improved": step_status == "improved", "regressed": step_status == "regressed",
            "ratio": float(np.median(ratios)) if ratios else None, "p99_status": p99_status}
    noise_ms = threshold_pct / 100.0 * fb["step_p50_ms"] if fb.get("step_p50_ms") else None
    metrics = metric_rows(fb, fa, noise_ms, threshold_pct)
    for m in metrics if not comp["ok"] else []:
        m.update(direction="not judged", significant=False)
    for m in metrics if comp["ok"] else []:  # the step percentiles are judged by the step test, not by their difference
        if m["name"] in ("step_p50_ms", "step_p99_ms"):
            status = step_status if m["name"] == "step_p50_ms" else p99_status
            m["significant"] = status in ("improved", "regressed", "mixed")
            m["direction"] = status if status in ("improved", "regressed", "mixed") else (
                "unchanged" if status == "unchanged" else "n/a")
    serving_ok = _serving_comparable(b, a)[0]
    budgets = {"step p50": step_status, "step p99": p99_status}
    if serving_ok and comp["ok"]:
        for m in metrics:
            if m["name"] in SERVING_BUDGETS and m["change"] is not None:
                budgets[m["name"]] = m["direction"] if m["direction"] in ("improved", "regressed") else "unchanged"
    measured = [v for v in budgets.values() if v != "not measured"]
    ups = any(v in ("improved", "mixed") for v in measured)
    downs = any(v in ("regressed", "mixed") for v in measured)
    if not comp["ok"] or not measured:
        verdict = "inconclusive"
        if comp["ok"]:
            comp["reasons"].append("nothing measured on both sides to judge: no step durations, no serving percentiles")
    else:
        verdict = "mixed" if ups and downs else "improved" if ups else "regressed" if downs else "unchanged"
    slo_broken, slo_unmeasured = slo_breaks(b.serving, a.serving, slo or {})
    findings = finding_rows(b, a, fb, fa, step, noise_ms, comp["ok"], threshold_pct)
    result = {
        "schema": SCHEMA,
        "tool_version": __version__,
        "verdict": verdict,
        "summary": "",
        "comparable": comp,
        "threshold_pct": threshold_pct,
        "method": {
            "step_test": "two-sided Mann-Whitney U on the step durations of each rank, and a percentile bootstrap "
                         f"({RESAMPLES} resamples) of the ratio of medians; significant when p < {ALPHA}, the 95% "
                         f"interval excludes 1 and the change is at least {threshold_pct:g}% of the step",
            "noise_ms_per_step": _round(noise_ms),
            "alpha": ALPHA,
        },
        "before": _side_info(b, fb),
        "after": _side_info(a, fa),
        "budgets": budgets,
        "slo_broken": slo_broken,
        "slo_not_measured": slo_unmeasured,
        "step_time": step_rows,
        "metrics": metrics,
        "findings": findings,
        "kernels": kernel_rows(b, a) if comp["ok"] else [],
        "_series": {"before": {f"rank{i}": r["durations"].tolist() for i, r in enumerate(b.ranks)},
                    "after": {f"rank{i}": r["durations"].tolist() for i, r in enumerate(a.ranks)}},
    }
    result["summary"] = summary_line(result)
    return result


def _side_info(s: Side, figures: dict) -> dict:
    names = Counter(d.get("name") for d in s.devices)
    return {"label": s.label, "headline": s.data.get("headline"),
            "inputs": [str(i.get("path")) for i in s.data.get("inputs") or []],
            "devices": _devices_text(names), "world_size": len(s.ranks), "steps": figures.get("steps") or 0,
            "steps_per_rank": int(statistics.median([int(r["steps"]["count"] or 0) for r in s.ranks])) if s.ranks else 0,
            "step_p50_ms": _round(figures.get("step_p50_ms")), "graph_level": s.graph_level}


def slo_breaks(before: dict | None, after: dict | None, slo: dict) -> tuple[list[str], list[str]]:
    """SLO budgets (``--slo``): those met before and broken after, and those that could not be
    checked on a side; each side's budget is checked by the one check analyze uses
    (rules.slo.slo_check on that side's serving artifacts)."""
    from tracetriage.analyzers.rules.slo import slo_check

    out, unmeasured = [], []
    for key, budget in slo.items():
        cb, ca = slo_check(before, key, budget), slo_check(after, key, budget)
        if "not_measured" in (cb["status"], ca["status"]):
            side = " and ".join(n for n, c in (("before", cb), ("after", ca)) if c["status"] == "not_measured")
            unmeasured.append(f"{key}={budget:g}: no {cb['percentile']} of {cb['metric']} {side}")
        elif cb["status"] == "met" and ca["status"] == "broken":
            out.append(f"{key}={budget:g}: {ms_text(cb['measured_ms'])} -> {ms_text(ca['measured_ms'])}")
    return out, unmeasured


def gate_exit(result: dict) -> int:
    """``--gate``: 0 improved / unchanged / mixed within budgets, 8 regressed, 9 inconclusive.
    A mixed verdict fails when the step p50 is what regressed or a --slo budget broke."""
    v = result["verdict"]
    if v == "inconclusive":
        return EXIT_INCONCLUSIVE
    if v == "regressed" or result["slo_broken"]:
        return EXIT_REGRESSED
    if v == "mixed" and result["budgets"].get("step p50") == "regressed":
        return EXIT_REGRESSED
    return 0


def speed_words(s: dict) -> str:
    """A rank's step p50 change in words: "3.02x faster", "1.13x slower", "same speed"."""
    speed = s["before_p50_ns"] / s["after_p50_ns"] if s.get("after_p50_ns") and s.get("before_p50_ns") else None
    if speed is None:
        return ""
    if abs(speed - 1) < 0.005:
        return "same speed"
    return f"{speed:.2f}x faster" if speed >= 1 else f"{1 / speed:.2f}x slower"


def summary_line(r: dict) -> str:
    v = r["verdict"]
    if v == "inconclusive":
        why = next((x for x in r["comparable"]["reasons"]), "nothing to judge")
        return f"inconclusive: {why}"
    parts = [v]
    rows = [s for s in r["step_time"] if s["ratio"] is not None]
    if rows:
        s = rows[0]
        parts.append(f"step p50 {ms_text(s['before_p50_ns'] / 1e6)} -> {ms_text(s['after_p50_ns'] / 1e6)}"
                     f" ({speed_words(s)}, after/before {s['ratio']:.3f} "
                     f"[95% CI {s['ci95'][0]:.3f}-{s['ci95'][1]:.3f}]{'' if s['significant'] else ', within noise'})"
                     + (f" on rank0 of {len(r['step_time'])}" if len(r["step_time"]) > 1 else ""))
    by = {}
    for f in r["findings"]:
        if f["status"]:
            by.setdefault(f["status"], []).append(f["id"])
    for status in ("fixed", "falsified", "worse", "new", "better", "persists"):
        if status in by:
            parts.append(f"{status}: {', '.join(by[status])}")
    if r["slo_broken"]:
        parts.append("SLO broken: " + "; ".join(r["slo_broken"]))
    return "; ".join(parts)


# ---------------------------------------------------------------------------
# The record batch keeps per case, so trend never re-reads a capture


SERIES_FIGURES = tuple(name for name, _unit, _lower in METRICS)  # every per-step metric compare shows


def trend_record(data: dict) -> dict:
    """What ``trend`` reads of one analysis (flat, for the batch Parquet tables): the
    comparability signature, the per-step figures, each finding's ms per step, and each
    device's kernels in ms per step (rank order)."""
    side = Side(data, "")
    fig = side.figures()
    names = Counter(d.get("name") for d in side.devices)
    serving = side.serving or {}
    program = ",".join(sorted({k for k in (program_key(r["name"]) for r in side.ranks) if k}))
    if not side.devices and serving:
        program = "serving:" + str(serving.get("engine") or "unknown")
    signature = {
        "device_model": _devices_text(names) if names else "",  # counts per model: 1x A100, 3x H100
        "device_count": len(side.devices),
        "world_size": len(side.ranks),
        "program": program,
        "step_ranges": ",".join(sorted({str(r["steps"].get("range_name")) for r in side.ranks
                                        if r["steps"].get("range_name")})),
    }
    findings = {fid: _round(side.finding_ms(fid)) for fid in side.findings}
    kernels = []
    for rank, d in enumerate(side.devices_in_rank_order()):
        n = side.device_steps(d)
        for k in d.get("kernels") or []:
            kernels.append({"device_rank": rank, "name": k["name"], "kind": k["kind"],
                            "ms_per_step": round(k["total_ns"] / n / 1e6, 6) if n else None})
    return {"signature": signature, "figures": {k: _round(fig.get(k)) for k in SERIES_FIGURES},
            "findings_ms": findings, "kernels": kernels}
