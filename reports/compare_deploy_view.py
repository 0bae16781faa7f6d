"""The serving side of a Comparison's view (analyzers/compare_serving.py): the engine settings that changed,
those the same and those not compared, the per-request shapes, the shares of requests, the load and the
quality finding, formatted once from the comparison's serving record for every format (reports/compare_view.py
holds the rest of the view)."""

from __future__ import annotations

from dataclasses import dataclass

from tracetriage.records.compare import Load, LoadSide, ServingChange, Setting, Shape
from tracetriage.records.findings import Finding
from tracetriage.records.serving import LengthStats
from tracetriage.reports.side_views import length_summary


@dataclass(frozen=True, slots=True)
class ShapeView:
    """One per-request length distribution across the change: each side's summary in words, the
    two-sample test's statistic and p-value, and its outcome (shifted, within noise, not tested)."""
    name: str
    before: str
    after: str
    test: str
    outcome: str


@dataclass(frozen=True, slots=True)
class QualityView:
    """The compare-stage finding (quality_regression): its words, severity, impact and evidence."""
    id: str
    title: str
    severity: str
    impact: str
    mechanism: str
    fix: str
    confirm: str
    falsifier: str
    evidence: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeployView:
    """The serving side of the change (analyzers/compare_serving.py): the engines, the settings that
    changed (with where each side's value comes from), those the same, those not compared (known on one side only, or
    ``auto`` against the dtype it may resolve to),
    the per-request shapes,
    the shares of requests (length-capped, failed), the load, the latency note (None: none) and the
    quality finding (None: it did not fire)."""
    engines: str
    changed: tuple[str, ...]
    same: tuple[str, ...]
    uncompared: tuple[str, ...]
    shapes: tuple[ShapeView, ...]
    shares: tuple[str, ...]
    load: str
    latency: str | None
    quality: QualityView | None


def _length_words(stats: LengthStats | None) -> str:
    return length_summary(stats, " tokens") if stats else "not measured"


def _shape(shape: Shape) -> ShapeView:
    test = ("no per-request values: not tested" if shape.p_value is None
            else f"KS D={shape.ks_statistic:.3f}, p={shape.p_value:.2g}")
    outcome = "not tested" if shape.shifted is None else "shifted" if shape.shifted else "within noise"
    return ShapeView(f"{shape.name} tokens per request", _length_words(shape.before), _length_words(shape.after),
                     test, outcome)


def _source(source: str) -> str:
    return source.split(" (")[0]


def _setting(setting: Setting) -> str:
    before, after = _source(setting.before_source), _source(setting.after_source)
    return f"{setting.text} [{before if before == after else f'{before} -> {after}'}]"


def _same(setting: Setting) -> bool:
    """Whether both sides know the setting (printed or a default) with one value."""
    return "not known" not in (setting.before_source, setting.after_source) and setting.before == setting.after


def _load(traffic: Load) -> str:
    def rate(side: LoadSide) -> str:
        return "n/a" if side.request_rate is None else f"{side.request_rate:g} req/s"

    def cap(side: LoadSide) -> str:
        return "none" if side.max_concurrency is None else f"{side.max_concurrency:g}"

    before, after = traffic.before, traffic.after
    return f"request rate {rate(before)} -> {rate(after)}; max concurrency {cap(before)} -> {cap(after)}"


def _quality(quality: Finding) -> QualityView:
    return QualityView(
        id=quality.id, title=quality.title, severity=quality.severity,
        impact=f"{quality.impact_pct:.0f}% of {quality.impact_denominator}", mechanism=quality.mechanism,
        fix=quality.fix, confirm=quality.confirm, falsifier=quality.falsifier,
        evidence=tuple(row.text for row in quality.evidence))


def deploy_view(serving: ServingChange | None) -> DeployView | None:
    """The serving side of a comparison (None without one on both sides)."""
    if serving is None:
        return None
    settings = serving.settings
    return DeployView(
        engines=str(serving.engines),
        changed=tuple(_setting(setting) for setting in settings if setting.changed),
        same=tuple(_setting(setting) for setting in settings if not setting.changed and _same(setting)),
        uncompared=tuple(_setting(setting) for setting in settings if not setting.changed and not _same(setting)),
        shapes=tuple(_shape(shape) for shape in serving.shapes), shares=tuple(share.text for share in serving.shares),
        load=_load(serving.load), latency=serving.latency,
        quality=_quality(serving.quality) if serving.quality else None)
