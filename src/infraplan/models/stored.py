"""The format a checkpoint stores its weights in, read from its config.json.

A quantized checkpoint says so in `quantization_config` (transformers' HfQuantizer
configs): DeepSeek-V3 `{"quant_method": "fp8", "weight_block_size": [128, 128]}`, gpt-oss
`{"quant_method": "mxfp4", "modules_to_not_convert": [...]}`, AWQ and GPTQ exports
`{"quant_method": "awq", "bits": 4}`, NVIDIA ModelOpt `{"quant_method": "modelopt",
"quant_algo": "NVFP4"}`. Serving engines load such a checkpoint in that format unless told
otherwise (vLLM reads the method from the config), so it is what a deployment that names
no weight format serves. Methods not listed here (bitsandbytes, compressed-tensors'
per-group schemes, ...) are not guessed at: the model is planned from its 16-bit shapes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# quant_method -> the serving weight format (serving.quantization) it stores; MXFP4 (OCP
# microscaling: 4-bit e2m1 values, an 8-bit scale per 32) is planned as fp4, whose bytes
# (a 1-byte scale per 16) it is within 6 % of
_BY_METHOD = {"fp8": "fp8", "fbgemm_fp8": "fp8", "mxfp4": "fp4"}
_BY_BITS = {"awq": {4: "int4", 8: "int8"}, "gptq": {4: "int4", 8: "int8"}}  # "bits"
_BY_ALGO = {"modelopt": {"fp8": "fp8", "nvfp4": "fp4"}}  # "quant_algo"


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredWeights:
    method: str  # quant_method as the config names it: mxfp4, fp8, awq, ...
    weight_dtype: str  # the serving weight format it is planned as: fp8, fp4, int4, int8
    attention_unquantized: bool = False  # modules_to_not_convert names the attention

    def describe(self) -> str:
        """'mxfp4 (served as fp4; attention unquantized)'."""
        extra = "; attention unquantized" if self.attention_unquantized else ""
        same = self.method == self.weight_dtype and not extra
        return self.method + ("" if same else f" (served as {self.weight_dtype}{extra})")


def stored_weights(raw: Mapping[str, Any]) -> StoredWeights | None:
    """The config's quantization_config as a serving weight format; None when it has none
    or one infraplan does not map."""
    config = raw.get("quantization_config")
    if not isinstance(config, Mapping) or not isinstance(config.get("quant_method"), str):
        return None
    method = config["quant_method"].lower()
    dtype = _BY_METHOD.get(method)
    if method in _BY_BITS:
        dtype = _BY_BITS[method].get(config.get("bits"))
    if method in _BY_ALGO and isinstance(config.get("quant_algo"), str):
        dtype = _BY_ALGO[method].get(config["quant_algo"].lower())
    if dtype is None:
        return None
    skipped = config.get("modules_to_not_convert") or ()
    attention = any(isinstance(m, str) and "attn" in m for m in skipped)
    return StoredWeights(method=method, weight_dtype=dtype, attention_unquantized=attention)


def unmodelled_quantization(raw: Mapping[str, Any]) -> str:
    """A quantization_config that `stored_weights` does not map, in words ('gptq, 3 bits');
    '' when there is none or it maps."""
    config = raw.get("quantization_config")
    if not isinstance(config, Mapping) or stored_weights(raw) is not None:
        return ""
    method = config.get("quant_method")
    parts = [method if isinstance(method, str) else "no quant_method"]
    if isinstance(config.get("bits"), int):
        parts.append(f"{config['bits']} bits")
    if isinstance(config.get("quant_algo"), str):
        parts.append(config["quant_algo"])
    return ", ".join(parts)
