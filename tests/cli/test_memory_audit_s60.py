"""`infraplan memory` as a first-time user meets it (audit s60): the fixes it offers, the
flags it names in its errors, one unit down its breakdown, and the fp8 weight cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infraplan.cli import main
from infraplan.units import GiB

ROOT = Path(__file__).resolve().parents[2]
QLORA = str(ROOT / "examples" / "memory-llama-3.1-8b-qlora.yaml")
FSDP = str(ROOT / "examples" / "memory-llama-3.1-70b-fsdp-sft.yaml")
MIXTRAL = str(ROOT / "examples" / "memory-mixtral-8x7b-pretrain.yaml")


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _fixes(out: str) -> list[str]:
    return [line.split(" total ")[0].strip() for line in out.splitlines()
            if line.startswith("  --")]


def test_fused_kernels_and_the_milder_recompute_are_offered(capsys):
    """Eager attention at 10,240 tokens read 'No single change or pair of changes makes this
    plan fit', though --kernels fused alone fits (13.48 of 22.49 GiB)."""
    code, out, _ = run(capsys, "memory", QLORA, "--kernels", "eager", "--seq-len", "10240")
    assert code == 1 and "Single changes that fit:" in out
    assert _fixes(out)[0] == "--kernels fused"
    code, out, _ = run(capsys, "memory", QLORA, "--kernels", "eager", "--seq-len", "16384",
                       "--recompute", "none")
    assert "No single change fits; pairs of changes that do:" in out
    assert "--kernels fused --recompute full" in _fixes(out)


def test_a_partial_full_recompute_is_offered_the_whole_of_it(capsys):
    """--recompute-fraction 0.5 on the 70B SFT example (132.60 GiB) found no fix, though the
    example itself (fraction 1) fits at 49.91 GiB."""
    code, out, _ = run(capsys, "memory", FSDP, "--recompute-fraction", "0.5")
    assert code == 1 and "--recompute-fraction 1" in _fixes(out)
    assert "--recompute-fraction 1     total 49.91 GiB (63%)" in out


def test_sequence_parallel_can_be_switched_off_and_its_error_says_how(capsys):
    code, out, err = run(capsys, "memory", MIXTRAL, "--tp", "1", "--pp", "8")
    assert code == 2 and "parallelism.sequence_parallel splits activations" in err
    assert "set sequence_parallel: false, or tp above 1" in err
    code, out, _ = run(capsys, "memory", MIXTRAL, "--tp", "1", "--pp", "8",
                       "--no-sequence-parallel")
    assert code in (0, 1) and "plan: TP=1 PP=8" in out and " SP" not in out.splitlines()[1]


@pytest.mark.parametrize("flags, message", [
    (["--gpu", "foo"], "error: --gpu unknown accelerator 'foo'"),
    (["--model", "foo"], "error: --model unknown model 'foo'"),
    (["--finetune", "lora", "--lora-targets", "foo"], "error: --lora-targets unknown LoRA "
     "target 'foo'"),
])
def test_a_flags_bad_value_names_the_flag_not_the_files_key(capsys, flags, message):
    """'memory-llama-3.1-70b-fsdp-sft.yaml: hardware.gpu unknown accelerator 'foo'' blamed
    the file, which holds another value."""
    code, _, err = run(capsys, "memory", FSDP, *flags)
    assert code == 2 and err.startswith(message) and "fsdp-sft.yaml" not in err
    assert "To fix:" in err


def test_a_tp_the_model_refuses_is_named_before_the_gpu_count(capsys):
    """--tp 3 on 32 GPUs said 'use a GPU count that is a multiple of 3'; 33 GPUs then met
    'tp=3 does not divide the 64 attention heads'."""
    code, _, err = run(capsys, "memory", FSDP, "--tp", "3")
    assert code == 2 and err.startswith("error: tp=3 does not divide the 64 attention heads")


def test_lora_targets_may_be_one_comma_separated_string(tmp_path, capsys):
    """'lora_targets: all-linear' read 'must be a valid tuple'."""
    path = tmp_path / "one.yaml"
    path.write_text("model: llama-3.1-8b\nhardware: {gpu: l4}\n"
                    "finetune: {method: qlora, lora_targets: 'q_proj, v_proj'}\n")
    code, out, _ = run(capsys, "memory", str(path), "--json")
    assert json.loads(out)["options"]["lora_targets"] == ["q_proj", "v_proj"]


def test_the_breakdown_is_in_grouped_gib_and_names_the_chips_runtime(capsys):
    """A 100M-token sequence read 'seq 99999999', 'fragmentation 2453.42 GiB' and 'total
    50.32 TiB' while -q read '51,530.03 GiB'; the QLoRA gradients read '320.00 MiB' among
    GiB; a TPU's overhead read 'cuda context'."""
    _, out, _ = run(capsys, "memory", QLORA, "--seq-len", "99999999")
    assert "seq 99,999,999," in out and "allocator fragmentation 2,453.42 GiB" in out
    assert "  total       51,530.03 GiB  of 22.49 GiB" in out
    _, out, _ = run(capsys, "memory", QLORA)
    assert "  gradients        0.31 GiB" in out and "MiB" not in out
    assert "(CUDA context 0.39," in out
    _, out, _ = run(capsys, "memory", "--model", "llama-3.1-8b", "--gpu", "tpu-v5p")
    assert "(runtime context 0.39," in out and "CUDA" not in out


def test_the_fp8_weight_cache_covers_the_decoder_gemms_only(capsys):
    """Transformer Engine caches fp8 copies of its own GEMMs' weights; the embedding is a
    lookup and Megatron-Core's LM head a plain ColumnParallelLinear. The cache was charged
    on all 8.03B parameters (29.92 GiB of weights)."""
    from infraplan.models import load_model, param_counts

    counts = param_counts(load_model("llama-3.1-8b"))
    layers_gemm = counts.total - counts.embedding - counts.lm_head - sum(
        p.norms for p in counts.layers) - counts.final_norm
    _, out, _ = run(capsys, "memory", "--model", "llama-3.1-8b", "--gpu", "h100",
                    "--precision", "fp8", "--json")
    weights = json.loads(out)["weights_bytes"]
    assert weights == pytest.approx(2 * counts.total + 2 * layers_gemm, abs=1)
    assert weights / GiB == pytest.approx(27.96, abs=0.01)


def test_the_report_of_a_memory_scenario_states_the_job(tmp_path, capsys):
    """The HTML left out the sequence length, precision, optimizer and fine-tune method that
    the terminal's 'job:' line gives."""
    _, out, _ = run(capsys, "memory", QLORA)
    job = next(line for line in out.splitlines() if line.startswith("job: "))[5:]
    assert job == "seq 4,096, 16 micro-batch(es) per step, bf16, adamw, qlora rank 64, fused " \
        "kernels"
    page = tmp_path / "r.html"
    run(capsys, "report", QLORA, "-o", str(page))
    assert job in page.read_text()
