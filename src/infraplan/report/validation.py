"""Terminal view of `infraplan validate`: each row's prediction against the published figure,
then the error's definition, the summary, each failed row's reason and each row's notes.
Numbers in grouped digits, never exponents."""

from __future__ import annotations

import math

from infraplan.report.terminal import table
from infraplan.training.evaluate import PlanResult
from infraplan.training.plan import plan_legend

# Each kind's --help on what is printed and the exit status, in the kind's own words
_BAD_INPUT = {"training": "a typo, a bad number, an impossible plan such as tp*pp*cp*dp not "
                          "equal to num_gpus",
              "serving": "a typo, a bad number, num_gpus not a multiple of tp, an engine "
                         "without the row's KV format"}
_MODEL_LIMIT = {"training": "no plan fits in memory",
                "serving": "the replica's memory holds no KV cache for the requests, or the "
                           "engine refuses them"}
EXIT_HELP = {kind: "Every row's result is printed (predicted, published, signed error, plan; "
             "then the median and max |error| and each failed row's reason); --quiet prints "
             "the summary line, and the bad rows' reasons on stderr. The exit status is 2 "
             f"when any row has bad input ({_BAD_INPUT[kind]}) or the file cannot be read, "
             "and 0 otherwise, also when the model cannot predict some or all rows "
             f"({limit})." for kind, limit in _MODEL_LIMIT.items()}


def figure(value: float | None) -> str:
    """Four significant digits in grouped digits, never an exponent: 27,303, 8,425, 2.691,
    0.05545; '-' for no number (a failed row, a published cell that is not a number)."""
    if value is None or not math.isfinite(value):
        return "-"
    if abs(value) >= 1000 or value == 0:
        return f"{value:,.0f}"
    decimals = 3 - math.floor(math.log10(abs(value)))
    return f"{value:,.{decimals}f}"


def validation_text(report) -> str:
    """The table of rows; a metric column when the file mixes metrics (step_s beside
    gpu_hours, output_tok_s beside ttft_p50_s), else the one metric above the table."""
    metrics = list(dict.fromkeys(r.metric for r in report.rows))
    mixed = len(metrics) > 1
    rows = []
    for r in report.rows:
        if r.predicted is None:
            # the reason follows the summary, once: in the table it would set every row's width
            cells = ["-", figure(r.published), "failed", f"({r.kind} error: reason below)"]
        else:
            cells = [figure(r.predicted), figure(r.published), f"{r.error_pct:+.1f}%",
                     (r.plan.describe() if r.plan else "") + (" (note below)" if r.notes
                                                              else "")]
        rows.append([r.id, *([r.metric] if mixed else []), *cells])
    head = ["row", *(["metric"] if mixed else []), "predicted", "published", "error", "plan"]
    right = [head.index(c) for c in ("predicted", "published", "error")]
    lines = [] if mixed or not metrics[0] else [f"metric: {metrics[0]}"]
    plans = [r.plan.plan for r in report.rows if isinstance(r.plan, PlanResult)]
    lines += [table(head, rows, align_right=right), *([plan_legend(plans)] if plans else []),
              "", report.error_definition,
              validation_summary(report)]
    lines += [f"  failed ({r.kind} error) {r.error}" for r in report.failed]
    name = report.file.rsplit("/", 1)[-1]
    lines += [f"  note {name}:{r.line}: row {r.id!r}: {note}"
              for r in report.predicted_rows for note in r.notes]
    return "\n".join(lines)


def validation_summary(report) -> str:
    """Rows, median and max |error| (and the max's row) and the mean signed error over the
    rows that predicted, failures (bad input apart from the model's limits), and the rows a
    stand-in engine simulated."""
    if not report.predicted_rows:
        errors = "no row predicted"
    else:
        bias = report.mean_error_pct  # NaN when the rows mix times and rates
        errors = (f"median |error| {report.median_abs_error_pct:.1f}%, "
                  f"max |error| {report.max_abs_error_pct:.1f}% (row "
                  f"{report.max_abs_error_id!r})"
                  + (f", mean error {bias:+.1f}% (bias)" if math.isfinite(bias) else ""))
    failed = len(report.failed)
    bad = len(report.input_errors)
    split = f" ({bad} bad input, {failed - bad} beyond the model)" if failed else ""
    line = f"rows: {len(report.rows)}, {errors}, failed: {failed}{split}"
    if report.stand_ins:
        names = dict.fromkeys(f"{r.stand_in!r}" + (f" (did you mean {r.stand_in_match!r}?)"
                                                   if r.stand_in_match else "")
                              for r in report.stand_ins)
        line += (f"; {len(report.stand_ins)} predicted with a stand-in engine for "
                 f"{', '.join(names)}")
    return line


# the bad rows whose reasons a --quiet run's error lists; the others are counted
QUIET_REASONS = 5


def bad_input_message(report, file: str, where: str = "text") -> str:
    """The stderr lines of a run whose rows include bad input (exit status 2). `where` the
    rows' reasons are: "text" (printed above), "json" (the "failed" list); "quiet": nowhere
    else, so the message carries them (the first QUIET_REASONS and a count)."""
    bad = report.input_errors
    lines = ", ".join(str(r.line) for r in bad[:10]) + (", ..." if len(bad) > 10 else "")
    head = (f"error: {len(bad)} row{'s' if len(bad) > 1 else ''} of {file} "
            f"{'have' if len(bad) > 1 else 'has'} bad input (line {lines})")
    if where == "json":
        return f"{head}. To fix: see each row's reason in the JSON's \"failed\" list"
    if where != "quiet":
        return f"{head}. To fix: see each row's reason above"
    shown = [f"  {r.error}" for r in bad[:QUIET_REASONS]]
    more = len(bad) - QUIET_REASONS
    if more > 0:
        shown.append(f"  ... and {more} more (run without --quiet to see every row)")
    return "\n".join([f"{head}:", *shown, "To fix: correct each row as its reason says"])
