"""Numeric formats and their storage size."""

from __future__ import annotations

from infraplan.errors import UnknownNameError

# Bytes per element. int4/fp4/nf4 pack two values per byte; block scales are extra and
# accounted where a format uses them (see physics/memory/weights.py for QLoRA's NF4).
DTYPE_BYTES: dict[str, float] = {
    "fp64": 8, "fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2,
    "fp8": 1, "int8": 1, "fp6": 0.75, "int4": 0.5, "fp4": 0.5, "nf4": 0.5,
}

# Spellings seen in config.json files ("torch_dtype": "bfloat16") and on command lines.
_ALIASES = {"float32": "fp32", "float": "fp32", "float16": "fp16", "half": "fp16",
            "bfloat16": "bf16", "float8": "fp8", "e4m3": "fp8", "e5m2": "fp8",
            "float8_e4m3fn": "fp8", "float64": "fp64", "double": "fp64",
            "fp8_e4m3": "fp8", "fp8_e5m2": "fp8",  # vLLM's kv_cache_dtype spellings
            # OCP MXFP4 (gpt-oss): e2m1 values like NVFP4, planned at NVFP4's bytes (a scale
            # per 16 values, not 32: 6 % more)
            "nvfp4": "fp4", "e2m1": "fp4", "mxfp4": "fp4"}


def canonical_dtype(name: str, *, field: str = "dtype") -> str:
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in DTYPE_BYTES:
        raise UnknownNameError(f"{field} value", str(name), DTYPE_BYTES)
    return key


def dtype_bytes(name: str, *, field: str = "dtype") -> float:
    return DTYPE_BYTES[canonical_dtype(name, field=field)]
