"""Terminal view of a validation run: each row's prediction against the published figure."""

from __future__ import annotations

from infraplan.report.terminal import table


def validation_report(report) -> str:
    rows = []
    for r in report.rows:
        if r.predicted is None:
            # the reason follows the summary, once: in the table it would set every row's width
            rows.append([r.id, "-", f"{r.published:,.4g}", "failed", "(reason below)"])
        else:
            rows.append([r.id, f"{r.predicted:,.4g}", f"{r.published:,.4g}",
                         f"{r.error_pct:+.1f}%", r.plan.describe() if r.plan else ""])
    lines = [table(["row", "predicted", "published", "error", "plan"], rows,
                   align_right=[1, 2, 3]), "", validation_summary(report)]
    lines += [f"  failed {r.id}: {r.error}" for r in report.failed]
    return "\n".join(lines)


def validation_summary(report) -> str:
    """One line: rows, median and max |error| over the rows that predicted, failures."""
    if not report.predicted_rows:
        errors = "no row predicted"
    else:
        errors = (f"median |error| {report.median_abs_error_pct:.1f}%, "
                  f"max |error| {report.max_abs_error_pct:.1f}%")
    return f"rows: {len(report.rows)}, {errors}, failed: {len(report.failed)}"
