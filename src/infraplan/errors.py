"""Typed errors for people: what is wrong, the valid choices (with a close match), the fix.

Every error the library raises on bad input is an `InputError` (or a subclass). The CLI
prints `str(error)` on one line and exits 2; it never shows a traceback for these.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

EXIT_BAD_INPUT = 2  # the CLI's exit status on bad input


class InfraplanError(Exception):
    """Base of every error infraplan raises on purpose."""


class InputError(InfraplanError, ValueError):
    """Bad input: a typo, an unknown name, a negative size, an impossible plan."""

    def __init__(self, message: str, *, fix: str | None = None):
        self.message = message
        self.fix = fix
        joiner = " " if message.endswith(("?", ".", "!")) else ". "
        super().__init__(message if fix is None else f"{message}{joiner}To fix: {fix}")


class UnknownNameError(InputError):
    """A catalog look-up missed: names the kind, the close matches and what exists."""

    def __init__(self, kind: str, name: str, choices: Iterable[str], *, fix: str | None = None,
                 canonical: Mapping[str, str] | None = None):
        """`choices` are matched against, aliases too; `canonical` maps an alias to its
        row's name, so that a close match is named once, canonically, and a miss with no
        close match lists the rows rather than every alias."""
        self.kind, self.name = kind, name
        self.choices = sorted(set(choices))
        self.canonical = dict(canonical or {})
        self.listed = sorted({self.canonical.get(c, c) for c in self.choices})
        close = list(dict.fromkeys(self.canonical.get(c, c)
                                   for c in close_matches(name, self.choices, n=9)))[:3]
        self.close = close  # canonical row names, best first
        if close:
            message = f"unknown {kind} {name!r}; did you mean {', '.join(map(repr, close))}?"
        else:
            shown = ", ".join(self.listed[:12]) + (", ..." if len(self.listed) > 12 else "")
            message = f"unknown {kind} {name!r}; valid choices: {shown}"
        super().__init__(message, fix=fix)


class PlanError(InputError):
    """A parallel plan that cannot run: a degree that does not divide, a mismatch of counts."""


def close_matches(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Up to n choices close to name, ignoring case, dashes and underscores."""
    choices = list(choices)

    def key(s: str) -> str:
        return s.lower().replace("_", "-").replace(" ", "-")

    by_key = {key(c): c for c in choices}
    hits = difflib.get_close_matches(key(name), list(by_key), n=n, cutoff=0.6)
    # substring matches ("h100" -> every h100 variant) are often what a person meant
    hits += [k for k in by_key if key(name) in k and k not in hits]
    return [by_key[k] for k in hits[:n]]
