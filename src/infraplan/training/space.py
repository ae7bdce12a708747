"""The plan space: every (GPU count x TP x PP x CP x EP x ZeRO x micro-batch x recompute x
sequence parallel x virtual stages) a job could use, built as NumPy arrays and pruned by
what cannot run (a degree that does not divide) before anything is evaluated.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from infraplan.models.arch import ModelArch
from infraplan.training.layer_time import PlanArrays

POWERS_OF_TWO = (1, 2, 4, 8, 16, 32, 64, 128, 256)
VIRTUAL_STAGES = (1, 2, 3, 4, 6, 8, 12, 16)
MICRO_BATCHES = (1, 2, 4, 8, 16, 32)


@dataclass(frozen=True)
class Knobs:
    """Values each knob may take; a single value pins it."""

    gpus: tuple[int, ...]
    tp: tuple[int, ...] = POWERS_OF_TWO
    pp: tuple[int, ...] | None = None  # None: 1..num_layers (powers of two and divisors)
    cp: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    ep: tuple[int, ...] | None = None  # None: divisors of the expert count (1 if dense)
    dp: tuple[int, ...] | None = None  # None: whatever the GPU count leaves
    zero: tuple[int, ...] = (0, 1, 2, 3)
    micro_batch: tuple[int, ...] = MICRO_BATCHES
    # none, selective, full, and "auto": full recompute of the fewest layers that fit
    recompute: tuple[float, ...] = (0.0, 1.0, 2.0, -1.0)
    tp_overlap: tuple[int, ...] = (0, 1)
    sequence_parallel: tuple[int, ...] = (0, 1)
    vp: tuple[int, ...] = VIRTUAL_STAGES


def default_pp(arch: ModelArch) -> tuple[int, ...]:
    layers = arch.num_layers
    values = {p for p in POWERS_OF_TWO if p <= layers}
    values |= {d for d in range(1, layers + 1) if layers % d == 0 and d <= 128}
    return tuple(sorted(values))


@dataclass(frozen=True)
class Space:
    plans: PlanArrays
    gpus: np.ndarray
    candidates: int  # size of the product before any pruning


def _product(**axes) -> dict[str, np.ndarray]:
    names = list(axes)
    grids = np.meshgrid(*(np.asarray(axes[n], dtype=float) for n in names), indexing="ij")
    return {n: g.ravel() for n, g in zip(names, grids, strict=True)}


def build_space(arch: ModelArch, knobs: Knobs, *, seq_len: int, global_batch: int) -> Space:
    at = arch.attention
    pp_values = knobs.pp or default_pp(arch)
    ep_values = knobs.ep or ((tuple(d for d in POWERS_OF_TWO if arch.moe.num_experts % d == 0)
                              if arch.is_moe else (1,)))
    inner = (len(knobs.zero) * len(knobs.micro_batch) * len(knobs.recompute)
             * len(knobs.sequence_parallel) * len(knobs.vp) * len(ep_values)
             * len(knobs.tp_overlap))
    candidates = len(knobs.gpus) * len(knobs.tp) * len(pp_values) * len(knobs.cp) * inner

    # outer axes: prune what cannot divide before expanding the inner ones
    o = _product(n=knobs.gpus, tp=knobs.tp, pp=pp_values, cp=knobs.cp)
    dp = o["n"] / (o["tp"] * o["pp"] * o["cp"])
    ok = (dp >= 1) & (dp == np.floor(dp))
    ok &= at.num_heads % o["tp"] == 0
    if at.kind != "mla":
        kv = at.num_kv_heads
        ok &= (kv % o["tp"] == 0) | (o["tp"] % kv == 0)
    widths = ([arch.mlp.intermediate_size] if arch.num_dense_layers else []) + (
        [arch.moe.expert.intermediate_size] if arch.is_moe else [])
    for width in widths:
        ok &= width % o["tp"] == 0
    ok &= o["pp"] <= arch.num_layers
    ok &= (o["cp"] == 1) | (seq_len % (2 * o["cp"]) == 0)
    if knobs.dp is not None:
        ok &= np.isin(dp, knobs.dp)
    o = {k: v[ok] for k, v in o.items()}
    o["dp"] = dp[ok]

    # inner axes by index arithmetic: outer index x inner combination
    inner_axes = _product(zero=knobs.zero, mb=knobs.micro_batch, recompute=knobs.recompute,
                          sp=knobs.sequence_parallel, vp=knobs.vp, ep=ep_values,
                          tp_overlap=knobs.tp_overlap)
    n_out, n_in = len(o["n"]), len(inner_axes["zero"])
    outer_idx = np.repeat(np.arange(n_out), n_in)
    inner_idx = np.tile(np.arange(n_in), n_out)
    col = {k: v[outer_idx] for k, v in o.items()}
    col.update({k: v[inner_idx] for k, v in inner_axes.items()})

    per_step = col["dp"] * col["mb"]
    ok = (global_batch % per_step) == 0
    ok &= (col["sp"] == 0) | (col["tp"] > 1)
    ok &= (col["tp_overlap"] == 0) | (col["sp"] > 0)  # userbuffer overlap needs SP
    # interleaving needs a pipeline and at least one layer per model chunk; uneven
    # chunks are allowed (Megatron-LM --num-layers-in-first/last-pipeline-stage)
    ok &= (col["vp"] == 1) | ((col["pp"] > 1) & (col["pp"] * col["vp"] <= arch.num_layers))
    ok &= ((col["dp"] * col["cp"]) % col["ep"]) == 0
    col = {k: v[ok] for k, v in col.items()}
    plans = PlanArrays(tp=col["tp"], pp=col["pp"], dp=col["dp"], cp=col["cp"], ep=col["ep"],
                       vp=col["vp"], zero=col["zero"], sp=col["sp"], mb=col["mb"],
                       recompute=col["recompute"],
                       microbatches=global_batch / (col["dp"] * col["mb"]),
                       tp_overlap=col["tp_overlap"])
    return Space(plans=plans, gpus=col["n"], candidates=candidates)
