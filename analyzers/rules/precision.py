"""fp32_math: a busy tensor-core GPU whose GEMMs and convolutions run in FP32 on the CUDA cores (read from
the kernels' names, analyzers/math_precision.py: no shapes needed); and the precision advice each device's
architecture supports (analyzers/devices.toml peaks), shared with the healthy verdict's fix."""

from __future__ import annotations

from tracetriage.analyzers import catalog
from tracetriage.analyzers.evidence import ev, severity_for
from tracetriage.analyzers.metrics import DeviceMetrics, TraceMetrics
from tracetriage.analyzers.rules.context import Context, Rule, t, window_denominator
from tracetriage.wording import pct

# name: (value, why)
THRESHOLDS = {
    "fp32_math_min_share_pct": (25.0, ("FP32 GEMMs and convolutions on the CUDA cores holding a quarter of the kernel "
                                       "time: on tensor cores (8-16x the FP32 rate) most of that quarter goes")),
    "fp32_tensor_min_ratio": (2.0, ("a device whose fp16/bf16 peak is at least twice its FP32 peak has tensor/matrix "
                                    "cores that FP32 math leaves idle")),
}


def tensor_dtype(peaks: dict) -> str | None:
    """The reduced-precision data type mixed precision would use on a device with these datasheet peaks:
    bf16 where the device has it, else fp16 (V100, T4: no bf16); None when neither is listed."""
    return "bf16" if "bf16" in peaks else "fp16" if "fp16" in peaks else None


def is_amd(device: dict | None) -> bool:
    """Whether a devices.toml entry is an AMD Instinct GPU (matrix cores, ROCm's libraries and words)."""
    return str((device or {}).get("model") or "").startswith("AMD")


def precision_advice(device: dict | None) -> str:
    """The mixed-precision change the device supports, in the words of a fix: fp16 AMP with loss scaling on
    a device without bf16 (V100), bf16 (and TF32 for what stays in fp32) without fp8 (A100), bf16 or fp8 with
    scaling where the device has fp8 (H100, H200, B200, MI300X); generic words when the device is unknown. On
    an AMD device the fp8 path is hipBLASLt's and the TF32 one is the MI300's XF32 (listed as tf32 in
    devices.toml: none on an MI250), enabled through hipBLASLt."""
    peaks = (device or {}).get("peak_tflops") or {}
    model = (device or {}).get("model") or "this device"
    amd = is_amd(device)
    cores = "matrix cores" if amd else "tensor cores"
    if not peaks:
        return ("mixed precision in a data type the device's tensor cores support (bf16 or fp16; fp8 with scaling on "
                "Hopper, Blackwell or MI300)")
    if "bf16" not in peaks and "fp16" in peaks:
        return (f"fp16 mixed precision: torch.autocast(device_type='cuda', dtype=torch.float16) with a "
                f"torch.amp.GradScaler for training (the {model} has no bf16 or fp8 {cores})")
    if "bf16" not in peaks:
        return f"reduced precision where the {model} supports it (its datasheet lists no fp16 or bf16 rate)"
    words = "bf16 mixed precision: torch.autocast(device_type='cuda', dtype=torch.bfloat16)"
    if amd:
        words += " (ROCm's PyTorch keeps the 'cuda' device type; fp16 with a torch.amp.GradScaler also runs on the matrix cores)"
    if "fp8" in peaks:
        words += ", or fp8 with scaling for the large GEMMs " + (
            "(hipBLASLt's fp8 kernels through ROCm's Transformer Engine or torchao float8)" if amd
            else "(Transformer Engine, torchao float8)")
    if "tf32" in peaks and amd:
        words += (f"; for the math that stays in fp32, the {model}'s XF32 (TF32-like) matrix math through hipBLASLt "
                  "(torch.backends.cuda.matmul.allow_tf32 = True, with HIPBLASLT_ALLOW_TF32=1 on the PyTorch builds that "
                  "read it; GEMMs only, at a cost in accuracy)")
    elif "tf32" in peaks:
        words += ("; for the math that stays in fp32, TF32 (torch.backends.cuda.matmul.allow_tf32 = True, "
                  "torch.backends.cudnn.allow_tf32 = True)")
    return words


def quantize_advice(device: dict | None) -> str:
    """The lower-precision serving format the device supports, in the words of a fix: FP8 where the device has
    it, else weight-only int8 / int4 quantization; both named when the device is unknown."""
    peaks = (device or {}).get("peak_tflops") or {}
    if not peaks:
        return "FP8 (where the device has it) or int8 / int4 weight quantization"
    if "fp8" in peaks:
        return "FP8 weights and KV cache"
    return f"int8 / int4 weight quantization (the {(device or {}).get('model') or 'device'} has no FP8)"


def _tensor_cores(device: dict | None) -> tuple[str, float, float] | None:
    """(dtype, its peak, the FP32 peak) when the device's reduced-precision peak is fp32_tensor_min_ratio or more
    times its FP32 peak (it has tensor/matrix cores FP32 math leaves idle); else None."""
    peaks = (device or {}).get("peak_tflops") or {}
    dtype = tensor_dtype(peaks)
    fp32 = float(peaks.get("fp32") or 0.0)
    if dtype is None or not fp32 or float(peaks[dtype]) < t("fp32_tensor_min_ratio") * fp32:
        return None
    return dtype, float(peaks[dtype]), fp32


def _wants(ctx: Context) -> tuple[dict, dict]:
    """Per busy device (compute at least roofline_busy_min_pct of its window) whose FP32 matrix kernels hold
    fp32_math_min_share_pct of its kernel time on a tensor-core device: the compute time the same work would
    not take at the same fraction of the tensor-core peak, compute x fp32 share x (1 - fp32 peak / tensor peak)."""
    wants, found = {}, {}
    for trace in ctx.judged():
        cores = _tensor_cores(trace.efficiency.device)
        precision = trace.precision
        if cores is None or len(precision.kernel_ns) != len(trace.devices):
            continue
        for index, device in enumerate(trace.devices):
            kernel_ns, fp32_ns = precision.kernel_ns[index], precision.fp32_ns[index]
            compute = device.slices["compute"]
            if not (device.window_ns and kernel_ns) or 100.0 * compute / device.window_ns < t("roofline_busy_min_pct"):
                continue
            share = fp32_ns / kernel_ns
            if 100.0 * share < t("fp32_math_min_share_pct"):
                continue
            wants[device.id] = (["compute"], compute * share * (1.0 - cores[2] / cores[1]))
            found[device.id] = (trace, device, index, cores)
    return wants, found


def _evidence(trace: TraceMetrics, device: DeviceMetrics, index: int, cores: tuple[str, float, float],
              impact: float, explains: float) -> list[dict]:
    precision = trace.precision
    kernel_ns = precision.kernel_ns[index]
    fp32_pct = 100.0 * precision.fp32_ns[index] / kernel_ns
    tensor_pct = 100.0 * precision.tensor_ns[index] / kernel_ns
    dtype, tensor_peak, fp32_peak = cores
    model = trace.efficiency.device["model"]
    top = ", ".join(f"{name.split('(')[0][:60]} {share:.1f}%" for name, share in precision.top_fp32)
    amd = is_amd(trace.efficiency.device)
    fp32_words = ("in FP32 at the matrix cores' FP32 rate (Tensile / hipBLASLt GEMMs of single-precision data, sgemm, "
                  "fp32 MIOpen engines)" if amd else "in FP32 on the CUDA cores (sgemm, scudnn, fp32 engines)")
    reduced_words = ("on the reduced-precision matrix path (bf16/fp16/fp8/int8/xf32 data: Tensile BBS/HHS/F8 kernels, "
                     "bf16/fp16 MIOpen engines)" if amd else "on the tensor cores (fp16/bf16/tf32/fp8 kernels)")
    return [
        ev("fp32_matrix_pct", round(fp32_pct, 1), "%", f"kernel time on {device.id}",
           text=f"GEMMs and convolutions {fp32_words}: {pct(fp32_pct)} of "
                f"the kernel time on {device.id}" + (f" (top: {top})" if top else "")),
        ev("tensor_matrix_pct", round(tensor_pct, 1), "%", f"kernel time on {device.id}",
           text=f"GEMMs and convolutions {reduced_words}: {pct(tensor_pct)} of the "
                "kernel time"),
        ev("peak_ratio", round(tensor_peak / fp32_peak, 1), "x", None,
           text=f"the {model} peaks at {tensor_peak:,.0f} TFLOP/s in dense {dtype.upper()} against {fp32_peak:,.1f} "
                "TFLOP/s in FP32 (datasheet)"),
        ev("fp32_window_pct", round(explains, 2), "%", "window",
           text=f"those FP32 kernels hold {pct(explains)} of the window; at the same fraction of the {dtype.upper()} "
                f"peak the same work would take {fp32_peak / tensor_peak:.0%} of that time: about {pct(impact)} of the "
                "window at most"),
    ]


def rule_fp32_math(ctx: Context):
    """A busy GPU with tensor cores whose GEMMs and convolutions run in FP32 on the CUDA cores (kernel names:
    math_precision.py) for fp32_math_min_share_pct of its kernel time or more. It claims, from each such
    device's compute slice, the share FP32 matrix kernels hold times (1 - FP32 peak / tensor peak)."""
    wants, found = _wants(ctx)
    if not wants:
        return None
    explains = {device_id: ns / (1.0 - found[device_id][3][2] / found[device_id][3][1])
                for device_id, (_, ns) in wants.items()}
    taken = ctx.ledger.take("fp32_math", wants)
    impact = ctx.ledger.impact_pct(taken)
    device_id = max(taken, key=lambda x: taken[x] / max(1, ctx.ledger.window[x]))
    trace, device, index, cores = found[device_id]
    explains_pct = ctx.ledger.impact_pct(explains)  # the FP32 matrix share of the windows, as impact_pct averages
    fp32_pct = 100.0 * trace.precision.fp32_ns[index] / trace.precision.kernel_ns[index]
    fields = {"fp32": pct(fp32_pct), "device": trace.efficiency.device["model"], "dtype": cores[0].upper(),
              "ratio": f"{cores[1] / cores[2]:.0f}x", "claimed": pct(impact),
              "precision": precision_advice(trace.efficiency.device)}
    return catalog.make("fp32_math", impact, fields, _evidence(trace, device, index, cores, impact, explains_pct),
                        severity=severity_for(impact), denominator=window_denominator(ctx), kind=ctx.kind,
                        explains=explains_pct)


FP32_MATH = Rule("fp32_math", "throughput", rule_fp32_math, reads=("precision", "efficiency", "devices"),
                 thresholds=("fp32_math_min_share_pct", "fp32_tensor_min_ratio", "roofline_busy_min_pct"))
