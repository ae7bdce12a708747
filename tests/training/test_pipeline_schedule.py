"""The pipeline bubble of the step-time model against Megatron-LM's interleaved 1F1B order,
list-scheduled op by op: exact when the layers split evenly into model chunks, a lower bound
when they do not."""

from __future__ import annotations

import pytest

from infraplan.models import load_model
from infraplan.physics.memory.states import stage_layer_indices
from infraplan.training.evaluate import TrainingJob, evaluate_plan
from infraplan.training.plan import ParallelPlan


def _rank_order(rank: int, pp: int, vp: int, m: int) -> list[tuple[str, int, int]]:
    """(pass, micro-batch, chunk) in the order one rank runs them: Megatron-LM's warm-up
    forwards, then one forward and one backward in turn, then the remaining backwards
    (schedules.py, forward_backward_pipelining_with_interleaving, m a multiple of pp)."""
    total = m * vp
    warm = min(pp - rank - 1 if vp == 1 else (pp - rank - 1) * 2 + (vp - 1) * pp, total)

    def op(kind: str, k: int) -> tuple[str, int, int]:
        chunk = (k // pp) % vp
        return kind, (k // (pp * vp)) * pp + k % pp, chunk if kind == "F" else vp - 1 - chunk

    ops = [op("F", k) for k in range(warm)]
    for k in range(total - warm):
        ops += [op("F", warm + k), op("B", k)]
    return ops + [op("B", k) for k in range(total - warm, total)]


def scheduled_bubble(layers: int, pp: int, vp: int, m: int) -> float:
    """Idle time of the busiest rank, in micro-batch slots (its forward + backward of one
    micro-batch), when a layer's forward takes 1 and its backward 2."""
    ranks = stage_layer_indices(layers, pp, vp)
    chunks = pp * vp
    size = [layers // chunks + (i < layers % chunks) for i in range(chunks)]  # block sizes
    orders = [_rank_order(r, pp, vp, m) for r in range(pp)]
    done: dict[tuple, float] = {}
    at, free = [0] * pp, [0.0] * pp
    while any(at[r] < len(orders[r]) for r in range(pp)):
        moved = False
        for r in range(pp):
            while at[r] < len(orders[r]):
                kind, mb, c = orders[r][at[r]]
                if kind == "F":  # the same chunk on the rank before, or the last rank's
                    prev = ("F", mb, c, r - 1) if r else ("F", mb, c - 1, pp - 1) if c else None
                else:  # previous chunk
                    prev = ("B", mb, c, r + 1) if r < pp - 1 else \
                        ("B", mb, c + 1, 0) if c < vp - 1 else None
                needs = [d for d in (prev, ("F", mb, c, r) if kind == "B" else None) if d]
                if any(d not in done for d in needs):
                    break
                start = max([free[r], *(done[d] for d in needs)])
                free[r] = done[(kind, mb, c, r)] = start + size[c * pp + r] * (
                    1 if kind == "F" else 2)
                at[r] += 1
                moved = True
        assert moved, "the order deadlocked"
    per_microbatch = 3 * max(len(idx) for idx in ranks)
    return max(free) / per_microbatch - m


@pytest.mark.parametrize("pp, vp, even", [(4, 1, True), (4, 2, True), (4, 4, True),
                                          (2, 8, True), (4, 3, False), (2, 6, False)])
def test_the_bubble_is_the_scheduled_one(pp, vp, even):
    """Llama 2 7B's 32 layers at 64 micro-batches: the model's bubble in micro-batch slots
    is the list-scheduled idle time, (p - 1) / v for even chunks, and more for uneven ones
    where the fill and drain pass the larger chunks (4 x 3 chunks of 3 or 2 layers: 1.125
    slots, not 1; 2 x 6: 0.1875, not 0.167)."""
    arch = load_model("llama-2-7b")
    job = TrainingJob(seq_len=4096, global_batch=64)
    r = evaluate_plan(arch, "h100", job, ParallelPlan(tp=1, pp=pp, dp=1, vp=vp, micro_batch=1))
    per_microbatch = (r.breakdown_s["compute"] + r.breakdown_s["pp_p2p"]) / 64
    scheduled = scheduled_bubble(arch.num_layers, pp, vp, 64)
    if even:
        assert scheduled == pytest.approx((pp - 1) / vp)
    else:
        assert scheduled > 1.1 * (pp - 1) / vp
    assert r.breakdown_s["bubble"] / per_microbatch == pytest.approx(scheduled, rel=0.02)


def test_uneven_chunks_can_stall_beyond_the_fill_and_drain():
    """80 layers in 4 stages x 16 chunks (1 or 2 layers): the scheduled idle time grows with
    the micro-batches, where an even split's (4 x 10 chunks of 2) stays (p - 1) / v. The
    step-time model charges the fill and drain of the largest chunk alone: a lower bound."""
    assert scheduled_bubble(80, 4, 10, 16) == pytest.approx(0.3)
    assert scheduled_bubble(80, 4, 10, 64) == pytest.approx(0.3)
    uneven = [scheduled_bubble(80, 4, 16, m) for m in (16, 64)]
    assert uneven[0] > 0.3 and uneven[1] > uneven[0] + 0.5
