"""Reading the files a user names (scenarios, config.json, CSVs) with errors for people."""

from __future__ import annotations

from pathlib import Path

from infraplan.errors import InputError


def read_user_file(path: Path, what: str, fix: str) -> str:
    """The text of `path`; a missing or unreadable file is an InputError naming it."""
    if not path.is_file():
        raise InputError(f"{what} {str(path)!r} does not exist", fix=fix)
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path.name}: cannot be read ({exc})", fix=fix) from None
