"""`infraplan validate training|serving FILE.csv`: registered by src/infraplan/cli.py.
Every row's result is printed; the exit status is 2 when a row has bad input, 0 when
rows fail only on the model's limits (report/validation.py's EXIT_HELP)."""

from __future__ import annotations

import sys

from infraplan.errors import EXIT_BAD_INPUT
from infraplan.report.output import emit, progress


def _print_validation(args, kind: str, validate) -> int:
    from infraplan.report.validation import (bad_input_message, validation_summary,
                                             validation_text)

    with progress(args, f"predicting {kind} rows") as tick:
        report = validate(args.file, progress=tick)
    emit(args, f"validate_{kind}", report.to_json(), lambda: validation_text(report),
         lambda: validation_summary(report))
    # rows the model cannot predict (even all of them) are results, reported with their
    # reasons: only bad input sets the status (EXIT_HELP)
    if report.input_errors:  # every row's result is printed; the status flags the typos
        where = "json" if args.json else "quiet" if args.quiet else "text"
        print(bad_input_message(report, args.file, where), file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


def run_validate_training(args) -> int:
    from infraplan.training.validate import validate_training

    return _print_validation(args, "training", validate_training)


def run_validate_serving(args) -> int:
    from infraplan.serving.validate import validate_serving

    return _print_validation(args, "serving", validate_serving)
