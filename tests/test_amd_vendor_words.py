"""Vendor-correct words on every AMD capture (issue 32 item 5): each real ROCm input of the repository and of the
project's collection (rocprofv3 rocpd / JSON / CSV, RPD, Kineto traces of MI-series GPUs, rocm-smi --showtopo, an
RCCL log, and cases that combine them) and generated rocprofv3 databases, analyzed and rendered in every format
(text, Markdown, JSON, HTML, the card), name no NVIDIA-only tool or API: never nvidia-smi, nsys, Nsight, nccl-tests,
NVTX where roctx is meant, a CUDA call or CUDA graph where HIP's is meant, NVLink, cuBLAS, CUPTI or nsys'
--pytorch=autograd options. A word inside a name the capture itself holds (a kernel, a range, a process, a file, a
log's own field such as RCCL's "cudaDev N") is a quotation and is left out first; so are the contract's enum values
(``steps.source`` "nvtx" is any named range)."""

import html
import json
import re
import sys

import pytest
from conftest import REAL, ROOT, real

from tracetriage import analyze
from tracetriage.analyzers.catalog import CATALOG
from tracetriage.reports import render
from tracetriage.reports.html import render_card

sys.path.insert(0, str(ROOT / "samples"))
import generate  # noqa: E402

NVIDIA_ONLY = re.compile(r"nvidia-smi|\bnsys\b|Nsight|\bncu\b|nccl-tests|cudabacktrace|CUPTI|cuBLAS|--pytorch=autograd"
                         r"|\bNVTX\b(?!/roctx)|\bnvtx\b|NVLink|(?<!HIP/)\bCUDA calls?\b|(?<!HIP/)\bCUDA[- ]graphs?\b"
                         r"|(?<![/\w.])cuda[A-Z]\w*")
# keys whose values are the capture's own names (quoted, cut out of every format), and keys whose values are the
# contract's enum values or raw evidence values (left out of the JSON's prose only)
CAPTURE_KEYS = {"name", "names", "range_name", "path", "trace", "files", "frame", "message", "location", "command",
                "kernel", "caller", "call", "process"}
ENUM_KEYS = {"source", "value", "kind", "id", "axis", "op"}
LOG_FIELDS = ("cudaDev",)  # as NCCL and RCCL print them ("Init COMPLETE ... cudaDev 0"): the table's column names them

REAL_AMD = [("rocprof", name) for name in (
    "rocprofv3_rocpd_v3_bmm_trace_mi300x.db", "rocprofv3_rocpd_v3_ck_batched_gemm_mi300x.db", "rpd_v2_pytorch_matmul.rpd",
    "rpd_v2_vllm_hipgraph.rpd.gz", "rocprofv3_json_mi350x_aorta_fsdp_train_pid908.json.gz")] + [
    ("kineto", name) for name in (
        "hta_amd_mi250_minitoy_train_rocm6.2.json.gz", "tracelens_mi300_qwen1.5-0.5b_chat.json.gz",
        "tracelens_mi300_ddp8_resnet_act_checkpoint.json.gz", "tracelens_sglang_decode_capture_bs32_rank0.json.gz",
        "tracelens_sglang_qwen3-8b_decode.json.gz", "tracelens_vllm_decode_full_graph_capture_rank0.json.gz",
        "tracelens_vllm_decode_full_graph_execution.json.gz",
        "tracelens_vllm_prefilldecode_piecewise_graph_capture_rank0.json.gz",
        "tracelens_vllm_prefilldecode_piecewise_graph_execution.json.gz")] + [
    ("topo", "rocm-smi_showtopo_8gpu_xgmi_2numa_ms-swift.txt"), ("topo", "rocm-smi_showtopo_mi300a_4apu_4numa.txt"),
    ("nccl", "rccl_lumi_mi250x_2.20.5_socket_fallback_init_excerpt.txt")]
COMBOS = {  # one case of several AMD inputs: a trace with the node's rocm-smi matrix and an RCCL log
    "mi300_ddp_topo_rccl": [("kineto", "tracelens_mi300_ddp8_resnet_act_checkpoint.json.gz"),
                            ("topo", "rocm-smi_showtopo_8gpu_xgmi_2numa_ms-swift.txt"),
                            ("nccl", "rccl_lumi_mi250x_2.20.5_socket_fallback_init_excerpt.txt")],
    "mi350x_fsdp_topo": [("rocprof", "rocprofv3_json_mi350x_aorta_fsdp_train_pid908.json.gz"),
                         ("topo", "rocm-smi_showtopo_mi300a_4apu_4numa.txt")],
}
GENERATED = ["eager_decode", "eager_decode_nvtx", "prefill_stall", "decode_rare_prefill", "tp8_cross_island",
             "dp2_late_rank", "host_starved", "pageable_readback", "offload_copy_bound", "graph_capture_phase",
             "data_loader_starved", "setup_then_starved"]


def _quoted(data) -> set[str]:
    """Every string the capture itself supplied (the values under CAPTURE_KEYS, anywhere in the analysis)."""
    found: set[str] = set()

    def walk(node, key=None):
        if isinstance(node, dict):
            for k, v in node.items():
                if not (k == "name" and "text" in node):  # an evidence row's name is the tool's key, not the capture's
                    walk(v, k)
        elif isinstance(node, list):
            for v in node:
                walk(v, key)
        elif isinstance(node, str) and key in CAPTURE_KEYS and len(node) >= 3:
            found.add(node)
    walk(data)
    return found


def _prose(data) -> str:
    """The JSON's strings a reader reads as the tool's words (every string not under CAPTURE_KEYS)."""
    out: list[str] = []

    def walk(node, key=None):
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, k)
        elif isinstance(node, list):
            for v in node:
                walk(v, key)
        elif isinstance(node, str) and key not in CAPTURE_KEYS | ENUM_KEYS:
            out.append(node)
    walk(data)
    return "\n".join(out)


def _rendered(analysis) -> dict[str, str]:
    """Each format as a reader sees it: HTML without styles, scripts and charts and with its entities undone,
    Markdown without its escapes, the JSON by its prose strings."""
    def page(text):
        return html.unescape(re.sub(r"<style.*?</style>|<script.*?</script>|<svg.*?</svg>", "", text, flags=re.S))
    return {"text": render(analysis, "text"), "md": re.sub(r"\\(.)", r"\1", render(analysis, "md")),
            "html": page(render(analysis, "html")), "card": page(render_card(analysis)),
            "json": _prose(json.loads(render(analysis, "json")))}


def nvidia_words(analysis) -> dict[str, list[str]]:
    """NVIDIA-only words in each rendered format, with their context, once the capture's own names are cut out."""
    quoted = sorted(_quoted(analysis.data) | set(LOG_FIELDS), key=len, reverse=True)
    hits = {}
    for fmt, text in _rendered(analysis).items():
        for name in quoted:
            text = text.replace(name, " ")
        found = [text[max(0, m.start() - 70):m.end() + 30] for m in NVIDIA_ONLY.finditer(text)]
        if found:
            hits[fmt] = found
    return hits


@pytest.mark.parametrize("fmt, name", REAL_AMD, ids=[name for _fmt, name in REAL_AMD])
def test_real_amd_input_names_no_nvidia_tool(fmt, name):
    a = analyze(str(real(fmt, name)))
    if a.data.get("capture_kind"):
        assert a.data["capture_kind"]["vendor"] in ("rocm", None), a.data["capture_kind"]
    assert not nvidia_words(a)


@pytest.mark.parametrize("combo", sorted(COMBOS))
def test_real_amd_combined_case_names_no_nvidia_tool(combo):
    a = analyze([str(real(fmt, name)) for fmt, name in COMBOS[combo]])
    assert a.data["capture_kind"]["vendor"] == "rocm"
    assert not nvidia_words(a)


def test_the_rocprofv3_csv_set_names_no_nvidia_tool():
    paths = sorted((REAL / "rocprof").glob("rocprofv3_docs_*_trace.csv"))
    if not paths:
        pytest.skip("rocprofv3 CSV samples absent")
    assert not nvidia_words(analyze([str(path) for path in paths]))


def _rocm_smi_two_islands(gpus=8) -> str:
    """``rocm-smi --showtopo`` of a node of two XGMI islands (GPUs 0-3, 4-7) joined over PCIe, NUMA node per island."""
    head = "       " + "".join(f"GPU{g:<10}" for g in range(gpus))

    def matrix(title, cell):
        rows = [f"GPU{a}   " + "".join(f"{cell(a, b):<13}" for b in range(gpus)) for a in range(gpus)]
        return [f"=== {title} ===", head, *rows, ""]
    same = lambda a, b: a // 4 == b // 4  # noqa: E731
    lines = ["=== ROCm System Management Interface ===", ""]
    lines += matrix("Weight between two GPUs", lambda a, b: 0 if a == b else 15 if same(a, b) else 72)
    lines += matrix("Hops between two GPUs", lambda a, b: 0 if a == b else 1 if same(a, b) else 3)
    lines += matrix("Link Type between two GPUs", lambda a, b: 0 if a == b else "XGMI" if same(a, b) else "PCIE")
    lines += ["=== Numa Nodes ==="] + [f"GPU[{g}]          : (Topology) Numa Node: {g // 4}" for g in range(gpus)]
    lines += [f"GPU[{g}]          : (Topology) Numa Affinity: {g // 4}" for g in range(gpus)]
    return "\n".join(lines + ["=== End of ROCm SMI Log ==="]) + "\n"


@pytest.fixture(scope="module")
def rocpd_bundles(tmp_path_factory):
    return {bundle.name.removesuffix("_rocpd"): bundle
            for bundle in generate.generate_rocpd(tmp_path_factory.mktemp("rocpd"), GENERATED)}


@pytest.mark.parametrize("scenario", GENERATED)
def test_generated_rocpd_case_names_no_nvidia_tool(scenario, rocpd_bundles):
    a = analyze(str(rocpd_bundles[scenario]))
    assert a.data["capture_kind"]["vendor"] == "rocm"
    assert not nvidia_words(a)


def test_a_rocm_smi_node_of_two_islands_is_laid_out_in_rocm_words(rocpd_bundles, tmp_path):
    """TP=8 over two XGMI islands joined by PCIe (the matrix built here): the layout names HIP_VISIBLE_DEVICES and
    XGMI islands (the groups and NUMA nodes the matrix was built with), no CUDA variable, no NVLink."""
    topo = tmp_path / "topo.txt"
    topo.write_text(_rocm_smi_two_islands())
    a = analyze([str(p) for p in sorted(rocpd_bundles["tp8_cross_island"].glob("*.db"))] + [str(topo)])
    assert a.data["topology"]["islands"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    layout = a.data["topology"]["recommendation"]
    assert "XGMI/fabric island" in layout and "CUDA_VISIBLE_DEVICES" not in layout, layout
    assert "HIP_VISIBLE_DEVICES=0,1,2,3 numactl --cpunodebind=0" in layout, layout
    assert "HIP_VISIBLE_DEVICES=4,5,6,7 numactl --cpunodebind=1" in layout, layout
    assert not nvidia_words(a)


def _rocm_texts():
    """Every catalog text written for ROCm (a variant named rocm or ..._rocm)."""
    for finding_id, entry in CATALOG.items():
        for key, value in entry.items():
            if isinstance(value, dict):
                for variant, text in value.items():
                    if isinstance(text, str) and (variant == "rocm" or variant.endswith("_rocm")):
                        yield f"{finding_id}.{key}.{variant}", text


def test_every_rocm_variant_of_the_catalog_names_no_nvidia_tool():
    texts = dict(_rocm_texts())
    assert len(texts) >= 10 and "launch_bound.fix.eager_rocm" in texts and "launch_bound.fix.rocm" in texts
    assert {name: NVIDIA_ONLY.findall(text) for name, text in texts.items() if NVIDIA_ONLY.search(text)} == {}
