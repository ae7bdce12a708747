"""The `auto` recompute knob: the fewest fully recomputed layers (the rest selective) that
make a plan fit."""

from __future__ import annotations

import numpy as np
import pytest

from infraplan.models import load_model
from infraplan.physics.memory.training import training_memory_arrays
from infraplan.training.evaluate import (AUTO_RECOMPUTE, TrainingJob, plan_arrays,
                                         resolve_auto_recompute)


@pytest.mark.parametrize("model, tp, pp, dp, zero", [
    ("llama-2-70b", 1, 1, 64, 3),  # FSDP, every layer on one rank
    ("llama-3.1-70b", 4, 4, 4, 1),  # a pipeline: per stage
])
def test_auto_recompute_takes_the_fewest_whole_layers_that_fit(model, tp, pp, dp, zero):
    """Memory is linear in the share of fully recomputed layers only from the first one on:
    from then a whole layer is rebuilt in the backward, where all-selective layers rebuild
    an attention core. Interpolating between all-selective and all-full took 100 % of a
    70B's layers where 36 % fit (its step 18.7 % over the published one instead of 2.3 %)."""
    arch = load_model(model)
    job = TrainingJob(seq_len=4096, global_batch=512)

    def total(code):
        return np.asarray(training_memory_arrays(
            arch, job.memory_options(), tp=tp, pp=pp, dp=dp, cp=1, ep=1, etp=tp, zero=zero,
            vp=1, sequence_parallel=float(tp > 1), micro_batch=1,
            num_microbatches=512 / dp, recompute=code)["total"]).item()

    layers = arch.num_layers // pp
    # a capacity between the all-selective and the all-full plan's memory
    capacity = total(1.0) - 0.4 * (total(1.0) - total(2.0))
    p = plan_arrays(global_batch=512, tp=[tp], pp=[pp], dp=[dp], cp=[1], ep=[1], vp=[1],
                    zero=[zero], sp=[float(tp > 1)], mb=[1], recompute=[AUTO_RECOMPUTE])
    share = resolve_auto_recompute(arch, job, p, capacity).recompute[0] - 1.0
    k = round(share * layers)
    assert share == pytest.approx(k / layers)
    assert 0 < k < layers
    assert total(1.0 + k / layers) <= capacity < total(1.0 + (k - 1) / layers)
    # a plan whose all-selective memory fits keeps every layer selective
    roomy = resolve_auto_recompute(arch, job, p, total(1.0) + 1.0).recompute[0]
    assert roomy == 1.0
