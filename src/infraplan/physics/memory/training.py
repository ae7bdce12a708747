"""Training memory per accelerator, vectorised over parallel plans.

`training_memory_arrays` takes NumPy arrays of plan knobs (tp, pp, dp, cp, ep, zero, vp,
sequence parallel, micro-batch, micro-batches per step, recompute) that broadcast together
and returns arrays of bytes per accelerator. For each plan the worst pipeline rank counts:
the first one (embedding, most micro-batches in flight), the last one (LM head, loss
logits), or the one holding the most parameters (MoE layers bunched mid-model).

Model states (ZeRO paper, Sec. 5): stage 1 shards optimizer states, 2 also gradients, 3 also
weights, over the data-parallel group (with context parallelism: DP x CP, as Megatron's
distributed optimizer and torchtitan's FSDP mesh do); routed experts over the
expert-data-parallel group DP x CP / EP. Tensor parallelism divides the layer matrices and
the vocabulary (Shoeybi et al. 2019); norms and routers are replicated. Expert tensor
parallelism equals TP.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from infraplan.catalog import load_catalog
from infraplan.models.arch import ModelArch
from infraplan.physics.memory import activations as act
from infraplan.physics.memory.pipeline import (inflight_layer_units, inflight_microbatches,
                                               pipeline_groups)
from infraplan.physics.memory.states import (FP8_WEIGHT_CACHE_BYTES_PER_PARAM,
                                             NF4_BYTES_PER_PARAM, expert_dp,
                                             lora_params_per_layer,
                                             lora_shapes, lora_targets, stage_params,
                                             state_bytes)

RECOMPUTE = ("none", "selective", "full")


def recompute_code(mode: str, fraction: float = 1.0) -> float:
    """Numeric recompute knob: 0 none, 1 selective, 1 + f for full recompute of a fraction f
    of each stage's layers (the rest selective; Megatron-LM --recompute-method block
    --recompute-num-layers), 2 for full recompute of every layer."""
    index = RECOMPUTE.index(mode)
    return 1.0 + fraction if index == 2 else float(index)


def recompute_weights(code):
    """Share of layers under (none, selective, full) recompute for numeric codes."""
    code = np.asarray(code, dtype=float)
    full = np.clip(code - 1.0, 0.0, 1.0)
    none = (code < 1.0).astype(float)
    return none, 1.0 - none - full, full
FINETUNE = ("full", "lora", "qlora")


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryOptions:
    """Knobs shared by every plan of one evaluation."""

    seq_len: int
    precision: str = "bf16"  # bf16 | fp16 | fp8 | fp32
    grad_dtype: str | None = None  # None: the training dtype (ZeRO accounting); "fp32": Megatron
    optimizer: str = "adamw"
    kernels: str = "fused"  # fused (flash attention, fused norms/SwiGLU) | eager
    finetune: str = "full"  # full | lora | qlora
    lora_rank: int = 16
    lora_targets: tuple[str, ...] = ("all-linear",)


def overhead_constant(name: str) -> float:
    return load_catalog().memory_overheads.get(name).value


@dataclass(frozen=True)
class _LayerBytes:
    """Per-token bytes of one layer kind by scaling class, for each recompute mode."""

    replicated: np.ndarray  # shape (3,): none, selective, full
    tensor: np.ndarray
    per_key: np.ndarray

    @classmethod
    def of(cls, by_mode: list[np.ndarray]) -> _LayerBytes:
        """From one (replicated, tensor, per_key) row per recompute mode."""
        return cls(*np.stack(by_mode).T)


def _trainable_gemm(term: act.Term, targets: frozenset[str] | None) -> bool:
    """Whether a GEMM-input term is kept: always in full training; under LoRA only for the
    adapted GEMMs (frozen routed experts and LM head keep nothing for a weight gradient)."""
    if term.role != "gemm_input" or targets is None:
        return True
    wanted = {"qkv": {"q", "k", "v"}, "q": {"q"}, "k": {"k", "v"}, "o": {"o"},
              "up": {"up", "gate"}, "down": {"down"}, "expert": set(),
              "lm_head": set()}[term.gemm]
    return bool(wanted & targets)


def _sum_by_scaling(terms, targets, drop_core: bool) -> np.ndarray:
    out = {"replicated": 0.0, "tensor": 0.0, "per_key": 0.0}
    for t in terms:
        kept = t.role != ("core" if drop_core else "checkpoint_input")
        if kept and _trainable_gemm(t, targets):
            out[t.scaling] += t.bytes_per_token
    return np.array([out["replicated"], out["tensor"], out["per_key"]])


@lru_cache(maxsize=256)
def _layer_bytes(arch: ModelArch, options: MemoryOptions, moe_layer: bool
                 ) -> tuple[_LayerBytes, _LayerBytes]:
    """(what one layer saves for its backward, what its backward rebuilds while it runs),
    per token, by recompute mode.

    Recomputation rebuilds a checkpointed segment inside that segment's backward, one
    segment at a time: the peak is the saved segment inputs plus one segment's internals
    (Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost", Sec. 4: O(n/k)
    + O(k)). Under full recompute the segment is a whole layer, re-run from its saved
    input as its backward starts: all it would save without recompute, less that input
    (already held). Under selective recompute it is the layer's attention core, re-run
    after the layer's MLP and out-projection have freed theirs, so less those. Checked
    against the tensors PyTorch autograd holds over a whole step
    (tests/physics/test_against_pytorch.py).
    """
    widths = _widths(options)
    terms = act.layer_terms(arch, kernels=options.kernels, moe_layer=moe_layer, widths=widths)
    targets = _targets(options)
    if targets is not None:
        # Each adapter's B saves A's r-wide output for its weight gradient.
        adapted = len(lora_shapes(arch, targets, moe_layer))
        terms.append(act.Term("lora_intermediates", adapted * options.lora_rank * widths.act,
                              "replicated"))
    full_input = act.layer_input_bytes(arch, widths)
    none = _sum_by_scaling(terms, targets, drop_core=False)
    selective = _sum_by_scaling(terms, targets, drop_core=True)
    full = np.array([full_input, 0.0, 0.0])
    core = _sum_by_scaling([t for t in terms if t.role == "core"], targets, drop_core=False)
    freed = _sum_by_scaling(act.freed_before_core(arch, kernels=options.kernels,
                                                  moe_layer=moe_layer, widths=widths),
                            targets, drop_core=False)
    return (_LayerBytes.of([none, selective, full]),
            _LayerBytes.of([np.zeros(3), core - freed, none - full]))


def _widths(options: MemoryOptions) -> act.Widths:
    a = 4.0 if options.precision == "fp32" else 2.0
    # Transformer Engine saves fp8 copies of GEMM inputs for the weight gradient.
    return act.Widths(act=a, gemm_in=1.0 if options.precision == "fp8" else a)


def _targets(options: MemoryOptions) -> frozenset[str] | None:
    return None if options.finetune == "full" else lora_targets(options.lora_targets)


@lru_cache(maxsize=256)
def _edge_bytes(arch: ModelArch, options: MemoryOptions) -> tuple[np.ndarray, np.ndarray]:
    """(replicated, tensor) bytes per token of the first-stage and last-stage extras."""
    widths, targets = _widths(options), _targets(options)
    first = _sum_by_scaling(act.embedding_terms(arch, widths), targets, False)
    last = _sum_by_scaling(act.output_terms(arch, widths, options.kernels), targets, False)
    return first, last


def _candidate_ranks(pp: int, vp: int, arch: ModelArch) -> list[int]:
    sp = stage_params(arch, pp, vp)
    heaviest = int(np.argmax(sp.tensor_sharded + sp.experts))
    return sorted({0, pp - 1, heaviest})


def training_memory_arrays(arch: ModelArch, options: MemoryOptions, *, tp, pp, dp, cp, ep,
                           zero, vp, sequence_parallel, micro_batch, num_microbatches,
                           recompute, ep_overlap=0.0, etp=None) -> dict[str, np.ndarray]:
    """Bytes per accelerator at the worst pipeline rank, one entry per plan.

    `etp`: tensor parallelism of the routed experts (None: tp); the expert grid etp x ep x
    expert-DP covers the stage's tp x dp x cp ranks, so a rank holds 1/(etp x ep) of the
    experts and ZeRO shards them over tp x dp x cp / (etp x ep).
    `recompute` holds codes from `recompute_code`; `ep_overlap` 1 runs one micro-batch's
    forward beside another's backward, so a rank holds one more of them. Returns weights,
    gradients, optimizer, activations, overhead and total bytes, the rank, parameters per
    accelerator, and the overhead's parts as "overhead.<name>".
    """
    arrays = np.broadcast_arrays(*(np.asarray(x) for x in (
        tp, pp, dp, cp, ep, tp if etp is None else etp, zero, vp, sequence_parallel,
        micro_batch, num_microbatches, recompute, ep_overlap)))
    tp, pp, dp, cp, ep, etp, zero, vp, sp, mb, m, rc, epo = (a.astype(float) for a in arrays)
    shape = tp.shape
    columns = dict(tp=tp, dp=dp, cp=cp, ep=ep, etp=etp, zero=zero, sp=sp, mb=mb, m=m, rc=rc,
                   epo=epo)
    out: dict[str, np.ndarray] = {}
    for (p_val, v_val), idx in pipeline_groups(pp, vp):
        sub = {name: arr.ravel()[idx] for name, arr in columns.items()}
        worst = None
        for rank in _candidate_ranks(p_val, v_val, arch):
            parts = _rank_memory(arch, options, p_val, v_val, rank, **sub)
            if worst is None:
                worst = parts
                continue
            fuller = parts["total"] > worst["total"]
            worst = {k: np.where(fuller, v, worst[k]) for k, v in parts.items()}
        for k, value in worst.items():
            if k not in out:
                out[k] = np.zeros(shape)
            out[k].reshape(-1)[idx] = value
    return out


def _rank_memory(arch, options, pp, vp, rank, *, tp, dp, cp, ep, etp, zero, sp, mb, m, rc,
                 epo):
    stages = stage_params(arch, pp, vp)
    wb, gb, k_opt = state_bytes(options.precision, options.grad_dtype, options.optimizer)
    shard_dense = dp * cp
    shard_expert = expert_dp(tp, dp, cp, etp, ep)
    dense = stages.tensor_sharded[rank] / tp + stages.replicated[rank]
    experts = stages.experts[rank] / (etp * ep)
    gemm_share = (stages.gemm[rank] - stages.experts[rank]) / tp + experts

    def sharded(value_dense, value_expert, from_stage):
        on = zero >= from_stage
        return (value_dense / np.where(on, shard_dense, 1.0)
                + value_expert / np.where(on, shard_expert, 1.0))

    if options.finetune == "full":
        trainable = dense + experts
        weights = sharded(dense * wb, experts * wb, 3)
        if options.precision == "fp8":
            # the decoder layers' GEMMs only: the embedding is a lookup, and Megatron-Core's
            # LM head is its own ColumnParallelLinear, outside Transformer Engine's fp8
            layer_dense = (stages.gemm[rank] - stages.experts[rank] - stages.vocab[rank]) / tp
            weights = weights + sharded(layer_dense * FP8_WEIGHT_CACHE_BYTES_PER_PARAM,
                                        experts * FP8_WEIGHT_CACHE_BYTES_PER_PARAM, 3)
        gradients = sharded(dense * gb, experts * gb, 2)
        optimizer = sharded(dense * k_opt, experts * k_opt, 1)
    else:
        targets = lora_targets(options.lora_targets)
        n_moe = stages.moe_layers[rank]
        n_dense = stages.layers[rank] - n_moe
        lora = (n_dense * lora_params_per_layer(arch, targets, options.lora_rank, False)
                + n_moe * lora_params_per_layer(arch, targets, options.lora_rank, True)) / tp
        trainable = lora
        # QLoRA quantises the decoder layers' GEMM weights; embeddings, LM head and norms
        # stay 16-bit (Dettmers et al. 2023, Sec. 3).
        layer_gemm = gemm_share - stages.vocab[rank] / tp
        base_bpp = NF4_BYTES_PER_PARAM if options.finetune == "qlora" else wb
        base = layer_gemm * base_bpp + (dense + experts - layer_gemm) * wb
        weights = sharded(base, 0.0, 3) + sharded(lora * wb, 0.0, 3)
        gradients = sharded(lora * gb, 0.0, 2)
        optimizer = sharded(lora * k_opt, 0.0, 1)

    # FSDP / ZeRO-3 gather the full parameters of the current and the prefetched layer, at
    # the bytes they are stored in. FSDP-QLoRA keeps the NF4 weights packed in a 16-bit
    # storage dtype (bitsandbytes Params4bit quant_storage, Answer.AI fsdp_qlora, 2024), so
    # a gather moves the 4-bit matrices; norms and routers stay 16-bit. With one rank in
    # the shard group there is nothing to gather (PyTorch FSDP runs NO_SHARD at world size
    # 1; DeepSpeed's partitions are the whole tensors).
    gemm_bpp = NF4_BYTES_PER_PARAM if options.finetune == "qlora" else wb
    dense_layer = (stages.max_layer_dense_gemm * gemm_bpp
                   + (stages.max_layer_dense - stages.max_layer_dense_gemm) * wb) / tp
    expert_layer = stages.max_layer_experts * gemm_bpp / (etp * ep)
    gathered = np.where(zero >= 3, overhead_constant("zero3-prefetch-layers") * (
        np.where(shard_dense > 1, dense_layer, 0.0)
        + np.where(shard_expert > 1, expert_layer, 0.0)), 0.0)
    activations, loss_transient, recomputed = _activations(
        arch, options, stages, pp, vp, rank, tp=tp, cp=cp, sp=sp, mb=mb, m=m, rc=rc,
        extra=epo)
    gpus = tp * pp * dp * cp
    overheads = {
        "cuda_context": np.full_like(activations, overhead_constant("cuda-context")),
        "communication_buffers": np.where(gpus > 1,
                                          overhead_constant("communication-buffers"), 0.0),
        "loss_logits_transient": loss_transient,
        "recomputed_layer": recomputed,
        "zero3_gathered_layers": gathered,
        "allocator_fragmentation": overhead_constant("allocator-fragmentation")
        * (activations + loss_transient + recomputed + gathered),
    }
    overhead = sum(overheads.values())
    total = weights + gradients + optimizer + activations + overhead
    return dict(weights=weights, gradients=gradients, optimizer=optimizer,
                activations=activations, overhead=overhead, total=total,
                rank=np.full_like(total, rank), params_per_gpu=dense + experts,
                trainable_per_gpu=trainable, **{f"overhead.{k}": v for k, v in overheads.items()})


def _activations(arch, options, stages, pp, vp, rank, *, tp, cp, sp, mb, m, rc, extra):
    """Saved activations on `rank`, the loss's transient logits on the last rank, and what
    one layer's recomputation adds at its peak; `extra` more chunk passes in flight than
    the schedule alone holds."""
    tokens = mb * options.seq_len / cp  # tokens of one micro-batch on this accelerator
    keys = float(options.seq_len)  # eager attention scores every key of the sequence
    rep_div = np.where(sp > 0, tp, 1.0)
    weights = recompute_weights(rc)

    def mode_bytes(lb: _LayerBytes, i: int):
        # Korthikanti et al. 2022: sequence parallelism shards the replicated tensors by t
        return lb.replicated[i] / rep_div + lb.tensor[i] / tp + lb.per_key[i] * keys / tp

    def per_token(lb: _LayerBytes):
        return sum(w * mode_bytes(lb, i) for i, w in enumerate(weights))

    def rebuilt(lb: _LayerBytes):
        """The largest one layer's backward rebuilds, over the modes this rank's layers run."""
        return np.maximum.reduce([np.where(w > 0, mode_bytes(lb, i), 0.0)
                                  for i, w in enumerate(weights)])

    n_layers = stages.layers[rank]
    n_moe = stages.moe_layers[rank]
    dense_saved, dense_rebuilt = _layer_bytes(arch, options, False)
    layer_b = per_token(dense_saved)
    layer_rebuilt = rebuilt(dense_rebuilt) if n_layers > n_moe else 0.0
    if n_moe:
        moe_saved, moe_rebuilt = _layer_bytes(arch, options, True)
        layer_b = ((n_layers - n_moe) * layer_b + n_moe * per_token(moe_saved)
                   ) / max(n_layers, 1.0)
        layer_rebuilt = np.maximum(layer_rebuilt, rebuilt(moe_rebuilt))
    units = inflight_layer_units(rank, pp, vp, m, n_layers, extra)
    total = tokens * layer_b * units
    first, last = _edge_bytes(arch, options)
    if rank == 0:
        total = total + tokens * inflight_microbatches(rank, pp, m, extra) * (
            first[0] / rep_div + first[1] / tp)
    loss_transient = np.zeros_like(total)
    recompute = tokens * layer_rebuilt + np.zeros_like(total)
    if rank == pp - 1:
        head = tokens * (last[0] / rep_div + last[1] / tp)
        total = total + head
        loss_transient = tokens * act.loss_transient_bytes_per_token(
            arch, _widths(options), options.kernels) / tp
        # The last rank's backward runs the loss and the head before its last layer's
        # recompute and frees their tensors first: the recompute peak shares memory with
        # them, and adds only what it needs beyond them.
        recompute = np.maximum(recompute - head - loss_transient, 0.0)
    return total, loss_transient, recompute
