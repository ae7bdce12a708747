"""Reading a validation CSV's cells: numbers as published tables write them, choices,
flags and metrics, each refusal naming its row, its column and the fix."""

from __future__ import annotations

import math
import re

from infraplan.errors import InputError, close_matches

# Published tables write counts as "184,320" or "2T" (tokens); a suffix is read as SI,
# never binary, and the row's notes say so (suffix_notes): "1k" tokens is 1,000 to some
# readers and 1,024 to others
_GROUPED = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d*)?")
_SUFFIXED = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?)\s*([kmbgt])", re.I)
_SUFFIX = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
_BINARY = {"k": 2**10, "m": 2**20, "g": 2**30}  # where a binary reading is in use
# columns that hold names and prose, never a number
_TEXT_COLUMNS = ("id", "source", "derivation", "model", "gpu", "engine")


def cell_number(text: str) -> float:
    """A cell's number: plain ('512', '3.528', '2e12'), grouped by thousands ('184,320') or
    with an SI suffix ('2T', '1.4 B'); ValueError otherwise. '1,5' is not a grouping: never
    guessed."""
    text = text.strip()
    if _GROUPED.fullmatch(text):
        text = text.replace(",", "")
    suffixed = _SUFFIXED.fullmatch(text)
    if suffixed:
        return float(suffixed.group(1)) * _SUFFIX[suffixed.group(2).lower()]
    return float(text)


def _plain(value: float) -> str:
    """A number as a CSV cell may hold it: digits for a whole number, else Python's
    shortest form (1400000000, 1.5, 2e+20)."""
    return str(int(value)) if value.is_integer() and abs(value) < 1e16 else repr(value)


def suffix_notes(row: dict) -> list[str]:
    """A note for each numeric cell written with a suffix: the SI number it was read as,
    and the binary one to write instead when that may be what the source means."""
    notes = []
    for key, text in row.items():
        suffixed = _SUFFIXED.fullmatch((text or "").strip()) \
            if isinstance(key, str) and key not in _TEXT_COLUMNS else None
        if suffixed:
            number, suffix = float(suffixed.group(1)), suffixed.group(2).lower()
            read = _plain(number * _SUFFIX[suffix])
            binary = (f"; write {_plain(number * _BINARY[suffix])} if the source means "
                      "binary" if suffix in _BINARY else "")
            notes.append(f"{key} {text.strip()!r} read as {read} (a suffix is SI{binary})")
    return notes


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
