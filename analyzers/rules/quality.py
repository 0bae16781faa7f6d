"""The quality rule: answers that changed across a deploy of another model, weights or precision.

Stage ``compare``: it reads a pair, not one capture, so ``compare`` (analyzers/compare.py) runs it
on the serving comparison (analyzers/compare_serving.py) and ``trend`` gets it through compare at
each change. It fires when, after a change of the served model, its revision or its precision
(dtype, quantization, KV-cache dtype),

* the inputs did not shift (their per-request lengths tested, and within noise), and
* the outputs did: the output-length distribution shifted (KS test), or the share of requests
  finishing on the length cap or failing moved (Fisher's exact test).

Never on noise: every shift needs p < ``shape_alpha`` *and* a practical size (the mean moved by
``shape_mean_change_pct`` or the CDFs parted by ``shape_ks_min``; a share moved by
``share_min_points``); never without a change of model or precision, nor when the inputs changed
or are not known (then the prompts, not the model, may have changed the answers).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracetriage.analyzers import catalog
from tracetriage.analyzers.compare_serving import ServingComparison
from tracetriage.analyzers.evidence import ev, severity_for
from tracetriage.analyzers.findings import Finding
from tracetriage.analyzers.rules.context import Rule

# name: (value, why)
THRESHOLDS = {
    "shape_alpha": (0.001, ("a shift needs p < 0.001: two runs of one config differ at p < 0.05 one time in twenty, and a "
                            "series of nightly comparisons must not cry wolf")),
    "shape_mean_change_pct": (10.0, ("the mean length moved by 10% or more: sampling noise of a few hundred requests "
                                     "moves it by a few %; the case study's INT4 deploy moved it by 56%")),
    "shape_ks_min": (0.2, ("or the CDFs part by 0.2 (KS D): a fifth of the requests moved across some length; two draws "
                           "of 1,000 requests part by about 0.04")),
    "shape_min_requests": (50, "fewer than 50 requests a side is no distribution to test"),
    "share_min_points": (2.0, "a share of requests (length-capped, failed) moved by 2 points or more"),
}


@dataclass(frozen=True)
class PairContext:
    """What the compare-stage rules read: the serving comparison of the pair, and the capture kind
    the catalog's variants are chosen by (a serving pair: no vendor, no workload)."""

    serving: ServingComparison | None
    kind: dict


def _evidence(serving: ServingComparison) -> list:
    rows = [ev("changed", "; ".join(serving.identity), text="changed: " + "; ".join(serving.identity))]
    for shape in serving.shapes:
        rows.append(ev(f"{shape.name}_length", shape.after["mean"] if shape.after else None, "tokens",
                       f"{shape.after['n'] if shape.after else 0:,} requests after", text=shape.text))
    rows.extend(ev(share.name, round(100.0 * share.after_count / share.after_total, 2), "%",
                   f"{share.after_total:,} requests after", text=share.text) for share in serving.shares)
    return rows


def rule_quality_regression(ctx: PairContext) -> Finding | None:
    """quality_regression (module docstring)."""
    serving = ctx.serving
    if serving is None or not serving.identity_changed or serving.inputs_shifted is not False:
        return None
    output = serving.shape("output")
    moved_shares = [share for share in serving.shares if share.shifted and share.change_points > 0]
    if not (output and output.shifted) and not moved_shares:
        return None
    impact = 100.0 * output.ks_statistic if output and output.shifted else max(share.change_points for share in moved_shares)
    what = ([output.text] if output and output.shifted else []) + [share.text for share in moved_shares]
    fields = {"changes": "; ".join(serving.identity), "what": "; ".join(what),
              "inputs": serving.shape("input").text if serving.shape("input") else "input lengths within noise"}
    return catalog.make("quality_regression", impact, fields, _evidence(serving), severity=severity_for(impact),
                        denominator="requests, at least (the KS distance D between the before and after output-length "
                                    "distributions bounds from below the share of requests whose length distribution "
                                    "must differ, their total variation distance; else the share of requests that moved)",
                        kind=ctx.kind)


QUALITY = Rule("quality_regression", "compare", rule_quality_regression, reads=("serving",), requires=("serving",),
               thresholds=tuple(THRESHOLDS))
RULES = [QUALITY]


def evaluate_pair(serving: ServingComparison | None) -> Finding | None:
    """The compare stage on one pair: each of its rules (one today) on the serving comparison."""
    ctx = PairContext(serving, {"workload": "serving"})
    for rule in RULES:
        if all(getattr(ctx, name) for name in rule.requires) and (finding := rule.evaluate(ctx)) is not None:
            return finding
    return None
