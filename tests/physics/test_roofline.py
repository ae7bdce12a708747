"""The p-norm roofline that combines a kernel's compute-bound and memory-bound times."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from infraplan.physics import hardware
from infraplan.physics.compute import roofline_s
from infraplan.physics.hardware import calibration


def test_the_sharp_roofline_no_overlap_and_the_euclidean_blend():
    assert roofline_s(3.0, 4.0) == 4.0
    assert roofline_s(3.0, 4.0, 1.0) == 7.0
    assert roofline_s(3.0, 4.0, 2.0) == pytest.approx(5.0)
    # at the ridge point a p-norm costs 2^(1/p) x either time
    assert roofline_s(2.0, 2.0, 3.0) == pytest.approx(2.0 * 2 ** (1 / 3))
    # zeros and arrays: a kernel with no bytes is its math, none at all costs nothing
    got = roofline_s(np.array([0.0, 5.0, 0.0]), np.array([0.0, 0.0, 1e-300]), 1.5)
    assert got.tolist() == [0.0, 5.0, 1e-300]


times = st.floats(min_value=1e-12, max_value=1e3)


@given(times, times, st.floats(min_value=1.0, max_value=8.0),
       st.floats(min_value=1.0, max_value=8.0))
@example(1.0, 387.0, 1.0, 1.0)  # (1 + 387^1)^(1/1) rounds to 388.00000000000006
def test_a_blend_lies_between_the_slower_time_and_the_sum_and_sharpens_with_p(c, m, p, q):
    """Each inequality holds to a relative 1e-12 (float rounding of the p-norm); the chain
    used to scale both sides of the last one alike, which made it exact."""
    low, high = sorted((p, q))
    sharp, soft = roofline_s(c, m, high), roofline_s(c, m, low)
    assert max(c, m) * (1 - 1e-12) <= sharp
    assert sharp <= soft * (1 + 1e-12)
    assert soft <= (c + m) * (1 + 1e-12)


def test_training_keeps_the_sharp_roofline_and_serving_the_fitted_exponent():
    assert hardware.device("h100", "bf16", use="training").roofline_exponent == math.inf
    assert hardware.device("h100", "bf16", use="serving").roofline_exponent == \
        calibration("serving-roofline-exponent")
