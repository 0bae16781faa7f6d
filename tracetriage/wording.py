"""Numbers and counts in words, as every output writes them: durations, percentages, serving
milliseconds, byte sizes, plurals, and one --slo budget check. The rules write evidence with these
and the reports show figures with them, so one figure reads the same everywhere; they depend on no
layer (plain values in, text out)."""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal


def us(ns) -> str:
    if ns is None:
        return "n/a"
    if ns >= 1_000_000:
        return f"{ns / 1e6:,.2f} ms"
    return f"{ns / 1e3:,.1f} µs"


def pct(x: float) -> str:
    """A percentage to one decimal that never rounds a value below 100 up to 100.0."""
    shown = f"{x:.1f}"
    if shown == "100.0" and x < 100.0:
        return "99.9%"
    return shown + "%"


def rounded(value: float, decimals: int, stored: int = 3) -> str:
    """``value`` to ``decimals`` places (thousands separated), by one path: first to the ``stored``
    places the JSON contract keeps, then half up from that decimal. A raw figure and its stored value
    (612.7496 and 612.75, 20.9503 and 20.95) therefore always read the same, wherever each is shown."""
    exact = Decimal(repr(round(float(value), stored)))
    return f"{exact.quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP):,}"


RATIO_DECIMALS = 2  # a ratio after/before as compare prints it: x1.05, not x1.050


def ratio_text(value: float) -> str:
    """A ratio (after / before, or an interval's end) by the one path every compare output prints it with:
    two decimals, half up from the 4 the contract keeps (1.0496 -> 1.05)."""
    return rounded(value, RATIO_DECIMALS, stored=4)


def ms(x) -> str:
    """Milliseconds as serving figures are read: ``812.4 ms``, ``12.35 s`` from 10 s on (:func:`rounded`
    from the 3 decimals the contract keeps)."""
    if x is None:
        return "n/a"
    if x >= 10_000:
        return f"{rounded(round(float(x), 3) / 1000, 2, stored=6)} s"
    return f"{rounded(x, 1)} ms"


def rps(rate) -> str:
    """A request rate as every serving text reads it: ``9.6 req/s`` (one decimal from 1 req/s, three
    significant figures below), ``n/a`` when not measured: one rounding for one figure on every page."""
    if rate is None:
        return "n/a"
    return f"{rate:,.1f} req/s" if abs(rate) >= 1 else f"{rate:.3g} req/s"


def requests(x) -> str:
    """A number of requests or sequences (a queue, a running batch: often a mean over stats samples) as every
    page reads it: one decimal by :func:`rounded`, none when whole (``29.7``, ``39``, ``12,279``); n/a when
    not measured. One rounding for the stats line, the queue line and each finding's evidence."""
    if x is None:
        return "n/a"
    shown = rounded(x, 1)
    return shown[:-2] if shown.endswith(".0") else shown


def plural(n, word: str, words: str | None = None) -> str:
    """A count and its noun: ``1 case``, ``12,345 cases``."""
    return f"{n:,} {noun(n, word, words)}"


def noun(n, word: str, words: str | None = None) -> str:
    """``word`` as a count ``n`` agrees with it: ``case`` for 1, ``cases`` (or ``words``) for any other."""
    return word if n == 1 else (words or word + "s")


def with_unit(number: str, unit: str) -> str:
    """``number`` (as written) with its rate unit, the unit's count word singular for exactly one:
    "1 call/step", "2 calls/step"."""
    head, slash, rest = unit.partition("/")
    if number == "1" and slash and head.endswith("s"):
        head = head[:-3] + "y" if head.endswith("ies") else head[:-1]  # "1 copy/step", not "1 copie/step"
    return f"{number} {head}{slash}{rest}"


def counted(n, word: str, words: str | None = None) -> str:
    """A count and its noun, the count as it is (no separators): ``1 case``, ``1234 cases``."""
    return f"{n} {noun(n, word, words)}"


def nbytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{int(n):,} B"


def slo_measured(check: dict) -> str:
    """What decided one budget: the metric, the percentile measured (its own, or ``bounded_by``) and
    its value: 'TTFT p50 70.3 ms'."""
    return f"{check['metric'].upper()} {check.get('bounded_by') or check['percentile']} {ms(check['measured_ms'])}"


def slo_text(check: dict) -> str:
    """One budget in words: 'TTFT p95 249.3 ms > budget 100 ms: broken (benchmark (client))'; decided
    by another percentile: 'TPOT p50 27.0 ms > budget 20 ms, so the p95 is over it: broken (...)'."""
    if check["status"] == "not_measured":
        return f"{check['budget']}={check['limit_ms']:g}: unchecked ({check['source']})"
    broken = check["status"] == "broken"
    bound = check.get("bounded_by")
    therefore = f", so the {check['percentile']} is {'over' if broken else 'within'} it" if bound else ""
    return (f"{slo_measured(check)} {'>' if broken else '<='} budget {check['limit_ms']:g} ms{therefore}: "
            f"{check['status']} ({check['source']})")


def ms_decimals(value: float) -> int:
    """The one precision rule for milliseconds in compare's results and views: four
    significant figures, at most three decimals (0.606, 70.35, 680.2, 13,396)."""
    size = abs(value)
    return 0 if size >= 1000 else 1 if size >= 100 else 2 if size >= 10 else 3


def ms_text(value: float, decimals: int | None = None, sign: str = "") -> str:
    """``value`` ms by :func:`ms_decimals` (or ``decimals``), by :func:`rounded` from the 4 decimals the
    compare contract keeps; ``sign="+"`` for a change."""
    text = rounded(value, ms_decimals(value) if decimals is None else decimals, stored=4)
    return f"{'+' if sign == '+' and not text.startswith('-') else ''}{text} ms"


def duration_ms(value) -> str:
    """A duration given in ms as analyze and compare both write it: under 1 ms in µs as :func:`us` writes
    every duration of an analysis (``18.9 µs``, never ``0.019 ms``), from 1 ms on by :func:`ms_text`
    (four significant figures: ``4.776 ms``); ``not measured`` for None."""
    if value is None:
        return "not measured"
    if abs(value) < 1.0:
        return ("-" if value < 0 else "") + us(abs(value) * 1e6)
    return ms_text(value)


def duration_pair_ms(before, after) -> str:
    """``before -> after`` in ms, in one unit (:func:`duration_ms`'s µs only when both are under 1 ms):
    "2.120 ms -> 0.000 ms", never "2.120 ms -> 0.0 µs"."""
    values = [value for value in (before, after) if value is not None]
    if values and max(abs(value) for value in values) >= 1.0:
        return " -> ".join("not measured" if value is None else ms_text(value) for value in (before, after))
    return f"{duration_ms(before)} -> {duration_ms(after)}"


def speed_words(step_row: dict) -> str:
    """A rank's step p50 change in words, of its contract row (speed_text)."""
    return speed_text(step_row.get("before_p50_ns"), step_row.get("after_p50_ns"))


def speed_text(before_ns, after_ns) -> str:
    """A step p50 change in words: "3.02x faster", "1.13x slower", "same speed" ("" when a side is not measured)."""
    speed = before_ns / after_ns if after_ns and before_ns else None
    if speed is None:
        return ""
    if abs(speed - 1) < 0.005:
        return "same speed"
    return f"{speed:.2f}x faster" if speed >= 1 else f"{1 / speed:.2f}x slower"


def fmt_ns(ns) -> str:
    if ns is None:
        return "n/a"
    ns = float(ns)
    if ns < 0:
        return "-" + fmt_ns(-ns)
    if ns >= 1e9:
        return f"{ns / 1e9:,.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:,.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:,.1f} µs"
    return f"{ns:,.0f} ns"


def fmt_bytes(n) -> str:
    """Bytes in one style on every page and format: ``16.1 GB``, ``512 B`` (decimal units)."""
    return "n/a" if n is None else nbytes(n)


def short_middle(name: str, width: int = 90) -> str:
    """A long templated name (Tensile, CUTLASS) cut in the middle: its start (the kernel family)
    and its end (the tile shape, the last template arguments) are what tell two kernels apart."""
    name = str(name)
    if len(name) <= width:
        return name
    head = (width - 1) * 3 // 5
    return name[:head] + "…" + name[-(width - 1 - head):]


def fmt_num(x) -> str:
    if x is None:
        return "n/a"
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,.1f}"


def fixed(x, decimals: int) -> str | None:
    """A number to a fixed count of decimals (``12.3``); None when it was not measured."""
    return None if x is None else f"{x:.{decimals}f}"


def count(n) -> str:
    """A count with thousands separators: ``12,345``."""
    return f"{n:,}"


# What a trace's named ranges are, by the trace's format: an nsys capture's NVTX ranges, a rocprofv3 / RPD
# capture's roctx ranges, a PyTorch profiler trace's record_function annotations (its ProfilerStep#N too).
RANGE_KINDS = {"nsys": "NVTX", "kineto": "profiler annotation", "rocpd": "roctx", "rpd": "roctx", "rocprof_csv": "roctx",
               "rocprof_json": "roctx"}


def range_kind(fmt: str | None) -> str:
    """The kind of a trace's named ranges by its format (RANGE_KINDS; NVTX for a format not listed)."""
    return RANGE_KINDS.get(fmt or "", "NVTX")


RANGE_LABELS = {"NVTX": "nvtx", "roctx": "roctx", "profiler annotation": "annotation"}


def source_text(source: str, fmt: str | None) -> str:
    """A step or window source of the contract (``nvtx``, ``steps:nvtx+sync``: ``nvtx`` is any named range) as a
    reader is told it for a trace of format ``fmt``: nvtx, roctx or annotation (RANGE_KINDS)."""
    return re.sub(r"\bnvtx\b", RANGE_LABELS[range_kind(fmt)], source) if source else source


def fabric_islands_word(kind: str | None) -> str:
    """What a topology matrix's fast GPU islands are called, by the tool that printed it (the matrix's ``kind``):
    ``XGMI/fabric`` for rocm-smi, ``NVLink/fabric`` else."""
    return "XGMI/fabric" if kind == "rocm-smi" else "NVLink/fabric"


def as_text(x) -> str:
    """A value from the contract as the reports print it (``None`` as ``None``)."""
    return str(x)


# the CUDA runtime's nouns and their HIP names, for texts written once for both vendors
_HIP_WORDS = (("CUDA calls", "HIP calls"), ("CUDA call", "HIP call"), ("CUDA-graph", "HIP-graph"), ("CUDA graph", "HIP graph"),
              ("NVTX", "roctx"))


def for_vendor(text: str, vendor: str | None) -> str:
    """``text`` with the CUDA runtime's nouns (a CUDA call, a CUDA graph, an NVTX range) named as HIP's
    when ``vendor`` is rocm (capture_kind's vendor); unchanged otherwise."""
    if vendor != "rocm":
        return text
    for cuda, hip in _HIP_WORDS:
        text = text.replace(cuda, hip)
    return text


def cause_name(cause: str, vendor: str | None = None) -> str:
    """The short name of an idle cause where a reader sees it: its key, but ``other_cuda`` named by the
    vendor (``other_hip`` on an AMD capture; the JSON key stays ``other_cuda``)."""
    return "other_hip" if cause == "other_cuda" and vendor == "rocm" else cause


WITHIN_NOISE = "within noise"  # compare's status of a change that is not significant and not shown small


def noise_words(status: str, before_count: int, after_count: int, threshold_pct: float) -> str:
    """Why a change that is not improved / regressed is so, in the words compare and trend share (each
    writes the interval beside them): ``within noise / not significant (60 / 400 steps)`` when the data
    cannot tell, ``unchanged (within the 5% threshold)`` when it shows the change small; the status
    itself otherwise."""
    if status == WITHIN_NOISE:
        return f"within noise / not significant ({before_count} / {after_count} steps)"
    if status == "unchanged":
        return f"unchanged (within the {threshold_pct:g}% threshold)"
    return status


def long_steps_words(long) -> str:
    """A rank's long steps in the words the summary, the reports and the gate share (``long``: its
    ``before``, ``before_steps``, ``after``, ``after_steps``, ``factor``, ``cutoff_ns``, ``p_value``, ms per
    step and ``status``): ``long steps 3/400 -> 5/60 over 3x the before p50 (64.82 ms), Fisher p=0.0013, 3.277 ->
    35.25 ms per step above the before p50: regressed``."""
    return (f"long steps {long.before}/{long.before_steps} -> {long.after}/{long.after_steps} over {long.factor:g}x the "
            f"before p50 ({long.cutoff_ns / 1e6:.4g} ms), Fisher p={long.p_value:.2g}, {long.before_ms_per_step:.4g} -> "
            f"{long.after_ms_per_step:.4g} ms per step above the before p50: {long.status}")
