"""Grouping plans by knob values (physics/memory/pipeline.py): counting must give the
groups a sort gives, for whole-number knobs, fractional recompute codes and sparse keys."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from infraplan.physics.memory.pipeline import pipeline_groups, unique_rows

small_ints = arrays(np.float64, st.integers(1, 300), elements=st.sampled_from(
    [0.0, 1.0, 2.0, 4.0, 8.0, 128.0, 256.0]))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_unique_rows_matches_a_sort(data):
    a = data.draw(small_ints)
    n = len(a)
    b = data.draw(arrays(np.float64, n, elements=st.sampled_from([1.0, 1.25, 1.5, 2.0, 0.0])))
    c = data.draw(arrays(np.float64, n, elements=st.integers(0, 70_000).map(float)))
    for columns in ((a,), (a, b), (a, b, c)):
        first, inverse = unique_rows(*columns)
        rows = np.stack(columns, axis=1)
        # every row is its group's representative's row, and groups are distinct rows
        assert np.array_equal(rows[first][inverse], rows)
        assert len({tuple(r) for r in rows[first]}) == len(first)
        assert len(first) == len(np.unique(rows, axis=0))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_pipeline_groups_partition_the_plans_in_order(data):
    n = data.draw(st.integers(1, 300))
    pp = data.draw(arrays(np.float64, n, elements=st.sampled_from([1.0, 2.0, 9.0, 64.0, 128.0])))
    vp = data.draw(arrays(np.float64, n, elements=st.sampled_from([1.0, 2.0, 3.0, 16.0])))
    groups = pipeline_groups(pp, vp)
    keys = [k for k, _ in groups]
    assert keys == sorted(set(zip(pp.astype(int).tolist(), vp.astype(int).tolist())))
    seen = np.concatenate([idx for _, idx in groups])
    assert sorted(seen.tolist()) == list(range(n))
    for (p, v), idx in groups:
        assert np.all(np.diff(idx) > 0)  # each group's plans in their original order
        assert np.all(pp[idx] == p) and np.all(vp[idx] == v)
