"""Predictions of published measurements, row by row (validation/README.md): the shared
report of `infraplan validate training` and `infraplan validate serving`."""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from infraplan.errors import InfraplanError, InputError, close_matches
from infraplan.files import check_user_file
from infraplan.validation_cells import cell_number, suffix_notes


@dataclass(frozen=True)
class RowResult:
    id: str
    predicted: float | None
    published: float
    plan: Any = None  # what produced the prediction; has describe()
    error: str | None = None
    metric: str = ""  # the row's metric cell: what `predicted` and `published` measure
    notes: tuple[str, ...] = ()  # what a reader should know about a predicted row
    line: int | None = None  # the CSV line the row ends on (1 = the header)
    kind: str | None = None  # a failed row's cause: "input" (the row) or "model" (infraplan)
    stand_in: str = ""  # serving: the engine cell a stand-in engine simulated, if any
    stand_in_match: str = ""  # ... and the catalog engine closest to it, if any

    @property
    def error_pct(self) -> float | None:
        if self.predicted is None:
            return None
        return 100.0 * (self.predicted / self.published - 1.0)


class RowModelError(InputError):
    """A row infraplan cannot predict although its cells are valid (no plan fits in memory,
    the simulated engine cannot hold the requests): a limit of the model, not of the row."""


# The signed error of every row, and what its sign means for each kind of metric
ERROR_DEFINITION = "error = (predicted - published) / published"
_TIME_SIGN = "negative: predicted faster (less time) than published"
_RATE_SIGN = "negative: predicted lower (slower) than published"


def _is_rate(metric: str) -> bool:
    """Tokens or requests per second (a negative error: slower), not a time (faster)."""
    return "_per_s" in metric or metric.endswith("_tok_s")


def error_definition(metrics) -> str:
    """The error's formula, with the meaning of its sign for the time metrics (step_s,
    gpu_hours, latencies) and the rate metrics (tokens or requests per second) present."""
    rates = [m for m in metrics if _is_rate(m)]
    times = [m for m in metrics if m and m not in rates]
    signs = ([f"{_TIME_SIGN} ({', '.join(times)})"] if times else []) + \
        ([f"{_RATE_SIGN} ({', '.join(rates)})"] if rates else [])
    return "; ".join([ERROR_DEFINITION, *signs])


@dataclass(frozen=True)
class ValidationReport:
    rows: list[RowResult]
    file: str = ""

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
    def max_abs_error_id(self) -> str | None:
        """The id of the row with the largest |error| (the first such row on a tie)."""
        rows = self.predicted_rows
        return max(rows, key=lambda r: abs(r.error_pct)).id if rows else None

    @property
    def mean_error_pct(self) -> float:
        """The mean signed error, the bias: negative when the predictions run low (faster
        for a time metric, slower for a rate), unlike the median |error| that hides it. NaN
        when no row predicted or the rows mix times and rates, whose signs mean opposites."""
        rows = self.predicted_rows
        if len({_is_rate(r.metric) for r in rows}) != 1:
            return float("nan")
        return float(np.mean([r.error_pct for r in rows]))

    @property
    def failed(self) -> list[RowResult]:
        return [r for r in self.rows if r.predicted is None]

    @property
    def input_errors(self) -> list[RowResult]:
        """The rows that failed on their own cells (exit status 2), not on the model."""
        return [r for r in self.failed if r.kind != "model"]

    @property
    def stand_ins(self) -> list[RowResult]:
        """Predicted rows whose engine the catalog does not hold (a stand-in simulated it)."""
        return [r for r in self.predicted_rows if r.stand_in]

    @property
    def error_definition(self) -> str:
        return error_definition(dict.fromkeys(r.metric for r in self.predicted_rows))

    def to_json(self) -> dict:
        return {
            "file": self.file,
            "error_definition": self.error_definition,
            "rows": [{"id": r.id, "line": r.line, "metric": r.metric,
                      "predicted": r.predicted, "published": r.published,
                      "error_pct": r.error_pct, "plan": r.plan.describe() if r.plan else None,
                      "notes": list(r.notes)} for r in self.rows],
            "median_abs_error_pct": self.median_abs_error_pct,
            "max_abs_error_pct": self.max_abs_error_pct,
            "max_abs_error_id": self.max_abs_error_id,
            "mean_error_pct": self.mean_error_pct,
            "failed": [{"id": r.id, "line": r.line, "kind": r.kind, "reason": r.error}
                       for r in self.failed],
            "input_errors": len(self.input_errors),
            "stand_in_engines": [{"id": r.id, "line": r.line, "engine": r.stand_in,
                                  "did_you_mean": r.stand_in_match or None}
                                 for r in self.stand_ins],
        }


def validate_file(path: str | Path, columns: tuple[str, ...], kind: str,
                  predict: Callable[[dict, Path], RowResult],
                  progress: Callable[[int, int], None] | None = None,
                  optional: tuple[str, ...] = ("derivation",),
                  terms: tuple[tuple[str, str], ...] = ()) -> ValidationReport:
    """Predict every row of a CSV; a row that cannot be predicted is reported, not fatal.
    `optional`: the schema's columns a file may leave out; other columns are kept as
    notes, unless one is a near miss of a schema column (a typo would drop its values).
    `terms`: (regex, replacement) pairs that put a failed row's reason, written for scenario
    files (`pin.tp`, `training.global_batch`), in the CSV's columns."""
    path = Path(path)
    schema = f"see validation/README.md for the {kind} CSV schema"
    try:
        check_user_file(path, "validation file")
    except InputError as exc:
        raise InputError(exc.message, fix=exc.fix or f"give the path of a {kind} CSV file "
                         f"(e.g. validation/{kind}_dev.csv); {schema}") from None
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:  # -sig: Excel's BOM
            reader = csv.DictReader(handle)
            if not reader.fieldnames:
                raise InputError(f"{path.name} is empty; expected a header row and data rows",
                                 fix=schema)
            # 'id, source, ...': spaces after the commas are not part of the names
            reader.fieldnames = [c.strip() for c in reader.fieldnames]
            _check_kind(path, reader.fieldnames, kind)
            _check_near_misses(path.name, reader.fieldnames, columns + optional, schema)
            twice = sorted({c for c in reader.fieldnames if reader.fieldnames.count(c) > 1})
            if twice:  # DictReader would keep the last cell of each silently
                raise InputError(f"{path.name}: the header names {', '.join(twice)} twice",
                                 fix="keep one column of each name")
            missing = [c for c in columns if c not in reader.fieldnames]
            if missing:
                header = ",".join(reader.fieldnames)
                other = next((sep for sep in ";\t|" if sep in header and all(
                    c in header.split(sep) for c in columns)), None)
                if other is not None:  # Excel in many locales writes ';'
                    raise InputError(f"{path.name}: the columns are separated by "
                                     f"{other!r}, not commas",
                                     fix="save it as comma-separated values (CSV with ',')")
                raise InputError(f"{path.name}: missing column"
                                 f"{'s' if len(missing) > 1 else ''}: {', '.join(missing)}",
                                 fix=schema)
            rows = [(reader.line_num, row) for row in reader]  # the line each row ends on
    except UnicodeDecodeError as exc:
        raise InputError(f"{path.name}: not UTF-8 text ({exc.reason} at byte {exc.start})",
                         fix="save the CSV as UTF-8") from None
    except csv.Error as exc:
        raise InputError(f"{path.name}: not a readable CSV ({exc})", fix=schema) from None
    except OSError as exc:  # unreadable: permissions, an I/O error
        raise InputError(f"{path.name}: cannot be read ({exc.strerror})",
                         fix="check the file's permissions, or give a copy you can read") \
            from None
    if not rows:
        raise InputError(f"{path.name}: no data rows under the header", fix=schema)
    results, first_of = [], {}  # first_of: id -> the data row that first named it
    for done, (line, row) in enumerate(rows, 1):
        rid = (row.get("id") or "").strip()
        try:
            _check_width(row, len(reader.fieldnames))
            _check_id(row, done, first_of)
            result = predict(row, path.parent)
            if not (math.isfinite(result.predicted) and result.predicted > 0):
                raise RowModelError(f"the model gives no finite prediction > 0 "
                                    f"(got {result.predicted!r}) for this metric")
            results.append(replace(result, metric=_metric_cell(row), line=line,
                                   notes=(*result.notes, *suffix_notes(row))))
        except InfraplanError as exc:
            reason = str(exc)
            for pattern, replacement in terms:  # the planners' scenario keys, as columns
                reason = re.sub(pattern, replacement, reason)
            results.append(RowResult(
                id=rid or "?", predicted=None, published=_number(row.get("value")),
                error=located(reason, path.name, line, rid), metric=_metric_cell(row),
                line=line, kind="model" if isinstance(exc, RowModelError) else "input"))
        if progress:
            progress(done, len(rows))
    return ValidationReport(results, file=str(path))


_ROW_PREFIX = re.compile(r"^row (?:'[^']*'|\"[^\"]*\"|None): ")


def located(message: str, file: str, line: int, rid: str) -> str:
    """Every row's message starts the same way: 'FILE:LINE: row 'ID': ' (a message that
    already names its row loses that prefix)."""
    who = f"row {rid!r}: " if rid else ""
    return f"{file}:{line}: {who}{_ROW_PREFIX.sub('', message)}"


# Columns only one kind's schema has: a header with the other kind's is the wrong command
_KIND_MARKERS = {"training": ("global_batch", "seq_len", "micro_batch"),
                 "serving": ("input_len", "output_len", "arrival")}


def _check_kind(path: Path, header: list[str], kind: str) -> None:
    mine = _KIND_MARKERS.get(kind, ())
    other = next((k for k, cols in _KIND_MARKERS.items() if k != kind
                  and all(c in header for c in cols)), None)
    if other and not any(c in header for c in mine):
        raise InputError(f"{path.name}: this header is the {other} CSV schema, not the "
                         f"{kind} one (it has {', '.join(_KIND_MARKERS[other])})",
                         fix=f"run infraplan validate {other} {path}")


def _metric_cell(row: dict) -> str:
    return (row.get("metric") or "").strip()


def _check_near_misses(name: str, header: list[str], known: tuple[str, ...],
                       schema: str) -> None:
    """A column the schema does not know, close to one of its columns the file lacks
    ('engnie', 'Model'), is a typo: its cells would be ignored without a word."""
    absent = [c for c in known if c not in header]
    misses = [(c, close[0]) for c in header if c not in known
              and (close := close_matches(c, absent, n=1))]
    if misses:
        shown = "; ".join(f"{c!r}: did you mean {m!r}?" for c, m in misses[:5])
        raise InputError(f"{name}: {'a column is' if len(misses) == 1 else 'columns are'} "
                         f"not in the schema ({shown})",
                         fix=f"rename {'it' if len(misses) == 1 else 'them'}; {schema}")


def _check_id(row: dict, number: int, first_of: dict[str, int]) -> None:
    """Ids name the rows in the report and its JSON: each must be given, and only once."""
    rid = (row.get("id") or "").strip()
    if not rid:
        raise InputError(f"data row {number} has no id", fix="give every row an id")
    if rid in first_of:
        raise InputError(f"row {rid!r}: data row {number} repeats the id of data row "
                         f"{first_of[rid]}", fix="give each row its own id")
    first_of[rid] = number


def _check_width(row: dict, width: int) -> None:
    """csv.DictReader fills a short row with None and files a long row's extra cells under
    the key None: either way the cells no longer line up with the header."""
    extra = len(row.get(None) or [])
    cells = width - sum(v is None for k, v in row.items() if k is not None) + extra
    if cells != width:
        raise InputError(f"row {row.get('id')!r}: {cells} cells but the header has {width} "
                         "columns", fix="quote cells that contain commas; give every row "
                                        "one cell per column (empty cells are allowed)")


def _number(text) -> float:
    try:
        return cell_number(text)
    except (AttributeError, ValueError):
        return float("nan")
