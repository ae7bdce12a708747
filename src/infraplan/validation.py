"""Predictions of published measurements, row by row (validation/README.md): the shared
report of `infraplan validate training` and `infraplan validate serving`."""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from infraplan.errors import InfraplanError, InputError


@dataclass(frozen=True)
class RowResult:
    id: str
    predicted: float | None
    published: float
    plan: Any = None  # what produced the prediction; has describe()
    error: str | None = None

    @property
    def error_pct(self) -> float | None:
        if self.predicted is None:
            return None
        return 100.0 * (self.predicted / self.published - 1.0)


@dataclass(frozen=True)
class ValidationReport:
    rows: list[RowResult]

    @property
    def predicted_rows(self) -> list[RowResult]:
        return [r for r in self.rows if r.predicted is not None]

    @property
    def median_abs_error_pct(self) -> float:
        errors = [abs(r.error_pct) for r in self.predicted_rows]
        return float(np.median(errors)) if errors else float("nan")

    @property
    def max_abs_error_pct(self) -> float:
        errors = [abs(r.error_pct) for r in self.predicted_rows]
        return float(max(errors)) if errors else float("nan")

    @property
    def failed(self) -> list[RowResult]:
        return [r for r in self.rows if r.predicted is None]

    def to_json(self) -> dict:
        return {
            "rows": [{"id": r.id, "predicted": r.predicted, "published": r.published,
                      "error_pct": r.error_pct,
                      "plan": r.plan.describe() if r.plan else None} for r in self.rows],
            "median_abs_error_pct": self.median_abs_error_pct,
            "max_abs_error_pct": self.max_abs_error_pct,
            "failed": [{"id": r.id, "reason": r.error} for r in self.failed],
        }


def validate_file(path: str | Path, columns: tuple[str, ...], kind: str,
                  predict: Callable[[dict, Path], RowResult],
                  progress: Callable[[int, int], None] | None = None) -> ValidationReport:
    """Predict every row of a CSV; a row that cannot be predicted is reported, not fatal."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"validation file {str(path)!r} does not exist")
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"{path.name}: missing columns {', '.join(missing)}",
                             fix=f"see validation/README.md for the {kind} CSV schema")
        rows = list(reader)
    results = []
    for done, row in enumerate(rows, 1):
        try:
            results.append(predict(row, path.parent))
        except InfraplanError as exc:
            results.append(RowResult(id=row.get("id", "?"), predicted=None,
                                     published=_number(row.get("value")), error=str(exc)))
        if progress:
            progress(done, len(rows))
    return ValidationReport(results)


def _number(text) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return float("nan")


def row_int(row: dict, key: str) -> int | None:
    text = (row.get(key) or "").strip()
    if not text:
        return None
    try:
        value = int(float(text))
    except ValueError:
        raise InputError(f"row {row.get('id')!r}: {key}={text!r} is not a number") from None
    if value < 0:
        raise InputError(f"row {row.get('id')!r}: {key} must be >= 0, got {value}")
    return value
