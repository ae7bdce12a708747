"""When the global batch has few factors it rules out data-parallel degrees: 250 sequences
on 16 GPUs allow DP 1 and 2 only. The search never sees those plans, so 'why other choices
lost' cannot name them; this note does, with the nearest batch sizes that allow them and
what the best of their plans would gain."""

from __future__ import annotations

import math
from dataclasses import replace

from infraplan.errors import InputError
from infraplan.training.evaluate import PlanResult, TrainingJob
from infraplan.training.search import search
from infraplan.training.space import Knobs, build_space

# A gain below this is within the step model's noise: not worth changing a recipe for
NOTED_GAIN = 0.02


def batch_note(arch, best: PlanResult, knobs: Knobs, job: TrainingJob, system) -> list[str]:
    """A note naming the DP degrees above the best plan's that its GPU count's splits
    leave but the global batch forbids (it is not a multiple of dp x micro_batch), the
    nearest batches that allow them all, and the best plan among them at the nearest, when
    that plan fits and runs at least NOTED_GAIN faster."""
    n, gb = best.plan.num_gpus, job.global_batch
    at_n = replace(knobs, gpus=(n,))
    space = build_space(arch, at_n, seq_len=job.seq_len, global_batch=gb)
    mbs = sorted({int(m) for m in knobs.micro_batch})
    dps = sorted({int(d) for d in space.outer["dp"]})
    forbidden = [d for d in dps if d > best.plan.dp and all(gb % (d * m) for m in mbs)]
    if not forbidden:
        return []
    step = math.lcm(*forbidden) * mbs[0]
    below, above = gb // step * step, -(-gb // step) * step
    nearest = [b for b in sorted({below, above}, key=lambda b: (abs(b - gb), -b)) if b > 0]
    try:
        other = search(arch, [best.accelerator], replace(at_n, dp=tuple(forbidden)),
                       replace(job, global_batch=nearest[0]), top=1, system=system).best[0]
    except InputError:  # none of them fits, or the batch is under one step's tokens
        return []
    gain = other.tokens_per_s / best.tokens_per_s - 1
    if gain < NOTED_GAIN:
        return []
    shown = ", ".join(map(str, forbidden))
    mb = "micro_batch" if len(mbs) > 1 else f"micro_batch {mbs[0]}"
    return [f"global_batch {gb:,} rules out DP {shown} on {n:,} GPUs (it must be a multiple "
            f"of dp x {mb}); {' or '.join(f'{b:,}' for b in nearest)} would allow "
            f"{'them' if len(forbidden) > 1 else 'it'}, and at {nearest[0]:,} the best such "
            f"plan ({other.plan.describe()}) runs {gain:.0%} faster: set "
            "training.global_batch to it if the training recipe allows"]
