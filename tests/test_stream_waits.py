"""Dependency waits streamed (analyzers/stream_queued.py, issue 36 item 3): on generated captures whose stream
waits on an event with its work queued (samples/gen_dependency.py), with and without a host/GPU clock offset,
``analyze_streamed`` with small chunks finds the window, the steps, every device timeline (its ``dependency``
idle included) and the kernel summary equal to the whole-table path's; the join's own structure against a sort."""

import sys

import numpy as np
import pytest
from conftest import ROOT
from test_stream_steps import streamed, whole

from tracetriage.analyzers import stream_queued as sq
from tracetriage.analyzers import stream_timeline as stl

sys.path.insert(0, str(ROOT / "samples"))
import gen_dependency  # noqa: E402

CASES = {"wait": (10_000, 0), "short_wait": (1_000, 0), "no_wait": (0, 0),
         "gpu_ahead": (10_000, 5_000), "gpu_behind": (10_000, -5_000)}  # wait µs, GPU clock offset µs


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("stream_waits")
    paths = {}
    for name, (wait_us, offset_us) in CASES.items():
        gen_dependency.write_bundle(out / name, f"dependency:{name}", wait_us, gpu_offset_us=offset_us)
        paths[name] = out / name / "trace.sqlite"
    return paths


@pytest.mark.parametrize("name", sorted(CASES))
def test_dependency_waits_stream_to_the_same_numbers(generated, name):
    path = generated[name]
    want = whole(path)
    dependency = [t["gaps"]["by_cause"].get("dependency", 0) for t in want[2].values()]
    # the whole-table path finds the waits where the clocks agree, and none where they are offset or nothing waits
    assert (sum(dependency) > 0) == (name in ("wait", "short_wait"))
    for chunk_rows in (7, 100):
        got, numbers = streamed(path, chunk_rows, 10_000)
        assert numbers == want, (name, chunk_rows)
        # an offset is known once every pair is read: the pass that assumed the process queues runs again
        assert got.passes == (("timeline", "timeline") if name.startswith("gpu_") else ("timeline",))


def test_the_join_holds_no_more_than_its_bound(generated, monkeypatch):
    monkeypatch.setattr(sq, "HELD_MOST", 50)
    with pytest.raises(stl.NotStreamable, match="more than 50 launch calls or operations held"):
        streamed(generated["wait"], 100, 10_000)


def test_sorted_runs_find_the_first_row_of_a_key_as_a_stable_sort_does():
    rng = np.random.default_rng(3)
    held = sq._Sorted()
    keys, values = [], []
    for part in range(40):
        k = rng.integers(0, 300, int(rng.integers(1, 60)))
        v = np.arange(k.size) + 1000 * part
        held.add(k, v)
        keys.append(k)
        values.append(v)
        every_k, every_v = np.concatenate(keys), np.concatenate(values)
        order = np.argsort(every_k, kind="stable")
        sk, sv = every_k[order], every_v[order]
        asked = rng.integers(-5, 305, 50)
        if part % 2:  # runs of one key, as a graph's kernels ask
            asked = np.repeat(asked[:10], 5)
        hit, (got,) = held.lookup(asked)
        pos = np.minimum(np.searchsorted(sk, asked), sk.size - 1)
        assert np.array_equal(hit, sk[pos] == asked)
        assert np.array_equal(got[hit], sv[pos][hit])
    assert len(held.runs) <= 2 * np.log2(held.size) + 1  # runs merge as they grow
    taken = held.take(np.array([5, 17, 299]))
    gone = np.isin(every_k, [5, 17, 299])
    assert sorted(taken[1].tolist()) == sorted(every_v[gone].tolist())
    assert held.size == int((~gone).sum()) and not held.lookup(np.array([5, 17, 299]))[0].any()
