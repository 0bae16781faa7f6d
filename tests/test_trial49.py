"""New-user trial 49: a gate's answer does not depend on how much of the report the reader took."""

import subprocess
import sys

from conftest import BUNDLES


def test_a_reader_that_stops_early_does_not_turn_a_failed_gate_into_a_pass(tmp_path):
    """`compare --gate graph_decode eager_decode | head -c 1` exited 8 or 0 by the pipe's timing
    (BrokenPipeError was exit 0): the regression is exit 8 whoever reads how much of it."""
    cache = tmp_path / "cache"
    argv = [sys.executable, "-m", "tracetriage", "compare", "--gate", "--cache-dir", str(cache),
            str(BUNDLES / "graph_decode"), str(BUNDLES / "eager_decode")]
    full = subprocess.run(argv, capture_output=True, text=True)
    assert full.returncode == 8, full.stderr
    for _ in range(2):  # the reader goes before the report is written: every write fails
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.stdout.close()
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 8, err.decode()[-500:]
        assert b"Traceback" not in err


def _finding(data, finding_id):
    return next(row for row in data["findings"] if row["id"] == finding_id)


def test_a_sync_that_stayed_is_neither_fixed_nor_new():
    """Both bundles sync once a step (one 256 B device-to-host copy); the before analysis of one of
    them leaves the finding under its reporting threshold. compare said 'FIXED - confirmed: the
    blocking sync left the step' one way (beside 'blocking syncs per step: 1 -> 1') and 'new' the
    other: it persists both ways, on its own time, which held."""
    import json

    from conftest import run_cli

    for before, after in (("decode_rare_prefill", "prefill_stall"), ("prefill_stall", "decode_rare_prefill")):
        proc = run_cli("compare", BUNDLES / before, BUNDLES / after, "-f", "json")
        assert proc.returncode == 0, proc.stderr
        data = json.loads(proc.stdout)
        row = _finding(data, "host_sync_per_step")
        syncs = {e["name"]: e for e in row["evidence"]}.get("syncs_per_step")
        if syncs is not None:  # where the check lists it, the sync is there on both sides
            assert syncs["before"] >= 0.5 and syncs["after"] >= 0.5
        assert row["status"] == "persists", (before, after, row["status"], row["decided_by"])
        assert "left the step" not in row["decided_by"]
        assert "new: host_sync_per_step" not in data["summary"]


def test_the_graph_footnote_is_shown_only_beside_na_cells():
    """The compare page's 'n/a on a graph-level capture' note under the kernels table was printed on
    a pair without graph replays (the real 2xH100 mfu pair), where no cell is n/a."""
    from conftest import ROOT, run_cli

    note = "n/a on a graph-level capture"
    real = ROOT / "samples" / "real" / "nsys"
    plain = run_cli("compare", real / "nsys2026.2_2xH100_mfu_before.sqlite", real / "nsys2026.2_2xH100_mfu_after.sqlite",
                    "-f", "html")
    graph = run_cli("compare", BUNDLES / "eager_decode", BUNDLES / "graph_decode", "-f", "html")
    assert plain.returncode == graph.returncode == 0
    assert "Kernels that moved most" in plain.stdout and note not in plain.stdout
    assert note in graph.stdout and ">n/a<" in graph.stdout
