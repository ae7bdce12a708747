"""How many micro-batches' activations a pipeline rank holds at its peak.

1F1B (Narayanan et al. 2021, Sec. 2.2.1): rank r runs p - r - 1 warm-up forwards before its
first backward, so it holds min(m, p - r) micro-batches of its L/p layers; the first rank
holds p of them, i.e. the activations of all L layers for one micro-batch (Korthikanti et
al. 2022, pipeline parallelism).
Interleaved 1F1B with v model chunks per rank (Megatron-LM `schedules.py`): the warm-up is
(p - r - 1) * 2 + (v - 1) * p chunk-forwards, so rank r holds min(m v, 2 (p - r - 1) +
(v - 1) p + 1) chunks of L / (p v) layers: L (1 + (p - 1) / (p v)) layers on the first rank,
the paper's interleaving factor.
"""

from __future__ import annotations

import numpy as np


def inflight_chunks(rank, pp, vp, num_microbatches, extra=0.0):
    """Model chunks (each L/(p v) layers of one micro-batch) held at once by `rank`.
    `extra` warm-up passes beyond the schedule's: Megatron-Core's all-to-all overlap runs
    each forward beside an earlier micro-batch's backward, one more warm-up forward
    (schedules.py adds 1 to num_warmup_microbatches; with pp = 1 two micro-batches are
    alive at once)."""
    rank, pp, vp, m, extra = (np.asarray(x, dtype=float) for x in (
        rank, pp, vp, num_microbatches, extra))
    one_f_one_b = np.minimum(m, pp - rank + extra)
    interleaved = np.minimum(m * vp, 2 * (pp - rank - 1) + (vp - 1) * pp + 1 + extra)
    return np.where(vp > 1, interleaved, one_f_one_b)


def inflight_layer_units(rank, pp, vp, num_microbatches, layers_on_rank, extra=0.0):
    """Layer-micro-batches of activations held at the peak by `rank`."""
    chunks = inflight_chunks(rank, pp, vp, num_microbatches, extra)
    return chunks * np.asarray(layers_on_rank, dtype=float) / np.asarray(vp, dtype=float)


def _codes(column) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values, each entry's index into them). Knob columns hold a few small
    whole numbers: a counting pass finds them in O(n); anything else is sorted."""
    c = np.asarray(column).ravel()
    if c.size and c.min() >= 0 and c.max() < 1 << 16:
        ints = c.astype(np.int64)
        if np.array_equal(ints, c):
            present = np.bincount(ints) > 0
            return np.flatnonzero(present), (np.cumsum(present) - 1)[ints]
    values, codes = np.unique(c, return_inverse=True)
    return values, codes.ravel()


def unique_rows(*columns):
    """(an index of each distinct row, inverse) over equal-length columns of few distinct
    values each: a mixed-radix integer key over the columns' value codes, grouped by
    counting. Rows with equal keys are interchangeable, so any one of them represents its
    group."""
    key = np.zeros(len(columns[0]), dtype=np.int64)
    span = 1
    for column in columns:
        values, codes = _codes(column)
        key = key * len(values) + codes
        span *= len(values)
    if span > max(4 * len(key), 1 << 16):  # a sparse key: counting would waste memory
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        return first, inverse.ravel()
    present = np.bincount(key, minlength=span) > 0
    representative = np.empty(span, dtype=np.int64)
    representative[key] = np.arange(len(key))
    return representative[present], (np.cumsum(present) - 1)[key]


def pipeline_groups(pp, vp):
    """[((pp, vp), indices)] of the plans sharing a pipeline layout, in ascending (pp, vp),
    each group's indices in order (a stable sort of small group codes)."""
    pp = np.asarray(pp, dtype=np.int64).ravel()
    vp = np.asarray(vp, dtype=np.int64).ravel()
    radix = int(vp.max()) + 1 if vp.size else 1
    keys, inverse = _codes(pp * radix + vp)
    small = inverse.astype(np.int16 if len(keys) < 1 << 15 else np.int64)
    order = np.argsort(small, kind="stable")  # radix sort for 16-bit codes
    bounds = np.searchsorted(small[order], np.arange(len(keys) + 1))
    return [((int(k // radix), int(k % radix)), order[bounds[i]:bounds[i + 1]])
            for i, k in enumerate(keys)]


def inflight_microbatches(rank, pp, num_microbatches, extra=0.0):
    """Micro-batches whose first-stage inputs (token ids) are alive on `rank`."""
    return np.minimum(np.asarray(num_microbatches, float),
                      np.asarray(pp, float) - rank + np.asarray(extra, float))
