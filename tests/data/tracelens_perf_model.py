"""How tracelens_perf_model.json was made: TraceLens's perf model (AMD-AGI/TraceLens @ 171dd747) run over the real
Kineto traces, per-op FLOPs and bytes written as a fixture (tests/test_efficiency.py checks our formulas against it).

    git clone https://github.com/AMD-AGI/TraceLens /tmp/tracelens && git -C /tmp/tracelens checkout 171dd747
    cd ../shared/samples/real/kineto && \\
        TRACELENS=/tmp/tracelens python tests/data/tracelens_perf_model.py OUT.json tracelens_*.json.gz

Not run by the tests (TraceLens is not a dependency).
"""
import collections
import json
import math
import os
import sys
import warnings

sys.path.insert(0, os.environ.get("TRACELENS", "/tmp/tracelens"))
warnings.filterwarnings("ignore")
from TraceLens import TreePerfAnalyzer  # noqa: E402 - found through the sys.path entry above

out = {}
for path in sys.argv[2:]:
    a = TreePerfAnalyzer.from_file(path)
    names = set(a.op_to_perf_model_class_map)
    groups = collections.OrderedDict()
    for e in a.tree.events:
        if e.get("cat") != "cpu_op" or e["name"] not in names:
            continue
        try:
            m = a.compute_perf_metrics(e)
        except Exception:
            continue
        args = e["args"]
        mb = m["Data Moved (MB)"]
        key = (e["name"], json.dumps(args.get("Input Dims")), json.dumps(args.get("Input type")),
               json.dumps(args.get("Concrete Inputs")))
        g = groups.setdefault(key, {"name": e["name"], "input_dims": args.get("Input Dims"), "input_type": args.get("Input type"),
                                    "concrete_inputs": args.get("Concrete Inputs"), "gflops": m["GFLOPS"],
                                    "data_moved_mib": None if isinstance(mb, float) and math.isnan(mb) else mb,
                                    "perf_model": a.op_to_perf_model_class_map[e["name"]].__name__, "external_ids": []})
        g["external_ids"].append(args.get("External id"))
    out[path.rsplit("/", 1)[-1]] = list(groups.values())
    print(path, len(groups), file=sys.stderr)
doc = {"provenance": {
    "tool": "TraceLens (https://github.com/AMD-AGI/TraceLens), MIT license",
    "commit": "171dd74721ca1ec45709e5805b68ae1f65e27811",
    "how": "TreePerfAnalyzer.from_file(trace); for every cpu_op named in op_to_perf_model_class_map, compute_perf_metrics(event) "
           "(its perf model's flops() and bytes()); grouped by op name and recorded Input Dims / Input type / Concrete Inputs, "
           "with the External ids of the events in each group",
    "units": "gflops = perf_model.flops() / 1e9; data_moved_mib = perf_model.bytes() / 2**20 "
             "(null where TraceLens has no byte model)",
    "traces": "../shared/samples/real/kineto/ (see its SOURCES.md): the same files TraceLens ships in its tests/traces",
    "generated_by": "tests/data/tracelens_perf_model.py",
    },
    "ops": out}
json.dump(doc, open(sys.argv[1], "w"), indent=0)
