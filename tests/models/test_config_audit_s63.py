"""Session 63's audit of config.json reading: a key the file leaves out takes the default
that transformers' configuration class gives it (built here as a real model from the same
minimal dict); a sample-sized default that cannot fit is asked for; errors give the fix."""

from __future__ import annotations

import inspect
import json

import pytest

from infraplan.errors import InputError
from infraplan.models import load_model, param_counts, read_config
from infraplan.models.families import FAMILIES, arch_from_config
from infraplan.report.model import arch_summary
from tests.conftest import require

torch = require("torch")
transformers = require("transformers")

CORE = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=8,
            vocab_size=101)
MLA = dict(CORE, kv_lora_rank=16, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
           n_routed_experts=16, num_experts_per_tok=2, moe_intermediate_size=32)

# only the keys infraplan requires: every other key takes transformers' default
MINIMAL = {
    "deepseek_v3": dict(MLA, model_type="deepseek_v3"),
    "deepseek_v2": dict(MLA, model_type="deepseek_v2"),
    "kimi_k2": dict(MLA, model_type="kimi_k2"),
    "gemma": dict(CORE, model_type="gemma", num_attention_heads=16),
    "gemma2": dict(CORE, model_type="gemma2"),
    "gemma3_text": dict(CORE, model_type="gemma3_text", num_hidden_layers=7),
    "mistral": dict(CORE, model_type="mistral"),
    "qwen3": dict(CORE, model_type="qwen3", num_attention_heads=32),
    "qwen3_moe": dict(CORE, model_type="qwen3_moe", num_experts=4, num_experts_per_tok=2,
                      moe_intermediate_size=32),
    "gpt_oss": dict(CORE, model_type="gpt_oss", num_local_experts=4, num_experts_per_tok=2),
    "llama4_text": dict(CORE, model_type="llama4_text", num_local_experts=4,
                        intermediate_size_mlp=80),
    "starcoder2": dict(CORE, model_type="starcoder2"),
    "stablelm": dict(CORE, model_type="stablelm", hidden_size=128, num_attention_heads=64),
    "exaone4": dict(CORE, model_type="exaone4", num_attention_heads=32),
}


def _meta_model(config: dict):
    model_type = "deepseek_v3" if config["model_type"] == "kimi_k2" else config["model_type"]
    hf = transformers.AutoConfig.for_model(**dict(config, model_type=model_type))
    with torch.device("meta"):
        return hf, transformers.AutoModelForCausalLM.from_config(hf)


@pytest.mark.parametrize("label", list(MINIMAL))
def test_a_minimal_config_counts_what_transformers_builds(label):
    hf, model = _meta_model(MINIMAL[label])
    arch = arch_from_config(MINIMAL[label], name=label, origin=label)
    assert param_counts(arch).total == sum(p.numel() for p in model.parameters())
    assert arch.max_position_embeddings == hf.max_position_embeddings


def test_deepseek_v3_defaults_are_transformers():
    """Without the keys: 1 shared expert, 3 dense layers, a 1536-wide q LoRA, 8 groups of
    which 4 are picked (was: no shared expert, every layer MoE, no q LoRA, 1 group: 515,328
    parameters against transformers' 1,808,640)."""
    arch = arch_from_config(MINIMAL["deepseek_v3"], name="d", origin="d")
    assert arch.moe.shared.intermediate_size == 32 and arch.moe_layers == (3,)
    assert arch.attention.q_lora_rank == 1536
    assert (arch.moe.expert_groups, arch.moe.groups_per_token) == (8, 4)
    assert param_counts(arch).total == 1_808_640
    # a null q_lora_rank (DeepSeek-V2-Lite writes one) keeps the full-rank query
    lite = arch_from_config(dict(MINIMAL["deepseek_v2"], q_lora_rank=None), name="l",
                            origin="l")
    assert lite.attention.q_lora_rank is None and lite.moe.shared.intermediate_size == 64


def test_gemma_defaults_are_transformers():
    g1 = arch_from_config(MINIMAL["gemma"], name="g", origin="g")
    assert (g1.attention.head_dim, g1.attention.num_kv_heads) == (256, 16)
    g2 = arch_from_config(MINIMAL["gemma2"], name="g", origin="g")
    assert (g2.attention.head_dim, g2.attention.num_kv_heads) == (256, 4)
    assert (g2.attention.sliding_window, g2.num_windowed_layers) == (4096, 2)
    g3 = arch_from_config(MINIMAL["gemma3_text"], name="g", origin="g")
    assert (g3.attention.sliding_window, g3.num_windowed_layers) == (4096, 6)


def test_the_defaults_table_is_the_installed_transformers():
    from infraplan.models.hf_defaults import TRANSFORMERS_DEFAULTS

    for family, defaults in TRANSFORMERS_DEFAULTS.items():
        cls = transformers.CONFIG_MAPPING["deepseek_v3" if family == "kimi_k2" else family]
        signature = inspect.signature(cls.__init__).parameters
        for key, value in defaults.items():
            assert signature[key].default == value, (family, key)
    assert set(TRANSFORMERS_DEFAULTS) <= set(FAMILIES)


def test_a_sample_sized_default_that_cannot_fit_is_asked_for():
    """Gemma's 16 key/value heads cannot serve 8 attention heads: transformers would build
    a model that cannot run; infraplan asks for the key."""
    with pytest.raises(InputError) as err:
        arch_from_config(dict(CORE, model_type="gemma"), name="g", origin="g.json")
    assert str(err.value) == (
        "g.json: missing 'num_key_value_heads'; transformers' default for 'gemma' (16) does "
        "not divide the 8 attention heads. To fix: set \"num_key_value_heads\" to a divisor "
        "of num_attention_heads 8: 1, 2, 4, 8")
    with pytest.raises(InputError, match=r"missing 'n_group' and 'topk_group', whose "
                                         r"transformers default for 'deepseek_v3' does not "
                                         r"fit: n_group=8 must divide n_routed_experts=4"):
        arch_from_config(dict(MINIMAL["deepseek_v3"], n_routed_experts=4), name="d",
                         origin="d")


@pytest.mark.parametrize("family, key", [("qwen2_moe", "shared_expert_intermediate_size"),
                                         ("dots1", "n_shared_experts")])
def test_keys_transformers_cannot_default_are_required(family, key):
    raw = dict(CORE, model_type=family, num_key_value_heads=2, num_experts=4, n_routed_experts=4,
               num_experts_per_tok=2, moe_intermediate_size=32)
    with pytest.raises(InputError, match=rf"missing '{key}'\. To fix: add \"{key}\""):
        arch_from_config(raw, name="x", origin="x")


def test_errors_give_the_fix():
    base = dict(CORE, model_type="llama")
    with pytest.raises(InputError) as err:
        arch_from_config(dict(base, num_key_value_heads=3), name="x", origin="c.json")
    assert str(err.value).endswith("To fix: set \"num_key_value_heads\" to a divisor of "
                                   "num_attention_heads 8: 1, 2, 4, 8")
    with pytest.raises(InputError) as err:
        arch_from_config(dict(base, tie_word_embeddings="true"), name="x", origin="c.json")
    assert str(err.value) == ("c.json: tie_word_embeddings must be true or false, got 'true'. "
                              "To fix: write true without quotes: \"tie_word_embeddings\": "
                              "true")
    with pytest.raises(InputError) as err:
        arch_from_config(dict(base, model_type="lama"), name="x", origin="c.json")
    assert str(err.value).startswith("c.json: unsupported model_type 'lama'; did you mean "
                                     "'llama', 'llama4_text'? To fix: set \"model_type\" to "
                                     "'llama' if that is its family (supported: arcee, ")


def test_an_empty_config_and_a_bom(tmp_path):
    empty = tmp_path / "config.json"
    empty.write_text("\n")
    with pytest.raises(InputError, match=r"^config\.json is empty\. To fix: save the model's "):
        read_config(empty)
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps(dict(CORE, model_type="llama")).encode())
    assert param_counts(load_model(str(bom))).total == 152_768


def test_a_small_vision_tower_is_not_0_00b():
    raw = dict(model_type="gemma3", text_config=dict(MINIMAL["gemma3_text"],
                                                     num_key_value_heads=4),
               vision_config=dict(model_type="siglip_vision_model", hidden_size=128,
                                  num_hidden_layers=2, intermediate_size=512))
    summary = arch_summary(arch_from_config(raw, name="mm", origin="mm"))
    assert "the vision tower (siglip_vision_model, 2 layers, hidden 128; about 393.22k " \
           "parameters, 14% of the language model's)" in summary["text"]


def test_the_embedding_line_states_its_convention():
    tied = arch_summary(load_model("gpt2"))["text"]
    assert "  embedding 38.60M (tied to the output layer) + 786.43k positions, " \
           "non-embedding 85.06M (all else)" in tied
    untied = arch_summary(load_model("llama-3.1-8b"))["text"]
    assert "  embedding 525.34M, non-embedding 7.50B (all else, the untied output layer's " \
           "525.34M included)" in untied
