"""The verdict: findings ranked, symptom first, and the headline that says it in one line.

Findings are ranked: the ``--symptom`` axis first when one is given, then by severity, then by
impact. Without a symptom the headline names the top finding of each axis; the --slo budgets it
leaves out are named after it."""

from __future__ import annotations

from tracetriage.analyzers import catalog
from tracetriage.analyzers.catalog import AXES, SEVERITIES
from tracetriage.analyzers.findings import Abstention, Finding
from tracetriage.analyzers.rules.abstain import BLOCKS_HEALTHY, ODD
from tracetriage.analyzers.rules.context import t
from tracetriage.analyzers.rules.serving import tail_words
from tracetriage.analyzers.rules.serving_signals import tail_unexplained
from tracetriage.analyzers.rules.slo import measured_serving, slo_checks
from tracetriage.analyzers.serving_metrics import ServingSummary, serving_summary
from tracetriage.errors import is_damaged
from tracetriage.wording import pct, plural, slo_measured

# below this share (and below medium severity) a finding is minor: reported, named in the headline, but never the
# verdict itself, neither of a mostly idle GPU nor of a GPU-bound one (minor_findings)
MINOR_HEADLINE_PCT = 5.0


PAIR_AXES = ("quality",)  # axes whose findings come from a pair of captures (rules/quality.py), never from one


def rank(findings: list[Finding], symptom: str | None) -> list[Finding]:
    """Healthy first (it fires only when nothing reaches medium); then the findings that answer
    the symptom (its axis, or a further symptom they explain: launch-bound kernels answer
    "GPU at 30% utilization"); then severity, impact, the symptom's own axis before an answer
    from another, and a root cause before its symptom on ties."""
    order = {"nccl_socket_transport": 0, "cross_island_collective": 0}
    return sorted(findings, key=lambda finding: (finding.id != "healthy", bool(finding.falsified),
                                                 bool(symptom) and not catalog.answers(finding, symptom),
                                                 -SEVERITIES.index(finding.severity), -finding.impact_pct,
                                                 bool(symptom) and finding.axis != symptom, order.get(finding.id, 1)))


def _says(finding: Finding) -> str:
    """A finding in headline words: its id, title and the share it explains, by the one rounding path every
    report card prints that share with (wording.pct: one decimal, never 100.0% for less), so the headline
    never reads 44% where the card reads 44.4%. Where the finding's fix removes only part of the share it
    measured (explains_pct over impact_pct) the two are named apart:
    ``takes 52.9% of the window, of which the fix removes about 49.9%``."""
    if finding.explains_pct is not None:
        return (f"[{finding.id}] {finding.title} — takes {pct(finding.explains_pct)} of the {finding.impact_denominator}, "
                f"of which the fix removes about {pct(finding.impact_pct)}")
    return f"[{finding.id}] {finding.title} — explains {pct(finding.impact_pct)} of the {finding.impact_denominator}"


def headline_by_axis(findings: list[Finding]) -> dict[str, str]:
    out: dict[str, str] = {}
    for finding in findings:  # already ranked: the first of each axis is its top finding
        if finding.axis in AXES and finding.axis not in out and not finding.falsified:
            out[finding.axis] = _says(finding)
    return out


SLO_AXES = {"ttft": {"ttft"}, "tpot": {"tpot"}, "itl": {"tail"},
            "e2el": {"ttft", "tpot", "tail", "utilization", "oom"}}  # the axes whose findings can explain a broken budget


def slo_unexplained(findings: list[Finding], data: dict) -> tuple[list[dict], list[dict]]:
    """The --slo budgets broken with no standing finding on an axis that explains them
    (SLO_AXES), and those that could not be checked (slo.slo_check)."""
    checks = slo_checks(data.get("serving"), data.get("slo") or {})
    standing = {finding.axis for finding in findings if not finding.falsified and finding.id != "healthy"}
    broken = [check for check in checks
              if check["status"] == "broken" and not (SLO_AXES.get(check["metric"], set()) & standing)]
    return broken, [check for check in checks if check["status"] == "not_measured"]


def _slo_words(checks: list[dict]) -> str:
    """Each broken budget with the percentile that was measured over it: its own, or a lower one
    (``bounded_by``: a p50 over a p95 budget proves the p95 over it too)."""
    def words(check: dict) -> str:
        measured = slo_measured(check)
        limit = f"{check['limit_ms']:g} ms"
        return f"{measured} over the {limit} {check['percentile']} budget" if check.get("bounded_by") else \
            f"{measured} over the {limit} budget"

    return "; ".join(words(check) for check in checks)


def headline(findings: list[Finding], abstentions: list[Abstention], data: dict, symptom: str | None = None) -> str:
    """The verdict in one line (_headline), then the --slo budgets it leaves out: a broken budget no
    standing finding explains is named (it leads when nothing else stands), one not checked is said so."""
    broken, unchecked = slo_unexplained(findings, data)
    text = _headline(findings, abstentions, data, symptom, broken)
    if broken and not text.startswith("SLO broken"):
        text += f"; SLO broken, no finding on its axis: {_slo_words(broken)}"
    if unchecked:
        text += "; --slo not checked: " + ", ".join(f"{check['budget']} ({check['source']})" for check in unchecked)
    return text


def _headline(findings: list[Finding], abstentions: list[Abstention], data: dict, symptom: str | None, broken: list[dict]) -> str:
    """The verdict in one line, without the --slo budgets it leaves out (headline adds them)."""
    if symptom in PAIR_AXES:  # judged across a deploy, never on one capture: say which captures would decide
        return (f"{symptom}: not judged from one capture: the answers' shape is compared across a deploy; run tracetriage "
                "compare on serving captures from before and after it (benchmark results with per-request lengths: "
                "--save-result, plus the engine logs)")
    if not data["devices"]:
        return _side_artifacts_headline(findings, abstentions, data, symptom, broken)
    return _trace_headline(findings, abstentions, data["devices"], symptom)


def _side_artifacts_headline(findings: list[Finding], abstentions: list[Abstention], data: dict, symptom: str | None,
                             broken: list[dict]) -> str:
    """The verdict of a case without a GPU trace: a topology, serving artifacts or other side artifacts."""
    topo = data.get("topology")
    what = ((f"topology: {plural(len(topo.gpus), 'GPU')} in islands {topo.islands}" if len(topo.gpus) > 1
             else "topology: one GPU, so no interconnect between GPUs to judge") if topo
            else "serving artifacts" if data.get("serving") else "side artifacts only")
    no_trace = _no_trace(data)
    if findings and findings[0].id == "healthy":
        return f"Healthy: {findings[0].title} ({no_trace})"
    if symptom:
        return _symptom_headline(findings, abstentions, symptom, f" ({no_trace}; {what})")
    tops = _axis_tops(findings)
    if tops:
        return f"{_tops_words(tops)} ({no_trace}; {what})"
    if serving := serving_summary(data.get("serving")):
        text = _serving_headline(findings, abstentions, serving, broken, no_trace)
        if text is not None:
            return text
    return f"{no_trace[:1].upper()}{no_trace[1:]}, so no timeline verdict; {what}" + _not_measured(abstentions)


def _no_trace(data: dict) -> str:
    """Why the case has no timeline: no GPU trace given, or the one given is damaged (the case's
    ``skipped`` says how)."""
    damaged = [item["path"] for item in data.get("skipped") or () if is_damaged(item.get("reason", ""))]
    if not damaged:
        return "no GPU trace given"
    more = f" and {plural(len(damaged) - 1, 'other')}" if len(damaged) > 1 else ""
    return f"no GPU trace read: {damaged[0]}{more} could not be read (see skipped)"


def _serving_headline(findings: list[Finding], abstentions: list[Abstention], serving: ServingSummary,
                      broken: list[dict], no_trace: str = "no GPU trace given") -> str | None:
    """The verdict of serving artifacts with no standing finding: a broken budget, an unexplained
    inter-token tail, or what was measured and why it is not called healthy; None when nothing was measured."""
    measured = measured_serving(serving)
    if broken:
        return (f"SLO broken: {_slo_words(broken)}; no serving finding explains it (measured: " + "; ".join(measured[:3])
                + f"){_ruled_out(findings)}; {no_trace}"
                + _not_measured(abstentions))
    tail = tail_unexplained(serving, findings)
    if tail:
        return (f"Inter-token tail not explained: {tail_words(tail)}"
                + (f"; not the prefill-chunk mechanism ({', '.join(tail.ruled_out)} ruled out by its own falsifier)"
                   if tail.ruled_out else "")
                + _ruled_out([finding for finding in findings if finding.id not in tail.ruled_out])
                + "; not called healthy; "
                + no_trace + _not_measured(abstentions))
    queue = next((abstention for abstention in abstentions if abstention.analysis == "queue_trend"), None)
    if queue:  # a queue behind a full batch, seen at a moment: what it shows, and that its trend is not measured
        return (f"Queue behind a full batch or KV pool, its trend not measured: {queue.reason}{_ruled_out(findings)}; "
                f"not called healthy; {no_trace}" + _not_measured(abstentions))
    if not measured:
        return None
    knee = next((abstention for abstention in abstentions if abstention.analysis == "tpot_budget"), None)
    why = ("not called healthy: TPOT rises with the batch and no TPOT budget was given (give "
           "--slo tpot_p95_ms=<budget>)"
           if knee else "not enough to call it healthy")
    return ("No serving finding in what was measured (" + "; ".join(measured[:3])
            + f"){_ruled_out(findings)}, {why}; "
            + no_trace
            + _not_measured(abstentions))


def _tops_words(tops: dict[str, dict]) -> str:
    """The top finding of one axis, or of each axis joined by ' | '."""
    if len(tops) == 1:
        return _says(next(iter(tops.values())))
    return " | ".join(f"{axis}: {_says(finding)}" for axis, finding in tops.items())


def _trace_headline(findings: list[Finding], abstentions: list[Abstention], devices: list, symptom: str | None) -> str:
    """The verdict of a case with a GPU trace (``devices``: its DeviceMetrics with their accounting)."""
    compute = min(device.accounting["slices_pct"].get("compute", 0.0) + device.accounting["slices_pct"].get("collective", 0.0)
                  for device in devices)
    odd = [abstention for abstention in abstentions if abstention.analysis in ODD]
    if findings and findings[0].id == "healthy":
        return f"Healthy: {findings[0].title}"
    if symptom:
        return _symptom_headline(findings, abstentions, symptom, "",
                                 f"; the capture is too odd to judge: {odd[0].reason}" if odd else "")
    tops = _axis_tops(findings)
    if odd and not any(finding.axis != "throughput" for finding in findings):
        return f"Not enough to judge: {odd[0].reason}. To decide: {odd[0].capture_hint}"
    if tops and (bound := _gpu_bound_headline(findings, abstentions, devices, compute)):
        return bound
    if tops:
        throughput = tops.get("throughput")
        if (throughput is not None and len(tops) == 1 and throughput.impact_pct < MINOR_HEADLINE_PCT
                and SEVERITIES.index(throughput.severity) < SEVERITIES.index("medium")
                and compute < t("healthy_compute_min_pct")):
            # A minor finding must not pose as the verdict of a mostly idle capture.
            return (f"GPU computing {pct(compute)} of the window and no measured cause explains the rest "
                    f"(largest finding: {throughput.id}, {throughput.impact_pct:.1f}%)"
                    + _not_measured(abstentions))
        return _tops_words(tops)
    if compute >= t("healthy_compute_min_pct") and abstentions:
        busy = "all of" if compute >= 100.0 else f"at least {pct(compute)} of"  # never "at least 100.0%" (as healthy)
        return (f"No problem found in what was measured (GPU computing {busy} the window)"
                f"{_ruled_out(findings)}, but the verdict is incomplete: "
                + "; ".join(sorted({abstention.analysis for abstention in abstentions})) + " not measured")
    return (f"GPU computing {pct(compute)} of the window; no measured cause explains the rest (not healthy: not GPU-bound)"
            + _ruled_out(findings)
            + _not_measured(abstentions))


def minor_findings(findings: list[Finding]) -> list[Finding]:
    """The standing findings (ranked, as given) when every one of them is minor: below medium severity and
    explaining less than MINOR_HEADLINE_PCT of its denominator (the measured share, explains_pct, where it is
    more than the removable one); empty when one is not minor, or none stands."""
    standing = [finding for finding in findings if finding.axis in AXES and not finding.falsified]
    if all(SEVERITIES.index(finding.severity) < SEVERITIES.index("medium")
           and max(finding.impact_pct, finding.explains_pct or 0.0) < MINOR_HEADLINE_PCT for finding in standing):
        return standing
    return []


def _gpu_bound_headline(findings: list[Finding], abstentions: list[Abstention], devices: list,
                        compute: float) -> str | None:
    """The verdict of a GPU-bound capture whose findings are all minor (minor_findings): every device computes
    (kernels, collectives included: the accounting's figure, ``compute`` its least) at least the healthy rule's
    share of its window, so the verdict is GPU-bound, and the largest minor finding is named with its impact
    beside it, not as the verdict. Never healthy: a finding stands (and steadiness is not claimed). None when
    the capture is not GPU-bound, a finding is not minor, or an abstention makes the busy figure unsure
    (BLOCKS_HEALTHY: too odd to judge, gap causes or graph replays not measured)."""
    minor = minor_findings(findings)
    if (not minor or compute < t("healthy_compute_min_pct")
            or any(abstention.analysis in BLOCKS_HEALTHY for abstention in abstentions)):
        return None
    who = "the GPU computes" if len(devices) == 1 else "every device computes at least"
    collectives = any(device.accounting["slices_pct"].get("collective", 0.0) > 0 for device in devices)
    which = "minor finding" if len(minor) == 1 else f"largest of {len(minor)} minor findings"
    return (f"GPU-bound: {who} {pct(compute)} of the window{' (kernels, collectives included)' if collectives else ''}; "
            f"{which}: {_says(minor[0])}" + _ruled_out(findings) + _not_measured(abstentions))


def _not_measured(abstentions: list[Abstention]) -> str:
    """'; not measured: a, b' for the abstentions' analyses (empty when none)."""
    if not abstentions:
        return ""
    return "; not measured: " + ", ".join(sorted({abstention.analysis for abstention in abstentions}))


def _ruled_out(findings: list[Finding]) -> str:
    """'; ruled out by its own falsifier: a, b' for the falsified findings (empty when none): a
    headline with no standing finding still says what was measured and set aside."""
    out = [finding.id for finding in findings if finding.falsified]
    return f"; ruled out by its own falsifier: {', '.join(out)}" if out else ""


def _symptom_headline(findings: list[Finding], abstentions: list[Abstention], symptom: str, where: str, tail: str = "") -> str:
    """The verdict for the symptom the user named: its top finding, or why there is none."""
    mine = [finding for finding in findings if catalog.answers(finding, symptom) and not finding.falsified]
    if mine:
        return f"{symptom}: {_says(mine[0])}{where}"
    others = "; ".join(f"{axis}: [{finding.id}]" for axis, finding in _axis_tops(findings).items())
    undecided = [abstention for abstention in abstentions
                 if symptom == "tail" and abstention.analysis in ("steps", "step_tail", "step_annotations")]
    why = f"; not measured: {undecided[0].reason}" if undecided else ""
    return (f"{symptom}: no finding on this axis in what was measured{why}{where}"
            + (f" (other axes: {others})" if others else "") + tail)


def _axis_tops(findings: list[Finding]) -> dict[str, Finding]:
    tops: dict[str, dict] = {}
    for finding in findings:
        if finding.axis in AXES and finding.axis not in tops and not finding.falsified:
            tops[finding.axis] = finding
    return tops
