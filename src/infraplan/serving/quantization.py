"""Weight and KV-cache formats of inference engines: bytes per element and the GEMM dtype.

A format is what the engines ship, not a dtype alone:
- fp8 (W8A8, per-tensor or per-channel scales): weights and activations in e4m3, GEMMs on
  fp8 tensor cores where the chip has them (Hopper, Ada, Blackwell; TensorRT-LLM and vLLM
  "fp8" checkpoints). Chips without fp8 run the weights through a weight-only kernel (vLLM's
  Marlin fp8 path on Ampere): fp8 bytes, 16-bit math.
- int8 (W8A8 SmoothQuant, Xiao et al. 2023): int8 GEMMs on int8 tensor cores. Of a layer's
  four GEMM inputs, two (the QKV and gate/up inputs) are smoothed and quantized inside the
  RMSNorm before them; the other two (the attention output and the MLP activation) have no
  norm to fold the smoothing factors into and pass through an element-wise kernel of their
  own (a TensorRT-LLM developer, NVIDIA/TensorRT-LLM#2074: "two smooth operations can not be
  merged with LN in one layer"; "int8 smoothquant has quant/dequant cost").
- int4 (W4A16 AWQ / GPTQ, group size 128): packed 4-bit weights plus one fp16 scale per
  group of 128 (AWQ, Lin et al. 2024, Sec. 5; 2/128 bytes per weight), dequantised to 16
  bits inside the GEMM (Marlin kernels), so the math runs at the 16-bit rate.
- fp4 (NVFP4, W4A4: NVIDIA ModelOpt's `nvidia/...-FP4` checkpoints that TensorRT-LLM and
  vLLM serve on Blackwell): e2m1 values with one e4m3 scale per block of 16 and a per-tensor
  fp32 scale (NVIDIA, "Introducing NVFP4 for Efficient and Accurate Low-Precision
  Inference", 2025), so 0.5 + 1/16 bytes per weight; activations are quantized the same way
  and the GEMMs run on the fp4 tensor cores. A chip without them (Hopper, Ampere) runs the
  weights through a weight-only kernel (vLLM's Marlin NVFP4 path): fp4 bytes, 16-bit math.
Scales of per-tensor and per-channel formats are a negligible share and are not counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from infraplan.catalog.schema import Accelerator
from infraplan.dtypes import canonical_dtype, dtype_bytes
from infraplan.errors import InputError, close_matches
from infraplan.models import ModelArch

INT4_GROUP_SIZE = 128
SCALE_BYTES = 2  # one fp16 scale per group
NVFP4_BLOCK_SIZE = 16
NVFP4_SCALE_BYTES = 1  # one e4m3 scale per block
# Formats with their own tensor-core rate on chips that have it: bytes per stored weight
_TENSOR_CORE_FORMAT_BYTES = {"fp8": 1.0, "int8": 1.0,
                             "fp4": 0.5 + NVFP4_SCALE_BYTES / NVFP4_BLOCK_SIZE}
SERVING_WEIGHT_DTYPES = ("bf16", "fp16", "fp8", "int8", "int4", "fp4")
# KV-cache formats engines store: the model's 16- or 32-bit type (vLLM kv_cache_dtype
# "auto"), fp8 (vLLM fp8_e4m3 / fp8_e5m2, TensorRT-LLM FP8 KV), int8 (TensorRT-LLM INT8 KV,
# LMDeploy quant_policy 8) and int4 (LMDeploy quant_policy 4)
SERVING_KV_DTYPES = ("bf16", "fp16", "fp32", "fp8", "int8", "int4")


def _among(name: str, formats: tuple[str, ...], field: str) -> tuple[str | None, str]:
    """(`name` in canonical spelling if it is one of `formats`, else None; a did-you-mean
    suffix for the miss)."""
    try:
        dtype = canonical_dtype(name, field=field)
    except InputError:
        dtype = None
    if dtype in formats:
        return dtype, ""
    close = close_matches(str(name).lower(), formats)
    return None, f"; did you mean {close[0]!r}?" if close else ""


def kv_format(name: str) -> str:
    """`name` in canonical spelling if engines store their KV cache in it; an InputError
    naming the formats they do otherwise (nf4, fp4, fp6, tf32 and fp64 caches do not exist)."""
    dtype, hint = _among(name, SERVING_KV_DTYPES, "kv_dtype")
    if dtype is None:
        raise InputError("must be a KV-cache format engines store: "
                         + ", ".join(SERVING_KV_DTYPES[:-1]) + f" or {SERVING_KV_DTYPES[-1]}"
                         + hint)
    return dtype


CHECKPOINT_FORMAT = "checkpoint"  # in a search: the format the model's checkpoint stores


def checkpoint_weight_dtype(arch: ModelArch) -> str:
    """The serving weight format `arch`'s checkpoint stores: its quantization_config's
    (models/stored.py), else its 16-bit torch_dtype (a float32 checkpoint is served in
    bf16, as vLLM's dtype "auto" does)."""
    if arch.stored is not None:
        return arch.stored.weight_dtype
    try:
        dtype = canonical_dtype(arch.dtype, field="torch_dtype")
    except InputError:  # a torch_dtype that names no dtype ("auto"): the usual bf16
        dtype = "bf16"
    return "fp16" if dtype == "fp16" else "bf16"


def serving_weight_dtype(name: str) -> str:
    """`name` in canonical spelling if it is a serving weight format; an InputError naming
    them otherwise."""
    dtype, hint = _among(name, SERVING_WEIGHT_DTYPES, "weight_dtype")
    if dtype is None:
        raise InputError("not a serving weight format" + hint,
                         fix="use " + ", ".join(SERVING_WEIGHT_DTYPES))
    return dtype


@dataclass(frozen=True, slots=True)
class WeightFormat:
    name: str
    bytes_per_weight: float
    gemm_dtype: str  # the dtype whose tensor-core peak the GEMMs run at
    # GEMM inputs of a layer quantized by an element-wise kernel of their own (names from
    # catalog.engines.ALL_GEMM_INPUTS); fp8, fp4 and weight-only formats fuse theirs
    quantized_inputs: tuple[str, ...] = ()

    @property
    def quantize_kernels_per_layer(self) -> int:
        return len(self.quantized_inputs)


def stays_16_bit(scope: str, arch: ModelArch, weights: WeightFormat) -> bool:
    """A GEMM of `scope` the checkpoint leaves unquantized when served in its own format
    (gpt-oss's MXFP4 quantization_config: modules_to_not_convert lists self_attn)."""
    stored = arch.stored
    return (scope == "attention" and stored is not None and stored.attention_unquantized
            and stored.weight_dtype == weights.name)


SMOOTHQUANT_UNFUSED_INPUTS = ("attention_output", "mlp_activation")
# Bytes per stored weight of the formats any GPU can serve (weight-only where it lacks the
# tensor path), offered as a fix when the weights do not fit
_PORTABLE_FORMAT_BYTES = {"fp8": _TENSOR_CORE_FORMAT_BYTES["fp8"],
                          "int4": 0.5 + SCALE_BYTES / INT4_GROUP_SIZE}


def smaller_weight_formats(current: WeightFormat, missing: frozenset[str] | set[str] = frozenset()
                           ) -> list[str]:
    """The formats that store a weight in fewer bytes than `current`, less those an engine
    has no kernel for (`missing`): the portable fp8 and int4, and int8 where fp8 is missing
    (vLLM's TPU backend runs INT8 W8A8 and no FP8, AWQ or GPTQ kernel)."""
    formats = ({"int8": _TENSOR_CORE_FORMAT_BYTES["int8"]} if "fp8" in missing else {}) \
        | _PORTABLE_FORMAT_BYTES
    return [name for name, size in formats.items()
            if size < current.bytes_per_weight and name not in missing]


def weight_format(name: str, gpu: Accelerator, activation_dtype: str) -> WeightFormat:
    """The format `name` ('bf16', 'fp8', 'int8', 'int4', 'fp4') as it runs on `gpu`."""
    dtype = canonical_dtype(name, field="weight_dtype")
    if dtype in ("bf16", "fp16", "fp32"):
        return WeightFormat(dtype, dtype_bytes(dtype), dtype)
    if dtype == "int4":
        return WeightFormat("int4", _PORTABLE_FORMAT_BYTES["int4"], activation_dtype)
    if dtype in _TENSOR_CORE_FORMAT_BYTES:
        # a tensor path slower than 16-bit math (Blackwell Ultra's INT8, cut to 0.15 POP/s)
        # is not taken: the weights are dequantised into the 16-bit GEMM instead
        native = gpu.peak_flops.get(dtype, 0.0) >= gpu.peak_flops_for(activation_dtype)
        smoothquant = dtype == "int8" and native
        return WeightFormat(dtype, _TENSOR_CORE_FORMAT_BYTES[dtype],
                            dtype if native else activation_dtype,
                            SMOOTHQUANT_UNFUSED_INPUTS if smoothquant else ())
    raise InputError(f"weight_dtype {name!r} is not a serving weight format",
                     fix="use one of " + ", ".join(SERVING_WEIGHT_DTYPES))


def sixteen_bit(dtype: str, gpu: Accelerator) -> str:
    """A bf16 format as it runs on `gpu`: fp16 where the chip has no bf16, as engines pick
    for a bf16 checkpoint there (vLLM's auto dtype takes the first the platform supports),
    in the same two bytes per value; any other format unchanged."""
    return gpu.sixteen_bit if dtype == "bf16" else dtype
