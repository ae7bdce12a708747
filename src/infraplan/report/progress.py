"""Progress bars for long library calls: a `rich` bar on stderr that appears only once the
work has taken more than a second, on a terminal, and never with --quiet or --json.

Library functions take `progress: Callable[[int, int], None] | None` and call it with
(done, total) as they go; they know nothing about terminals.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Progress = Callable[[int, int], None]
DELAY_S = 1.0  # quick commands never flash a bar


@contextmanager
def progress_bar(label: str, *, enabled: bool = True) -> Iterator[Progress | None]:
    """Yields a (done, total) callback, or None when no bar should show."""
    if not (enabled and sys.stderr.isatty()):
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, \
        TextColumn, TimeElapsedColumn

    start = time.perf_counter()
    state: dict = {}

    def update(done: int, total: int) -> None:
        if "bar" not in state:
            if time.perf_counter() - start < DELAY_S:
                return
            bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=Console(file=sys.stderr), transient=True)
            bar.start()
            state["bar"], state["task"] = bar, bar.add_task(label, total=total)
        state["bar"].update(state["task"], completed=done, total=total)

    try:
        yield update
    finally:
        if "bar" in state:
            state["bar"].stop()
