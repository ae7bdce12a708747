"""Plotly figures as plain dicts: `{"data": [...], "layout": {...}}`, JSON-ready.

Pure functions from library results to figure dicts; nothing here imports plotly (the HTML
report and the web page hand the dicts to plotly.js as they are). Quantities stay SI inside
and are scaled only for the axes, whose titles carry the unit. `cost_items` is the one place
a cost is computed for the report and the web UI (the economics package will replace it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from infraplan.units import GiB

SECONDS_PER_DAY = 86400.0
COLORS = ("#2f6fb0", "#e07b39", "#3a9a5b", "#c4424d", "#8a63b8", "#8c6d4f", "#d16fb1",
          "#6f7a86", "#b8b23a", "#3ab0c4", "#1f3f66", "#f2b134")
# step-time parts, in stacking order, with the labels the terminal report uses
STEP_PARTS = {"compute": "compute", "recompute": "recompute", "tp_comm": "exposed TP comm",
              "cp_comm": "exposed CP comm", "ep_comm": "exposed EP all-to-all",
              "pp_p2p": "exposed PP send/recv", "dp_comm": "exposed DP sync",
              "zero3_comm": "exposed ZeRO-3 gathers", "bubble": "pipeline bubble",
              "optimizer": "optimizer", "data_stall": "data stall"}
MEMORY_PARTS = {"weights_bytes": "weights", "gradients_bytes": "gradients",
                "optimizer_bytes": "optimizer states", "activations_bytes": "activations",
                "kv_bytes": "KV cache", "overhead_bytes": "overhead"}


def cost_items(economics: dict) -> list[dict]:
    """A plan's cost line items (economics.spec.plan_economics, the same call `plan train`
    and `plan serve` print) as rows for tables and the cost figure."""
    return [{"item": i["name"], "usd": i["usd"], "basis": i["formula"]}
            for i in economics["cost"]["items"]]


def total_usd(items: Sequence[dict]) -> float:
    return float(sum(i["usd"] for i in items))


def _layout(title: str, x_title: str, y_title: str, **extra) -> dict:
    layout = {"title": {"text": title, "font": {"size": 15}},
              "xaxis": {"title": {"text": x_title}, "automargin": True},
              "yaxis": {"title": {"text": y_title}, "automargin": True},
              "margin": {"l": 10, "r": 10, "t": 40, "b": 10}, "autosize": True,
              "legend": {"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
              "font": {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif",
                       "size": 12},
              "paper_bgcolor": "rgba(0,0,0,0)", "plot_bgcolor": "#fafafa"}
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(layout.get(key), dict):
            layout[key] = {**layout[key], **value}
        else:
            layout[key] = value
    return layout


def log_ticks(lo: float, hi: float, most: int = 8) -> dict:
    """A log axis' ticks at 1, 2 and 5 times a power of ten within [lo, hi], or at the
    decades alone when those would be more than `most`: left to itself, plotly labels the
    minor ticks between decades with small single digits ('3 4 5 6 7 8 9'), once per
    decade. {} (plotly's own ticks) when the range holds fewer than two."""
    if not (math.isfinite(lo) and math.isfinite(hi) and 0 < lo < hi):
        return {}
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    for steps in ((1, 2, 5), (1,)):
        values = [float(f"{m}e{k}") for k in decades for m in steps
                  if lo <= float(f"{m}e{k}") <= hi]
        if 2 <= len(values) <= most:
            return {"tickmode": "array", "tickvals": values,
                    "ticktext": [f"{v:,g}" for v in values]}
    return {}


def _plan_label(p) -> str:
    """Hover text of a plan: count, accelerator and its parallel layout."""
    return f"{p.plan.num_gpus} x {p.accelerator}: {p.plan.describe()}"


def frontier_figure(result, *, cost_usd: Callable | None = None) -> dict:
    """Time to train against GPU-hours (or USD when `cost_usd(plan)` is given) of the
    frontier plans, each accelerator's best, with the chosen plan marked."""
    best = result.best[0]
    has_tokens = best.time_to_train_s is not None

    def x_of(p):
        if cost_usd is not None:
            return cost_usd(p)
        return p.gpu_hours if has_tokens else p.step_s * p.plan.num_gpus / 3600.0

    def y_of(p):
        return p.time_to_train_s / SECONDS_PER_DAY if has_tokens else p.step_s

    traces = []
    by_gpu: dict[str, list] = {}
    for p in result.frontier:
        by_gpu.setdefault(p.accelerator, []).append(p)
    for n, (gpu, plans) in enumerate(by_gpu.items()):
        plans = sorted(plans, key=x_of)
        traces.append({"type": "scatter", "mode": "lines+markers", "name": f"frontier {gpu}",
                       "x": [x_of(p) for p in plans], "y": [y_of(p) for p in plans],
                       "text": [_plan_label(p) for p in plans], "hoverinfo": "text+x+y",
                       "marker": {"color": COLORS[n % len(COLORS)], "size": 8}})
    others = [p for p in result.by_accelerator if p is not best]
    if others:
        traces.append({"type": "scatter", "mode": "markers", "name": "best of each GPU type",
                       "x": [x_of(p) for p in others], "y": [y_of(p) for p in others],
                       "text": [_plan_label(p) for p in others], "hoverinfo": "text+x+y",
                       "marker": {"symbol": "diamond", "size": 10, "color": "#6f7a86"}})
    traces.append({"type": "scatter", "mode": "markers", "name": "chosen plan",
                   "x": [x_of(best)], "y": [y_of(best)], "text": [_plan_label(best)],
                   "hoverinfo": "text+x+y",
                   "marker": {"symbol": "star", "size": 16, "color": "#c4424d"}})
    x_title = "cost (USD)" if cost_usd is not None else \
        ("GPU-hours" if has_tokens else "GPU-hours per step")
    y_title = "time to train (days)" if has_tokens else "step time (s)"
    title = "Time vs cost" if cost_usd is not None else "Time vs GPU-hours"
    # grouped ticks, as the tables print the figures: '$1,000,000', '600,000'
    xaxis = {"tickformat": ",", **({"tickprefix": "$"} if cost_usd is not None else {})}
    return {"data": traces, "layout": _layout(f"{title}: Pareto frontier", x_title, y_title,
                                              xaxis=xaxis)}


def memory_figure(bars: Sequence[dict]) -> dict:
    """Memory per accelerator, stacked by component. Each bar: {"label", "capacity_bytes",
    and any of MEMORY_PARTS' keys in bytes}."""
    labels = [b["label"] for b in bars]
    traces = []
    for n, (key, name) in enumerate(MEMORY_PARTS.items()):
        if not any(b.get(key) for b in bars):
            continue
        traces.append({"type": "bar", "name": name, "y": labels,
                       "x": [b.get(key, 0.0) / GiB for b in bars], "orientation": "h",
                       "marker": {"color": COLORS[n]},
                       "hovertemplate": name + ": %{x:.2f} GiB<extra></extra>"})
    traces.append({"type": "scatter", "mode": "markers", "name": "capacity", "y": labels,
                   "x": [b["capacity_bytes"] / GiB for b in bars],
                   "marker": {"symbol": "line-ns-open", "size": 22, "color": "#111",
                              "line": {"width": 3}},
                   "hovertemplate": "capacity %{x:.1f} GiB<extra></extra>"})
    return {"data": traces, "layout": _layout("Memory per accelerator", "GiB", "",
                                              barmode="stack", height=240 + 44 * len(bars),
                                              yaxis={"autorange": "reversed"})}


def step_breakdown_figure(plans: Sequence, labels: Sequence[str] | None = None) -> dict:
    """Step time of each plan, stacked: compute, recompute, exposed communication by kind,
    pipeline bubble, optimizer, data stall (PlanResult.breakdown_s). `labels` name the bars
    (by default each plan's count and accelerator)."""
    labels = list(labels) if labels is not None else [
        f"{p.plan.num_gpus} x {p.accelerator}" for p in plans]
    hover = [p.plan.describe() for p in plans]
    traces = []
    for n, (key, name) in enumerate(STEP_PARTS.items()):
        values = [p.breakdown_s.get(key, 0.0) for p in plans]
        if not any(v > 0 for v in values):
            continue
        traces.append({"type": "bar", "name": name, "y": labels, "x": values,
                       "orientation": "h", "marker": {"color": COLORS[n % len(COLORS)]},
                       "customdata": hover, "hovertemplate": name + ": %{x:.3f} s<br>"
                       "%{customdata}<extra></extra>"})
    return {"data": traces, "layout": _layout("Step time breakdown", "seconds per step", "",
                                              barmode="stack", height=260 + 44 * len(plans),
                                              yaxis={"autorange": "reversed"})}


def _cdf(values: np.ndarray, points: int = 400) -> tuple[list[float], list[float]]:
    """The empirical CDF at up to `points` quantiles (a plot needs no more)."""
    values = np.sort(np.asarray(values, dtype=float))
    values = values[np.isfinite(values)]
    if values.size == 0:
        return [], []
    q = np.linspace(0.0, 1.0, min(points, values.size))
    return np.quantile(values, q).tolist(), q.tolist()


def latency_cdf_figure(latencies: dict[str, np.ndarray]) -> dict:
    """Empirical CDFs of TTFT, TPOT and end-to-end latency (serving.metrics.latencies)."""
    traces, shown = [], []
    for n, (key, name) in enumerate((("ttft_s", "time to first token"),
                                     ("tpot_s", "time per output token"),
                                     ("e2e_s", "end to end"))):
        x, y = _cdf(latencies[key])
        shown += [v for v in x if v > 0]
        traces.append({"type": "scatter", "mode": "lines", "name": name, "x": x, "y": y,
                       "line": {"color": COLORS[n], "width": 2},
                       "hovertemplate": name + ": %{x:.4f} s at %{y:.1%}<extra></extra>"})
    return {"data": traces,
            "layout": _layout("Latency CDF", "latency (s, log scale)", "share of requests",
                              xaxis={"type": "log", **(log_ticks(min(shown), max(shown))
                                                       if shown else {})},
                              yaxis={"range": [0, 1.02], "tickformat": ".0%"})}


def load_sweep_figure(points: Sequence[dict], slo=None) -> dict:
    """Throughput (sustained, and completed in the finite run) and p99 latencies against
    offered load. Each point: {"rate_per_s", "sustained_requests_per_s", "requests_per_s",
    "ttft_p99_s", "tpot_p99_s", "e2e_p99_s"}."""
    rates = [p["rate_per_s"] for p in points]
    traces = [{"type": "scatter", "mode": "lines+markers", "name": "sustained (req/s)",
               "x": rates, "y": [p["sustained_requests_per_s"] for p in points],
               "marker": {"color": COLORS[0]}},
              {"type": "scatter", "mode": "markers", "name": "completed in the run (req/s)",
               "x": rates, "y": [p["requests_per_s"] for p in points],
               "marker": {"color": COLORS[0], "symbol": "circle-open"}}]
    for n, (key, name) in enumerate((("ttft_p99_s", "p99 TTFT (s)"),
                                     ("tpot_p99_s", "p99 TPOT (s)"),
                                     ("e2e_p99_s", "p99 end to end (s)")), start=1):
        traces.append({"type": "scatter", "mode": "lines+markers", "name": name, "x": rates,
                       "y": [p[key] for p in points], "yaxis": "y2",
                       "line": {"dash": "dot"}, "marker": {"color": COLORS[n]}})
    shapes = []
    if slo is not None:
        for n, limit in ((1, slo.ttft_p99_s), (2, slo.tpot_p99_s), (3, slo.e2e_p99_s)):
            if limit is not None:
                shapes.append({"type": "line", "xref": "paper", "x0": 0, "x1": 1,
                               "yref": "y2", "y0": limit, "y1": limit,
                               "line": {"color": COLORS[n], "width": 1, "dash": "dash"}})
    return {"data": traces, "layout": _layout(
        "Throughput and p99 latency vs load", "offered load (requests/s)",
        "throughput (requests/s)", shapes=shapes,
        # tickmode auto: plotly.js 3+ may sync an overlaying axis' ticks to the axis under
        # it, which on a log axis labels fractional decades with one digit ('5', '4', ...)
        yaxis2={"title": {"text": "p99 latency (s, log; dashed: SLO)"}, "overlaying": "y",
                "side": "right", "type": "log", "automargin": True, "tickmode": "auto",
                "showgrid": False})}


def _dollars(value: float) -> str:
    """A bar's label: whole dollars, cents only under $100."""
    return f"${value:,.2f}" if abs(value) < 100 else f"${value:,.0f}"


def cost_figure(items: Sequence[dict], title: str = "Cost by line item") -> dict:
    """One bar per line item labelled with its dollars; its basis (a sentence) is in the
    hover and in the section's "cost line items" table: drawn inside the bar, plotly shrank
    it to a few pixels."""
    return {"data": [{"type": "bar", "x": [i["item"] for i in items],
                      "y": [i["usd"] for i in items],
                      "text": [_dollars(i["usd"]) for i in items], "textposition": "outside",
                      "textfont": {"size": 13}, "cliponaxis": False,
                      "customdata": [i["basis"] for i in items],
                      "marker": {"color": COLORS[0]},
                      "hovertemplate": "%{x}: %{text}<br>%{customdata}<extra></extra>"}],
            "layout": _layout(title, "", "USD", showlegend=False,
                              yaxis={"tickprefix": "$", "tickformat": ",",
                                     "rangemode": "tozero"},
                              margin={"t": 40})}


def goodput_figure(blocking_s: float, mtbf_s: float, restart_s: float,
                   chosen_interval_s: float, waste: Callable[[float], float], *,
                   daly_interval_s: float | None = None, mtbf_text: str | None = None,
                   shortest_interval_s: float = 0.0) -> dict:
    """Share of wall time doing useful work, 1 - waste(interval), over checkpoint intervals
    around the chosen one (Daly's, or the upload when Daly's is shorter: then Daly's is
    marked too); `waste` is reliability.checkpoint.waste_fraction bound to the job's
    checkpoint cost, MTBF and restart time; `mtbf_text` is the MTBF as the page shows it.
    The curve starts no shorter than `shortest_interval_s` (the upload: a checkpoint starts
    only once the last is durable) nor the time a checkpoint blocks training."""
    lo = max(blocking_s, shortest_interval_s, chosen_interval_s / 30.0)
    hi = min(max(chosen_interval_s * 30.0, lo * 10), mtbf_s * 4)
    intervals = np.geomspace(lo, max(hi, lo * 2), 80)
    goodput = [max(0.0, 1.0 - waste(float(t))) for t in intervals]
    best = max(0.0, 1.0 - waste(chosen_interval_s))
    minutes = intervals / 60.0
    daly = [] if daly_interval_s is None or daly_interval_s >= chosen_interval_s else [
        {"type": "scatter", "mode": "markers", "name": "Daly's (shorter than the upload)",
         "x": [daly_interval_s / 60.0], "y": [max(0.0, 1.0 - waste(daly_interval_s))],
         "marker": {"symbol": "circle-open", "size": 12, "color": "#c4424d"}}]
    return {"data": [
        {"type": "scatter", "mode": "lines", "name": "goodput", "x": minutes.tolist(),
         "y": goodput, "line": {"color": COLORS[0], "width": 2},
         "hovertemplate": "every %{x:.3g} min: %{y:.2%}<extra></extra>"},
        {"type": "scatter", "mode": "markers", "name": "interval used",
         "x": [chosen_interval_s / 60.0], "y": [best],
         "marker": {"symbol": "star", "size": 14, "color": "#c4424d"}}, *daly],
        "layout": _layout("Goodput vs checkpoint interval (MTBF "
                          f"{mtbf_text or f'{mtbf_s / 3600:,.1f} h'})",
                          "checkpoint interval (minutes, log scale)", "goodput",
                          xaxis={"type": "log", **log_ticks(minutes[0], minutes[-1])},
                          yaxis={"tickformat": ".1%"})}


def json_safe(value):
    """A copy with NaN and infinities as None (JSON has no such numbers) and NumPy scalars
    and arrays as Python ones."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
