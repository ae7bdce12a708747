"""Reading the files a user names (scenarios, config.json, CSVs) with errors for people."""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

from infraplan.errors import InputError


def read_user_file(path: Path, what: str, fix: str) -> str:
    """The text of `path`; a missing or unreadable file is an InputError naming it."""
    check_user_file(path, what, fix)
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path.name}: cannot be read ({exc})", fix=fix) from None


def probe_path(path: Path, what: str, fix: str | None = None) -> tuple[bool, bool]:
    """(is a folder, is a file) of `path`; a string the OS cannot take as a path (too long,
    a NUL byte) is an InputError naming it."""
    try:
        return path.is_dir(), path.is_file()
    except (OSError, ValueError) as exc:
        raise InputError(f"{what} {str(path)[:80]!r}: not a usable path "
                         f"({getattr(exc, 'strerror', None) or exc})", fix=fix) from None


def check_user_file(path: Path, what: str, fix: str | None = None) -> None:
    """An InputError unless `path` is an existing file (a directory is named as one)."""
    is_dir, is_file = probe_path(path, what, fix)
    if is_dir:
        raise InputError(f"{what} {str(path)!r} is a directory, not a file", fix=fix)
    if not is_file:
        if path.exists():  # a device or a pipe (/dev/null) exists but is not a file
            raise InputError(f"{what} {str(path)!r} is not a regular file", fix=fix)
        near = _files_near(path)
        hint = f"; did you mean {', '.join(map(repr, near))}?" if near else ""
        raise InputError(f"{what} {str(path)!r} does not exist{hint}", fix=fix)


# How close a file's name must be to the one typed to be suggested: difflib's ratio of the
# stems (2 x matching characters / both lengths), 0.8 = one slip in about ten characters.
# The catalog's 0.6 (errors.close_matches) suits short names from a list; between file
# names it matched 'nonexist.csv' to 't_extra.csv' (0.61, mostly the shared '.csv').
NEAR_FILE_RATIO = 0.8
_SAME_SUFFIX = {".yml": ".yaml"}


def _files_near(path: Path) -> list[str]:
    """Files in `path`'s folder whose names are close to its name (a typo, a dropped
    suffix such as "-a100"), written as the user wrote the folder: the same extension, and
    stems within NEAR_FILE_RATIO or the typed stem the start of one at most twice as long."""
    try:
        names = sorted(p.name for p in path.parent.iterdir() if p.is_file())
    except OSError:
        return []

    def key(name: str) -> tuple[str, str]:
        p = Path(name.lower().replace("_", "-"))
        return p.stem, _SAME_SUFFIX.get(p.suffix, p.suffix)

    stem, suffix = key(path.name)
    scored = []
    for name in names:
        other, other_suffix = key(name)
        if other_suffix != suffix:
            continue
        ratio = difflib.SequenceMatcher(None, stem, other).ratio()
        # a name the user shortened ("train-gpt3-175b.yaml" for "...-175b-a100.yaml")
        shortened = other.startswith(stem) and 2 * len(stem) >= len(other)
        if ratio >= NEAR_FILE_RATIO or shortened:
            scored.append((-max(ratio, shortened), name))
    return [str(path.parent / n) for _, n in sorted(scored)[:3]]


def on_disk(path: Path) -> bool:
    """Anything at `path` (a file, a folder, a device such as /dev/null: reading it says
    what it is); False for a name the OS cannot take as a path (too long, a NUL byte)
    instead of an OSError: such a string is a name, not a file."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def too_big_to_read(origin: str, exc: RecursionError | ValueError, fix: str) -> InputError:
    """The error for a parsed document Python refuses to build: nesting past the recursion
    limit, or an integer past the digits it converts (the parsers raise a bare ValueError)."""
    what = "nested too deeply to read" if isinstance(exc, RecursionError) else \
        f"holds an integer of more than {sys.get_int_max_str_digits():,} digits"
    return InputError(f"{origin}: {what}", fix=fix)
