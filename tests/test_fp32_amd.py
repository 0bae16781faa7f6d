"""FP32 GEMMs on AMD GPUs read from their Tensile / hipBLASLt names (analyzers/math_precision.py), and the fp32_math
finding's AMD words (analyzers/rules/precision.py, findings.toml [fp32_math] rocm texts).

Tensile's kernel name states its ProblemType (Tensile/SolutionStructs.py ProblemType.__str__, DataType.toChar):
``Cijk_<A indices>_<B indices>_`` then DataType (the type of A and B), then for the high-precision-accumulate types
DestDataType and ComputeDataType (``HHS``, ``BBS``: half / bf16 data, fp32 compute), in newer hipBLASLt names
separated by ``_`` (``B_BS``; single data: ``S_B``), then the flags (``B`` UseBeta, ``H`` high-precision accumulate)
and, for single data computed as XF32, ``_MX_``. The built table below writes names from those parts, so its truth
(FP32 math where DataType is S without the XF32 math op) comes from the parts, not from the parser."""

import gzip
import itertools
import json
import re
import sqlite3

import pytest
from conftest import matrix_training, real, samples_generate

from tracetriage import analyze, open_case
from tracetriage.analyzers import math_precision
from tracetriage.analyzers.op_kernels import kernel_class
from tracetriage.analyzers.rules.precision import precision_advice
from tracetriage.analyzers.tomlfiles import read_toml
from tracetriage.model import Trace

US = 1_000
REDUCED = {"H": "HS", "B": "BS", "F8": "BS", "B8": "HS", "F8B8": "BS", "I8": "II", "X": "SS"}  # data -> (dest, compute)
INDICES = ("Cijk_Ailk_Bljk", "Cijk_Alik_Bljk", "Cijk_Ailk_Bjlk", "Cijk_Alik_Bjlk")
TAIL = "_MT64x64x8_MI16x16x1_SN_LDSB0_AFC1_ISA942_WG16_4_4"


def _name(indices: str, data: str, dest_compute: str, flags: str, style: str, mx: bool = False) -> str:
    """A Tensile kernel name from its parts: ``style`` old (``HHS_BH``), hipblaslt (``H_HS_BH``; ``S_B``)."""
    if style == "old":
        types = data + (dest_compute + "_" if dest_compute else "")
    else:
        types = data + "_" + (dest_compute + "_" if dest_compute else "")
    return f"{indices}_{types}{'_MX_' if mx else ''}{flags}_Bias_HA_S_SAV_UserArgs{TAIL}"


def _table():
    """(name, truth) for every combination: single data is FP32 math unless computed as XF32; the others reduced."""
    rows = []
    for indices, style, flags in itertools.product(INDICES, ("old", "hipblaslt"), ("B", "BH")):
        rows.append((_name(indices, "S", "", flags[:1], style), "fp32"))
        rows.append((_name(indices, "S", "", flags[:1], style, mx=True), "tensor"))
        for data, dest_compute in REDUCED.items():
            rows.append((_name(indices, data, dest_compute, flags, style), "tensor"))
        rows.append((_name(indices, "D", "", flags[:1], style), None))  # double: not FP32 math
    return rows


@pytest.mark.parametrize("name, truth", _table())
def test_tensile_names_read_their_data_type(name, truth):
    assert kernel_class(name) == "gemm"
    assert math_precision.matrix_precision(name) == truth


def test_rocblas_sgemm_is_fp32_and_other_vendors_names_keep_their_reading():
    assert math_precision.matrix_precision("rocblas_sgemm_nn_kernel<float, 64, 64>") == "fp32"
    assert math_precision.matrix_precision("volta_sgemm_128x64_nn") == "fp32"
    assert math_precision.matrix_precision("volta_h884gemm_128x128_ldg8_nn") == "tensor"
    assert math_precision.matrix_precision("void at::native::vectorized_elementwise_kernel<4, float>") is None


# -- the finding on a generated MI300X capture (rocpd) -------------------------------------------------------------

FP32_TENSILE = (_name("Cijk_Ailk_Bljk", "S", "", "B", "hipblaslt"), _name("Cijk_Alik_Bljk", "S", "", "B", "old"))
BF16_TENSILE = (_name("Cijk_Ailk_Bljk", "B", "BS", "BH", "old"), _name("Cijk_Alik_Bljk", "H", "HS", "BH", "hipblaslt"))
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"


def _mi300_training(tmp_path, matrix_kernels, seed=5):
    """conftest.matrix_training on an MI300X (rocpd, roctx steps); returns the capture and the matrix share."""
    rank, share = matrix_training(matrix_kernels, ELEMENTWISE, 7300, seed)
    path = tmp_path / "train_mi300x.db"
    samples_generate().write_rocpd(path, rank, "fp32_training_mi300x")
    return path, share


def test_generated_fp32_tensile_training_on_an_mi300x_is_fp32_math_in_amd_words(tmp_path):
    path, share = _mi300_training(tmp_path, FP32_TENSILE)
    a = analyze(open_case([path]))
    found = next(f for f in a.findings if f["id"] == "fp32_math")
    by_name = {row["name"]: row["value"] for row in found["evidence"]}
    assert by_name["fp32_matrix_pct"] == pytest.approx(share, abs=0.2) and by_name["tensor_matrix_pct"] == 0.0
    texts = " ".join(found[key] for key in ("title", "mechanism", "fix", "confirm", "falsifier"))
    texts += " ".join(row["text"] for row in found["evidence"])
    assert "MI300X" in found["title"] and "matrix" in texts
    for nvidia in ("CUDA cores", "tensor-core GPU", "cuDNN", "cublas", "scudnn", "nsys", "Nsight"):
        assert nvidia not in texts, nvidia
    # MI300X advice: bf16 AMP, fp8 through hipBLASLt, XF32 (it lists a tf32 rate) through hipBLASLt
    assert "bfloat16" in found["fix"] and "fp8" in found["fix"] and "hipBLASLt" in found["fix"] and "XF32" in found["fix"]


def test_generated_bf16_tensile_training_on_an_mi300x_is_not_fp32_math(tmp_path):
    path, _ = _mi300_training(tmp_path, BF16_TENSILE)
    a = analyze(open_case([path]))
    assert not any(f["id"] == "fp32_math" for f in a.findings)


def test_mi250_advice_has_no_xf32_or_fp8():
    devices = read_toml(__import__("pathlib").Path(math_precision.__file__).with_name("devices.toml"))
    mi250, mi300 = devices["mi250_gcd"], devices["mi300x"]
    words = precision_advice(mi250)
    assert "bfloat16" in words and "XF32" not in words and "TF32" not in words and "fp8" not in words
    assert "XF32" in precision_advice(mi300) and "cudnn" not in precision_advice(mi300)


# -- the real AMD captures ---------------------------------------------------------------------------------------

TENSILE_TYPE = re.compile(r"C[a-z]+_A[A-Za-z]+_B[A-Za-z]+_([A-Z0-9]+)")


def _truth(name: str) -> str | None:
    """The reading of a real Tensile name from its first type part, written apart from the parser: a DataType
    S (``SB``, ``S``) is FP32 math; B, H, F8 / B8 (and their mixes), I8 are reduced; anything else unread."""
    match = TENSILE_TYPE.search(name)
    if not match or "_MX_" in name:
        return None
    part = match.group(1)
    if part in ("S", "SB", "SBH"):
        return "fp32"
    return "tensor" if part[0] in "BHF" or part.startswith("I8") else None


def _kineto_kernels(path):
    events = json.load(gzip.open(path, "rt"))["traceEvents"]
    return [(e["name"], float(e.get("dur", 0))) for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"]


def _rpd_kernels(path):
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    names = [row[0] for row in con.execute("SELECT string FROM rocpd_string")]
    return [(name, 1.0) for name in names if name.startswith("Cijk_")]


@pytest.mark.parametrize("fmt, name, read", [
    ("kineto", "tracelens_sglang_qwen3-8b_decode.json.gz", _kineto_kernels),
    ("kineto", "tracelens_mi300_qwen1.5-0.5b_chat.json.gz", _kineto_kernels),
    ("kineto", "tracelens_mi300_ddp8_resnet_act_checkpoint.json.gz", _kineto_kernels),
    ("kineto", "hta_amd_mi250_minitoy_train_rocm6.2.json.gz", _kineto_kernels),
    ("rocprof", "rpd_v2_pytorch_matmul.rpd", _rpd_kernels)])
def test_real_amd_tensile_names_read_as_their_data_type(fmt, name, read):
    kernels = [(kernel, dur) for kernel, dur in read(real(fmt, name)) if TENSILE_TYPE.search(kernel)]
    assert kernels, "the capture holds Tensile GEMMs"
    for kernel, _ in kernels:
        assert math_precision.matrix_precision(kernel) == _truth(kernel), kernel


def test_real_sglang_bf16_decode_is_not_fp32_math():
    """BBS GEMMs (bf16 data, fp32 accumulate) on an MI300X: their time is the reduced-precision path's."""
    path = real("kineto", "tracelens_sglang_qwen3-8b_decode.json.gz")
    trace: Trace = open_case([path]).traces[0]
    measured = math_precision.measure(trace, -(1 << 62), 1 << 62)
    kernels = _kineto_kernels(path)
    bbs = sum(dur for kernel, dur in kernels if "_BBS_" in kernel) * 1000
    assert bbs > 0 and measured.fp32_ns[0] == 0 and measured.tensor_ns[0] >= 0.99 * bbs
    assert not any(f["id"] == "fp32_math" for f in analyze(open_case([path])).findings)
