"""Terminal view of a validation run: each row's prediction against the published figure."""

from __future__ import annotations

from infraplan.report.terminal import table


def validation_report(report) -> str:
    """The table of rows; a metric column when the file mixes metrics (step_s beside
    gpu_hours, output_tok_s beside ttft_p50_s), else the one metric above the table."""
    metrics = list(dict.fromkeys(r.metric for r in report.rows))
    mixed = len(metrics) > 1
    rows = []
    for r in report.rows:
        if r.predicted is None:
            # the reason follows the summary, once: in the table it would set every row's width
            cells = ["-", f"{r.published:,.4g}", "failed", "(reason below)"]
        else:
            cells = [f"{r.predicted:,.4g}", f"{r.published:,.4g}", f"{r.error_pct:+.1f}%",
                     r.plan.describe() if r.plan else ""]
        rows.append([r.id, *([r.metric] if mixed else []), *cells])
    head = ["row", *(["metric"] if mixed else []), "predicted", "published", "error", "plan"]
    right = [head.index(c) for c in ("predicted", "published", "error")]
    lines = [] if mixed or not metrics[0] else [f"metric: {metrics[0]}"]
    lines += [table(head, rows, align_right=right), "", validation_summary(report)]
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
