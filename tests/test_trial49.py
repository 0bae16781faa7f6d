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
