"""The memory model against published accounting: ZeRO, Megatron-LM, Korthikanti et al."""

from __future__ import annotations

import pytest

from infraplan.errors import InputError
from infraplan.models import load_model, param_counts
from infraplan.physics.memory import activations as act
from infraplan.physics.memory.pipeline import inflight_layer_units
from infraplan.physics.memory.states import NF4_BYTES_PER_PARAM, stage_layer_indices
from infraplan.physics.memory.training import MemoryOptions
from infraplan.training.memory import training_memory
from infraplan.training.plan import ParallelPlan

GB = 1e9


def model_states(report) -> float:
    return report.weights_bytes + report.gradients_bytes + report.optimizer_bytes


@pytest.mark.parametrize("zero, published_gb", [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_zero_paper_7_5b_on_64_gpus(zero, published_gb):
    """Rajbhandari et al. 2020, Fig. 1 / Sec. 5: Psi = 7.5B, N_d = 64, K = 12."""
    report = training_memory("megatron-gpt-7.5b", "a100-sxm4-80gb",
                             ParallelPlan(dp=64, zero=zero), MemoryOptions(seq_len=2048))
    assert model_states(report) / GB == pytest.approx(published_gb, rel=0.02)


def test_megatron_distributed_optimizer_is_6_plus_12_over_d_bytes_per_param():
    """Megatron-LM docs (distributed optimizer): bf16 params + fp32 main grads are kept
    whole, the 12 bytes of fp32 params and Adam moments are sharded over DP."""
    d = 16
    report = training_memory("llama-2-7b", "h100", ParallelPlan(dp=d, zero=1),
                             MemoryOptions(seq_len=4096, grad_dtype="fp32"))
    params = param_counts(load_model("llama-2-7b")).total
    assert model_states(report) == pytest.approx(params * (6 + 12 / d), rel=1e-12)


def test_korthikanti_gpt_layer_is_34_plus_5as_over_h():
    """Korthikanti et al. 2022, activation memory per layer: s b h (34 + 5 a s / h) bytes
    in 16-bit; with tensor parallelism t and no sequence parallelism s b h (10 + 24/t +
    5 a s / (h t)); with sequence parallelism everything is divided by t. The generalised
    model adds the norms' fp32 statistics (16 bytes per token per layer)."""
    arch = load_model("gpt3-175b")  # GPT-2 family: dropout 0.1, LayerNorm, 4h GeLU
    h, a, s, t = arch.hidden_size, arch.attention.num_heads, 2048, 8
    terms = act.layer_terms(arch, kernels="eager", widths=act.Widths(2, 2))
    rep = sum(x.bytes_per_token for x in terms if x.scaling == "replicated")
    ten = sum(x.bytes_per_token for x in terms if x.scaling == "tensor")
    key = sum(x.bytes_per_token for x in terms if x.scaling == "per_key")
    stats = 2 * 2 * act.FP32_BYTES
    assert rep + ten + key * s == h * (34 + 5 * a * s / h) + stats
    assert rep + ten / t + key * s / t == h * (10 + 24 / t + 5 * a * s / (h * t)) + stats
    assert (rep + ten + key * s) / t == pytest.approx((h * (34 + 5 * a * s / h) + stats) / t)


@pytest.mark.parametrize("p, v", [(8, 2), (12, 3), (16, 4)])
def test_first_stage_holds_the_interleaving_factor(p, v):
    """Korthikanti et al. 2022, pipeline parallelism: L (1 + (p - 1) / (p v)) layers' activations
    under the interleaved schedule; L (p micro-batches of L/p layers) under plain 1F1B."""
    L = p * v * 3
    units = inflight_layer_units(0, p, v, num_microbatches=1000, layers_on_rank=L / p)
    assert units == pytest.approx(L * (1 + (p - 1) / (p * v)))
    assert inflight_layer_units(0, p, 1, num_microbatches=1000, layers_on_rank=L / p) == L
    # fewer micro-batches than stages: only those are in flight
    assert inflight_layer_units(0, p, 1, num_microbatches=2, layers_on_rank=L / p) == 2 * L / p
    # all-to-all overlap: one more warm-up chunk (schedules.py adds 1 to the warm-up count)
    extra = inflight_layer_units(0, p, v, num_microbatches=1000, layers_on_rank=L / p, extra=1)
    assert extra - units == pytest.approx(L / (p * v))


def test_without_a_pipeline_the_all_to_all_overlap_keeps_two_micro_batches_alive():
    assert inflight_layer_units(0, 1, 1, num_microbatches=8, layers_on_rank=32) == 32
    assert inflight_layer_units(0, 1, 1, num_microbatches=8, layers_on_rank=32, extra=1) == 64
    assert inflight_layer_units(0, 1, 1, num_microbatches=1, layers_on_rank=32, extra=1) == 32


def test_pipeline_ranks_hold_every_layer_once():
    ranks = stage_layer_indices(126, 16, 1)
    assert sorted(i for r in ranks for i in r) == list(range(126))
    assert max(map(len, ranks)) - min(map(len, ranks)) == 1
    interleaved = stage_layer_indices(96, 8, 12)
    assert interleaved[0][:2] == [0, 8] and len(interleaved[0]) == 12


@pytest.mark.parametrize("kernels, logit_bytes", [("fused", 2), ("eager", 4)])
def test_full_recompute_keeps_only_layer_inputs(kernels, logit_bytes):
    """Korthikanti et al. 2022: full recompute keeps 2 s b h per layer (16-bit)."""
    arch = load_model("llama-2-7b")
    options = MemoryOptions(seq_len=4096, kernels=kernels)
    report = training_memory(arch, "h100", ParallelPlan(recompute="full"), options)
    edges = report.activations_bytes - 2 * 4096 * arch.hidden_size * arch.num_layers
    # what remains is outside the layers: token ids, final norm, LM-head input, the logits
    # the loss keeps (16-bit for a fused cross-entropy, fp32 for the eager one), targets
    assert edges == 4096 * (8 + 2 * 4096 + 4 + 2 * 4096 + logit_bytes * arch.vocab_size + 8)



def test_full_recompute_holds_one_rebuilt_layer_beside_the_saved_inputs():
    """Chen et al. 2016 (Sec. 4): checkpointing keeps the segment inputs plus one
    segment's internals while its backward runs. Llama-2-7B, fused kernels, 16-bit: a
    layer saves, per token, its input, norm inputs, QKV and MLP GEMM inputs (2h each,
    replicated over TP), two fp32 rstd (4 each), q 2h, k and v 4h, attention output 2h,
    the log-sum-exp 4 a, gate|up 4f and the down projection's input 2f (sharded by t).
    Rebuilding it holds all but the input, which is already saved."""
    arch = load_model("llama-2-7b")
    h, f, a, s = arch.hidden_size, arch.mlp.intermediate_size, 32, 4096
    replicated = 6 * h + 2 * 4  # without the layer input
    tensor = 2 * h + 4 * h + 2 * h + 4 * a + 6 * f
    options = MemoryOptions(seq_len=s)
    # the first of 4 stages holds 4 micro-batches of its 8 layers' inputs, then rebuilds
    # one layer; sequence parallelism shards the replicated tensors by t as well
    first = training_memory(arch, "h100", ParallelPlan(tp=2, pp=4, dp=1, recompute="full",
                                                       sequence_parallel=True), options)
    assert first.pipeline_rank == 0
    assert first.overhead_parts["recomputed_layer"] == s * (replicated + tensor) / 2
    # and, of each micro-batch, the token ids (8 bytes, replicated)
    assert first.activations_bytes == s * 4 * (8 * 2 * h + 8) / 2
    no_sp = training_memory(arch, "h100", ParallelPlan(tp=2, pp=4, dp=1,
                                                       recompute="full"), options)
    assert no_sp.overhead_parts["recomputed_layer"] == s * (replicated + tensor / 2)
    # one stage: the LM head and the loss run, and free their tensors, before the last
    # layer is rebuilt, so only the excess over them adds (fused loss: 16-bit logits)
    single = training_memory(arch, "h100", ParallelPlan(tp=2, recompute="full",
                                                        sequence_parallel=True), options)
    head = (2 * h + 4 + 2 * h + 8) / 2 + 2 * arch.vocab_size / 2  # norm, LM head, targets
    assert single.overhead_parts["recomputed_layer"] == pytest.approx(
        s * ((replicated + tensor) / 2 - head))

def test_qlora_keeps_base_weights_in_nf4_and_trains_only_adapters():
    arch = load_model("llama-3.1-8b")
    counts = param_counts(arch)
    options = MemoryOptions(seq_len=2048, finetune="qlora", lora_rank=16,
                            lora_targets=("q_proj", "v_proj"))
    report = training_memory(arch, "l4", ParallelPlan(recompute="full"), options)
    at, h = arch.attention, arch.hidden_size
    lora = arch.num_layers * 16 * ((h + at.q_width) + (h + at.num_kv_heads * at.head_dim))
    assert report.trainable_params_per_gpu == lora
    assert report.gradients_bytes == lora * 2
    assert report.optimizer_bytes == lora * 12
    layer_gemms = counts.total - counts.embedding - counts.lm_head - counts.final_norm - sum(
        layer.norms for layer in counts.layers)
    base = layer_gemms * NF4_BYTES_PER_PARAM + (counts.total - layer_gemms) * 2
    assert report.weights_bytes == pytest.approx(base + lora * 2)


def test_lora_on_routed_experts_adapts_nothing_and_says_so():
    # transformers 5 stores routed experts fused (MixtralExperts.gate_up_proj, a 3-D
    # parameter): LoRA's target modules reach attention only, and MLP targets nothing
    arch = load_model("mixtral-8x7b")
    plan = ParallelPlan(tp=8, recompute="full")
    with pytest.raises(InputError, match=r"finetune.lora_targets \[mlp\] adapt no weight"):
        training_memory(arch, "h100", plan, MemoryOptions(
            seq_len=1024, finetune="lora", lora_targets=("mlp",)))
    report = training_memory(arch, "h100", plan, MemoryOptions(
        seq_len=1024, finetune="lora", lora_rank=8, lora_targets=("all-linear",)))
    at, h = arch.attention, arch.hidden_size
    kv = at.num_kv_heads * at.head_dim
    attention = 8 * ((h + at.q_width) + 2 * (h + kv) + (at.out_width + h))
    assert report.trainable_params_per_gpu == arch.num_layers * attention / 8
    assert any("adapt nothing: it has no dense or shared-expert MLP" in n
               for n in report.notes)


def test_lora_frozen_gemms_do_not_keep_their_inputs():
    arch = load_model("llama-2-7b")
    plan = ParallelPlan()
    full = training_memory(arch, "h100", plan, MemoryOptions(seq_len=1024))
    lora_attention = training_memory(arch, "h100", plan, MemoryOptions(
        seq_len=1024, finetune="lora", lora_targets=("attention",)))
    h, f, L = arch.hidden_size, arch.mlp.intermediate_size, arch.num_layers
    # frozen MLP: its input (2h) and the down-projection input (2f) are not saved; the
    # frozen LM head's input is not saved either; each of the 4 attention adapters keeps
    # its rank-16 intermediate (2 bytes each)
    saved_less = 1024 * (L * 2 * (h + f) + 2 * h - L * 4 * 16 * 2)
    assert full.activations_bytes - lora_attention.activations_bytes == saved_less


def test_fp8_training_saves_gemm_inputs_in_one_byte_and_caches_fp8_weights():
    arch = load_model("llama-2-7b")
    plan = ParallelPlan()
    bf16 = training_memory(arch, "h100", plan, MemoryOptions(seq_len=1024))
    fp8 = training_memory(arch, "h100", plan, MemoryOptions(seq_len=1024, precision="fp8"))
    assert fp8.activations_bytes < bf16.activations_bytes
    assert fp8.weights_bytes > bf16.weights_bytes
    assert fp8.optimizer_bytes == bf16.optimizer_bytes


def test_expert_parallel_shards_experts_and_zero_shards_over_expert_data_parallel():
    arch = load_model("mixtral-8x7b")
    options = MemoryOptions(seq_len=4096)
    no_ep = training_memory(arch, "h100", ParallelPlan(dp=8, zero=1), options)
    ep8 = training_memory(arch, "h100", ParallelPlan(dp=8, ep=8, zero=1), options)
    counts = param_counts(arch)
    assert no_ep.params_per_gpu == counts.total
    assert ep8.params_per_gpu == counts.total - counts.routed_experts * 7 / 8
    # experts' optimizer states: sharded over dp*cp/ep = 1 rank, so the same bytes per GPU
    expert_opt = counts.routed_experts / 8 * 12
    dense_opt = (counts.total - counts.routed_experts) * 12 / 8
    assert ep8.optimizer_bytes == pytest.approx(expert_opt + dense_opt)


def test_context_parallel_divides_activations_and_shards_zero_with_dp():
    arch = load_model("llama-3.1-8b")
    options = MemoryOptions(seq_len=32768)
    cp1 = training_memory(arch, "h100", ParallelPlan(dp=4, zero=1), options)
    cp4 = training_memory(arch, "h100", ParallelPlan(dp=1, cp=4, zero=1), options)
    assert cp4.optimizer_bytes == pytest.approx(cp1.optimizer_bytes)
    assert cp4.activations_bytes == pytest.approx(cp1.activations_bytes / 4)
