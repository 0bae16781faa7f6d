"""The report as a reader meets it (issue 26): one consistent picture per number.

The copies line names every direction with the bytes the devices' copy activity holds; the
Measurements table shows compute and copies apart; the window accounting is a table (HTML and
Markdown) with one row per device; every chart and table colours a finding by its id and an
idle cause by its cause, from one palette; long kernel names are cut in the middle with the
full name on hover; commands are kept whole; the header names the inputs, the devices and the
capture's date; counts agree with their nouns; bytes have one unit style."""

from __future__ import annotations

import datetime
import html as htmlmod
import json
import re

import pytest
from conftest import BUNDLES, real, sql

from tracetriage.api import analyze
from tracetriage.reports import palette
from tracetriage.reports.html import render_html
from tracetriage.reports.markdown import render_markdown
from tracetriage.reports.text import render_text
from tracetriage.wording import nbytes, short_middle


@pytest.fixture(scope="module")
def offload():
    return analyze([BUNDLES / "offload_copy_bound"])


@pytest.fixture(scope="module")
def tp8():
    return analyze([BUNDLES / "tp8_cross_island"])


def _moved(a, direction):
    """Count and bytes of one copy direction, summed from the JSON's per-device copy activity."""
    n = b = 0
    for d in a.data["devices"]:
        x = (d.get("copies") or {}).get("by_direction", {}).get(direction) or {}
        n += x.get("count") or 0
        b += x.get("bytes") or 0
    return n, b


def test_copies_line_names_host_to_device_copies(offload):
    n, b = _moved(offload, "HtoD")
    assert n > 0 and b > 10**9  # the bundle moves GBs host to device
    expected = f"{n:,} host-to-device copies ({nbytes(b)})"
    assert expected in render_text(offload)
    assert expected.replace("-", "-") in render_markdown(offload).replace("\\", "")
    page = render_html(offload)
    assert expected in htmlmod.unescape(page)
    assert "Copies in the window" in page  # capitalized without lowering the rest ("GB" stays "GB")
    assert not re.search(r"\(\d[\d,.]* b\)", page)  # one byte style: never "(0 b)"


def test_measurements_show_compute_and_copies_apart(offload):
    d = offload.data["devices"][0]
    s = d["accounting"]["slices_pct"]
    compute, copy = s.get("compute", 0) + s.get("collective", 0), s.get("copy", 0)
    assert copy > 90 and compute < 10  # copy-bound: busy is not compute
    page = render_html(offload)
    head = page[page.index('id="measurements"'):page.index("</table>", page.index('id="measurements"'))]
    assert "<th class=\"num\">compute %</th>" in head and "<th class=\"num\">copy-only %</th>" in head
    assert f'<td class="num">{compute:.1f}</td><td class="num">{copy:.1f}</td>' in head
    md = render_markdown(offload)
    assert f"| {d['busy_pct']:.1f} | {compute:.1f} | {copy:.1f} |" in md
    txt = render_text(offload)
    assert re.search(rf"{d['busy_pct']:.1f}\s+{compute:.1f}\s+{copy:.1f}", txt)


def test_window_accounting_is_a_table_in_markdown_and_html(tp8):
    devs = tp8.data["devices"]
    assert len(devs) == 8
    md = render_markdown(tp8)
    rows = [line for line in md.splitlines() if line.startswith("| GPU")]
    # one accounting row and one measurements row per device, each on its own line
    assert len(rows) == 2 * len(devs)
    claims = {k for d in devs for k in d["accounting"]["claims_pct"]}
    header = next(line for line in md.splitlines() if line.startswith("| device |") and "unclaimed" in line)
    for k in claims:
        assert k.replace("_", "\\_") in header
    for d in devs:
        row = next(r for r in rows if r.startswith(f"| {d['id']} |") and r.count("|") == header.count("|"))
        for k, x in d["accounting"]["claims_pct"].items():
            assert f" {x:.1f} |" in row
    page = render_html(tp8)
    table = page[page.index('<table id="accounting">'):]
    table = table[:table.index("</table>")]
    assert table.count("<tr>") == 1 + len(devs)  # header + one row per device, not a paragraph cut with "…"
    assert "…" not in table


def test_one_palette_keyed_by_finding_and_cause():
    fam = [set(palette.CAUSE_COLORS.values()), set(palette.ACTIVITY_COLORS.values()),
           set(palette.FINDING_COLORS.values()) | set(palette._SPARE), set(palette.NEUTRAL)]
    for i in range(len(fam)):
        for j in range(i + 1, len(fam)):
            assert not fam[i] & fam[j], "a colour means one thing on the page"
    assert palette.finding_color("launch_bound") == palette.finding_color("launch_bound")
    assert palette.finding_color("some_new_finding") in palette._SPARE


def test_charts_and_tables_use_the_finding_colour(offload, tp8):
    from tracetriage.reports.charts import window_accounting

    for a in (offload, tp8):
        page = render_html(a)
        for d in a.data["devices"]:
            for fid in d["accounting"]["claims_pct"]:
                color = palette.finding_color(fid)
                assert f"background: {color}" in page  # the swatch in the table and the finding card
                assert color.lower() in window_accounting(a.data["devices"]).lower()  # the bar in the chart


def test_timeline_legend_lists_every_cause_it_shades(tp8, offload):
    from tracetriage.reports.charts import timeline

    for a in (tp8, offload):
        tl = a.series.get("timeline")
        charts = timeline(tl)
        assert charts
        for (name, svg), w in zip(charts, [w for w in tl["windows"] if w["devices"]]):
            shaded = {c for d in w["devices"] for _, _, c in d["gaps"]}
            for cause in palette.CAUSE_COLORS:
                label = f"idle: {palette.CAUSE_LABELS[cause]}"
                assert (htmlmod.escape(label) in svg or label in svg) == (cause in shaded), (name, cause)
            assert "ms from the start of the span shown" in svg
            assert w["label"].split(" (")[0] in htmlmod.unescape(svg)


def test_busy_over_time_draws_lockstep_ranks_once(tp8):
    from tracetriage.reports.charts import busy_over_time

    busy = tp8.series["busy"]
    assert len(busy) == 8
    svg = busy_over_time(busy, tp8.data["window"]["duration_ns"])
    # matplotlib writes one <g id="line2d_N"> per line drawn: the 8 ranks in lockstep are one curve
    assert len(re.findall(r'id="c\d+-line2d_\d+"', svg)) < 8 + 12  # axes ticks are line2d too: bounded, not 8 curves
    assert "more (within 3 points)" in svg


def test_long_kernel_names_are_cut_in_the_middle():
    name = ("Cijk_Alik_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN_1LDSB0_APM1_ABV0_ACED0_AF0EM1_AF1EM1_AMAS3_ASE_ASGT_ASLT_"
            "ASAE01_ASCE01_ASEM1_AAC0_BL1_BS1_DTL0_DTVA0_DVO0_ETSP_EPS1_FL0_GRVW8_GSU1_GSUASB_GLS0_ISA942_IU1_K1_KLA_"
            "LBSPPA128_LPA0_LPB8_LDL1_LRVW16_LWPMn1_LDW0_FMA_MIAV1_MDA2_MO40_NTA0_NTB0_NTC0_NTD0_NEPBS0_NLCA1_NLCB1_ONLL1_"
            "OPLV0_PK0_PAP0_PGR2_PLR1_SIA3_SS1_SU32_SUM0_SUS128_SCIUI1_SPO0_SRVW0_SSO0_SVW4_SNLL0_TT4_64_TLDS1_USFGROn1_"
            "VAW2_VSn1_VW4_WSGRA1_WSGRB1_WS64_WG32_8_1_WGM8")
    short = short_middle(name)
    assert len(short) == 90 and "…" in short
    assert short.startswith("Cijk_Alik_Bljk") and short.endswith("WGM8")  # family and tile shape both kept
    assert short_middle("gemm_kernel") == "gemm_kernel"


def test_long_kernel_names_keep_the_full_name_on_hover():
    path = real("rocprof", "rocprofv3_rocpd_v3_ck_batched_gemm_mi300x.db")
    a = analyze([path])
    page = render_html(a)
    long_names = [k["name"] for k in a.data["kernels"] if len(k["name"]) > 90]
    assert long_names
    for n in long_names:
        assert f'title="{htmlmod.escape(n)}"' in page  # the whole name on hover
        assert f">{htmlmod.escape(short_middle(n))}</td>" in page  # one line in the table


def test_commands_are_kept_whole():
    """Each command of a capture hint is one code span; the sentence around it wraps as text (issue 38)."""
    from markupsafe import escape

    from tracetriage.reports.html import capture_pieces

    a = analyze([BUNDLES / "decode_rare_prefill"])
    page = render_html(a)
    commands = [piece for x in a.data["abstentions"] for piece, is_command in capture_pieces(x["capture_hint"]) if is_command]
    assert commands
    for command in commands:
        assert f'<code class="cmd">{escape(command)}</code>' in page


def test_header_names_inputs_devices_and_capture_date():
    path = real("nsys", "nsys2026.2_2xH100_fastvideo_sp2_pytorch_window1s.sqlite")
    a = analyze([path])
    start = sql(path, "SELECT min(utcEpochNs) FROM TARGET_INFO_SESSION_START_TIME")[0][0]
    when = datetime.datetime.fromtimestamp(start / 1e9, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    page = render_html(a).replace("<wbr>", "")  # the break points in the names are no text
    head = page[page.index("<header>"):page.index("</header>")]
    assert path.name in head and f"captured {when}" in head
    n = len(a.data["devices"])
    assert f"{n} x " in head or a.data["devices"][0]["name"] in head
    txt = render_text(a).splitlines()[1]
    assert txt.startswith("CASE") and path.name in txt and when in txt
    assert when in render_markdown(a)


def test_bundle_header_says_when_the_date_is_not_recorded(tp8):
    head = render_html(tp8).replace("<wbr>", "")
    head = head[head.index("<header>"):head.index("</header>")]
    assert "tp8_cross_island/ (nccl.log, topo.txt, trace.sqlite)" in head
    assert "8 x NVIDIA H100 80GB HBM3" in head
    assert "capture time not recorded" in head  # was 'captured at a time the capture does not record' (trial item 40)


def test_counts_agree_with_their_nouns():
    path = real("pyspy", "py-spy_dump_deepspeed_megatron_broadcast_hang.txt")
    a = analyze([BUNDLES / "healthy" / "trace.sqlite", path])
    caps = a.data["host_profile"]["captures"]
    assert any(c["threads"] == 1 for c in caps)
    for text in (render_text(a), htmlmod.unescape(render_html(a))):
        assert "1 threads" not in text and "1 thread," in text
    one = analyze([BUNDLES / "healthy"])
    assert "1 synchronous copy calls" not in render_text(one)


def test_json_view_is_unchanged_by_the_view(offload):
    """The view adds display keys to a copy; the JSON contract stays what the analysis wrote."""
    before = json.dumps(offload.data, sort_keys=True)
    render_html(offload)
    render_markdown(offload)
    assert json.dumps(offload.data, sort_keys=True) == before


@pytest.mark.parametrize("name, shot", [
    ("offload_copy_bound", "issue26_offload_copy_bound.png"),
    ("tp8_cross_island", "issue26_tp8_cross_island.png"),
    ("graph_decode_rocpd", "issue26_rocm_graph_decode_rocpd.png"),
    ("serving_at_capacity", "issue26_serving_at_capacity.png"),
])
def test_reports_in_the_browser(name, shot, tmp_path):
    """The offload, TP8, a ROCm and a serving report open offline in Chromium with the header,
    the verdict and (with a trace) the accounting table visible; a screenshot of each goes to
    test-artifacts/."""
    from conftest import open_in_chromium

    a = analyze([BUNDLES / name])
    page = tmp_path / f"{name}.html"
    a.to_html(page)
    text, errors, requests = open_in_chromium(page, shot)
    assert errors == [] and requests == [page.resolve().as_uri()]
    assert a.headline in text and ("captured " in text or "capture time not recorded" in text)
    if a.data["devices"]:
        assert "Window accounting" in text and "compute in all" in text
        for d in a.data["devices"][:2]:
            assert d["id"] in text
