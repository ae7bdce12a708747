"""A catalog table: rows by canonical name and alias, with did-you-mean on a miss."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Generic, TypeVar

import yaml
from pydantic import ValidationError

from infraplan.catalog.schema import Row
from infraplan.errors import InputError, UnknownNameError

R = TypeVar("R", bound=Row)


def _key(name: str) -> str:
    """Look-ups ignore case and treat '_' and ' ' like '-': 'H100_SXM' == 'h100-sxm'."""
    return name.strip().lower().replace("_", "-").replace(" ", "-")


class Table(Generic[R]):
    def __init__(self, kind: str, rows: list[R], listing: str | None = None):
        self.kind = kind
        self.listing = listing  # the `infraplan catalog` listing that prints the rows
        self._rows: dict[str, R] = {}
        self._index: dict[str, str] = {}
        for row in rows:
            if row.name in self._rows:
                raise InputError(f"{kind} catalog: duplicate name {row.name!r}")
            self._rows[row.name] = row
            for key in (row.name, *row.aliases):
                owner = self._index.setdefault(_key(key), row.name)
                if owner != row.name:
                    raise InputError(f"{kind} catalog: {key!r} names both {owner!r} and "
                                     f"{row.name!r}")

    def get(self, name: str, fix: str | None = None) -> R:
        """The row named `name` (or an alias); a miss raises UnknownNameError with `fix`,
        by default the listing that prints the rows."""
        key = _key(name)
        if key in self._index:
            return self._rows[self._index[key]]
        if fix is None:
            fix = f"run 'infraplan catalog {self.listing}' to list them" if self.listing \
                else f"use a name from the catalog's {self.kind} table"
        raise UnknownNameError(self.kind, name, list(self._rows) + self.aliases(), fix=fix,
                               canonical=self.canonical())

    def __contains__(self, name: str) -> bool:
        return _key(name) in self._index

    def __iter__(self) -> Iterator[R]:
        return iter(self._rows.values())

    def __len__(self) -> int:
        return len(self._rows)

    def names(self) -> list[str]:
        return list(self._rows)

    def aliases(self) -> list[str]:
        return [a for row in self._rows.values() for a in row.aliases]

    def canonical(self) -> dict[str, str]:
        """Each alias -> its row's name."""
        return {a: row.name for row in self._rows.values() for a in row.aliases}


def load_table(path: Path, row_type: type[R], kind: str,
               listing: str | None = None) -> Table[R]:
    """Read a YAML list of rows; a bad row names the file, the row and the field."""
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise InputError(f"{path.name}: not valid YAML ({exc})") from None
    if not isinstance(raw, list):
        raise InputError(f"{path.name}: expected a list of {kind} rows")
    rows = []
    for i, item in enumerate(raw):
        name = item.get("name", f"row {i}") if isinstance(item, dict) else f"row {i}"
        try:
            rows.append(row_type.model_validate(item))
        except ValidationError as exc:
            raise InputError(f"{path.name}: {kind} {name!r}: {describe_validation(exc)}") \
                from None
    return Table(kind, rows, listing)


def describe_validation(exc: ValidationError) -> str:
    """One line per pydantic error: 'field.sub: message'."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "value"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        parts.append(f"{loc}: {msg}")
    return "; ".join(parts)
