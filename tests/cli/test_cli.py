"""The command line: output, JSON keys, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infraplan.cli import main

ROOT = Path(__file__).parents[2]
JSON_KEYS = {"params_total", "params_active", "weights_bytes", "gradients_bytes",
             "optimizer_bytes", "activations_bytes", "overhead_bytes", "total_bytes",
             "capacity_bytes", "fits"}


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_memory_json_has_the_documented_keys(capsys):
    code, out, _ = run(capsys, "memory", "--model", "llama-3.1-70b", "--gpu", "h100",
                       "--num-gpus", "64", "--tp", "8", "--pp", "2", "--zero", "1",
                       "--recompute", "selective", "--sequence-parallel", "--seq-len",
                       "8192", "--json")
    assert code == 0
    data = json.loads(out)
    assert JSON_KEYS <= set(data)
    assert data["params_total"] == 70_553_706_496
    assert data["fits"] is True
    parts = ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes",
             "overhead_bytes")
    assert abs(sum(data[k] for k in parts) - data["total_bytes"]) <= len(parts)
    assert data["plan"]["dp"] == 4


def test_memory_text_says_whether_it_fits_and_how_to_fix(capsys):
    """A plan that does not fit is an answer (exit 1, with the fixes), not bad input (2)."""
    argv = ("memory", "--model", "llama-3.1-70b", "--gpu", "h100", "--num-gpus", "32",
            "--tp", "8", "--zero", "1", "--seq-len", "8192")
    code, out, _ = run(capsys, *argv)
    assert code == 1
    assert "DOES NOT FIT" in out and "--recompute full" in out
    for extra in (("--json",), ("--quiet",)):
        code, out, _ = run(capsys, *argv, *extra)
        assert code == 1 and ("DOES NOT FIT" in out or '"fits": false' in out)
    code, out, _ = run(capsys, *argv, "--recompute", "full", "--quiet")
    assert code == 0 and out.startswith("fits: ")


def test_memory_takes_the_chips_16_bit_type_without_a_precision(capsys):
    """--gpu v100 was refused ('does not support bf16') until --precision fp16 was given."""
    argv = ("memory", "--model", "llama-3.1-8b", "--gpu", "v100", "--num-gpus", "8",
            "--zero", "3", "--json")
    code, out, _ = run(capsys, *argv)
    assert code == 1  # it runs (35.7 GiB of 32 GiB: exit 1, does not fit)
    assert json.loads(out)["options"]["precision"] == "fp16"
    code, out, _ = run(capsys, *argv, "--precision", "fp16")
    assert code == 1 and json.loads(out)["options"]["precision"] == "fp16"
    code, _, err = run(capsys, *argv, "--precision", "bf16")
    assert code == 2 and "v100-sxm2-32gb does not support bf16" in err


@pytest.mark.parametrize("example", sorted((ROOT / "examples").glob("memory-*.yaml")),
                         ids=lambda p: p.name)
def test_memory_examples_run(capsys, example):
    code, out, err = run(capsys, "memory", str(example), "--json")
    assert code == 0, err
    assert json.loads(out)["fits"] is True


@pytest.mark.parametrize("example", sorted((ROOT / "examples").glob("train-*.yaml")),
                         ids=lambda p: p.name)
def test_training_examples_run(capsys, example):
    code, out, err = run(capsys, "plan", "train", str(example), "--json")
    assert code == 0, err
    best = json.loads(out)["best"][0]
    assert best["fits"] and best["gpu_hours"] > 0


def test_flags_override_the_scenario(capsys):
    example = ROOT / "examples" / "memory-llama-3.1-8b-qlora.yaml"
    _, out, _ = run(capsys, "memory", str(example), "--lora-rank", "8", "--json")
    assert json.loads(out)["options"]["lora_rank"] == 8


@pytest.mark.parametrize("kind", ["gpus", "models", "systems", "networks",
                                  "storage", "engines", "offers"])
def test_catalog_listings(capsys, kind):
    code, out, _ = run(capsys, "catalog", kind)
    assert code == 0 and "source" in out
    code, out, _ = run(capsys, "catalog", kind, "--json")
    data = json.loads(out)
    assert data["schema"] == "infraplan.catalog/1"
    rows = data["items"]
    assert rows and all(row["source"] and row["retrieved"] for row in rows)
    code, out, _ = run(capsys, "catalog", kind, "-q")  # one name a line, for scripts
    lines = out.splitlines()
    assert code == 0 and len(lines) == len(rows) and "source" not in out
    assert len(set(lines)) == len(lines)  # each line names one row
    if kind != "offers":
        assert lines == [row["name"] for row in rows]


def test_model_summary(capsys):
    code, out, _ = run(capsys, "model", "mixtral-8x7b", "--json")
    data = json.loads(out)
    assert code == 0 and data["params_active"] == 12_879_925_248
    code, out, _ = run(capsys, "model", "mixtral-8x7b", "--quiet")  # printed all six lines
    assert code == 0 and out.splitlines() == [data["text"].splitlines()[0]]
    assert out.startswith("mixtral-8x7b (mixtral): 46.70B parameters")


def test_model_summary_of_alternating_local_layers(capsys):
    """gpt-oss-120b: 18 of 36 layers attend within 128 tokens; 8 KV heads x 64 x 2 (K, V)
    x 2 bytes = 2 KiB per layer, 72 KiB a token, 36 KiB once the local caches are full."""
    code, out, _ = run(capsys, "model", "gpt-oss-120b", "--json")
    data = json.loads(out)
    assert code == 0 and (data["sliding_window"], data["windowed_layers"]) == (128, 18)
    assert data["kv_cache_bytes_per_token"]["bf16"] == 72 * 1024
    assert data["kv_cache_bytes_per_token_beyond_window"] == 36 * 1024
    assert "past it, a token adds 36.0 KiB in bf16" in data["text"]


def test_active_parameters_name_the_input_embedding_convention(capsys):
    """gpt-oss-120b's card says 5.13B active: it leaves out the 201,088 x 2,880 input table
    (a lookup), which the 5.71B counts; Mixtral's published 12.9B keeps it. Both shown."""
    code, out, _ = run(capsys, "model", "gpt-oss-120b", "--json")
    data = json.loads(out)
    assert data["params_active"] - data["params_active_without_input_embedding"] \
        == 201_088 * 2_880
    assert "5.71B active per token (5.13B without the input embedding)" in data["text"]
    assert data["moe"] == {"experts": 128, "experts_per_token": 4, "shared_expert_width": 0,
                           "expert_width": 2880}


def test_mla_says_what_it_caches_not_its_rebuilt_kv_heads(capsys):
    """DeepSeek-V3 printed '128 KV heads, head dim 192', which multiplies out to 5.7 MiB a
    token against the 68.6 KiB it caches: a 512 latent + a 64 rope key over 61 layers."""
    code, out, _ = run(capsys, "model", "deepseek-v3", "--json")
    data = json.loads(out)
    assert data["kv_cache_values_per_layer"] == 512 + 64
    assert data["kv_cache_bytes_per_token"]["bf16"] == (512 + 64) * 61 * 2
    assert "a 512-wide latent + a 64-wide rope key (576 values)" in data["text"]
    assert "128 KV heads" not in data["text"] and data["mtp_layers"] == 1


def test_model_flops_default_to_the_models_own_context(capsys):
    """gpt2 has 1,024 learned positions: quoting FLOPs at 4,096 tokens described a model
    that cannot run; past a RoPE model's context the numbers follow, with a note."""
    code, out, _ = run(capsys, "model", "gpt2", "--json")
    data = json.loads(out)
    assert code == 0 and data["seq_len"] == 1024 and data["notes"] == []
    code, out, _ = run(capsys, "model", "llama-3.1-8b", "--seq-len", "262144", "--json")
    data = json.loads(out)
    assert data["seq_len"] == 262144
    assert data["notes"] == ["seq_len 262144 exceeds the model's max_position_embeddings 131072"]
    assert data["text"].endswith("note: " + data["notes"][0])


LLAVA = {"model_type": "llava",
         "text_config": {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
                         "num_hidden_layers": 32, "num_attention_heads": 32,
                         "vocab_size": 32064, "max_position_embeddings": 4096},
         "vision_config": {"model_type": "clip_vision_model", "hidden_size": 1024,
                           "num_hidden_layers": 24, "intermediate_size": 4096}}


def test_a_multimodal_checkpoints_tower_is_named_wherever_its_model_is(tmp_path, capsys):
    """LLaVA 1.5 7B's language model is planned; its CLIP ViT-L tower (24 x (4 x 1024^2
    + 2 x 1024 x 4096) = 301.99M parameters, 4% of 6.74B) was left out without a word."""
    config = tmp_path / "llava.json"
    config.write_text(json.dumps(LLAVA))
    note = ("the vision tower (clip_vision_model, 24 layers, hidden 1024; about 301.99M "
            "parameters, 4% of the language model's) is not counted: infraplan plans the "
            "language model of a multimodal checkpoint")
    code, out, _ = run(capsys, "model", str(config))
    assert code == 0 and out.strip().endswith("note: " + note)
    code, out, _ = run(capsys, "memory", "--model", str(config), "--gpu", "h100", "--json")
    assert code == (0 if json.loads(out)["fits"] else 1) and note in json.loads(out)["notes"]
    scenario = tmp_path / "serve.yaml"
    scenario.write_text(f"model: {config}\ndeployment: {{gpu: h100}}\ntraffic: "
                        "{num_requests: 20, arrival: {kind: poisson, rate_per_s: 1}, input: "
                        "{kind: fixed, value: 100}, output: {kind: fixed, value: 10}}\n")
    code, out, _ = run(capsys, "simulate", "serve", str(scenario))
    assert code == 0 and out.strip().endswith("note: " + note)
    assert "per GPU-hour, 1 GPU; cheapest on-demand offer: " in out  # it read "1 GPUs"


def test_a_model_folder_is_named_after_itself(tmp_path, capsys):
    folder = tmp_path / "my-llama"
    folder.mkdir()
    (folder / "config.json").write_text((ROOT / "validation/models/llama-3.1-8b.json")
                                        .read_text())
    for target in (folder, folder / "config.json"):
        code, out, _ = run(capsys, "model", str(target))
        assert code == 0 and out.startswith("my-llama (llama): 8.03B parameters")


BAD_INPUT = [
    (["memory", "--model", "llama-3.1-70b", "--gpu", "h10"], "did you mean"),
    (["memory", "--model", "lama-3.1-70b", "--gpu", "h100"], "did you mean 'llama-3.1-70b'"),
    (["memory", "--model", "llama-3.1-70b", "--gpu", "h100", "--num-gpus", "3", "--tp", "3"],
     "--tp 3 does not divide the 64 attention heads"),
    (["memory", "--model", "llama-3.1-70b", "--gpu", "h100", "--tp", "-2"], "must be >= 1"),
    (["memory", "--model", "llama-3.1-70b", "--gpu", "h100", "--seq-len", "0"], "must be >= 1"),
    (["memory", "--model", "llama-3.1-70b", "--gpu", "h100", "--num-gpus", "12", "--tp", "8"],
     "not a multiple of tp*pp*cp"),
    (["memory", "--model", "no/such/config.json", "--gpu", "h100"], "does not exist"),
    (["memory", "no-such-scenario.yaml"], "does not exist"),
    # a typo or a shortened name in a folder names the files it may have meant
    (["plan", "train", str(ROOT / "examples" / "train-gpt3-175b.yaml")],
     f"does not exist; did you mean '{ROOT / 'examples' / 'train-gpt3-175b-a100.yaml'}'"),
    (["plan", "serve", str(ROOT / "examples" / "serve-lama8b-chat.yaml")],
     f"does not exist; did you mean '{ROOT / 'examples' / 'serve-llama8b-chat.yaml'}'"),
    (["memory", "--model", "llama-3.1-8b", "--gpu", "v100", "--precision", "bf16"],
     "does not support bf16"),
    (["memory", "--model", "llama-3.1-8b", "--gpu", "a100", "--precision", "fp8"],
     "a100-sxm4-80gb does not support fp8 training: it has no fp8 tensor cores. To fix: use "
     "--precision bf16"),
    (["memory", "--model", "llama-3.1-70b", "--gpu", "h100", "--num-gpus", "8", "--ep", "2"],
     "has no experts"),
    (["catalog", "gpu"], "invalid choice"),
    (["memory", "--gpu", "h100"], "--model is required"),
    # names too long for the file system: a catalog miss or an unusable path, no OSError
    (["model", "x" * 300], "unknown model 'xxxxxxxx"),
    (["memory", "--model", "x" * 300, "--gpu", "h100"], "unknown model 'xxxxxxxx"),
    (["validate", "training", "x" * 300], "not a usable path (File name too long)"),
    (["simulate", "serve", str(ROOT / "examples" / "serve-llama8b-chat.yaml"), "--seed", "-1"],
     "argument --seed: must be >= 0, got -1"),
    (["plan", "serve", str(ROOT / "examples" / "serve-llama8b-chat.yaml"), "--seed", "x"],
     "argument --seed: expected a whole number, got 'x'"),
    (["simulate", "train", str(ROOT / "examples" / "article-4-2b-spot.yaml"), "--seed", "1.5"],
     "argument --seed: expected a whole number, got '1.5'"),
    (["plan", "train", "x" * 300], "not a usable path (File name too long)"),
    # the plan search's ceiling on accelerators holds for a memory estimate too
    (["memory", "--model", "llama-3.1-8b", "--gpu", "h100", "--num-gpus", "1000000000"],
     "--num-gpus must be <= 131072 (got 1000000000)"),
    # a device is on disk but not a config.json ("does not exist" before)
    (["memory", "--model", "/dev/null", "--gpu", "h100"],
     "model file '/dev/null' is not a regular file"),
    # past 2^53 a count overflowed float arithmetic (400 digits) or Python's int parsing
    (["simulate", "serve", str(ROOT / "examples" / "serve-llama8b-chat.yaml"), "--seed",
      "9" * 400], "argument --seed: must be at most 9,007,199,254,740,992, got a whole "
                  "number of about 400 digits"),
    # it said "flags: parallelism.recompute_fraction must be <= 1"
    (["memory", "--model", "llama-3.1-8b", "--gpu", "h100", "--recompute-fraction", "1.5"],
     "argument --recompute-fraction: must be a finite number > 0 and <= 1, got 1.5"),
    (["memory", "--model", "llama-3.1-8b", "--gpu", "h100", "--num-gpus", "9" * 5000],
     "argument --num-gpus: expected a whole number, got '9999999999999999999999999999999999999999'"
     "... (5,000 characters)"),
]


@pytest.mark.parametrize("argv, fragment", BAD_INPUT, ids=[" ".join(a[1:4])[:40] for a, _ in
                                                            BAD_INPUT])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, fragment):
    with pytest.raises(SystemExit) as exit_info:
        sys.exit(main(argv))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert fragment in err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("content, fragment", [
    ("model: llama-3.1-8b\nhardware: {gpu: h100\n", "not valid YAML at line 3 (expected ',' or "
                                                  "'}', but got '<stream end>'). To fix: check "
                                                  "the indentation and brackets there"),
    ("model: llama-3.1-8b\nhardware: {gpu: h100}\ntraining: {seq_lenn: 2048}\n",
     "training.seq_lenn is not a known key; did you mean 'seq_len'?"),
    ("model: llama-3.1-8b\nhardware: {gpu: h100, num_gpus: -4}\ntraining: {seq_len: 2048}\n",
     "hardware.num_gpus must be >= 1 (got -4)"),
    # catalog names a memory scenario holds name the file and the field, as a plan
    # scenario's do (they read "unknown accelerator 'h1000'..." with neither)
    ("model: llama-3.1-8b\nhardware: {gpu: h1000, num_gpus: 8}\n",
     "error: scenario.yaml: hardware.gpu unknown accelerator 'h1000'; did you mean "
     "'h100-sxm5-80gb', "),
    ("model: llama-3.1-8b\nhardware: {gpu: h100}\n"
     "finetune: {method: lora, lora_rank: 8, lora_targets: [qproj]}\n",
     "error: scenario.yaml: finetune.lora_targets unknown LoRA target 'qproj'; did you mean "
     "'q_proj', "),
    ("- just\n- a list\n", "holds a list, not keys. To fix: write a mapping of keys (model, "
                           "hardware, training, ...)"),
    ("", "scenario.yaml is empty"),
    ("model: llama-3.1-8b\nhardware: {gpu: h100}\ntraining: {seq_len: 2048}\nmodel: gpt2\n",
     "the key 'model' is given twice at line 4"),
    ("model: llama-3.1-8b\nhardware: {gpu: h100, num_gpus: true}\ntraining: {seq_len: 2048}\n",
     "num_gpus must be a number, not a true/false value"),
    ("model: llama-3.1-8b\nhardware: {gpus: [h100]}\ntraining: {seq_len: 2048}\n",
     "a plan scenario (its hardware lists gpus: to compare), not what this command reads"),
    # a model name too long for a file name: a catalog miss, not an OSError traceback
    ("model: " + "x" * 400 + "\nhardware: {gpu: h100}\ntraining: {seq_len: 2048}\n",
     "unknown model 'xxxxxxxx"),
    # what PyYAML reads but Python refuses: ValueError, RecursionError, TypeError before
    ("model: llama-3.1-8b\nhardware: {gpu: h100, num_gpus: " + "9" * 5000 + "}\n",
     "scenario.yaml: holds an integer of more than 4,300 digits"),
    ("model: llama-3.1-8b\nhardware: " + "[" * 2000 + "]" * 2000 + "\n",
     "scenario.yaml: nested too deeply to read"),
    ("model: llama-3.1-8b\nhardware: {gpu: h100}\n? [seq_len, 2048]\n: 1\n",
     "the key at line 3 is a list, not a name"),
    ("model: llama-3.1-8b\n{gpu: h100}: x\n", "the key at line 2 is a mapping, not a name"),
    # whole numbers past 2^53: 400 digits overflowed a float far from the field, and a hex
    # literal past 4,300 digits crashed the message that echoed it
    ("model: llama-3.1-8b\nhardware: {gpu: h100}\ntraining: {seq_len: 2048}\n"
     "finetune: {method: lora, lora_rank: " + "9" * 400 + "}\n",
     "finetune.lora_rank must be at most 9,007,199,254,740,992 (2^53) (got a whole number of "
     "about 400 digits)"),
    ("model: llama-3.1-8b\nhardware: {gpu: h100}\ntraining: {seq_len: 2048}\n"
     "parallelism: {tp: 0x" + "f" * 5000 + "}\n",
     "parallelism.tp must be at most 9,007,199,254,740,992 (2^53) (got a whole number of about "
     "6,021 digits)"),
    ("name: 0x" + "f" * 5000 + "\nmodel: llama-3.1-8b\nhardware: {gpu: h100}\n"
     "training: {seq_len: 2048}\n",
     "name must be text (got a whole number of about 6,021 digits); to fix: quote it"),
    # what YAML reads unquoted as a date or a number
    ("name: 2024-01-01\nmodel: llama-3.1-8b\nhardware: {gpu: h100}\ntraining: {seq_len: 2048}\n",
     "name must be text (got 2024-01-01); to fix: quote it, as YAML reads it as a date"),
    ("model: llama-3.1-8b\nhardware: {gpu: h100, 1: 2}\ntraining: {seq_len: 2048}\n",
     "hardware.1 is not a known key (keys are names; YAML read this one as a number)"),
    ("model: llama-3.1-8b\nhardware: {gpu: h100}\ntraining: {seq_len: 2048}\n"
     "finetune: {method: lora, lora_targets: []}\n", "finetune.lora_targets must not be empty"),
    # Mixtral's w1/w3/w2 are its routed experts, fused in transformers: LoRA reaches none
    ("model: mixtral-8x7b\nhardware: {gpu: h100, num_gpus: 8}\ntraining: {seq_len: 2048}\n"
     "parallelism: {tp: 8}\nfinetune: {method: lora, lora_targets: [w1, w2, w3]}\n",
     "adapt no weight of mixtral-8x7b"),
    # a merge key is YAML; the keys written beside it win over the merged ones
    ("model: llama-3.1-8b\nhardware: {gpu: h100}\ntraining: {seq_len: 2048}\n"
     "parallelism:\n  <<: {tp: 2, zero: 9}\n  tp: 1\n",
     "parallelism.zero must be one of 0, 1, 2, 3 (got 9)"),
    ("model: llama-3.1-8b\nhardware: {gpu: h100}\ntraining: {seq_len: 2048}\n"
     "parallelism: {zero: '3'}\n",
     "parallelism.zero must be one of 0, 1, 2, 3 (got '3'); write 3 without quotes"),
    # a key one level too high names the section it belongs in; a value where keys belong
    # lists the keys (they read "valid keys: model, hardware, ..." and "a valid dictionary
    # or instance of Hardware")
    ("model: llama-3.1-8b\nhardware: {gpu: h100}\ntraining: {seq_len: 2048}\nzero: 1\n",
     "scenario.yaml: zero is not a key here; it belongs under parallelism.zero\n"),
    ("model: llama-3.1-8b\nhardware: h100\ntraining: {seq_len: 2048}\n",
     "scenario.yaml: hardware must be a mapping of keys (gpu, num_gpus), not a single value "
     "(got 'h100')\n"),
    ("model: llama-3.1-8b\nhardware: {gpu: h100}\ntraining: {seq_len: 2048}\n"
     "finetune: lora\n", "finetune must be a mapping of keys (method, lora_rank, "
                         "lora_targets), not a single value (got 'lora'); to fix: write "
                         "finetune: {method: lora, ...}"),
])
def test_bad_scenario_files(tmp_path, capsys, content, fragment):
    path = tmp_path / "scenario.yaml"
    path.write_text(content)
    code, _, err = run(capsys, "memory", str(path))
    assert code == 2 and fragment in err and err.count("\n") == 1



def test_a_memory_scenario_without_training_reads_as_the_flags_do(tmp_path, capsys):
    """Every training field has a default (4096-token sequences, as --seq-len's): the
    section is optional, as the flag form needs none (it was 'training is required')."""
    path = tmp_path / "scenario.yaml"
    path.write_text("model: llama-3.1-8b\nhardware: {gpu: h100}\n")
    code, out, _ = run(capsys, "memory", str(path), "--json")
    from_file = json.loads(out)
    code_flags, out, _ = run(capsys, "memory", "--model", "llama-3.1-8b", "--gpu", "h100",
                             "--json")
    assert code == code_flags == 1  # 8B with AdamW on one H100 does not fit
    assert from_file["options"]["seq_len"] == 4096
    assert from_file == json.loads(out)

TRAIN = ("model: llama-3.1-8b\ntraining: {tokens: 1.0e9, global_batch: 64, seq_len: 2048}\n"
         "hardware: {gpus: [h100], counts: [8, -8]}\n")
SERVE = ("model: llama-3.1-8b\ntraffic: {arrival: {kind: poisson, rate_per_s: 2}, "
         "num_requests: 50}\nsearch: {gpus: [h100], tp: [1, 0]}\n")


@pytest.mark.parametrize("command, content, fragment", [
    ("plan train", TRAIN, "hardware.counts.1 must be > 0 (got -8)"),
    ("plan serve", SERVE, "search.tp.1 must be > 0 (got 0)"),
    ("plan serve", SERVE.replace("tp: [1, 0]", "max_num_seqs: [64, -1]"),
     "search.max_num_seqs.1 must be > 0 (got -1)"),
    ("simulate train", TRAIN.replace(", -8]", "]") + "run: {strategies: []}\n",
     "run.strategies must not be empty"),
    # a misspelt gpus: beside the plan's counts is a typo, not a memory scenario (it said
    # "run it with infraplan memory", which then failed on the list)
    ("plan train", TRAIN.replace("gpus: [h100], counts: [8, -8]", "gpu: [h100], counts: [8]"),
     "hardware.gpu is not a known key; did you mean 'gpus'?"),
    ("plan train", TRAIN.replace("gpus: [h100], counts: [8, -8]", "gpu: [h100]"),
     "hardware.gpu is not a known key; did you mean 'gpus'?"),
    ("memory", TRAIN.replace("gpus: [h100], counts: [8, -8]", "gpus: h100, num_gpus: 8"),
     "hardware.gpus is not a known key; did you mean 'gpu'?"),
    # one accelerator priced twice, by an alias and its name: the first won silently
    ("plan train", TRAIN.replace(", -8]", "]") + "prices: {h100: 2, H100-SXM5-80GB: 3}\n",
     "prices names h100-sxm5-80gb twice: 'h100' ($2.00) and 'H100-SXM5-80GB' ($3.00)"),
])
def test_scenario_lists_are_checked_entry_by_entry(tmp_path, capsys, command, content,
                                                   fragment):
    path = tmp_path / "scenario.yaml"
    path.write_text(content)
    code, _, err = run(capsys, *command.split(), str(path))
    assert code == 2 and fragment in err and err.count("\n") == 1


def test_bad_config_json(tmp_path, capsys):
    broken = tmp_path / "config.json"
    broken.write_text('{"model_type": "llama", "hidden_size": 64,,}')
    code, _, err = run(capsys, "memory", "--model", str(broken), "--gpu", "h100")
    assert code == 2 and "not valid JSON at line 1" in err
    broken.write_text('{"model_type": "t5", "d_model": 512}')
    code, _, err = run(capsys, "memory", "--model", str(broken), "--gpu", "h100")
    assert code == 2 and "unsupported model_type 't5'" in err and "deepseek_v3" in err
    broken.write_text('{"model_type": "llama", "hidden_size": 64, "hidden_size": 128}')
    code, _, err = run(capsys, "model", str(broken))
    assert code == 2 and "config.json: the key 'hidden_size' is given twice in one object" in err
    broken.write_text('{"model_type": "llama", "hidden_size": ' + "9" * 5000 + "}")
    code, _, err = run(capsys, "model", str(broken))
    assert code == 2 and "config.json: holds an integer of more than 4,300 digits" in err
    broken.write_text('{"model_type": "llama", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    code, _, err = run(capsys, "model", str(broken))
    assert code == 2 and "config.json: nested too deeply to read" in err


@pytest.mark.parametrize("model_type", [[], {}, ["llama"]])
def test_a_model_type_that_is_not_a_string_is_unsupported(tmp_path, capsys, model_type):
    """A list or object as model_type crashed with TypeError: unhashable type."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": model_type, "hidden_size": 64,
                                  "text_config": {"model_type": model_type}}))
    code, _, err = run(capsys, "model", str(config))
    assert code == 2 and f"unsupported model_type {model_type!r}" in err
    assert err.count("\n") == 1


def test_console_script_exits_2_without_traceback():
    """The installed entry point, in a fresh process, as a user runs it."""
    result = subprocess.run([sys.executable, "-m", "infraplan.cli", "memory", "--model",
                             "llama-3.1-70b", "--gpu", "nope"], capture_output=True, text=True,
                            cwd=ROOT)
    assert result.returncode == 2
    assert result.stderr.startswith("error: unknown accelerator 'nope'")
    assert "Traceback" not in result.stderr


def test_ctrl_c_is_one_line_and_exit_130(capsys, monkeypatch):
    """A KeyboardInterrupt during a long command printed a full traceback."""
    import infraplan.training.plan_train as plan_train

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(plan_train, "plan_training", interrupted)
    scenario = ROOT / "examples" / "train-llama-3.1-70b.yaml"
    code, out, err = run(capsys, "plan", "train", str(scenario))
    assert (code, out, err) == (130, "", "interrupted\n")


@pytest.mark.parametrize("flags, fragment", [
    # in flag terms; they were refused in the scenario's ("flags: finetune lora_rank
    # applies only with method lora or qlora"), with no fix
    (["--recompute-fraction", "0.5"], "--recompute-fraction applies only to full recompute "
                                      "(it would be ignored). To fix: add --recompute full"),
    (["--lora-rank", "8"], "--lora-rank applies only to a LoRA or QLoRA fine-tune (it would "
                           "be ignored). To fix: add --finetune lora (or qlora)"),
    # at their default values the scenario's check (which a dumped file must pass) let
    # these through, and the flag was ignored
    (["--lora-rank", "16"], "--lora-rank applies only to a LoRA or QLoRA fine-tune (it would "
                            "be ignored). To fix: add --finetune lora (or qlora), or drop "
                            "--lora-rank"),
    (["--lora-targets", "all-linear"], "--lora-targets applies only to a LoRA or QLoRA"),
    (["--recompute-fraction", "1"], "--recompute-fraction applies only to full recompute (it "
                                    "would be ignored). To fix: add --recompute full"),
    (["--sequence-parallel"], "--sequence-parallel splits activations over the "
                              "tensor-parallel ranks: it needs --tp > 1"),
])
def test_memory_flags_that_would_be_ignored_are_refused(capsys, flags, fragment):
    code, _, err = run(capsys, "memory", "--model", "llama-3.1-8b", "--gpu", "h100", *flags)
    assert code == 2 and fragment in err


def test_a_flag_that_leaves_a_context_drops_the_files_settings_of_it(tmp_path, capsys):
    """--finetune full on a QLoRA scenario was refused: the file's lora_rank "applies only
    with method lora or qlora"; the flag's full fine-tune is what was asked. So with
    --recompute selective over a file's recompute_fraction."""
    qlora = ROOT / "examples" / "memory-llama-3.1-8b-qlora.yaml"
    code, out, _ = run(capsys, "memory", str(qlora), "--finetune", "full", "--json")
    data = json.loads(out)
    assert code == 1 and data["trainable_params_per_gpu"] == data["params_total"] > 8e9
    partial = tmp_path / "partial.yaml"
    partial.write_text("model: llama-3.1-8b\nhardware: {gpu: h100}\ntraining: {seq_len: 4096}\n"
                       "parallelism: {recompute: full, recompute_fraction: 0.5}\n")
    code, out, _ = run(capsys, "memory", str(partial), "--recompute", "selective")
    assert code == 1 and "recompute=selective" in out and "DOES NOT FIT" in out
    code, _, err = run(capsys, "memory", str(qlora), "--finetune", "full", "--lora-rank", "8")
    assert code == 2 and err.startswith("error: --lora-rank applies only to a LoRA or QLoRA")


def test_a_pinned_sequence_parallel_needs_tensor_parallel():
    from infraplan.workloads import Pins

    with pytest.raises(ValueError, match="it needs tp > 1"):
        Pins.model_validate({"tp": 1, "sequence_parallel": True})
    assert Pins.model_validate({"tp": 2, "sequence_parallel": True}).sequence_parallel


def test_model_seq_len_is_bounded_like_a_scenario(capsys):
    """A 25-digit --seq-len printed FLOP counts with 20 digits instead of an error."""
    code, _, err = run(capsys, "model", "llama-3.1-8b", "--seq-len", "1" + "0" * 24)
    assert code == 2 and "--seq-len must be <= 134,217,728" in err


def test_catalog_offers_of_one_gpu_cheapest_first(capsys):
    """`catalog offers --gpu h100`: that accelerator's offers alone (the alias resolved),
    cheapest on-demand first, and the chip's other variants named (the NVL and PCIe cards
    are priced apart)."""
    from infraplan.economics.offers import load_offers

    sold = [o for o in load_offers() if o.accelerator == "h100-sxm5-80gb"]
    code, out, _ = run(capsys, "catalog", "offers", "--gpu", "h100", "--json")
    items = json.loads(out)["items"]
    assert code == 0 and len(items) == len(sold) > 1
    assert {i["accelerator"] for i in items} == {"h100-sxm5-80gb"}
    on_demand = [i["on_demand_usd_per_hour"] and i["on_demand_usd_per_hour"] / i["count"]
                 for i in items]  # an instance's price, per GPU
    priced = [p for p in on_demand if p is not None]
    assert priced == sorted(priced) and on_demand[:len(priced)] == priced
    code, out, _ = run(capsys, "catalog", "prices", "--gpu", "h100")
    assert f"\n\n{len(sold)} prices of h100-sxm5-80gb; every row" in out
    assert "other h100 variants offered: h100-nvl-94gb (" in out
    code, out, _ = run(capsys, "catalog", "offers", "--gpu", "v100")
    assert "\n\n1 offer of v100-sxm2-32gb; every row" in out  # not "1 offers"


def test_catalog_offers_explain_sized_rows_and_give_per_gpu_prices(capsys):
    """A row rented in several sizes reads '1|2|4|8' in the GPUs column: the table says what
    that means, and --json gives the per-GPU prices the table shows (an instance's price
    alone was per GPU for sized rows and per instance for the rest)."""
    code, out, _ = run(capsys, "catalog", "offers", "--gpu", "h100")
    assert code == 0 and " 1|2|4|8 " in out
    assert "\nGPUs 1|2|4|8: instances of any of these sizes, each at the row's per-GPU " in out
    code, out, _ = run(capsys, "catalog", "offers", "--gpu", "h200")
    assert "GPUs " not in out.split("\n\n")[0].splitlines()[-1]  # no sized h200 row
    code, out, _ = run(capsys, "catalog", "offers", "--json")
    for item in json.loads(out)["items"]:
        for column in ("on_demand", "spot", "reserved_1y", "reserved_3y"):
            price = item[f"{column}_usd_per_hour"]
            assert item[f"{column}_usd_per_gpu_hour"] == (
                None if price is None else pytest.approx(price / item["count"]))


@pytest.mark.parametrize("argv, fragment", [
    (["offers", "--gpu", "h10"], "unknown accelerator 'h10'; did you mean 'h100-sxm5-80gb'"),
    (["gpus", "--gpu", "h100"], "--gpu picks one accelerator's offers; catalog gpus lists "
                                "every row. To fix: drop --gpu, or run: infraplan catalog "
                                "offers --gpu h100"),
])
def test_catalog_gpu_filter_refuses_what_it_cannot_filter(capsys, argv, fragment):
    code, _, err = run(capsys, "catalog", *argv)
    assert code == 2 and fragment in err and err.count("\n") == 1


def test_a_word_left_over_points_to_its_own_commands_help(capsys):
    """'infraplan model llama-3.1-8b mixtral' pointed to 'infraplan --help', which does not
    list model's arguments; other errors of model point to its own help."""
    from infraplan.cli import main

    for argv, prog in ((["model", "llama-3.1-8b", "mixtral"], "infraplan model"),
                       (["plan", "serve", "x.yaml", "--bogus"], "infraplan plan serve")):
        with pytest.raises(SystemExit) as stop:
            main(argv)
        assert stop.value.code == 2
        assert capsys.readouterr().err.endswith(f"(see '{prog} --help')\n")


def test_the_model_view_scales_its_units():
    """A 1T-parameter model printed 'forward 2,029.32 GFLOP' and '12,800.0 KiB'."""
    from infraplan.models import load_model
    from infraplan.report.model import arch_summary

    text = arch_summary(load_model("megatron-gpt-1t"), 2048)["text"]
    assert "forward 2.03 TFLOP, training (3x forward) 6.09 TFLOP" in text
    assert "KV cache per token: 12.5 MiB in bf16, 6.2 MiB in fp8" in text
    small = arch_summary(load_model("llama-3.1-8b"), 4096)["text"]
    assert "forward 16.08 GFLOP" in small and "128.0 KiB in bf16, 64.0 KiB in fp8" in small
