"""Time of one decoder layer for one micro-batch on one accelerator, vectorised over plans.

Per layer kind (dense FFN or MoE block): forward and backward kernels, what recomputation
repeats, and the communication the layer cannot hide: tensor-parallel collectives (the
forward's on the critical path in Megatron-LM), context-parallel ring attention beyond what
the attention kernel hides, and expert-parallel all-to-alls.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from infraplan.models.arch import ModelArch, MoeSpec
from infraplan.models.flops import attended_keys_per_sequence, gemms
from infraplan.physics import collectives as coll
from infraplan.physics.compute import Device, attention_time, gemm_time, memory_time
from infraplan.physics.hardware import calibration
from infraplan.physics.memory.training import recompute_weights

ACT_BYTES = 2.0  # bf16/fp16 activations and communication buffers
FLASH_BACKWARD_FACTOR = 2.5  # FlashAttention-2 backward: 5 matmuls against the forward's 2
# fp8 training quantizes every 16-bit GEMM operand it produces (each layer input in the
# forward, each output gradient in the backward): read 2 bytes, write 1 byte row-wise and
# 1 byte column-wise, because one GEMM reads the tensor along rows and another along
# columns. cuBLASLt's fp8 GEMMs on Hopper take only the "TN" layout, so the column-wise copy
# is a physical transpose (Transformer Engine docs, "Performance considerations: handling
# transposes"; its fused nvte_cast_transpose writes both); MXFP8 scales blocks along one
# direction, so Blackwell keeps both copies too. Delayed scaling fuses the amax; current
# scaling's extra amax read is not counted.
FP8_CAST_BYTES = 4.0
# Megatron-Core's MoE router and shared-expert gate are plain 16/32-bit linear layers, not
# Transformer Engine fp8 GEMMs
_UNQUANTIZED_GEMMS = frozenset({"router", "shared_gate"})


@dataclass(frozen=True)
class PlanArrays:
    """Plan knobs as float arrays of one shape (recompute: codes of
    physics.memory.training.recompute_code)."""

    tp: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    etp: np.ndarray  # tensor parallelism of the routed experts (tp unless folded)
    vp: np.ndarray
    zero: np.ndarray
    sp: np.ndarray
    mb: np.ndarray
    recompute: np.ndarray
    microbatches: np.ndarray
    tp_overlap: np.ndarray  # 1: TP collectives pipelined with the GEMMs (TE userbuffers)
    ep_overlap: np.ndarray  # 1: MoE all-to-alls beside another micro-batch's compute

    def subset(self, mask) -> PlanArrays:
        return PlanArrays(*(getattr(self, f)[mask] for f in self.__dataclass_fields__))


@dataclass(frozen=True)
class LayerTime:
    forward: np.ndarray  # kernels of the forward pass
    backward: np.ndarray
    recompute: np.ndarray  # what the plan's recompute mode repeats
    tp_comm: np.ndarray  # exposed tensor-parallel collectives (forward, backward, recompute)
    cp_exposed: np.ndarray
    ep_comm: np.ndarray
    attention_forward: np.ndarray  # the attention core alone (selective recompute)
    tp_comm_total: np.ndarray  # the same collectives before any overlap
    cp_comm_total: np.ndarray


def _gemm_shape(g, tokens, p: PlanArrays, arch: ModelArch):
    """(rows, cols, depth, groups) of one GEMM kernel on one rank; a routed expert's GEMM
    is one grouped GEMM over the rank's experts (Megatron-Core --moe-grouped-gemm), split
    etp-wide. An etp below tp folds the experts' grid over the TP ranks: each etp-group
    takes etp/tp of the TP group's tokens (sequence-parallel shards) into its experts."""
    split = p.etp if g.routed_expert else p.tp
    n = g.fan_out / split if g.split == "column" else np.full_like(split, g.fan_out, dtype=float)
    k = g.fan_in / split if g.split == "row" else np.full_like(split, g.fan_in, dtype=float)
    if g.routed_expert:
        experts = arch.moe.num_experts
        # tokens routed to each of the rank's experts
        rows = tokens * p.etp / p.tp * g.tokens_per_token * p.ep / experts
        return rows, n, k, experts / p.ep
    return tokens * g.tokens_per_token, n, k, np.ones_like(tokens)


def _elementwise_bytes(arch: ModelArch, moe_layer: bool) -> tuple[float, float]:
    """(replicated, tensor-sharded) bytes per token a layer's forward moves through
    element-wise kernels: two norms and two residual adds (Megatron's fused
    bias-dropout-add: read 2h, write h), RoPE on q and k, the activation function."""
    h, at, e = arch.hidden_size, arch.attention, ACT_BYTES
    replicated = 2 * 2 * h * e + 2 * 3 * h * e
    tensor = 0.0 if arch.learned_positions else 2 * (at.num_heads + at.num_kv_heads) * \
        at.head_dim * e
    mlps = [(arch.mlp, 1.0)] if not moe_layer else [(arch.moe.expert,
                                                     float(arch.moe.experts_per_token))]
    if moe_layer and arch.moe.shared:
        mlps.append((arch.moe.shared, 1.0))
    if moe_layer:  # permute and un-permute: read and write the k routed copies of a token
        replicated += 4 * arch.moe.experts_per_token * h * e
    for mlp, rows in mlps:
        tensor += rows * (3 if mlp.gated else 2) * mlp.intermediate_size * e
    return replicated, tensor


def gemm_operand_bytes(fp8: bool) -> float:
    """Bytes per GEMM operand element: fp8 GEMMs read 1-byte operands, the rest 16-bit."""
    return 1.0 if fp8 else ACT_BYTES


def layer_time(arch: ModelArch, dev: Device, fab: coll.Fabric, p: PlanArrays, *,
               seq_len: int, kernels: str, moe_layer: bool, fp8: bool = False) -> LayerTime:
    gemm_bytes = gemm_operand_bytes(fp8)
    tokens = p.mb * seq_len / p.cp
    scopes = ("attention", "moe") if moe_layer else ("attention", "dense_mlp")
    fwd = np.zeros_like(tokens)
    bwd = np.zeros_like(tokens)
    cast_in = {}  # fp8: forward inputs to quantize, one per distinct input tensor
    cast_grad = np.zeros_like(tokens)  # fp8: backward output gradients to quantize
    grads = 0  # fp8: cast kernels in the backward, one per quantized GEMM
    column = {"dgrad": np.zeros_like(tokens), "wgrad": np.zeros_like(tokens)}
    for g in gemms(arch):
        if g.scope not in scopes:
            continue
        m, n, k, groups = _gemm_shape(g, tokens, p, arch)
        fwd = fwd + gemm_time(dev, m, n, k, bytes_per_element=gemm_bytes, groups=groups)
        # backward: input gradient (m x k, over n) and weight gradient (k x n, over m)
        dgrad = gemm_time(dev, m, k, n, bytes_per_element=gemm_bytes, groups=groups)
        wgrad = gemm_time(dev, k, n, m, bytes_per_element=gemm_bytes, groups=groups)
        bwd = bwd + dgrad + wgrad
        if g.split == "column":
            column["dgrad"] = column["dgrad"] + dgrad
            column["wgrad"] = column["wgrad"] + wgrad
        if fp8 and g.name not in _UNQUANTIZED_GEMMS:
            # GEMMs reading the same tensor share one quantized copy of it: the column-split
            # projections of one normalised input (q/k/v, gate/up, MLA's down projections)
            reads = (g.scope, g.split == "row", g.fan_in, g.tokens_per_token,
                     g.routed_expert)
            cast_in[reads] = m * k * groups
            cast_grad = cast_grad + m * n * groups
            grads += 1

    attn_fwd, attn_bwd = _attention(arch, dev, p, seq_len, kernels)
    rep, ten = _elementwise_bytes(arch, moe_layer)
    elem = memory_time(dev, tokens * (rep / np.where(p.sp > 0, p.tp, 1.0) + ten / p.tp),
                       count=6)
    if fp8:
        elem_in = sum(cast_in.values(), np.zeros_like(tokens))
        fwd = fwd + memory_time(dev, FP8_CAST_BYTES * elem_in, count=len(cast_in))
        bwd = bwd + memory_time(dev, FP8_CAST_BYTES * cast_grad, count=grads)
    forward = fwd + attn_fwd + elem
    backward = bwd + attn_bwd + 2 * elem
    _, selective, full = recompute_weights(p.recompute)
    recompute = full * forward + selective * attn_fwd

    tp_comm, tp_total = _tensor_parallel_comm(arch, fab, p, tokens, fwd, bwd, column,
                                              moe_layer)
    cp_exposed, cp_total = _ring_attention_exposed(arch, fab, p, seq_len, attn_fwd, attn_bwd)
    ep_comm = _expert_all_to_all(arch, fab, p, tokens) if moe_layer else np.zeros_like(tokens)
    return LayerTime(forward, backward, recompute, tp_comm, cp_exposed, ep_comm, attn_fwd,
                     tp_total, cp_total)


def _attention(arch, dev, p, seq_len, kernels):
    at = arch.attention
    heads = at.num_heads / p.tp
    if kernels == "fused":
        # causal flash attention skips the masked half of the score blocks
        keys = float(attended_keys_per_sequence(arch, seq_len, causal=True))
        flops = p.mb * keys * 2 * heads * (at.head_dim + at.v_head_dim) / p.cp
        return attention_time(dev, flops), attention_time(dev, FLASH_BACKWARD_FACTOR * flops,
                                                          backward=True)
    # eager: Q K^T and P V as batched GEMMs over every key, softmax through memory
    batch = p.mb * heads
    s = float(seq_len)
    scores = gemm_time(dev, s, s, at.head_dim, bytes_per_element=ACT_BYTES, count=batch)
    values = gemm_time(dev, s, at.v_head_dim, s, bytes_per_element=ACT_BYTES, count=batch)
    passes = 4 if arch.attention_dropout > 0 else 2  # read scores, write probs (+ dropout)
    softmax = memory_time(dev, batch * s * s * ACT_BYTES * passes, count=2)
    return scores + values + softmax, 2 * (scores + values) + 1.5 * softmax


def _tensor_parallel_comm(arch, fab, p, tokens, gemm_fwd, gemm_bwd, column, moe_layer):
    """Megatron-LM: two all-reduces of the layer output per pass (after attention and after
    the FFN), forward and backward, again in a full recompute; with sequence parallelism
    each becomes an all-gather plus a reduce-scatter of the same total volume (Korthikanti
    et al. 2022). A parallel-residual layer (attention and MLP on the same input, outputs
    summed: GPT-NeoX's gpt_j_residual) needs one of each per pass. With TP overlap
    (Transformer Engine userbuffers, sequence parallel only) each all-gather /
    reduce-scatter is split into chunks pipelined with the GEMM that consumes or produces
    it, and the backward's re-gather of each column-parallel input runs in bulk beside the
    input-gradient GEMM (tp_comm_bulk_dgrad): only what the layer's GEMMs cannot cover stays
    exposed.

    Without it, the forward's collectives are exposed, but the backward launches some
    asynchronously (Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication,
    async_tensor_model_parallel_allreduce on by default): a column-parallel linear's
    input-gradient all-reduce (reduce-scatter with sequence parallelism) runs beside its
    weight-gradient GEMM, and with sequence parallelism the re-gather of its sharded input
    runs beside its input-gradient GEMM. A row-parallel linear's gradient all-gather (the
    backward of its reduce-scatter) stays exposed; without sequence parallelism it has none.
    An MoE block's collectives run over the experts' TP group (etp ranks, etp/tp of the
    tokens): none when the experts are folded to etp = 1.
    `column`: the backward GEMM times ("dgrad", "wgrad") of the column-parallel linears.
    Returns (exposed, total) seconds."""
    size = tokens * arch.hidden_size * ACT_BYTES
    blocks = [(size, p.tp)]  # (bytes, ranks): attention, or the parallel-residual layer
    if not arch.parallel_residual:
        blocks.append((size * p.etp / p.tp, p.etp) if moe_layer else (size, p.tp))
    all_reduce = gather = 0.0
    for nbytes, ranks in blocks:
        group = coll.group(ranks, 1.0, fab)
        all_reduce = all_reduce + coll.all_reduce(nbytes, group, fab)
        # an all-gather moves the same bytes as a reduce-scatter
        gather = gather + coll.reduce_scatter(nbytes, group, fab)
    full = recompute_weights(p.recompute)[2]
    sp = p.sp > 0
    per_pass = np.where(sp, 2 * gather, all_reduce)
    backward_total = np.where(sp, 3 * gather, all_reduce)
    userbuffers = overlapped(per_pass, gemm_fwd) * (1 + full) \
        + overlapped(backward_total, gemm_bwd)
    backward = np.where(sp, gather + overlapped(gather, column["wgrad"])
                        + overlapped(gather, column["dgrad"]),
                        overlapped(all_reduce, column["wgrad"]))
    asynchronous = per_pass * (1 + full) + backward
    total = per_pass * (1 + full) + backward_total
    return np.where((p.tp_overlap > 0) & sp, userbuffers, asynchronous), total


def _ring_attention_exposed(arch, fab, p, seq_len, attn_fwd, attn_bwd):
    """Context parallelism (ring attention, Liu et al. 2023; Megatron-LM CP): cp - 1 steps
    pass each rank's K and V chunk to its neighbour while the attention of the current
    chunk runs; the backward also passes dK and dV. Only what the kernel cannot hide shows.
    Returns (exposed, total) seconds."""
    at = arch.attention
    kv_heads = at.num_heads if at.kind == "mla" else at.num_kv_heads
    chunk = p.mb * seq_len / p.cp * kv_heads / p.tp * (at.head_dim + at.v_head_dim) * ACT_BYTES
    same_node = p.tp * p.cp <= fab.gpus_per_node
    step = coll.send_recv(chunk, same_node, fab)
    steps = p.cp - 1
    exposed = overlapped(steps * step, attn_fwd) + overlapped(steps * 2 * step, attn_bwd)
    return np.where(p.cp > 1, exposed, 0.0), np.where(p.cp > 1, 3 * steps * step, 0.0)


def overlapped(comm, window):
    """Communication hidden behind `window` seconds of computation: what does not fit,
    plus the `overlap-interference` share of what does (SMs and HBM it takes)."""
    hidden = np.minimum(comm, window)
    return comm - hidden + calibration("overlap-interference") * hidden


def _expert_all_to_all(arch, fab, p, tokens):
    """Dispatch and combine all-to-alls of the k routed copies of each token, forward and
    backward (and the recomputed forward); expert-parallel ranks follow TP and CP (the
    experts' TP when folded).

    Dispatched as the node-aware dispatchers do (DeepEP, DeepSeek-V3 report Sec. 3.2.2;
    HybridEP; Megatron-Core's flex dispatcher, which the Megatron-Core MoE report,
    arXiv:2603.07685 Sec. 8.1, runs for every MoE model it benchmarks): a token crosses the
    network once per destination node, then NVLink forwards it to the experts there, so
    only the distinct remote nodes count against the NIC; group-limited routing bounds
    those nodes further. (Megatron-Core's plain all-to-all dispatcher sends every routed
    copy: up to k / distinct-nodes times the inter-node bytes.)"""
    moe = arch.moe
    # folded (etp < tp): a rank dispatches only its etp/tp share of the TP group's tokens,
    # and the EP group is etp-strided over the stage's ranks instead of carved out of DP x CP
    size = tokens * p.etp / p.tp * moe.experts_per_token * arch.hidden_size * ACT_BYTES
    group = coll.group(p.ep, np.where(p.etp < p.tp, p.etp, p.tp * p.cp), fab)
    nodes = group.size / group.per_node
    remote = distinct_nodes_per_token(moe, nodes) * (nodes - 1) / nodes / moe.experts_per_token
    passes = 2 + recompute_weights(p.recompute)[2]
    return 2 * passes * coll.all_to_all(size, group, fab, remote_share=remote)


def distinct_nodes_per_token(moe: MoeSpec, nodes) -> np.ndarray:
    """Expected number of nodes holding a token's k routed experts, the experts laid out
    contiguously over `nodes` nodes and split into G groups of which the token uses t.
    k experts spread uniformly over R nodes reach R (1 - (1 - 1/R)^k) of them. With
    G >= nodes each node holds g = G / nodes whole groups and is missed when none of the
    t groups (drawn without replacement) is one of its g: at most nodes x (1 - C(G - g, t)
    / C(G, t)), and no more than the k experts alone would reach. With fewer groups than
    nodes the t groups span R = t x nodes / G nodes. No grouping is G = t = 1."""
    nodes = np.asarray(nodes, dtype=float)
    k, groups, picked = moe.experts_per_token, moe.expert_groups, moe.groups_per_token

    def uniform(reach):
        return reach * (1.0 - (1.0 - 1.0 / reach) ** k)

    per_node = groups / nodes
    missed = np.ones_like(nodes)
    for i in range(picked):
        missed = missed * np.clip((groups - per_node - i) / (groups - i), 0.0, 1.0)
    whole_groups = np.minimum(nodes * (1.0 - missed), uniform(nodes))
    spread = uniform(np.maximum(picked * nodes / groups, 1.0))
    return np.where(per_node >= 1.0, whole_groups, spread)
