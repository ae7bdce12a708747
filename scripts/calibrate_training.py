"""Refit the training step-time model's fitted constants on the development set.

The fitted constants are `training-derate` (what GEMMs and attention keep of their measured
micro-benchmark throughput inside a training step) and `overlap-interference` (what hidden
communication still costs the computation it overlaps); every other constant comes from a
measurement or a document. The fit grid-searches both over validation/training_dev.csv.
Among the settings that keep a 5 % margin inside the acceptance thresholds (median absolute
error <= 9.5 %, max <= 23.75 %) it takes the smallest correction to the measurements: the
largest derate, then the least interference. The dev set is mostly 2021-2023 software;
a larger correction than it needs would bias the planner against today's stacks.

    python scripts/calibrate_training.py            # print the fit
    python scripts/calibrate_training.py --write    # and store it in calibration.yaml
"""

from __future__ import annotations

import argparse
import itertools
import math
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from infraplan.catalog import DATA_DIR, load_catalog  # noqa: E402
from infraplan.physics import hardware  # noqa: E402
from infraplan.training.validate import validate_training  # noqa: E402

DEV = ROOT / "validation" / "training_dev.csv"
FITTED = ("training-derate", "overlap-interference")
GRID = {"training-derate": [round(0.70 + 0.01 * i, 2) for i in range(17)],
        "overlap-interference": [0.0, 0.15, 0.3, 0.45]}


def set_constants(values: dict[str, float]) -> None:
    catalog = load_catalog()
    for name, value in values.items():
        object.__setattr__(catalog.calibration.get(name), "value", value)
    hardware.device.cache_clear()
    hardware._fabric.cache_clear()


MARGIN = 0.95  # keep 5 % inside the thresholds: median 10 %, max 25 %


def score(report, values: dict[str, float]) -> tuple[float, float, float]:
    """(how far outside the margin, -derate, interference): smaller is better."""
    if report.failed or not report.predicted_rows:
        return math.inf, 0.0, 0.0
    outside = max(report.median_abs_error_pct / (10 * MARGIN),
                  report.max_abs_error_pct / (25 * MARGIN), 1.0)
    return outside, -values["training-derate"], values["overlap-interference"]


def write_constants(values: dict[str, float], rows: list[str]) -> None:
    path = DATA_DIR / "calibration.yaml"
    text = path.read_text()
    for name, value in values.items():
        block = re.search(rf"^- name: {re.escape(name)}\n(?:  .*\n|    .*\n)*", text, re.M)
        shown = ".inf" if math.isinf(value) else value  # YAML's spelling of infinity
        new = re.sub(r"^  value: .*$", f"  value: {shown}", block.group(0), count=1, flags=re.M)
        new = re.sub(r"^  fitted_on: .*$", f"  fitted_on: [{', '.join(rows)}]", new,
                     count=1, flags=re.M)
        text = text.replace(block.group(0), new)
    path.write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="store the fit in the data")
    args = parser.parse_args()
    results = []
    for combo in itertools.product(*(GRID[name] for name in FITTED)):
        values = dict(zip(FITTED, combo, strict=True))
        set_constants(values)
        report = validate_training(DEV)
        results.append((score(report, values), values, report))
        print(f"  {values}: median {report.median_abs_error_pct:5.1f}%  "
              f"max {report.max_abs_error_pct:5.1f}%", flush=True)
    _, values, report = min(results, key=lambda r: r[0])
    errors = [r.error_pct for r in report.predicted_rows]
    log_error = sum(abs(math.log1p(e / 100)) for e in errors) / len(errors)
    print("\nfit on", DEV.relative_to(ROOT))
    for name, value in values.items():
        print(f"  {name} = {value}")
    print(f"\n{'row':32s} {'predicted':>12s} {'published':>12s} {'error':>8s}")
    for r in report.rows:
        print(f"{r.id:32s} {r.predicted:12.4g} {r.published:12.4g} {r.error_pct:+7.1f}%")
    print(f"\nmedian |error| {report.median_abs_error_pct:.1f}%, max |error| "
          f"{report.max_abs_error_pct:.1f}%, mean |log error| {log_error:.3f}")
    if args.write:
        write_constants(values, [r.id for r in report.rows])
        print(f"written to {(DATA_DIR / 'calibration.yaml').relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
