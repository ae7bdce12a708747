"""First-time-user audit of `infraplan memory` (s63): each test fails on the code before it."""

from __future__ import annotations

import json

import pytest

from infraplan.cli import main
from infraplan.physics.memory.states import NF4_BYTES_PER_PARAM, stage_params
from infraplan.models import load_model

GiB = 2**30


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["memory", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_qlora_zero3_gathers_the_packed_nf4_layers(capsys):
    # FSDP-QLoRA (Answer.AI fsdp_qlora, bitsandbytes quant_storage) all-gathers the 4-bit
    # weights: 2 layers of 70B's largest layer at NF4, its norms at 16 bits
    base = ["--model", "llama-3.1-70b", "--gpu", "h100", "--num-gpus", "8", "--zero", "3",
            "--recompute", "full", "--json"]
    code, out, _ = run(capsys, *base, "--finetune", "qlora")
    gathered = json.loads(out)["overhead_parts_bytes"]["zero3_gathered_layers"]
    sp = stage_params(load_model("llama-3.1-70b"), 1)
    norms = sp.max_layer_dense - sp.max_layer_dense_gemm
    assert gathered == round(2 * (sp.max_layer_dense_gemm * NF4_BYTES_PER_PARAM + norms * 2))
    assert gathered / GiB == pytest.approx(0.822, abs=1e-3)  # was 3.188, as 16-bit
    _, out, _ = run(capsys, *base, "--finetune", "lora")
    assert json.loads(out)["overhead_parts_bytes"]["zero3_gathered_layers"] / GiB == \
        pytest.approx(3.188, abs=1e-3)


def test_zero3_on_one_rank_gathers_nothing_and_says_so(capsys):
    base = ["--model", "llama-3.1-8b", "--gpu", "h100", "--optimizer", "adamw-bf16"]
    code, out, _ = run(capsys, *base, "--json")
    without = json.loads(out)["total_bytes"]
    code, out, _ = run(capsys, *base, "--zero", "3", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["fits"]
    assert doc["overhead_parts_bytes"]["zero3_gathered_layers"] == 0
    assert doc["total_bytes"] == without
    assert "ZeRO-3 with one data-parallel rank (dp*cp = 1) shards nothing" in doc["notes"][0]
    # with two ranks the gather is back: 2 x 0.41 GiB
    _, out, _ = run(capsys, *base, "--zero", "3", "--num-gpus", "2", "--json")
    assert json.loads(out)["overhead_parts_bytes"]["zero3_gathered_layers"] / GiB == \
        pytest.approx(0.812, abs=1e-3)


@pytest.mark.parametrize("seq_len", ["4095", "4094"])
def test_cp_seq_len_fix_names_lengths_and_cp_that_divide_the_gpus(capsys, seq_len):
    code, _, err = run(capsys, "--model", "llama-3.1-8b", "--gpu", "h100", "--num-gpus", "2",
                       "--cp", "2", "--seq-len", seq_len)
    assert code == 2
    assert err.strip().endswith("To fix: use --seq-len 4092 or 4096, or --cp 1")
    assert "23" not in err


def test_cp_choices_divide_the_gpus_left_to_it(capsys):
    code, _, err = run(capsys, "--model", "llama-3.1-8b", "--gpu", "h100", "--num-gpus", "8",
                       "--cp", "8", "--seq-len", "4100")
    assert code == 2 and "use --seq-len 4096 or 4112, or --cp in 1, 2\n" in err


def test_pp_past_the_layers_names_the_valid_pp(capsys):
    code, _, err = run(capsys, "--model", "gpt2", "--gpu", "h100", "--num-gpus", "16",
                       "--pp", "16")
    assert code == 2
    assert "--pp 16 exceeds the 12 layers of gpt2. To fix: use --pp in 1, 2, 4, 8 " in err


@pytest.mark.parametrize("argv, expected", [
    (["--model", "llama-3.1-8b", "--num-gpus", "2", "--sequence-parallel"],
     "error: --sequence-parallel splits activations over the tensor-parallel ranks: it needs "
     "--tp > 1. To fix: use --no-sequence-parallel, or --tp above 1"),
    (["--model", "llama-3.1-8b", "--num-gpus", "2", "--cp", "2", "--kernels", "eager"],
     "To fix: use --kernels fused or --cp 1"),
    (["--model", "qwen3-30b-a3b", "--finetune", "lora", "--lora-targets", "mlp"],
     "error: --lora-targets mlp adapt no weight of qwen3-30b-a3b"),
    (["--model", "qwen3-30b-a3b", "--finetune", "lora", "--lora-targets", "mlp"],
     "To fix: use --lora-targets attention, or --lora-targets all-linear"),
    (["--model", "llama-3.1-8b", "--num-gpus", "1000000000"],
     "error: --num-gpus must be <= 131072 (got 1000000000)"),
    (["--model", "mixtral-8x7b", "--num-gpus", "8", "--tp", "1", "--ep", "8", "--etp", "2"],
     "error: --etp 2 must divide --tp 1"),
    (["--model", "mixtral-8x7b", "--num-gpus", "8", "--tp", "1", "--ep", "8", "--etp", "2"],
     "To fix: use --etp 1\n"),
])
def test_flag_errors_name_the_flags(capsys, argv, expected):
    code, _, err = run(capsys, *argv, "--gpu", "h100")
    assert code == 2 and expected in err, err
    assert "Traceback" not in err


def test_a_scenario_file_keeps_its_keys(capsys, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("model: qwen3-30b-a3b\nhardware: {gpu: h100}\n"
                    "finetune: {method: lora, lora_targets: [mlp]}\n")
    code, _, err = run(capsys, str(path))
    assert code == 2
    assert "finetune.lora_targets [mlp] adapt no weight" in err
    assert "To fix: set lora_targets: [attention], or lora_targets: [all-linear]" in err


def test_a_scenario_without_model_gets_an_example(capsys, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("hardware: {gpu: h100}\n")
    code, _, err = run(capsys, str(path))
    assert code == 2
    assert err == ("error: job.yaml: model is required. To fix: add model: llama-3.1-8b (a "
                   "catalog name: 'infraplan catalog models') or model: path/to/config.json\n")


def test_an_empty_gpu_is_said_empty(capsys):
    code, _, err = run(capsys, "--model", "llama-3.1-8b", "--gpu", "")
    assert code == 2
    assert err.startswith("error: --gpu is empty") and "did you mean" not in err
    assert "To fix: use --gpu h100" in err


@pytest.mark.parametrize("extra", [["--finetune", "lora"], []])
def test_empty_lora_targets_is_an_error_naming_the_targets(capsys, extra):
    code, out, err = run(capsys, "--model", "llama-3.1-8b", "--gpu", "h100",
                         "--lora-targets", "", *extra)
    assert code == 2 and out == ""
    assert err.startswith("error: --lora-targets '' has an empty target; valid targets: "
                          "attention, mlp, all-linear")


def test_qlora_refuses_fp8_and_lora_keeps_it(capsys):
    base = ["--model", "llama-3.1-8b", "--gpu", "h100", "--precision", "fp8"]
    code, _, err = run(capsys, *base, "--finetune", "qlora")
    assert code == 2
    assert err.startswith("error: --precision fp8 does not apply to --finetune qlora")
    assert "To fix: use --precision bf16" in err
    code, _, _ = run(capsys, *base, "--finetune", "lora")
    assert code == 0


def test_json_has_no_lora_options_without_lora(capsys):
    _, out, _ = run(capsys, "--model", "llama-3.1-8b", "--gpu", "h100", "--json")
    options = json.loads(out)["options"]
    assert options["lora_rank"] is None and options["lora_targets"] is None
    _, out, _ = run(capsys, "--model", "llama-3.1-8b", "--gpu", "h100", "--json",
                    "--finetune", "lora", "--lora-rank", "8")
    options = json.loads(out)["options"]
    assert options["lora_rank"] == 8 and options["lora_targets"] == ["all-linear"]
