"""Terminal views of training plans: ranked plans, the frontier, the best plan's breakdown,
and why other knob values lost."""

from __future__ import annotations

from infraplan.physics import hardware
from infraplan.report.terminal import table
from infraplan.training.plan import plan_legend
from infraplan.units import GiB, format_count, run_length

COMPONENTS = {"compute": "compute", "recompute": "recompute", "tp_comm": "TP comm",
              "cp_comm": "CP comm", "ep_comm": "EP all-to-all", "pp_p2p": "PP send/recv",
              "bubble": "pipeline bubble", "dp_comm": "DP sync", "zero3_comm": "ZeRO-3 gathers",
              "optimizer": "optimizer", "data_stall": "data stall"}
HIDDEN = {"tp_comm": "TP comm behind GEMMs", "cp_comm": "ring attention behind attention",
          "pp_p2p": "PP send/recv behind the next chunk",
          "dp_comm": "DP sync behind backward / forward",
          "zero3_comm": "ZeRO-3 gathers behind layer compute",
          "ep_comm": "expert all-to-all behind another micro-batch"}


def _days(seconds):
    return "-" if seconds is None else run_length(seconds)


def cost_cell(p) -> str:
    """A plan's cost in the plans tables (the CLI's and the report's): whole dollars, '-'
    when unpriced."""
    cost = p.economics and p.economics["cost"]
    return f"${cost['total_usd']:,.0f}" if cost else "-"


def plans_table(plans) -> str:
    rows = []
    for p in plans:
        rows.append([p.accelerator, p.plan.num_gpus, p.plan.describe(), f"{p.step_s:,.2f}",
                     f"{p.tokens_per_s / p.plan.num_gpus:,.0f}", f"{p.mfu:.1%}",
                     _days(p.time_to_train_s),
                     f"{p.gpu_hours:,.0f}" if p.gpu_hours is not None else "-", cost_cell(p),
                     memory_cell(p)])
    return table(["GPU", "count", "plan", "step s", "tok/s/GPU", "MFU", "time",
                  "GPU-hours", "cost", "mem GiB"], rows, align_right=[1, 3, 4, 5, 6, 7, 8, 9])


def memory_cell(p) -> str:
    """Memory per accelerator over the capacity the fit check compares it with (the
    catalog's memory_bytes, what the framework can allocate: 79.6 GiB on an H100 80GB),
    both to 0.1 GiB as the errors that name them."""
    return f"{p.memory_bytes / GiB:.1f}/{p.capacity_bytes / GiB:.1f}"


def economics_lines(e: dict) -> list[str]:
    """A plan's cost line items, energy and carbon, each with how it was computed."""
    if e["cost"] is None:
        lines = [f"cost: unknown ({e['missing_price']})"]
    else:
        lines = [f"cost ${e['cost']['total_usd']:,.0f}:"]
        lines += [f"  {i['name']:<22} ${i['usd']:>14,.2f}  {i['formula']}"
                  for i in e["cost"]["items"]]
        lines += [f"  {e['unbilled_note']}"] if e.get("unbilled_note") else []
    return lines + [f"energy {e['energy_formula']}", *energy_notes(e)]


def economics_notes(e: dict, energy_label: str = "energy") -> list[str]:
    """A report's notes under a plan's cost (plan_economics' JSON): what the cost leaves
    unbilled, the energy's formula under `energy_label`, and energy_notes."""
    return [e["unbilled_note"]] * bool(e.get("unbilled_note")) + [
        f"{energy_label}: {e['energy_formula']}", *energy_notes(e)]


def energy_notes(e: dict) -> list[str]:
    """What the energy leaves out (the servers' own draw, unless set) and the grid intensity
    the carbon is taken at, with its source (plan_economics' JSON)."""
    lines = [f"host: {e['host_note']}"] if e.get("host_note") else []
    if not e["intensity_note"]:
        return lines
    hint = " (set energy.region for the grid you run on)" if e["region"] == "world" else ""
    return lines + [f"grid: {e['intensity_note']}{hint}"]


def breakdown(p) -> str:
    lines = [f"step {p.step_s:,.3f} s: " + ", ".join(
        f"{COMPONENTS[k]} {v:,.3f}" for k, v in p.breakdown_s.items() if v > 5e-4)]
    if p.hidden_s:
        lines.append("overlapped (hidden): " + ", ".join(
            f"{HIDDEN[k]} {v:,.3f} s" for k, v in p.hidden_s.items()))
    lines.append(f"MFU {p.mfu:.1%}, HFU {p.hfu:.1%}, {p.tokens_per_s:,.0f} tokens/s")
    if p.time_to_train_s is not None:
        energy = "" if p.economics else f", {p.it_energy_kwh:,.0f} kWh (GPUs at TDP)"
        goodput = hardware.calibration("run-goodput")
        lines.append(f"time to train {_days(p.time_to_train_s)} (with {goodput:.0%} run "
                     "goodput: restarts, checkpoints, evaluation), "
                     f"{p.gpu_hours:,.0f} GPU-hours{energy}")
    if p.economics:
        lines += economics_lines(p.economics)
    return "\n".join(lines)


def frontier_title(result) -> str:
    """What the frontier trades time against: cost once the plans are priced (the search
    ranks on cost rates then), else GPU-hours."""
    economics = result.best[0].economics
    return f"time vs {'cost' if economics and economics['cost'] else 'GPU-hours'} frontier"


def search_report(model: str, result) -> str:
    best = result.best[0]
    lines = [f"{model}: {result.configs_evaluated:,} plans evaluated of "
             f"{result.candidates:,} candidates ({result.fitting:,} fit) in "
             f"{result.search_seconds:.2f} s", "", "best plans:", plans_table(result.best), "",
             f"best: {best.plan.num_gpus} x {best.accelerator}, {best.plan.describe()}",
             breakdown(best), ""]
    if len(result.by_accelerator) > 1:
        lines += ["best plan of each accelerator:", plans_table(result.by_accelerator), ""]
    lines += [f"{frontier_title(result)}:", plans_table(result.frontier),
              plan_legend(p.plan for p in (*result.best, *result.frontier,
                                           *result.by_accelerator))]
    if result.rejected:
        lines += ["", "why other choices lost (best plan with that value):"]
        lines += [f"  {r}" for r in result.rejected]
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)


__all__ = ["search_report", "plans_table", "cost_cell", "breakdown", "memory_cell", "format_count"]
