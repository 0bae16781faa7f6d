"""What the new-user trial of the merged branch found (session 42), each with the rule it broke."""

from __future__ import annotations

import re

import pytest
from conftest import BUNDLES, ROOT, real

from tracetriage import analyze, open_case
from tracetriage.analyzers import opwork
from tracetriage.reports import render


@pytest.mark.parametrize("name,dims,types,concrete,out_elems,index_elems", [
    # index_select(self, dim, index): self with dimension dim the index's length
    ("aten::index_select", [[30522, 512], [], [141]], ["c10::BFloat16", "Scalar", "long int"], ["", "0", ""], 141 * 512, 141),
    ("aten::index_select", [[64, 30522], [], [7]], ["float", "Scalar", "long int"], ["", "1", ""], 64 * 7, 7),
    # embedding(weight, indices): indices.shape + weight.shape[1:]
    ("aten::embedding", [[32000, 4096], [4, 128]], ["c10::Half", "long int"], ["", ""], 4 * 128 * 4096, 4 * 128),
    # gather(self, dim, index): the index's shape
    ("aten::gather", [[8, 50000], [], [8, 5]], ["float", "Scalar", "long int"], ["", "1", ""], 8 * 5, 8 * 5),
])
def test_a_gather_reads_the_rows_it_selects_not_its_table(name, dims, types, concrete, out_elems, index_elems):
    """bert_small's index_select over a 30522 x 512 table was counted as 62.5 MB for a 3.1 us kernel
    (20 TB/s): the whole table twice. A gather reads the selected elements, the indices, and writes them."""
    elem = {"c10::BFloat16": 2, "c10::Half": 2, "float": 4}[types[0]]
    work = opwork.work(name, dims, types, concrete)
    assert work.kind == "memory_bound"
    assert work.flops == out_elems
    assert work.bytes == 2 * out_elems * elem + 8 * index_elems


def test_real_bert_memory_bound_class_is_within_the_bandwidth_of_its_ops():
    """Every memory-bound op the table lists is at most ~18% of the bandwidth; the class it belongs to
    cannot sit far above its ops (it read 31% before the gather fix)."""
    path = real("kineto", "tracelens_h100_bert_small.json.gz")
    eff = analyze(open_case([path])).data["efficiency"]
    memory = next(row for row in eff["classes"] if row["class"] == "memory_bound")
    ops = [op for op in eff["top_ops"] if op["class"] == "memory_bound" and op["pct_of_roofline"] is not None]
    assert ops and memory["pct_of_roofline"] <= max(op["pct_of_roofline"] for op in ops) + 1
    assert all(row["pct_of_achievable"] is None for row in eff["classes"] if row["bound"] == "memory")


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_not_measured_section_does_not_claim_everything_was_measured_when_efficiency_was_not(fmt):
    analysis = analyze(open_case([BUNDLES / "tp8_cross_island"]))
    assert not analysis.data["abstentions"] and analysis.data["efficiency"]["not_measured"]
    page = render(analysis, fmt)
    assert "Every analysis had the data it needed" not in page
    assert "No analysis abstained; the kernel time the efficiency block could not measure is listed under Efficiency" in page


def test_help_lists_every_exit_code_the_readme_lists(capsys):
    from tracetriage import cli

    with pytest.raises(SystemExit):
        cli.main(["--help"])
    helped = " ".join(capsys.readouterr().out.split())
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    codes = set(re.findall(r"^\| (\d+) \|", readme, flags=re.M))
    assert codes and {"124", "130", "70"} <= codes
    for code in codes:
        assert re.search(rf"(?<![\d]){code} [a-zA-Z-]", helped), code
