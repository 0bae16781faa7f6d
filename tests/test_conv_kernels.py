"""Convolution kernels are math kernels, classed with the GEMMs (op_kernels.kernel_class, is_convolution), not
memory-bound (audit: the ResNet-50 captures' cuDNN wgrad_alg0_engine / implicit_convolve_sgemm kernels and the
MI300 ResNet's MIOpen igemm / CK grouped_conv kernels were counted as memory-bound kernels without shapes).

The built table's truth is the family each name was written from; the real captures' truth is read off their
raw JSON with the libraries' own naming (cuDNN's cudnn::cnn:: / cudnn::detail:: engines and its sgemm /
winograd / fft2d kernels, MIOpen's igemm_* / naive_conv_*, CK's conv kernels), independently of the classifier."""

import gzip
import json
import re

import pytest
from conftest import real

from tracetriage import analyze, open_case
from tracetriage.analyzers import op_kernels

# (name, the family it was written from): a convolution engine, or a kernel that only looks like one
CONVOLUTIONS = [
    "void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>(int, int, int, float const*, int)",
    "void cudnn::detail::implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, true, false, true>(int, int)",
    "void cudnn::detail::explicit_convolve_sgemm<float, int, 128, 5, 5, 3, 3, 3, 0, true>(int, int, int)",
    "void cudnn::detail::dgrad_engine<float, 128, 6, 7, 3, 3, 5, false>(int, int, int, float const*, int)",
    "void cudnn::cnn::conv2d_grouped_direct_kernel<false, true, false, false, 0, 0, int, float, float>(int)",
    "volta_scudnn_128x64_relu_interior_nn_v1",
    "turing_h1688cudnn_256x64_sliced1x2_ldg8_relu_exp_interior_nhwc_tn_v1",
    "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4",
    "sm86_xmma_dgrad_implicit_gemm_indexed_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize64x64x64_stage4",
    "sm80_xmma_wgrad_implicit_gemm_indexed_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x32_stage3",
    "cutlass_tensorop_s1688fprop_optimized_tf32_128x128_16x4_nhwc_align4",
    "void fft2d_r2c_32x32<float, false, 1u, false>(float2*, float const*, int, int, int, int, int, int, int)",
    "void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(cudnn::winograd_nonfused::WinogradDataParams)",
    "MIOpenConvUni",
    "miopenSp3AsmConv3x3F",
    "igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1_1x4x1x64_tb1x8x2x1_1x4x1x64_gkgs",
    "igemm_wrw_gtcx3_nhwc_bf16_bx0_ex1_bt64x32x32_wt16x16x16_ws1x1_wr2x1_ta1x4x1x2_1x8x1x32_tb1x4x1x1_1x8x1x32_vs1_gkgs",
    "naive_conv_fwd_nchw_float_double_float",
    "gridwise_convolution_implicit_gemm_v4r4_nchw_kcyx_nkhw",
    "_ZN2ck16tensor_operation6device12_GLOBAL__N_139kernel_grouped_conv_fwd_xdl_cshuffle_v3INS_28GridwiseGemm",
    "ck::tensor_operation::device::DeviceConvNdBwdDataNwcKxcNwk_Xdl<2, float, float, float>",
    "void at::native::(anonymous namespace)::conv_depthwise2d_forward_kernel<1, float, int>(float const*)",
]
NOT_CONVOLUTIONS = [  # each names a word of a convolution engine, or cuDNN, without being one
    "void at::native::vectorized_elementwise_kernel<4, at::native::convert_fp8_kernel<float>>(int, float*)",
    "ConvertLayoutKernel",
    "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>(cudnnTensorStruct, float const*)",
    "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true>(cudnn::ops::nchw2nhwc_params_t<float>)",
    "void regular_fft_factor<256u, EPT<16u>, 16u, 8u, LUT, float2>(float2*, unsigned int)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int, float*)",
]


@pytest.mark.parametrize("name", CONVOLUTIONS)
def test_a_convolution_engine_is_a_math_kernel(name):
    assert op_kernels.is_convolution(name) and op_kernels.kernel_class(name) == "gemm"


@pytest.mark.parametrize("name", NOT_CONVOLUTIONS)
def test_a_lookalike_stays_memory_bound(name):
    assert not op_kernels.is_convolution(name) and op_kernels.kernel_class(name) == "memory_bound"


def test_the_gemm_class_says_convolutions_where_they_ran():
    assert op_kernels.class_words("gemm", 1.0) == "GEMMs and convolutions"
    assert op_kernels.class_words("gemm", 0.0) == "GEMMs"
    assert op_kernels.class_words("memory_bound", 1.0) == "memory-bound kernels"


# the libraries' conv kernel families, written independently of op_kernels' pattern
CUDNN_CONV = re.compile(r"cudnn::cnn::|cudnn::detail::(?:dgrad|wgrad)|convolve_sgemm|scudnn|winograd|fft2d_")
MIOPEN_CK_CONV = re.compile(r"^igemm_(?:fwd|bwd|wrw)_|naive_conv_|kernel_grouped_conv_|conv_bwd|conv_fwd")


def _kernel_ns(path, family) -> tuple[float, float]:
    """(ns of the kernels the family names, ns of all kernels) from the raw Kineto JSON."""
    events = json.load(gzip.open(path, "rt"))["traceEvents"]
    kernels = [(e["name"], float(e.get("dur", 0)) * 1000) for e in events  # PyTorch 1.8 writes "Kernel"
               if str(e.get("cat", "")).lower() == "kernel" and e.get("ph") == "X"]
    return sum(dur for name, dur in kernels if family.search(name)), sum(dur for _, dur in kernels)


@pytest.mark.parametrize("name, family, least", [
    ("kineto_tb_plugin_resnet50_num_workers_0_pt1.8.json.gz", CUDNN_CONV, 0.3),  # a V100 ResNet-50 training in fp32
    ("kineto_tb_plugin_resnet50_num_workers_4_pt1.8.json.gz", CUDNN_CONV, 0.3),
    ("tracelens_mi300_ddp8_resnet_act_checkpoint.json.gz", MIOPEN_CK_CONV, 0.02)])  # RCCL holds 73% of it
def test_real_resnet_convolutions_are_counted_with_the_math_kernels(name, family, least):
    path = real("kineto", name)
    conv_ns, all_ns = _kernel_ns(path, family)
    assert conv_ns > least * all_ns
    case = open_case([path])
    data = analyze(case).data
    coverage = {row["class"]: row["time_ns"] for row in data["efficiency"]["coverage"]}
    # in the analysis window, the collectives apart (the coverage counts neither): the convolutions' time sits in
    # the gemm class, and the memory-bound class holds no more than the rest of the kernel time
    gpu = case.traces[0].gpu
    start, end = gpu["start"].to_numpy(), gpu["end"].to_numpy()
    rows = ((gpu["kind"].astype(str) == "kernel").to_numpy() & gpu["collective"].isna().to_numpy()
            & (start >= data["window"]["start_ns"]) & (start < data["window"]["end_ns"]))
    names = gpu["name"].astype(str).to_numpy()[rows]
    dur = (end - start)[rows]
    window_conv = float(dur[[bool(family.search(name)) for name in names]].sum())
    assert window_conv > 0
    assert coverage.get("gemm", 0) >= window_conv
    assert coverage.get("memory_bound", 0) <= float(dur.sum()) - window_conv
    texts = json.dumps([row for row in data["abstentions"] if row["analysis"] == "efficiency"]
                       + [f for f in data["findings"] if f["id"] == "below_roofline"])
    assert "memory-bound kernels hold most" not in texts
    if "GEMMs" in texts:
        assert "GEMMs and convolutions" in texts
