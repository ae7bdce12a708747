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
from tests.conftest import assert_readme_quotes

VALIDATION = Path(__file__).parents[1] / "validation"


def _count(path: Path) -> int:
    with path.open(newline="") as f:
        return sum(1 for _ in csv.DictReader(f))


# Where the project README quotes a file's summary: a pattern whose groups are the median
# and (if quoted) the max |error| in percent.
README_QUOTES = {
    "training_holdout.csv": r"On 191 published runs no constant was fitted on \(.*?\) it is "
                            r"([\d.]+) %",
    "serving_holdout.csv": r"on 152 published TensorRT-LLM, vLLM and LMDeploy rows.*?\) it is "
                           r"([\d.]+) %",
    "serving_latency.csv": r"`validation/serving_latency\.csv`:.*?\): median ([\d.]+) %",
    "serving_perf_tables.csv": r"`validation/serving_perf_tables\.csv`.*?give ([\d.]+) % "
                               r"median and ([\d.]+) % max",
    "serving_static_tables.csv": r"`validation/serving_static_tables\.csv`, 110 cells\) "
                                 r"([\d.]+) %",
    "serving_early_tables.csv": r"`validation/serving_early_tables\.csv`, 225 cells\) "
                                r"([\d.]+) %",
    "serving_ifb_tables.csv": r"`validation/serving_ifb_tables\.csv`, 171 cells.*?gives "
                              r"([\d.]+) % median and ([\d.]+) % max",
}


@pytest.mark.parametrize("name, validate, rows", [
    ("training_holdout.csv", validate_training, 191),
    ("serving_collected.csv", validate_serving, 29),
    ("serving_holdout.csv", validate_serving, 152),
    ("serving_latency.csv", validate_serving, 120),
    ("serving_perf_tables.csv", validate_serving, 519),
    ("serving_static_tables.csv", validate_serving, 110),
    ("serving_early_tables.csv", validate_serving, 225),
    ("serving_ifb_tables.csv", validate_serving, 171),
])
def test_every_collected_row_predicts(name, validate, rows):
    path = VALIDATION / name
    assert _count(path) == rows
    report = validate(path)
    assert [(r.id, r.error) for r in report.failed] == []
    assert len(report.predicted_rows) == rows
    assert all(r.predicted > 0 for r in report.predicted_rows)
    assert len({r.id for r in report.rows}) == rows  # ids are unique
    if name in README_QUOTES:
        assert_readme_quotes(README_QUOTES[name], report)


@pytest.mark.parametrize("path", sorted(VALIDATION.glob("serving_*.csv")), ids=lambda p: p.stem)
def test_no_static_batch_row_beats_streaming_its_weights(path):
    """A decode step reads every weight it touches (at batch 32 and up, every expert of a
    top-2-of-8 MoE), so a static batch of B sequences cannot produce more than
    B / (weight bytes per GPU / HBM peak) output tokens per second. A row above that bound
    was transcribed with the wrong per-GPU or per-group reading."""
    from infraplan.catalog import load_catalog
    from infraplan.models import load_model
    from infraplan.serving.memory import weight_bytes_per_gpu
    from infraplan.serving.quantization import weight_format

    accelerators = load_catalog().accelerators
    with path.open(newline="") as f:
        rows = [r for r in csv.DictReader(f)
                if r["arrival"] == "static_batch" and r["metric"] == "output_tok_s"]
    for row in rows:
        gpu = accelerators.get(row["gpu"])
        arch = load_model(row["model"], base_dir=VALIDATION)
        weights = weight_bytes_per_gpu(
            arch, weight_format(row["weight_dtype"], gpu, gpu.sixteen_bit),
            int(row["tp"]))
        batch = int(row["batch"])
        moe = arch.moe
        if arch.is_moe and moe.num_experts * (1 - moe.experts_per_token / moe.num_experts) \
                ** batch > 0.01:
            continue  # a small batch leaves experts unread: the bound needs fewer bytes
        bound = batch * gpu.memory_bandwidth_bytes_per_s / weights
        assert float(row["value"]) <= bound, row["id"]
