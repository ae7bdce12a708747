"""The analytical model against real PyTorch decoders on the CPU (random weights, small
dims; GPT-2, Llama and Mixtral-style MoE): parameters, gradient and AdamW state bytes,
training FLOPs, saved activations (no, selective and full recompute; LoRA)."""

from __future__ import annotations

import pytest

from infraplan.models import param_counts, training_flops_per_sequence
from infraplan.models.families import arch_from_config
from infraplan.physics.memory.training import MemoryOptions
from infraplan.training.memory import training_memory
from infraplan.training.plan import ParallelPlan
from tests.conftest import require

torch = require("torch")
from tests.torch_models import (Decoder, add_lora, peak_saved_activation_bytes,  # noqa: E402
                                saved_activation_bytes)

GPT2 = dict(model_type="gpt2", n_embd=64, n_layer=3, n_head=4, n_inner=256, vocab_size=97,
            n_positions=64, resid_pdrop=0.0, attn_pdrop=0.0)
LLAMA = dict(model_type="llama", hidden_size=64, intermediate_size=160, num_hidden_layers=3,
             num_attention_heads=4, num_key_value_heads=2, vocab_size=97,
             max_position_embeddings=64)
MIXTRAL = dict(LLAMA, model_type="mixtral", num_local_experts=4, num_experts_per_tok=2)
# DeepSeek-V3 attention (MLA, v head dim != qk head dim) on dense layers
MLA = dict(LLAMA, model_type="deepseek_v3", num_key_value_heads=4, q_lora_rank=24,
           kv_lora_rank=16, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=12,
           n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
           first_k_dense_replace=3)
BATCH, SEQ = 2, 32
CONFIGS = {"gpt2": GPT2, "llama": LLAMA, "mixtral": MIXTRAL, "mla": MLA}


def arch_of(cfg, dropout=0.0):
    cfg = dict(cfg)
    if cfg["model_type"] == "gpt2":
        cfg.update(resid_pdrop=dropout, attn_pdrop=dropout)
    else:
        cfg.update(attention_dropout=dropout)
    return arch_from_config(cfg, name=cfg["model_type"], origin="test")


def build(cfg, dtype=torch.float32, **kwargs):
    torch.manual_seed(0)
    return Decoder(cfg, **kwargs).to(dtype).train()


def batch(cfg, seq=SEQ):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, cfg["vocab_size"], (BATCH, seq), generator=g)
    return ids, torch.roll(ids, -1, dims=1)


@pytest.mark.parametrize("cfg", CONFIGS.values(), ids=CONFIGS)
@pytest.mark.parametrize("fused", [False, True])
def test_parameter_count_is_exact(cfg, fused):
    model = build(cfg, fused=fused)
    assert sum(p.numel() for p in model.parameters()) == param_counts(arch_of(cfg)).total


@pytest.mark.parametrize("cfg", CONFIGS.values(), ids=CONFIGS)
@pytest.mark.parametrize("dtype, precision, optimizer", [
    ("float32", "fp32", "adamw"), ("bfloat16", "bf16", "adamw-bf16")])
def test_gradient_and_adamw_state_bytes_after_one_step(cfg, dtype, precision, optimizer):
    """Plain fp32 AdamW: 4 B of gradient and 8 B of m + v per parameter; pure bf16: 2 + 4."""
    model = build(cfg, getattr(torch, dtype))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(*batch(cfg)).backward()
    opt.step()
    grads = sum(p.grad.nbytes for p in model.parameters())
    moments = sum(s[k].nbytes for s in opt.state.values() for k in ("exp_avg", "exp_avg_sq"))
    report = training_memory(arch_of(cfg), "cpu-server", ParallelPlan(),
                             MemoryOptions(seq_len=SEQ, precision=precision,
                                           optimizer=optimizer))
    assert report.gradients_bytes == grads
    assert report.optimizer_bytes == moments
    assert report.weights_bytes == sum(p.nbytes for p in model.parameters())


@pytest.mark.parametrize("cfg", CONFIGS.values(), ids=CONFIGS)
@pytest.mark.parametrize("recompute", ["none", "full"])
def test_training_step_flops_within_2_percent(cfg, recompute):
    from torch.utils.flop_counter import FlopCounterMode

    model = build(cfg, attention="eager", recompute=recompute)
    counter = FlopCounterMode(display=False)
    with counter:
        model(*batch(cfg)).backward()
    # explicit matmuls score every key (masked afterwards): causal=False
    flops = training_flops_per_sequence(arch_of(cfg), SEQ, recompute=recompute, causal=False)
    predicted = BATCH * flops.hardware
    assert predicted == pytest.approx(counter.get_total_flops(), rel=0.02)


CASES = [  # (config, attention, fused kernels, dropout, infraplan kernel profile)
    ("gpt2-eager-dropout", GPT2, "eager", False, 0.1, "eager"),
    ("gpt2-sdpa", GPT2, "sdpa", False, 0.0, "fused"),
    ("llama-eager", LLAMA, "eager", False, 0.0, "eager"),
    ("llama-fused", LLAMA, "sdpa", True, 0.0, "fused"),
    ("mixtral-eager", MIXTRAL, "eager", False, 0.0, "eager"),
    ("mixtral-fused", MIXTRAL, "sdpa", True, 0.0, "fused"),
    ("mla-eager", MLA, "eager", False, 0.0, "eager"),  # CPU SDPA has no d_v != d_qk kernel
]


@pytest.mark.parametrize("label, cfg, attention, fused, dropout, kernels", CASES,
                         ids=[c[0] for c in CASES])
@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_saved_activation_bytes_match(label, cfg, attention, fused, dropout,
                                                  kernels, recompute, dtype):
    model = build(cfg, getattr(torch, dtype), attention=attention, fused=fused,
                  dropout=dropout, recompute=recompute, fused_loss=kernels == "fused")
    measured, _ = saved_activation_bytes(model, *batch(cfg))
    report = training_memory(
        arch_of(cfg, dropout), "cpu-server", ParallelPlan(micro_batch=BATCH,
                                                          recompute=recompute),
        MemoryOptions(seq_len=SEQ, precision="fp32" if dtype == "float32" else "bf16",
                      kernels=kernels))
    # The issue sets 5%; the model is within 0.8% on every case, so hold it to 2%.
    assert report.activations_bytes == pytest.approx(measured, rel=0.02)


@pytest.mark.parametrize("targets", [("attention",), ("all-linear",), ("q_proj", "v_proj")])
@pytest.mark.parametrize("recompute", ["none", "full"])
def test_lora_saved_activation_bytes_match(targets, recompute):
    """Frozen base GEMMs keep no input for a weight gradient; each adapter keeps its input
    and its rank-r intermediate."""
    model = build(LLAMA, attention="sdpa", fused=True, recompute=recompute, fused_loss=True)
    add_lora(model, targets, rank=8)
    measured, _ = saved_activation_bytes(model, *batch(LLAMA))
    report = training_memory(arch_of(LLAMA), "cpu-server",
                             ParallelPlan(micro_batch=BATCH, recompute=recompute),
                             MemoryOptions(seq_len=SEQ, precision="fp32", finetune="lora",
                                           lora_rank=8, lora_targets=targets))
    assert report.activations_bytes == pytest.approx(measured, rel=0.02)



# Narrow layers, a small vocabulary and longer sequences: the eager attention core's s x s
# probabilities, which selective recompute rebuilds, outgrow the MLP, LM head and loss
# tensors freed before it. Last: the widths (in units of h) of the inputs the toy's eager
# core copies when it re-runs, besides its s x s bool causal mask. Its 4-D matmuls make
# contiguous copies of q (RoPE'd in [b, s, a, d]) and, for GPT-2's split QKV, of k and v,
# beside the checkpointed originals; Megatron's core (baddbmm over strided [s, b*a, d]
# views, an in-kernel causal mask) keeps neither, and the model follows Megatron.
LONG_LLAMA = dict(LLAMA, hidden_size=32, intermediate_size=32, vocab_size=17,
                  max_position_embeddings=128)
LONG_GPT2 = dict(GPT2, n_embd=32, n_inner=32, vocab_size=17, n_positions=128)
PEAK_CASES = [(label, cfg, attention, fused, dropout, kernels, "full", SEQ, 0)
              for label, cfg, attention, fused, dropout, kernels in CASES] + [
    ("llama-eager-long", LONG_LLAMA, "eager", False, 0.0, "eager", "selective", 128, 1),
    ("gpt2-eager-long", LONG_GPT2, "eager", False, 0.1, "eager", "selective", 128, 3)]


@pytest.mark.parametrize(
    "label, cfg, attention, fused, dropout, kernels, recompute, seq, copied_h", PEAK_CASES,
    ids=[f"{c[0]}-{c[6]}" for c in PEAK_CASES])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_recompute_peak_holds_one_rebuilt_layer(label, cfg, attention, fused, dropout,
                                                kernels, recompute, seq, copied_h, dtype):
    """Recompute rebuilds one layer (full) or one attention core (selective) inside that
    layer's backward: the step's peak of saved tensors is the saved activations plus what
    the rebuild needs beyond the tensors freed before it (the LM head's and the loss's;
    for the core also its layer's MLP and out-projection). Where that rebuild is the
    larger transient, the recomputed-layer and loss-logit parts together are it."""
    model = build(cfg, getattr(torch, dtype), attention=attention, fused=fused,
                  dropout=dropout, recompute=recompute, fused_loss=kernels == "fused")
    measured = peak_saved_activation_bytes(model, *batch(cfg, seq))
    arch = arch_of(cfg, dropout)
    report = training_memory(
        arch, "cpu-server", ParallelPlan(micro_batch=BATCH, recompute=recompute),
        MemoryOptions(seq_len=seq, precision="fp32" if dtype == "float32" else "bf16",
                      kernels=kernels))
    parts = report.overhead_parts
    assert parts["recomputed_layer"] > 0
    predicted = (report.activations_bytes + parts["recomputed_layer"]
                 + parts["loss_logits_transient"])
    toy_copies = (seq * seq + BATCH * seq * copied_h * arch.hidden_size
                  * getattr(torch, dtype).itemsize) if copied_h else 0
    assert predicted + toy_copies == pytest.approx(measured, rel=0.02)
    # the saved activations alone fall short by more than the tolerance
    assert report.activations_bytes < 0.95 * measured
