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
            results.append(replace(result, metric=_metric_cell(row), line=line))
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


# Published tables write counts as "184,320"; a suffix ("1k", "2T") is refused, not read: a
# CSV cell is a plain number (validation/README.md), and "1k" tokens is 1,000 to some
# readers and 1,024 to others
_GROUPED = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d*)?")
_SUFFIXED = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?)\s*([kmbgt])", re.I)
# each suffix's decimal and (where one is in use) binary multiplier
_SUFFIX = {"k": (1e3, 2**10), "m": (1e6, 2**20), "b": (1e9, None), "g": (1e9, 2**30),
           "t": (1e12, 2**40)}


def cell_number(text: str) -> float:
    """A cell's number: plain ('512', '3.528', '2e12') or grouped by thousands ('184,320');
    ValueError otherwise. '1,5' is not a grouping and '1k' not a number: never guessed."""
    text = text.strip()
    if _GROUPED.fullmatch(text):
        text = text.replace(",", "")
    return float(text)


def _plain(value: float) -> str:
    """A number as a CSV cell should hold it: digits for a whole number, else Python's
    shortest form (1400000000, 1.5, 2e+20)."""
    return str(int(value)) if value.is_integer() and abs(value) < 1e16 else repr(value)


def _check_no_suffix(row: dict, key: str, text: str) -> None:
    """An InputError for a cell such as '1k' or '2T': the two numbers it may mean, written
    plainly."""
    suffixed = _SUFFIXED.fullmatch(text)
    if not suffixed:
        return
    number, suffix = float(suffixed.group(1)), suffixed.group(2)
    decimal, binary = _SUFFIX[suffix.lower()]
    write = _plain(number * decimal)
    if binary:  # "1k" tokens: 1,000 or 1,024
        write += f" or {_plain(number * binary)}, whichever the source means"
    raise InputError(f"row {row.get('id')!r}: {key} {text!r} has a suffix ({suffix}); a cell "
                     "holds a plain number", fix=f"write {write} (exponent form such as "
                     "2.0e12 also works)")


def _bound(low: int, high: int | None) -> str:
    return f">= {low}" if high is None else f"between {low} and {high}"


def row_word(row: dict, key: str, default: str = "") -> str:
    """A cell that names a choice (precision, recompute, arrival...), case folded."""
    return (row.get(key) or "").strip().lower() or default


def row_choice(row: dict, key: str, choices, default: str = "") -> str:
    """A cell naming one of `choices` (case folded), or `default` when empty; otherwise an
    error naming the column, the value, the choices and the close match."""
    word = row_word(row, key, default)
    if word and word not in choices:
        close = close_matches(word, list(choices), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise InputError(f"row {row.get('id')!r}: {key} {word!r} is not one of "
                         f"{', '.join(choices)}{hint}",
                         fix=f"set the {key} cell to one of {', '.join(choices)}")
    return word


def row_flag(row: dict, key: str) -> bool | None:
    """A true/false cell (also yes/no, 1/0); None when empty."""
    text = row_word(row, key)
    if not text:
        return None
    if text in ("true", "yes", "1"):
        return True
    if text in ("false", "no", "0"):
        return False
    raise InputError(f"row {row.get('id')!r}: {key} must be true or false, got {text!r}",
                     fix=f"set the {key} cell to true or false (yes/no and 1/0 also work), "
                         "or leave it empty")


# The largest count a cell may hold (GPUs, sequences, tokens a sequence): a signed 32-bit
# integer, far above any published run, so that products of counts stay exact in floats.
ROW_INT_MAX = 2**31 - 1


def row_int(row: dict, key: str, *, required: bool = False, low: int | None = None,
            high: int | None = None) -> int | None:
    """The whole number in low..high (low: 1 if required, else 0; high: ROW_INT_MAX) in a
    row's cell; None for an empty cell unless required."""
    low = (1 if required else 0) if low is None else low
    rid = row.get("id")
    fix = f"set the {key} cell to a whole number {_bound(low, high)}"
    text = (row.get(key) or "").strip()
    if not text:
        if required:
            raise InputError(f"row {rid!r}: {key} is required and must be >= {low}", fix=fix)
        return None
    _check_no_suffix(row, key, text)
    try:
        number = cell_number(text)
        value = int(number)
    except (ValueError, OverflowError):  # 'abc', 'nan', 'inf'
        raise InputError(f"row {rid!r}: {key} {text!r} is not a number", fix=fix) from None
    if value != number:
        raise InputError(f"row {rid!r}: {key} {text!r} is not a whole number", fix=fix)
    if value < low or (high is not None and value > high):
        raise InputError(f"row {rid!r}: {key} must be {_bound(low, high)}, got {value}",
                         fix=fix)
    if value > ROW_INT_MAX:
        raise InputError(f"row {rid!r}: {key} must be at most {ROW_INT_MAX:,}, got {text}",
                         fix=fix)
    return value


def row_float(row: dict, key: str, *, required: bool = False) -> float | None:
    """The finite number > 0 in a row's cell; None for an empty cell unless required."""
    rid = row.get("id")
    fix = f"set the {key} cell to a plain number > 0 (such as 3.528 or 2.0e12)"
    text = (row.get(key) or "").strip()
    if not text:
        if required:
            raise InputError(f"row {rid!r}: {key} is empty",
                             fix=f"give the published {key} as a number > 0")
        return None
    _check_no_suffix(row, key, text)
    try:
        value = cell_number(text)
    except ValueError:
        raise InputError(f"row {rid!r}: {key} {text!r} is not a number", fix=fix) from None
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"row {rid!r}: {key} must be a finite number > 0, got {text!r}",
                         fix=fix)
    return value


def row_metric(row: dict, metrics) -> str:
    """The row's `metric` cell, one of `metrics`; otherwise an error listing them and the
    close ones."""
    metric = row_word(row, "metric")
    if metric not in metrics:
        close = close_matches(metric, metrics)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise InputError(f"row {row['id']!r}: metric {metric!r} is not one of "
                         f"{', '.join(metrics)}{hint}",
                         fix=f"set the metric cell to one of {', '.join(metrics)}")
    return metric
