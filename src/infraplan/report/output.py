"""How every command prints: JSON with a stable schema name, a one-line headline with
--quiet, or the full terminal report; progress bars only for people at a terminal."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager

from infraplan.errors import InputError
from infraplan.report.progress import progress_bar

SCHEMA_VERSION = 1


def add_output_flags(parser, command: str | None = None, *, json_what: str = "",
                     quiet_what: str = "the answer's headline") -> None:
    """--json and --quiet; --json's help names the schema emit() writes: `command`, by
    default the parser's words after 'infraplan' ('infraplan simulate train' ->
    'infraplan.simulate_train/1'), the name every command passes to emit(). `json_what`
    and `quiet_what`: what they print, where a command prints less than its answer."""
    command = command or "_".join(parser.prog.split()[1:])
    parser.add_argument("--json", action="store_true",
                        help=f"print {json_what or ''}JSON (schema "
                             f"'infraplan.{command}/{SCHEMA_VERSION}')")
    parser.add_argument("--quiet", "-q", action="store_true",
                        help=f"print only {quiet_what}; no progress bars")


def progress(args, label: str) -> AbstractContextManager:
    return progress_bar(label, enabled=not (args.json or args.quiet))


def emit(args, command: str, data, text: Callable[[], str],
         headline: Callable[[], str] | None = None) -> int:
    """Print `data` as JSON (lists under "items"), the headline, or the full text."""
    if args.json:
        from infraplan.report.figures import json_safe  # NaN and inf -> null: strict JSON

        payload = data if isinstance(data, dict) else {"items": data}
        _write(json.dumps(json_safe({"schema": f"infraplan.{command}/{SCHEMA_VERSION}",
                                     **payload}), indent=2, default=str))
    elif args.quiet and headline is not None:
        _write(headline())
    else:
        _write(text())
    return 0


def _write(text: str) -> None:
    """Print the answer; a full disk or a closed stdout is the user's to fix, not a bug
    (a closed pipe, `| head`, is BrokenPipeError: cli.main exits 0 on it)."""
    if sys.stdout is None:  # `infraplan ... >&-`
        raise InputError("cannot write the answer: standard output is closed; "
                         "run without '>&-' or redirect it to a file")
    try:
        print(text, flush=True)
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise InputError(f"cannot write the answer to standard output: "
                         f"{exc.strerror or exc}; redirect it to a file on a disk with "
                         f"room, or use -q for the headline only") from None
