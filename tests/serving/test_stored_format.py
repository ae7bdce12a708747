"""A quantized checkpoint's own weight format (its config.json quantization_config): read
from the config, served by default, searched by default, shown by `model`."""

from __future__ import annotations

import json

import pytest
import yaml

from infraplan.catalog import accelerator
from infraplan.cli import main
from infraplan.models import load_model
from infraplan.models.stored import StoredWeights, stored_weights
from infraplan.serving.memory import weight_bytes_per_gpu
from infraplan.serving.quantization import weight_format

OSS = {"model": "gpt-oss-120b",
       "traffic": {"arrival": {"kind": "poisson", "rate_per_s": 2}, "num_requests": 60,
                   "input": {"kind": "fixed", "value": 500},
                   "output": {"kind": "fixed", "value": 50}},
       "deployment": {"gpu": "h100"}}


@pytest.mark.parametrize("config, expected", [
    ({"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn",
                                                          "lm_head"]},
     StoredWeights(method="mxfp4", weight_dtype="fp4", attention_unquantized=True)),
    ({"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]},
     StoredWeights(method="fp8", weight_dtype="fp8")),
    ({"quant_method": "AWQ", "bits": 4, "group_size": 128},
     StoredWeights(method="awq", weight_dtype="int4")),
    ({"quant_method": "gptq", "bits": 8}, StoredWeights(method="gptq", weight_dtype="int8")),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4"},
     StoredWeights(method="modelopt", weight_dtype="fp4")),
    ({"quant_method": "gptq", "bits": 3}, None),  # no 3-bit serving format
    ({"quant_method": "bitsandbytes", "load_in_4bit": True}, None),  # not guessed at
    ({"bits": 4}, None),
])
def test_a_quantization_config_names_the_format_served(config, expected):
    assert stored_weights({"quantization_config": config}) == expected
    assert stored_weights({}) is None


@pytest.mark.parametrize("config, words", [
    ({"quant_method": "gptq", "bits": 3}, "gptq, 3 bits"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "bitsandbytes"),
    ({"bits": 4}, "no quant_method, 4 bits"),
])
def test_a_quantization_it_does_not_model_is_named_not_served_silently(tmp_path, capsys,
                                                                        config, words):
    """A 3-bit GPTQ checkpoint was planned and served as bf16 without a word."""
    raw = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
           "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
           "vocab_size": 128256, "max_position_embeddings": 8192,
           "quantization_config": config}
    (tmp_path / "q.json").write_text(json.dumps(raw))
    scenario = dict(OSS, model=str(tmp_path / "q.json"))
    code, out = _cli(tmp_path, capsys, scenario, "simulate", "serve")
    assert code == 0 and out["deployment"]["weight_dtype"] == "bf16"
    assert (f"the checkpoint's quantization_config ({words}) is not a format infraplan "
            "models: its weights are planned from the 16-bit shapes") in out["notes"][0]
    assert load_model(str(tmp_path / "q.json")).stored is None


def test_the_catalogs_quantized_checkpoints_say_so():
    assert load_model("gpt-oss-120b").stored == StoredWeights(
        method="mxfp4", weight_dtype="fp4", attention_unquantized=True)
    assert load_model("deepseek-v3").stored == StoredWeights(method="fp8", weight_dtype="fp8")
    assert load_model("llama-3.1-70b").stored is None


def test_gpt_oss_keeps_its_attention_in_16_bits_in_its_own_format_only():
    """modules_to_not_convert lists self_attn: served as fp4, the attention weights take
    2 bytes each; in fp8 (not the checkpoint's format) every GEMM weight is quantized."""
    arch, h100 = load_model("gpt-oss-120b"), accelerator("h100")
    at = arch.attention
    attention = arch.num_layers * arch.hidden_size * (2 * at.q_width
                                                      + 2 * at.num_kv_heads * at.head_dim)
    fp4 = weight_format("fp4", h100, "bf16")
    full = weight_bytes_per_gpu(arch, fp4, 1)
    as_if_all = full - attention * (2.0 - fp4.bytes_per_weight)
    assert as_if_all == pytest.approx(
        weight_bytes_per_gpu(_without_stored(arch), fp4, 1), rel=1e-12)
    fp8 = weight_format("fp8", h100, "bf16")
    assert weight_bytes_per_gpu(arch, fp8, 1) == weight_bytes_per_gpu(_without_stored(arch),
                                                                       fp8, 1)


def _without_stored(arch):
    from dataclasses import replace
    return replace(arch, stored=None)


def _cli(tmp_path, capsys, raw, *args):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw))
    code = main([*args, str(path), "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_a_deployment_without_weight_dtype_serves_the_checkpoints_format(tmp_path, capsys):
    """gpt-oss-120b was served in bf16 (217.61 GiB: no room on one H100) where vLLM loads
    its MXFP4 checkpoint onto one."""
    code, out = _cli(tmp_path, capsys, OSS, "simulate", "serve")
    assert code == 0 and out["deployment"]["weight_dtype"] == "fp4"
    assert out["notes"][0] == ("weights fp4: gpt-oss-120b's checkpoint stores them as mxfp4 "
                               "(served as fp4; attention unquantized); set "
                               "deployment.weight_dtype to serve another format")
    from infraplan.serving.deployment import Deployment  # the library's default too
    assert Deployment(model="gpt-oss-120b", gpu="h100").weight_dtype == "fp4"
    assert Deployment(model="deepseek-v3", gpu="h200").weight_dtype == "fp8"
    named = dict(OSS, deployment={"gpu": "h100", "tp": 4, "weight_dtype": "bf16"})
    code, out = _cli(tmp_path, capsys, named, "simulate", "serve")
    assert code == 0 and out["deployment"]["weight_dtype"] == "bf16"
    assert not any("checkpoint stores" in n for n in out["notes"])


def test_plan_serve_also_searches_the_checkpoints_format(tmp_path, capsys):
    """The default search (bf16, fp8) found 2 x H100 in fp8 the cheapest for gpt-oss-120b."""
    raw = dict(OSS, search={"gpus": ["h100"], "tp": [1, 2]})
    code, out = _cli(tmp_path, capsys, raw, "plan", "serve")
    assert code == 0
    best = out["best"]["deployment"]
    assert (best["weight_dtype"], best["tp"], best["replicas"]) == ("fp4", 1, 1)
    assert ("weight formats searched: bf16, fp8 and fp4, the last as gpt-oss-120b's "
            "checkpoint stores its weights: mxfp4 (served as fp4; attention unquantized); set "
            "search.weight_dtypes to choose") in out["notes"]
    raw["search"]["weight_dtypes"] = ["bf16", "fp8"]  # named: searched as named
    code, out = _cli(tmp_path, capsys, raw, "plan", "serve")
    searched = {c["deployment"]["weight_dtype"] for c in out["alternatives"] + out["rejected"]}
    assert searched == {"bf16", "fp8"}
    assert not any("checkpoint stores" in n for n in out["notes"])


def test_model_shows_the_stored_format_and_mxfp4_is_a_weight_format(capsys):
    assert main(["model", "gpt-oss-120b"]) == 0
    assert ("  quantization_config: weights stored as mxfp4 (served as fp4; attention "
            "unquantized)\n") in capsys.readouterr().out
    assert main(["model", "deepseek-v3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stored_weights"] == {
        "method": "fp8", "weight_dtype": "fp8", "attention_unquantized": False}
    from infraplan.serving.quantization import serving_weight_dtype
    assert serving_weight_dtype("MXFP4") == "fp4"


def test_checkpoint_in_a_search_names_the_format_the_model_stores(tmp_path, capsys):
    """`weight_dtypes: [checkpoint, fp8]` is fp4 and fp8 for gpt-oss-120b (MXFP4), bf16 and
    fp8 for Llama 3.1 8B (a bfloat16 checkpoint), fp16 for a float16 checkpoint; a typo of
    the keyword is pointed at it."""
    from dataclasses import replace

    from infraplan.serving.quantization import checkpoint_weight_dtype

    raw = dict(OSS, search={"gpus": ["h100"], "tp": [1],
                            "weight_dtypes": ["Checkpoint", "fp8", "fp4"]})
    code, out = _cli(tmp_path, capsys, raw, "plan", "serve")
    assert code == 0
    searched = {c["deployment"]["weight_dtype"] for c in out["alternatives"] + out["rejected"]}
    assert searched == {"fp4", "fp8"}  # listed twice, searched once
    assert ("weight formats searched: fp4, fp8; checkpoint is fp4, as gpt-oss-120b's "
            "checkpoint stores its weights: mxfp4 (served as fp4; attention unquantized)"
            ) in out["notes"]
    llama = dict(raw, model="llama-3.1-8b")
    code, out = _cli(tmp_path, capsys, llama, "plan", "serve")
    searched = {c["deployment"]["weight_dtype"] for c in out["alternatives"] + out["rejected"]}
    assert code == 0 and searched == {"bf16", "fp8", "fp4"}
    assert "checkpoint is bf16, as llama-3.1-8b's checkpoint stores its weights: 16-bit " \
           "(bfloat16)" in out["notes"][1]
    arch = load_model("llama-3.1-8b")
    assert checkpoint_weight_dtype(replace(arch, dtype="float16")) == "fp16"
    assert checkpoint_weight_dtype(replace(arch, dtype="float32")) == "bf16"
    llama["search"]["weight_dtypes"] = ["chekpoint"]
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(llama))
    assert main(["plan", "serve", str(path)]) == 2
    err = capsys.readouterr().err
    assert "search.weight_dtypes has 'chekpoint', not a serving weight format; did you " \
           "mean 'checkpoint'?" in err and "or checkpoint (the format" in err


def test_a_simulation_report_says_why_it_serves_the_checkpoints_format(tmp_path):
    """The report (and the web page built from it) showed 'weights fp4' with no word on
    why; `simulate serve` printed the note."""
    from infraplan.report.document import build_document

    path = tmp_path / "oss.yaml"
    path.write_text(yaml.safe_dump(OSS))
    doc = build_document(path)
    scale = next(s for s in doc["sections"] if s["heading"] == "Scale")
    assert ("weights fp4: gpt-oss-120b's checkpoint stores them as mxfp4 (served as fp4; "
            "attention unquantized); set deployment.weight_dtype to serve another format"
            ) in scale["paragraphs"]
    path.write_text(yaml.safe_dump(dict(OSS, deployment={"gpu": "h100", "tp": 2,
                                                         "weight_dtype": "fp8"})))
    scale = next(s for s in build_document(path)["sections"] if s["heading"] == "Scale")
    assert not any("checkpoint stores" in p for p in scale["paragraphs"])
