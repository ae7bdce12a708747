"""The published rows this project collected (validation/README.md) all predict.

They are never asserted against the acceptance thresholds (some sit outside the planner's
assumptions; the README says which), but a row that fails to predict is a defect: a
catalog gap, a config the planner cannot read or a knob combination it refuses.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from infraplan.serving.validate import validate_serving
from infraplan.training.validate import validate_training

VALIDATION = Path(__file__).parents[1] / "validation"


def _count(path: Path) -> int:
    with path.open(newline="") as f:
        return sum(1 for _ in csv.DictReader(f))


@pytest.mark.parametrize("name, validate, rows", [
    ("training_holdout.csv", validate_training, 123),
    ("serving_collected.csv", validate_serving, 30),
    ("serving_holdout.csv", validate_serving, 58),
    ("serving_latency.csv", validate_serving, 120),
    ("serving_perf_tables.csv", validate_serving, 421),
    ("serving_static_tables.csv", validate_serving, 110),
    ("serving_early_tables.csv", validate_serving, 225),
])
def test_every_collected_row_predicts(name, validate, rows):
    path = VALIDATION / name
    assert _count(path) == rows
    report = validate(path)
    assert [(r.id, r.error) for r in report.failed] == []
    assert len(report.predicted_rows) == rows
    assert all(r.predicted > 0 for r in report.predicted_rows)
    assert len({r.id for r in report.rows}) == rows  # ids are unique
