"""Published parameter counts, FLOP conventions and KV-cache sizes of shipped models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infraplan.errors import InputError, UnknownNameError
from infraplan.models import (kv_cache_bytes, kv_cache_bytes_per_token, load_model,
                              param_counts, training_flops_per_sequence)
from infraplan.models.families import FAMILIES, arch_from_config


@pytest.mark.parametrize("name, total, active", [
    ("llama-3.1-70b", 70_553_706_496, 70_553_706_496),
    ("mixtral-8x7b", 46_702_792_704, 12_879_925_248),
    ("llama-2-7b", 6_738_415_616, 6_738_415_616),
    ("llama-2-70b", 68_976_648_192, 68_976_648_192),
    ("gpt2", 124_439_808, 124_439_808),
    # transformers on the meta device; the model card's "235B total, 22B activated"
    ("qwen3-235b-a22b", 235_093_634_560, 22_190_763_520),
])
def test_published_parameter_counts(name, total, active):
    counts = param_counts(load_model(name))
    assert (counts.total, counts.active) == (total, active)


def test_bloom_config_gives_the_model_cards_parameter_count():
    # bigscience/bloom model card: 176,247,271,424 parameters (ALiBi, embedding LayerNorm)
    path = Path(__file__).parents[2] / "validation" / "models" / "bloom-176b.json"
    assert param_counts(load_model(str(path))).total == 176_247_271_424


def test_deepseek_v3_is_671b_total_and_37b_active():
    """DeepSeek-V3 report, Sec. 1: 671B total parameters, 37B activated per token (the
    14B multi-token-prediction module is not part of the main model)."""
    counts = param_counts(load_model("deepseek-v3"))
    assert counts.total == 671_026_404_352  # transformers' count on the meta device
    assert counts.active == pytest.approx(37e9, rel=0.02)


def test_deepseek_v3_routes_each_token_into_4_of_8_expert_groups():
    """config.json n_group 8, topk_group 4 (the report's node-limited routing, M = 4)."""
    moe = load_model("deepseek-v3").moe
    assert (moe.expert_groups, moe.groups_per_token) == (8, 4)
    path = Path(__file__).parents[2] / "src/infraplan/catalog/data/models/deepseek-v3.json"
    raw = dict(json.loads(path.read_text()), topk_group=9)
    with pytest.raises(InputError, match="n_group=8 must divide n_routed_experts=256 and be "
                                         ">= topk_group=9"):
        arch_from_config(raw, name="x", origin="config.json")


@pytest.mark.parametrize("name, total, card_total, card_active", [
    ("gpt-oss-120b", 116_829_156_672, 116.83e9, 5.13e9),
    ("gpt-oss-20b", 20_914_757_184, 20.91e9, 3.61e9),
])
def test_gpt_oss_matches_the_model_cards_table_1(name, total, card_total, card_active):
    """gpt-oss model card (arXiv 2508.10925) Table 1, to its two decimals (+-0.005B): active
    counts the unembedding but not the input embedding."""
    counts = param_counts(load_model(name))
    assert counts.total == total  # transformers' count on the meta device
    assert counts.total == pytest.approx(card_total, abs=5e6)
    assert counts.active - counts.embedding == pytest.approx(card_active, abs=5e6)


@pytest.mark.parametrize("name, total, non_embedding", [
    ("gemma-2-27b", 27_227_128_320, 26_047_480_320),
    ("gemma-2-9b", 9_241_705_984, 8_324_201_984),
])
def test_gemma_2_matches_the_reports_non_embedding_count(name, total, non_embedding):
    """Gemma 2 report (arXiv 2408.00118) Table 2, exactly. Its embedding column counts a
    256,128-token vocabulary; the HF checkpoints (and these configs) have 256,000 rows."""
    counts = param_counts(load_model(name))
    assert counts.total == total  # transformers' count on the meta device
    assert counts.total - counts.embedding == non_embedding


@pytest.mark.parametrize("name, total, index_bytes, bytes_per_param", [
    ("olmo-2-13b", 13_716_198_400, 54_864_793_600, 4),  # float32 checkpoint
    ("granite-3.3-2b", 2_533_525_504, 5_067_051_008, 2),  # bf16
    ("olmoe-1b-7b", 6_919_161_856, 13_838_323_712, 2),  # bf16
])
def test_counts_equal_the_published_checkpoint_size(name, total, index_bytes, bytes_per_param):
    """total_size in each release's model.safetensors.index.json (the copies models.yaml
    names), divided by the bytes of its dtype."""
    assert param_counts(load_model(name)).total == total == index_bytes // bytes_per_param


def test_olmoe_is_1_3b_active():
    """NVIDIA Megatron-Bridge OLMoE docs: about 1.3B active of 7B (to +-0.05B); the model's
    name rounds the same figure to 1B."""
    counts = param_counts(load_model("olmoe-1b-7b"))
    assert counts.active == 1_282_017_280  # meta-device model, top-8 of 64 experts
    assert counts.active == pytest.approx(1.3e9, abs=0.05e9)


def test_deepseek_v2_is_236b_total_and_21b_active():
    """DeepSeek-V2 paper (arXiv 2405.04434), abstract: 236B total, 21B activated per token,
    whole billions (+-0.5B; the 0.52B embedding is counted in our active figure)."""
    counts = param_counts(load_model("deepseek-v2"))
    assert counts.total == 235_741_434_880  # transformers' count on the meta device
    assert counts.total == pytest.approx(236e9, abs=0.5e9)
    assert counts.active == pytest.approx(21e9, abs=0.5e9)


def test_phi_2_is_2_7b():
    """microsoft/phi-2 model card: 2.7 billion parameters (+-0.1B)."""
    counts = param_counts(load_model("phi-2"))
    assert counts.total == 2_779_683_840  # transformers' count on the meta device
    assert counts.total == pytest.approx(2.7e9, abs=0.1e9)


def test_aliases_and_paths_load_the_same_architecture():
    assert load_model("meta-llama/Llama-3.1-70B") == load_model("llama-3.1-70b")
    by_path = load_model("src/infraplan/catalog/data/models/mixtral-8x7b.json")
    assert param_counts(by_path).total == param_counts(load_model("mixtral-8x7b")).total


@pytest.mark.parametrize("name", ["megatron-gpt-1.7b", "gpt3-175b", "megatron-gpt-1t"])
def test_training_flops_equal_narayanan_equation_3(name):
    """Narayanan et al. 2021 eq. (3), full recompute: 96 B s l h^2 (1 + s/6h + V/16lh)."""
    arch = load_model(name)
    s, h, L, V = 2048, arch.hidden_size, arch.num_layers, arch.vocab_size
    expected = 96 * s * L * h**2 * (1 + s / (6 * h) + V / (16 * L * h))
    flops = training_flops_per_sequence(arch, s, recompute="full", causal=False)
    assert flops.hardware == pytest.approx(expected, rel=1e-12)
    assert flops.model == pytest.approx(72 * s * L * h**2 * (1 + s / (6 * h)) + 6 * s * h * V,
                                        rel=1e-12)


def test_causal_attention_counts_half_the_scores_plus_the_diagonal():
    arch = load_model("llama-3.1-8b")
    s = 4096
    full = training_flops_per_sequence(arch, s, causal=False).forward
    causal = training_flops_per_sequence(arch, s, causal=True).forward
    at = arch.attention
    per_key = 2 * arch.num_layers * at.num_heads * (at.head_dim + at.v_head_dim)
    assert full - causal == pytest.approx(per_key * (s * s - s * (s + 1) / 2))


@pytest.mark.parametrize("name, dtype, expected", [
    ("llama-3.1-70b", "bf16", 2 * 80 * 8 * 128 * 2),  # GQA: 8 KV heads
    ("llama-2-7b", "bf16", 2 * 32 * 32 * 128 * 2),  # MHA
    ("llama-3.1-70b", "fp8", 2 * 80 * 8 * 128 * 1),
    ("deepseek-v3", "bf16", 61 * (512 + 64) * 2),  # MLA latent + RoPE key
])
def test_kv_cache_bytes_per_token(name, dtype, expected):
    assert kv_cache_bytes_per_token(load_model(name), dtype) == expected


def test_sliding_window_caps_the_cache():
    arch = load_model("mistral-7b")
    window = arch.attention.sliding_window
    assert window == 4096
    per_token = kv_cache_bytes_per_token(arch)
    assert kv_cache_bytes(arch, 32768) == window * per_token
    assert kv_cache_bytes(arch, 1000, batch=3) == 3 * 1000 * per_token


def test_unknown_model_type_lists_the_families():
    with pytest.raises(InputError) as err:
        arch_from_config({"model_type": "bert", "hidden_size": 8}, name="x", origin="c.json")
    message = str(err.value)
    assert "unsupported model_type 'bert'" in message
    assert all(family in message for family in FAMILIES)


def test_a_config_without_model_type_is_read_by_its_architectures_class():
    """Older and hand-written configs name only the class; each shipped config that names
    one reads the same without its model_type."""
    from infraplan.models import param_counts

    folder = Path(__file__).parents[2] / "src/infraplan/catalog/data/models"
    read = 0
    for path in sorted(folder.glob("*.json")):
        raw = json.loads(path.read_text())
        if "architectures" not in raw:
            continue
        bare = {k: v for k, v in raw.items() if k != "model_type"}
        with_type = arch_from_config(raw, name=path.stem, origin=path.name)
        without = arch_from_config(bare, name=path.stem, origin=path.name)
        assert without.family == with_type.family == raw["model_type"], path.name
        assert param_counts(without) == param_counts(with_type), path.name
        read += 1
    assert read == 25
    with pytest.raises(InputError) as err:
        arch_from_config({"architectures": ["BertForMaskedLM"], "hidden_size": 8}, name="x",
                         origin="c.json")
    assert str(err.value).startswith("c.json: no model_type, and its architectures "
                                     "['BertForMaskedLM'] name no supported family;")
    assert 'or add "model_type" naming its family' in str(err.value)


def test_unknown_model_name_suggests_a_close_one():
    with pytest.raises(UnknownNameError) as err:
        load_model("llama-3.1-7b")
    assert "did you mean" in str(err.value) and "llama-3.1-70b" in str(err.value)


@pytest.mark.parametrize("raw, fragment", [
    ({"model_type": "llama", "hidden_size": 64}, "missing 'num_hidden_layers'"),
    ({"model_type": "llama", "hidden_size": 64, "intermediate_size": 8,
      "num_hidden_layers": 2, "num_attention_heads": 6, "vocab_size": 10},
     "not divisible by num_attention_heads"),
    ({"model_type": "llama", "hidden_size": 64, "intermediate_size": 8,
      "num_hidden_layers": -2, "num_attention_heads": 4, "vocab_size": 10},
     "num_hidden_layers must be a whole number from 1 to 2,147,483,647"),
    ({"model_type": "mistral", "hidden_size": 64, "intermediate_size": 8,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 3,
      "vocab_size": 10}, "must divide num_attention_heads"),
])
def test_bad_configs_name_the_key(raw, fragment):
    with pytest.raises(InputError, match=fragment):
        arch_from_config(raw, name="x", origin="config.json")


def test_an_absurd_layer_count_is_refused_before_any_per_layer_work(tmp_path, capsys):
    """num_hidden_layers: 10**12 (a typo) made `infraplan model` and every planner build
    per-layer tables for minutes and gigabytes; it is an input error at once."""
    from infraplan.cli import main

    config = json.loads((Path(__file__).parents[2] / "validation" / "models" /
                         "llama-7b.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(config, num_hidden_layers=10**6)))
    assert main(["model", str(path)]) == 2
    err = capsys.readouterr().err
    assert "1,000,000 layers is more than the 10,000" in err
    assert "num_hidden_layers" in err
    path.write_text(json.dumps(dict(config, num_hidden_layers=10_000)))
    assert param_counts(load_model(str(path))).total > 0  # deep but possible: still read


TINY_LLAMA = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100}


@pytest.mark.parametrize("key, value, shown", [
    # 10**400 overflowed float in the FLOP maths (HTTP 500 in the web UI); 1e400 reads as inf
    ("vocab_size", 10**400, "1000000000000000000000000000000000000000... (401 characters)"),
    ("hidden_size", float("inf"), "inf"),
    ("num_attention_heads", 2**31, "2147483648"),
    ("intermediate_size", 0, "0"),
    ("num_key_value_heads", 1.0, "1.0"),
], ids=["vocab_size=10**400", "hidden_size=1e400", "heads=2**31", "zero", "float"])
def test_config_sizes_outside_the_range_name_the_key_the_value_and_the_range(key, value, shown):
    with pytest.raises(InputError) as err:
        arch_from_config(dict(TINY_LLAMA, **{key: value}), name="x", origin="config.json")
    assert str(err.value) == (f"config.json: {key} must be a whole number from 1 to "
                              f"2,147,483,647, got {shown}. To fix: set \"{key}\" to the "
                              "model's real size")


def test_the_largest_config_size_still_reads_and_its_maths_stays_finite():
    from infraplan.models import forward_flops_per_token

    arch = arch_from_config(dict(TINY_LLAMA, vocab_size=2**31 - 1), name="x",
                            origin="config.json")
    assert param_counts(arch).embedding == 64 * (2**31 - 1)
    assert 0 < forward_flops_per_token(arch, 4096) < float("inf")


def test_layer_indices_outside_the_range_are_refused():
    raw = dict(TINY_LLAMA, model_type="qwen2_moe", num_experts=4, num_experts_per_tok=2,
               moe_intermediate_size=32, shared_expert_intermediate_size=64, num_key_value_heads=2,
               mlp_only_layers=[10**400])
    with pytest.raises(InputError, match=r"mlp_only_layers must be a list of layer indices "
                                         r"\(whole numbers from 0 to 2,147,483,647\), got "
                                         r"\[100000000000000000000000000000000000000\.\.\. "
                                         r"\(403 characters\)$"):
        arch_from_config(raw, name="x", origin="config.json")


def test_llama_3_is_its_own_row_with_an_8k_context():
    """'llama-3-8b' resolved to llama-3.1-8b, whose 131,072-token context let a 100,000-token
    sequence through without a note (session 61's audit); the shapes are the same."""
    from infraplan.models import load_model, param_counts

    for three, three_one in (("Meta-Llama-3-8B", "llama-3.1-8b"),
                             ("meta-llama/Meta-Llama-3-70B-Instruct", "llama-3.1-70b")):
        old, new = load_model(three), load_model(three_one)
        assert old.name.startswith("llama-3-") and old.max_position_embeddings == 8192
        assert new.max_position_embeddings == 131072
        assert param_counts(old).total == param_counts(new).total
