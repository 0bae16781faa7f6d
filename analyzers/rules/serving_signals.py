"""What the serving verdicts share: the TPOT fit judged as a model of the server, the budgets it
breaks, and the inter-token tail (found unexplained when no standing finding on the tail axis explains
it). The serving rules, the abstentions and the headline read them; thresholds: rules/serving.py."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from tracetriage.analyzers.findings import Finding
from tracetriage.analyzers.metrics import Contract
from tracetriage.analyzers.rules.context import t
from tracetriage.analyzers.serving_metrics import ServingSummary, TpotFit, serving_summary
from tracetriage.wording import ms

COMMON_TPOT_BUDGETS_MS = (20, 30, 50, 100)  # interactive chat to batch-ish: where each budget breaks is stated without --slo


def _fit_of(fit: TpotFit | dict | None) -> TpotFit | None:
    """A TPOT fit given either way (a contract dict is read back)."""
    return fit if fit is None or isinstance(fit, TpotFit) else TpotFit.from_contract(fit)


def fit_rejected(fit: TpotFit | dict | None) -> str | None:
    """Why a TPOT = a + b x batch fit is not a model of this server (None when it is one): a
    slope or intercept below zero (TPOT does not fall as the batch grows, and a step costs
    something at batch 0), r² under knee_r2_min, or fewer than knee_min_points points."""
    fit = _fit_of(fit)
    if not fit:
        return "no fit"
    if fit.b_ms_per_seq <= 0:
        return f"negative slope ({fit.b_ms_per_seq:.3f} ms per sequence)"
    if fit.a_ms < 0:
        return f"negative intercept ({fit.a_ms:.2f} ms)"
    if fit.r2 < t("knee_r2_min"):
        return f"r² {fit.r2:.2f} under {t('knee_r2_min'):g}"
    if fit.points < t("knee_min_points"):
        return f"{fit.points} points, fewer than {t('knee_min_points')}"
    return None


def budgets_break_at(fit: TpotFit | dict) -> list[tuple[float, float]]:
    """(budget ms, the running batch at which it breaks) for the common TPOT budgets above the fit's intercept."""
    fit = _fit_of(fit)
    return [(budget, (budget - fit.a_ms) / fit.b_ms_per_seq) for budget in COMMON_TPOT_BUDGETS_MS if budget > fit.a_ms]



@dataclass(frozen=True, slots=True)
class InterTokenTail(Contract):
    """The inter-token tail: ITL p50, p99 and max (ms; max None from a histogram) and where from;
    ``ratio`` (p99 over p50) and ``ruled_out`` (findings on the tail axis their falsifiers rule
    out) once it is found unexplained (:func:`tail_unexplained`)."""

    p50: float
    p99: float
    max: float | None
    source: str
    ratio: float | None = None
    ruled_out: list | None = None

    @classmethod
    def from_contract(cls, data: dict) -> InterTokenTail:
        return cls(**{item.name: data.get(item.name) for item in fields(cls)})


def inter_token_tail(serving: ServingSummary) -> InterTokenTail | None:
    """ITL p50 / p99 / max from the benchmark (per-request arrays or aggregates), else the server histogram."""
    client = serving.latency.client.itl
    p50, p99, longest = (client.median or client.p50, client.p99, client.max) if client else (None, None, None)
    source = "benchmark (client)"
    if not (p50 and p99):
        server = serving.latency.server.itl or serving.latency.server.tpot
        if server and server.p50 and server.p99 and not server.p99.lower_bound:
            p50, p99, longest, source = server.p50.value_ms, server.p99.value_ms, None, (
                f"server histogram (bucket resolution {server.p99.resolution_ms:g} ms at p99)")
    if not (p50 and p99) or p50 <= 0:
        return None
    return InterTokenTail(p50, p99, longest, source)


def tpot_needs_budget(serving: ServingSummary | dict, slo: dict) -> bool:
    """TPOT rises with the batch (a fit that is a model, up 1.5x across the batches measured) and
    no TPOT budget was given: the knee cannot be judged, so the run is not called healthy."""
    fit = serving_summary(serving).tpot_fit
    return bool(fit and fit.model and not any(key.startswith("tpot_") for key in slo)
                and fit.at(fit.x_max) >= 1.5 * fit.at(fit.x_min))


def tail_unexplained(serving: ServingSummary | None, findings: list[Finding]) -> InterTokenTail | None:
    """The inter-token tail (itl_tail: ITL, else the server's TPOT histogram) when its p99 is at
    least itl_tail_ratio x its median and no standing finding on the tail axis explains it (a
    falsified one does not), with its ratio and the tail findings ruled out; None otherwise.
    Serving is never called healthy while one stands."""
    tail = inter_token_tail(serving) if serving else None
    if not tail or tail.p99 / tail.p50 < t("itl_tail_ratio"):
        return None
    if any(finding.axis == "tail" and not finding.falsified for finding in findings):
        return None
    return replace(tail, ratio=round(tail.p99 / tail.p50, 2),
                   ruled_out=[finding.id for finding in findings if finding.axis == "tail" and finding.falsified])


def tail_words(tail: InterTokenTail | dict) -> str:
    tail = tail if isinstance(tail, InterTokenTail) else InterTokenTail.from_contract(tail)
    return f"ITL p99 {ms(tail.p99)} is {tail.ratio:.1f}x the median of {ms(tail.p50)} ({tail.source})"
