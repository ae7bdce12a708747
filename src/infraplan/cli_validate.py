"""`infraplan validate training|serving FILE.csv`: registered by src/infraplan/cli.py.
Every row's result is printed; the exit status is 2 when a row has bad input."""

from __future__ import annotations

import sys

from infraplan.errors import EXIT_BAD_INPUT, InputError
from infraplan.report.output import emit, progress


def _print_validation(args, kind: str, validate) -> int:
    from infraplan.report.validation import (bad_input_message, validation_summary,
                                             validation_text)

    with progress(args, f"predicting {kind} rows") as tick:
        report = validate(args.file, progress=tick)
    emit(args, f"validate_{kind}", report.to_json(), lambda: validation_text(report),
         lambda: validation_summary(report))
    if not report.predicted_rows:  # every row failed: the reasons are printed above
        raise InputError(f"no row of {args.file} could be predicted",
                         fix="see each row's reason; validation/README.md has the schema")
    if report.input_errors:  # every row's result is above; the status flags the typos
        print(bad_input_message(report, args.file), file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


def run_validate_training(args) -> int:
    from infraplan.training.validate import validate_training

    return _print_validation(args, "training", validate_training)


def run_validate_serving(args) -> int:
    from infraplan.serving.validate import validate_serving

    return _print_validation(args, "serving", validate_serving)
