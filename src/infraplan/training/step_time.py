"""Step time of a training plan and where it goes, vectorised over plans.

One optimizer step of a pipeline with p stages, v virtual stages per rank and m
micro-batches takes (m + (p - 1) / v) times the slowest stage's time per micro-batch
(1F1B and interleaved 1F1B, Narayanan et al. 2021, Sec. 2.2; with chunks of unequal
size, the largest chunk sets the bubble instead of 1 / v), then the data-parallel
gradient synchronisation that the last micro-batch's backward could not hide, then the
optimizer. A loader slower than the step stalls it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from infraplan.catalog.schema import StorageTier
from infraplan.models.arch import ModelArch
from infraplan.models.flops import training_flops_per_sequence
from infraplan.physics import collectives as coll
from infraplan.physics.compute import Device, gemm_time, memory_time
from infraplan.physics.hardware import calibration
from infraplan.physics.memory.pipeline import pipeline_groups, unique_rows
from infraplan.physics.memory.states import expert_dp, stage_params, state_bytes
from infraplan.training.layer_time import (ACT_BYTES, LayerTime, PlanArrays,
                                          layer_time, overlapped)

BREAKDOWN = ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "pp_p2p", "bubble",
             "dp_comm", "zero3_comm", "optimizer", "data_stall")


@dataclass(frozen=True, slots=True, kw_only=True)
class StepOptions:
    seq_len: int
    global_batch: int
    precision: str = "bf16"
    grad_dtype: str | None = None
    optimizer: str = "adamw"
    kernels: str = "fused"
    data_bytes_per_token: float | None = None  # None: a pre-tokenised token id


def step_time_arrays(arch: ModelArch, dev: Device, fab: coll.Fabric, opts: StepOptions,
                     plans: PlanArrays, *, storage: StorageTier | None = None,
                     num_nodes=None) -> dict[str, np.ndarray]:
    """Seconds per optimizer step and its exposed parts, one entry per plan."""
    out: dict[str, np.ndarray] = {}
    for (pp, vp), idx in pipeline_groups(plans.pp, plans.vp):
        part = _step_for_pipeline(arch, dev, fab, opts, plans.subset(idx), pp, vp)
        for key, value in part.items():
            if key not in out:
                out[key] = np.zeros(plans.pp.shape)
            out[key][idx] = value
    compute_step = sum(out[k] for k in BREAKDOWN if k != "data_stall")
    out["data_stall"] = _data_stall(opts, storage, compute_step, num_nodes, plans)
    out["step"] = compute_step + out["data_stall"]
    return out


def _per_layer_knobs(arch, dev, fab, opts, p: PlanArrays):
    """Layer, head and embedding times depend on few knobs (not DP, ZeRO or micro-batch
    count): compute them once per distinct combination and spread them back."""
    first, inverse = unique_rows(p.tp, p.cp, p.ep, p.etp, p.mb, p.sp, p.recompute,
                                 p.tp_overlap)
    q = p.subset(first)
    fp8 = opts.precision == "fp8"
    kw = dict(seq_len=opts.seq_len, kernels=opts.kernels, fp8=fp8)
    dense = layer_time(arch, dev, fab, q, moe_layer=False, **kw)
    moe = layer_time(arch, dev, fab, q, moe_layer=True, **kw) if arch.is_moe else dense
    tokens = q.mb * opts.seq_len / q.cp
    head = _head_time(arch, dev, fab, q, tokens)
    embed = _embedding_time(arch, dev, fab, q, tokens)

    def spread(lt: LayerTime) -> LayerTime:
        return LayerTime(*(getattr(lt, f)[inverse] for f in lt.__dataclass_fields__))

    return spread(dense), spread(moe), head[inverse], embed[inverse]


def _step_for_pipeline(arch, dev, fab, opts, p: PlanArrays, pp: int, vp: int):
    dense, moe, head, embed = _per_layer_knobs(arch, dev, fab, opts, p)
    stages = stage_params(arch, pp, vp)
    tokens = p.mb * opts.seq_len / p.cp

    # the slowest rank sets the pace: compare first, last and the one with most layers
    ranks = sorted({0, pp - 1, int(np.argmax(stages.layers + stages.moe_layers))})
    best = None
    for rank in ranks:
        n_moe = stages.moe_layers[rank]
        n_dense = stages.layers[rank] - n_moe
        parts = {name: n_dense * getattr(dense, name) + n_moe * getattr(moe, name)
                 for name in ("forward", "backward", "recompute", "tp_comm", "cp_exposed",
                              "ep_comm", "tp_comm_total", "cp_comm_total")}
        extra = (embed if rank == 0 else 0.0) + (head if rank == pp - 1 else 0.0)
        parts["forward"] = parts["forward"] + extra / 3
        parts["backward"] = parts["backward"] + 2 * extra / 3
        total = sum(v for k, v in parts.items() if not k.endswith("_total"))
        if best is None:
            best, best_total = parts, total
        else:
            better = total > best_total
            best = {k: np.where(better, v, best[k]) for k, v in parts.items()}
            best_total = np.maximum(total, best_total)
    m = p.microbatches
    ep_total = best["ep_comm"]
    per_mb = best_total
    if p.ep_overlap.any():  # dense models and most searches never pair passes: skip the work
        best["ep_comm"] = np.where(p.ep_overlap > 0, _ep_overlapped(best, m, pp, vp), ep_total)
        per_mb = best_total - ep_total + best["ep_comm"]
    p2p = _pipeline_p2p(arch, fab, p, tokens, pp, vp)
    # Warm-up and drain run p - 1 passes of one model chunk. Chunks are the rank's layers
    # over v when they split evenly; when they do not (80 layers in 4 x 16 chunks: 1 or 2
    # layers each), the first chunks hold the extra layers and the fill and drain pass
    # them, so the bubble exceeds (p - 1) / v. A lower bound: list-scheduling Megatron-LM's
    # interleaved order with such chunks also stalls in steady state (80 layers, 4 x 16,
    # 16 micro-batches: 0.47 micro-batch slots against this 0.30 and the even 0.19).
    chunk_share = -(-arch.num_layers // (pp * vp)) / max(stages.layers.max(), 1.0)
    bubble = (pp - 1) * chunk_share * (per_mb + p2p)
    dp_comm, zero3, dp_total, zero3_total = _data_parallel_exposed(
        arch, fab, opts, p, pp, vp, best, dense, moe, stages)
    return {
        "compute": m * (best["forward"] + best["backward"]),
        "recompute": m * best["recompute"],
        "tp_comm": m * best["tp_comm"],
        "cp_comm": m * best["cp_exposed"],
        "ep_comm": m * best["ep_comm"],
        "pp_p2p": m * (overlapped(p2p, per_mb) if vp > 1 else p2p),
        "bubble": bubble,
        "dp_comm": dp_comm,
        "zero3_comm": zero3,
        "optimizer": _optimizer_time(arch, dev, opts, p, stages),
        # communication before overlap, to report what was hidden
        "total.tp_comm": m * best["tp_comm_total"], "total.cp_comm": m * best["cp_comm_total"],
        "total.pp_p2p": m * p2p, "total.dp_comm": dp_total, "total.zero3_comm": zero3_total,
        "total.ep_comm": m * ep_total,
    }


def _ep_overlapped(rank_times, m, pp, vp):
    """Exposed all-to-all time per micro-batch when Megatron-Core's combined 1F1B runs one
    micro-batch's forward beside another's backward (--overlap-moe-expert-parallel-comm,
    MCore 0.14; DeepSeek-V3's DualPipe pairs them the same way): each pass's dispatch and
    combine run on a second stream while the paired pass computes. A pair's all-to-alls
    (one micro-batch's worth) hide behind its compute (one micro-batch's worth) up to the
    `overlap-interference` share. The warm-up forwards and cool-down backwards have no
    partner: 2 (p - 1) + (v - 1) p + 1 of a rank's m v chunk passes (schedules.py's warm-up
    with the extra overlap forward; 1 of m without a pipeline) stay exposed."""
    a2a = rank_times["ep_comm"]
    compute = rank_times["forward"] + rank_times["backward"]
    unpaired = np.minimum(1.0, (2 * (pp - 1) + (vp - 1) * pp + 1) / (m * vp))
    return unpaired * a2a + (1 - unpaired) * overlapped(a2a, compute)


def _head_time(arch, dev, fab, p, tokens):
    """Final norm, LM head GEMM (vocab split over TP) and the fp32 cross-entropy, forward
    and backward; never recomputed. The head runs in 16 bits in fp8 training too:
    Megatron-Core's output layer is its own ColumnParallelLinear, outside Transformer
    Engine's fp8 autocast, and torchtitan's float8 conversion skips the 'output' linear."""
    if dev.gemm16_flops:
        dev = replace(dev, gemm16_flops=0.0, gemm_flops=dev.gemm16_flops)
    gemm_bytes = ACT_BYTES
    v = arch.vocab_size / p.tp
    h = arch.hidden_size
    fwd = gemm_time(dev, tokens, v, h, bytes_per_element=gemm_bytes)
    bwd = gemm_time(dev, tokens, h, v, bytes_per_element=gemm_bytes) + \
        gemm_time(dev, h, v, tokens, bytes_per_element=gemm_bytes)
    loss = memory_time(dev, tokens * v * (ACT_BYTES + 4 * 3), count=4)  # logits, softmax, grad
    return fwd + bwd + loss


def _embedding_time(arch, dev, fab, p, tokens):
    """Vocabulary-parallel embedding: a gather and an all-reduce over TP (Shoeybi et al.)."""
    size = tokens * arch.hidden_size * ACT_BYTES
    reduce = coll.all_reduce(size, coll.group(p.tp, 1.0, fab), fab)
    return memory_time(dev, 3 * size, count=2) + reduce


def _pipeline_p2p(arch, fab, p, tokens, pp, vp):
    """Each micro-batch crosses each of the v chunk boundaries forward and backward. With
    TP, Megatron sends 1/t of the activation and all-gathers it inside the node. In the
    interleaved schedule's steady state Megatron-LM runs these sends beside the next chunk's
    compute (overlap_p2p_comm, on unless --no-overlap-p2p-communication); warm-up and flush
    sends stay on the critical path (--overlap-p2p-communication-warmup-flush is off), and
    plain 1F1B sends on it throughout."""
    if pp == 1:
        return np.zeros_like(tokens)
    size = tokens * arch.hidden_size * ACT_BYTES / p.tp
    same_node = p.tp * p.cp * p.dp * pp <= fab.gpus_per_node
    return 2 * vp * coll.send_recv(size, same_node, fab)


def _stage_param_split(stages, p):
    """(dense, expert) parameters held by the fullest rank, after TP and the experts' etp x
    EP."""
    rank = int(np.argmax(stages.tensor_sharded + stages.experts))
    dense = stages.tensor_sharded[rank] / p.tp + stages.replicated[rank]
    experts = stages.experts[rank] / (p.etp * p.ep)
    return dense, experts


def _data_parallel_exposed(arch, fab, opts, p, pp, vp, stage, dense_layer: LayerTime,
                           moe_layer: LayerTime, stages):
    """Gradient synchronisation over DP x CP (experts over their expert-DP ranks).

    ZeRO 0: all-reduce; 1 and 2: reduce-scatter of gradients then all-gather of updated
    16-bit weights (ZeRO paper Sec. 7: same volume as the all-reduce). Bucketed, it
    overlaps the last micro-batch's backward (gradients) and the next step's first forward
    (weights), all but the last bucket. ZeRO-2 keeps only its shard of the gradients, so it
    reduce-scatters after every micro-batch's backward, not once per step (DeepSpeed
    maintainers, deepspeedai/DeepSpeed#2252): each earlier micro-batch's reduce-scatter
    hides behind its backward and the next forward. ZeRO-3/FSDP all-gathers each layer's
    weights in the forward and again in the backward and reduce-scatters its gradients, every
    micro-batch, prefetched one layer ahead: per layer only what exceeds that layer's
    compute is exposed."""
    wb, gb, _ = state_bytes(opts.precision, opts.grad_dtype, opts.optimizer)
    dense, experts = _stage_param_split(stages, p)
    dp_group = coll.group(p.dp * p.cp, p.tp, fab)
    edp_group = coll.group(expert_dp(p.tp, p.dp, p.cp, p.etp, p.ep), p.etp * p.ep, fab)

    def sync(dense_bytes, expert_bytes, fn):
        return fn(dense_bytes, dp_group, fab) + fn(expert_bytes, edp_group, fab)

    grads_ar = sync(dense * gb, experts * gb, coll.all_reduce)
    grads_rs = sync(dense * gb, experts * gb, coll.reduce_scatter)
    weights_ag = sync(dense * wb, experts * wb, coll.all_gather)
    eff = calibration("grad-overlap-efficiency")
    window_bwd = eff * stage["backward"]
    window_fwd = eff * stage["forward"]
    # Buckets: the last gradient bucket is only ready when the backward ends (and the first
    # weight bucket is needed before the forward starts), so one bucket's worth is exposed.
    grad_bytes = (dense + experts) * gb
    last_bucket = np.minimum(1.0, calibration("grad-bucket-bytes") / np.maximum(grad_bytes, 1))
    zero12 = overlapped((1 - last_bucket) * grads_rs, window_bwd) + last_bucket * grads_rs \
        + overlapped((1 - last_bucket) * weights_ag, window_fwd) + last_bucket * weights_ag
    earlier = np.where(p.zero == 2, p.microbatches - 1, 0.0)  # ZeRO-2's extra reductions
    zero12 = zero12 + earlier * overlapped(grads_rs, window_bwd + window_fwd)
    zero0 = overlapped((1 - last_bucket) * grads_ar, window_bwd) + last_bucket * grads_ar
    dp_exposed = np.where(p.zero == 0, zero0, np.where(p.zero < 3, zero12, 0.0))
    dp_total = np.where(p.zero == 0, grads_ar,
                        np.where(p.zero < 3, (1 + earlier) * grads_rs + weights_ag, 0.0))

    layers = stages.layers.max()
    per_layer_w = (dense * wb + experts * wb) / np.maximum(layers, 1)
    per_layer_g = (dense * gb + experts * gb) / np.maximum(layers, 1)
    ag = coll.all_gather(per_layer_w, dp_group, fab)
    rs = coll.reduce_scatter(per_layer_g, dp_group, fab)
    fwd_l = stage["forward"] / np.maximum(layers, 1)
    bwd_l = stage["backward"] / np.maximum(layers, 1)
    per_mb = layers * (overlapped(ag, fwd_l) + overlapped(ag + rs, bwd_l)) + ag
    zero3 = np.where(p.zero == 3, p.microbatches * per_mb, 0.0)
    zero3_total = np.where(p.zero == 3, p.microbatches * (layers * (2 * ag + rs) + ag), 0.0)
    several = p.dp * p.cp > 1
    return (np.where(several, dp_exposed, 0.0), np.where(several, zero3, 0.0),
            np.where(several, dp_total, 0.0), np.where(several, zero3_total, 0.0))


def _optimizer_time(arch, dev, opts, p, stages):
    """Adam reads gradients and states and writes states and weights once per step: memory
    bound, over the shard this rank owns (ZeRO >= 1 shards it over DP x CP)."""
    wb, gb, k_opt = state_bytes(opts.precision, opts.grad_dtype, opts.optimizer)
    dense, experts = _stage_param_split(stages, p)
    shard = np.where(p.zero >= 1, p.dp * p.cp, 1.0)
    params = dense / shard + experts / np.where(
        p.zero >= 1, expert_dp(p.tp, p.dp, p.cp, p.etp, p.ep), 1.0)
    return memory_time(dev, params * (gb + 2 * k_opt + wb), count=4)


def _data_stall(opts, storage, compute_step, num_nodes, p):
    """The loader reads global_batch x seq_len token ids per step; stall when the storage
    tier delivers them slower than the step consumes them (it prefetches in parallel)."""
    if storage is None or num_nodes is None:
        return np.zeros_like(compute_step)
    per_token = opts.data_bytes_per_token or calibration("token-bytes")
    total = opts.global_batch * opts.seq_len * per_token
    nodes = np.maximum(np.asarray(num_nodes, dtype=float), 1.0)
    read = total / (nodes * storage.read_bytes_per_s_per_node)
    if storage.read_bytes_per_s_aggregate:
        read = np.maximum(read, total / storage.read_bytes_per_s_aggregate)
    return np.maximum(0.0, read - compute_step)


def flops_per_step(arch: ModelArch, opts: StepOptions, recompute: str = "none"):
    """Model FLOPs (MFU numerator: 6N-style, attention over the full sequence as in PaLM
    App. B and Narayanan et al. eq. 3, capped at the sliding window in the layers that have
    one: models.flops.attended_keys_per_sequence) and hardware FLOPs (adds recomputation)."""
    f = training_flops_per_sequence(arch, opts.seq_len, recompute=recompute, causal=False)
    return opts.global_batch * f.model, opts.global_batch * f.hardware
