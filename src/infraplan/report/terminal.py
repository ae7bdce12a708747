"""Plain-text views for the terminal: tables and the memory breakdown."""

from __future__ import annotations

import io
import sys
from collections.abc import Sequence

from infraplan.units import GiB, format_count


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], *,
          align_right: Sequence[int] = ()) -> str:
    """A `rich` table as text: columns listed in align_right are right-aligned (numbers).
    Bold headers on a terminal, plain text in a pipe or a file; never wrapped or cut."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold",
              collapse_padding=True)
    for i, header in enumerate(headers):
        t.add_column(str(header), justify="right" if i in align_right else "left",
                     no_wrap=True, overflow="fold")
    for row in rows:
        t.add_row(*("" if c is None else str(c) for c in row))
    buffer = io.StringIO()
    Console(file=buffer, width=100_000, force_terminal=_stdout_is_terminal(),
            highlight=False).print(t)
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines()).strip("\n")


def _stdout_is_terminal() -> bool:
    return sys.stdout is not None and sys.stdout.isatty()  # None: stdout closed (>&-)


def _bar(fraction: float, width: int = 30) -> str:
    filled = max(0, min(width, round(fraction * width)))
    return "#" * filled + "." * (width - filled)


def _gib(value: float) -> str:
    """Bytes in GiB, grouped: one unit down the memory breakdown, as the capacity's."""
    return f"{value / GiB:,.2f} GiB"


def memory_report(check) -> str:
    """The per-accelerator memory breakdown of a fit check's plan, whether it fits, and the
    fixes it found (training.fit_check.FitCheck)."""
    report, fixes, min_gpus = check.report, check.fixes, check.min_gpus_for_model_states
    plan = report.plan
    lines = [
        f"{report.model} on {plan.num_gpus} x {report.accelerator}",
        f"plan: {plan.describe()}",
        f"job: {report.job_summary()}",
        f"params: {format_count(report.params_total)} total, "
        f"{format_count(report.params_active)} active; "
        f"{format_count(report.params_per_gpu)} per accelerator before ZeRO sharding, "
        f"{format_count(report.trainable_params_per_gpu)} of them trainable",
        "",
        f"memory per accelerator (pipeline rank {report.pipeline_rank}, the fullest):",
    ]
    capacity = report.capacity_bytes
    parts = [("weights", report.weights_bytes), ("gradients", report.gradients_bytes),
             ("optimizer", report.optimizer_bytes), ("activations", report.activations_bytes),
             ("overhead", report.overhead_bytes)]
    for name, value in parts:
        lines.append(f"  {name:<12}{_gib(value):>13}  {_bar(value / capacity)}")
    detail = ", ".join(f"{k} {v / GiB:,.2f}" for k, v in report.overhead_items() if v > 0)
    lines.append(f"  {'':<12}{'':>13}  ({detail} GiB)")
    used = report.total_bytes / capacity
    lines.append(f"  {'total':<12}{_gib(report.total_bytes):>13}  of "
                 f"{_gib(capacity)} ({used:.0%})")
    lines.append("")
    if report.fits:
        lines.append(f"FITS with {_gib(report.headroom_bytes)} to spare.")
    else:
        lines.append(f"DOES NOT FIT: {_gib(-report.headroom_bytes)} over.")
        lines.append(check.fixes_heading + (":" if fixes else "."))
        if fixes:
            width = max(26, *(len(label) for label, _ in fixes))
            for label, fixed in fixes:
                lines.append(f"  {label:<{width}} total {_gib(fixed.total_bytes)} "
                             f"({fixed.total_bytes / capacity:.0%})")
        if min_gpus and min_gpus > plan.num_gpus:
            lines.append(f"The model states alone need at least {min_gpus} x "
                         f"{report.accelerator} (fully sharded, before activations).")
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join(lines)
