"""The document of a training plan: the search's numbers, memory per accelerator, the step
breakdown, the frontier in GPU-hours and dollars, and the checkpoint plan with its goodput.

Every number is read from `plan_training`'s SearchResult (the call `infraplan plan train`
makes) or from the library function named beside it; nothing is recomputed here.
"""

from __future__ import annotations

import math

from infraplan.models import load_model, param_counts
from infraplan.physics import hardware
from infraplan.physics.memory.training import MemoryOptions
from infraplan.report import figures as fig
from infraplan.report.document import days, item, ordered, section, size_text, table, usd
from infraplan.report import run as run_view
from infraplan.report.run import decimals
from infraplan.report.training import (COMPONENTS, HIDDEN, cost_cell, economics_notes,
                                       frontier_title)
from infraplan.training.constraints import OBJECTIVES, constraint_terms
from infraplan.training.memory import training_memory
from infraplan.units import GiB, duration_text, format_count, format_figure, run_length

COMM_KINDS = ("tp_comm", "cp_comm", "ep_comm", "pp_p2p", "dp_comm", "zero3_comm")


def _memory_options(t, plan) -> MemoryOptions:
    return MemoryOptions(seq_len=t.seq_len, precision=plan.precision, grad_dtype=t.grad_dtype,
                         optimizer=t.optimizer, kernels=t.kernels)


def _plans_table(title: str, plans) -> dict:
    rows = [[p.accelerator, p.plan.num_gpus, p.plan.describe(), f"{p.step_s:,.3f}",
             f"{p.tokens_per_s / p.plan.num_gpus:,.0f}", f"{p.mfu:.1%}",
             days(p.time_to_train_s), "-" if p.gpu_hours is None else f"{p.gpu_hours:,.0f}",
             cost_cell(p), f"{p.memory_bytes / GiB:.1f} / {p.capacity_bytes / GiB:.1f}"]
            for p in plans]
    return table(title, ["GPU", "count", "plan", "step s", "tokens/s/GPU", "MFU",
                         "time to train", "GPU-hours", "cost", "memory GiB"], rows)


def _costs(plans) -> dict:
    """{id(plan): cost line items} for plans priced by plan_training."""
    return {id(p): fig.cost_items(p.economics) for p in plans
            if p.economics and p.economics["cost"]}


def _breakdown_bars(result, others) -> tuple[list, list[str]]:
    """(plans, bar labels) of the step breakdown chart: the first three best plans, labelled
    with their rank in the best plans table, then each other accelerator's best plan, by its
    rank when that table holds it, else as 'best <accelerator> plan'."""
    plans, labels = [], []
    for p in [*result.best[:3], *others]:
        if any(p is q for q in plans):
            continue
        rank = next((n for n, q in enumerate(result.best, 1) if q is p), None)
        name = f"{p.plan.num_gpus} x {p.accelerator}"
        plans.append(p)
        labels.append(f"#{rank} {name}" if rank else f"best {p.accelerator} plan: {name}")
    return plans, labels


def _memory_bars(scenario, arch, plans) -> list[dict]:
    bars = []
    for p in plans:
        m = training_memory(arch, p.accelerator, p.plan, _memory_options(scenario.training, p),
                            global_batch=scenario.training.global_batch)
        bars.append({"label": f"{p.plan.num_gpus} x {p.accelerator}",
                     "weights_bytes": m.weights_bytes, "gradients_bytes": m.gradients_bytes,
                     "optimizer_bytes": m.optimizer_bytes,
                     "activations_bytes": m.activations_bytes,
                     "overhead_bytes": m.overhead_bytes, "total_bytes": m.total_bytes,
                     "capacity_bytes": m.capacity_bytes})
    return bars


def _checkpoints(scenario, arch, best, setup=None) -> tuple[dict, dict]:
    """(checkpoint plan numbers, goodput figure) for the best plan: training/simulate_run's
    run_setup, the same call `simulate train` makes, so the two report the same plan."""
    from infraplan.reliability.checkpoint import waste_fraction
    from infraplan.training.simulate_run import run_setup

    setup = setup or run_setup(scenario, best, arch)
    plan, mtbf_s, restart_s = setup.checkpoint, setup.mtbf_s, setup.restart_s
    failures, gpus = setup.failures, best.plan.num_gpus
    # the wall time the failures land in, as simulate train draws it: the failure-free work
    # (tokens / tokens-per-second) plus the modelled loss, work / (1 - waste); not plan
    # train's time to train, whose 90% fleet goodput would count the loss twice
    tokens = scenario.training.tokens
    exposed_s = tokens / best.tokens_per_s / (1 - plan.waste_fraction) \
        if tokens and best.tokens_per_s > 0 and plan.waste_fraction < 1 else None
    numbers = {"storage_tier": setup.tier.name, "asynchronous": setup.asynchronous,
               "size_bytes": plan.size_bytes, "blocking_s": plan.blocking_s,
               "write_s": plan.write_s, "interval_s": plan.interval_s,
               "daly_interval_s": plan.daly_interval_s,
               "waste_fraction": plan.waste_fraction, "restart_s": restart_s,
               "failure_detection_s": scenario.run.failure_detection_s,
               "run_goodput": hardware.calibration("run-goodput"),
               "mtbf_s": mtbf_s, "derivation": failures.derivation,
               "exposed_s": exposed_s,
               "expected_interruptions": failures.expected_interruptions(
                   gpus, exposed_s) if exposed_s else None}
    figure = fig.goodput_figure(plan.blocking_s, mtbf_s, restart_s, plan.interval_s,
                                lambda t: waste_fraction(t, plan.blocking_s, mtbf_s,
                                                         restart_s),
                                daly_interval_s=plan.daly_interval_s,
                                mtbf_text=duration_text(mtbf_s),
                                shortest_interval_s=plan.write_s)
    return numbers, figure


SIZE_MISMATCH = 0.1  # a billed checkpoint this far from the modelled one is pointed out


def _billing_note(scenario, k: dict) -> list[str]:
    """Why the cost's checkpoint line names another tier than the one written to, and
    another size than the checkpoint the Yield plan writes, if so; without a checkpoint
    line, what to set to bill the checkpoints it writes."""
    billed = scenario.billed_costs()
    if not billed.checkpoint_gb:
        gb = k["size_bytes"] / 1e9
        return [f"The Yield plan writes {size_text(k['size_bytes'])} a checkpoint to "
                f"{k['storage_tier']}, which the cost does not bill: set costs.checkpoint_gb: "
                f"{gb:,.3g} and costs.checkpoint_tier: {k['storage_tier']} to bill one kept "
                "copy (costs.checkpoints_kept for more)."]
    notes = []
    if billed.checkpoint_tier != k["storage_tier"]:
        notes.append(f"Checkpoints are written to {k['storage_tier']}; the cost bills the "
                     f"{billed.checkpoints_kept:,} kept copies of {billed.checkpoint_gb:,g} GB "
                     f"(costs.checkpoint_gb) at {billed.checkpoint_tier}'s price. Set "
                     "costs.checkpoint_tier (or run.checkpoint_storage) to bill them where "
                     "they are written.")
    written_gb = k["size_bytes"] / 1e9
    if abs(billed.checkpoint_gb / written_gb - 1) > SIZE_MISMATCH:
        notes.append(f"The cost bills {billed.checkpoint_gb:,g} GB a checkpoint "
                     f"(costs.checkpoint_gb), the Yield plan writes {size_text(k['size_bytes'])}"
                     " (the model and optimizer states a restart needs). Keep the scenario's "
                     "figure if the kept copies hold less (weights only), else set "
                     f"costs.checkpoint_gb: {written_gb:,.3g}.")
    return notes


def _run_simulation(scenario, best, arch):
    """simulate train's runs of the chosen plan when the scenario has a run: block, which
    asks for its pricing strategies; else None."""
    if "run" not in scenario.model_fields_set or best.time_to_train_s is None:
        return None
    from infraplan.training.simulate_run import simulate_training_run

    return simulate_training_run(scenario, best, arch=arch)


def _reconciliation(sim, best, cost) -> list[str]:
    """How the table's on-demand cost relates to the cost in Economics: plan train bills its
    time to train (at the fleet's run goodput) and storage; the runs bill their compute."""
    base = sim.strategies.get("on_demand")
    if base is None or not cost:
        return []
    compute = [c for c in cost if c["item"].startswith("compute")]
    extras = [c for c in cost if not c["item"].startswith("compute")]
    billed = "; ".join(f"{c['item']}: {c['basis']}" for c in compute)
    if extras:
        billed += ", plus " + ", ".join(f"{c['item']} {usd(c['usd'])}" for c in extras)
    goodput = hardware.calibration("run-goodput")
    return [f"The cost in Economics, {usd(fig.total_usd(cost))}, is plan train's over its "
            f"{days(best.time_to_train_s)} to train at {goodput:.0%} run goodput ({billed}). "
            "This table bills compute alone, over runs drawn with this plan's own failures, "
            f"preemptions and checkpoints: the on-demand median run lasts "
            f"{run_length(base.wall_s.p50)} and costs {usd(base.cost_usd.p50)}."]


def _strategies(sim, best=None, cost=None) -> tuple[list[dict], list[str]]:
    """(the strategy table, its paragraphs) of simulate train's runs, as the CLI prints them,
    with simulate train's notes: the reserved GPUs' commitment and how plan train's time
    and cost relate to the runs sit right under the table."""
    if sim is None:
        return [], []
    title = "pricing strategies: Monte-Carlo runs of the chosen plan (simulate train)"
    paragraphs = [f"Price per GPU-hour, {line}" for line in run_view.price_lines(sim)]
    paragraphs += [line[0].upper() + line[1:] + "." for line in run_view.spot_lines(sim)]
    under = [*([sim.commitment] if sim.commitment else []),
             *([sim.plan_train_note] if sim.plan_train_note else [])]
    under += _reconciliation(sim, best, cost) if best is not None else []
    # the unused-price notes are plan train's too: Pick platform prints them
    others = [n for n in sim.notes if n not in under and n not in sim.price_notes]
    notes = [n[0].upper() + n[1:] + ("" if n.endswith(".") else ".") for n in under]
    return [table(title, run_view.strategy_columns(sim), run_view.strategy_rows(sim), notes)], [
        run_view.COLUMNS_LINE[0].upper() + run_view.COLUMNS_LINE[1:] + ".", *paragraphs,
        *run_view.against_on_demand(sim), *run_view.interval_lines(sim),
        *[n[0].upper() + n[1:] + ("" if n.endswith(".") else ".") for n in others],
        run_view.trials_line(sim) + "."]


SOURCES = {"scan": "the scan's least mean wall time", "daly": "Daly's",
           "upload": "Daly's raised to the upload", "given": "given"}


def _interval_used(k: dict, sim=None) -> str:
    """The interval used, and why it is not Daly's when it is longer; with simulate train's
    runs, the interval each strategy's runs were drawn with (its table's column), since
    those are the intervals the report's run figures come from."""
    used = duration_text(k["interval_s"])
    if sim is not None:
        runs = sim.strategies.values()
        sources = {d.interval_source for d in runs}
        one = len(sources) == 1
        each = ", ".join(f"{run_view.LABELS[key]} {duration_text(d.interval_s)}"
                         + ("" if one else f" ({SOURCES[d.interval_source]})")
                         for key, d in sim.strategies.items())
        how = f" ({SOURCES[sources.pop()]})" if one else ""
        first = _interval_used(k)
        return f"simulated{how}: {each}; first-order plan: {first}"
    if k["interval_s"] <= k["daly_interval_s"]:
        return f"{used}: Daly's"
    write = "upload" if k["asynchronous"] else "write"
    return (f"{used}: Daly's raised to the checkpoint's {write}, since a checkpoint cannot "
            "start before the last one is durable")


def _yield_plan(k: dict, notes: list[str], tables: list[dict] = (), sim=None) -> dict:
    """The Yield plan section: the checkpoint plan, and why plan train's time to train (the
    published 90% fleet goodput) differs from what simulate train models for this plan;
    `tables` and `notes` follow."""
    mode = "async" if k["asynchronous"] else "synchronous"
    assumed = 1 - k["run_goodput"]
    lost = f"{k['waste_fraction']:.{decimals([k['waste_fraction']], 2)}%}"
    return section("DEPLOY", "Yield plan", items=[
        item("job MTBF", k["mtbf_s"], duration_text(k["mtbf_s"])),
        item("expected interruptions over the run", k["expected_interruptions"],
             "-" if k["expected_interruptions"] is None
             else f"{k['expected_interruptions']:,.1f} over {days(k['exposed_s'])}: the "
                  f"failure-free work plus the {lost} modelled loss, at one per job MTBF"),
        item("checkpoint size", k["size_bytes"], size_text(k["size_bytes"])),
        item("checkpoint tier", k["storage_tier"], k["storage_tier"]),
        item(f"training blocked per checkpoint ({mode})", k["blocking_s"],
             duration_text(k["blocking_s"])),
        item("checkpoint durable after", k["write_s"], duration_text(k["write_s"])),
        item("checkpoint interval (Daly)", k["daly_interval_s"],
             duration_text(k["daly_interval_s"])),
        item("checkpoint interval used", k["interval_s"], _interval_used(k, sim)),
        item("restart (failure detection + reload)", k["restart_s"],
             f"{duration_text(k['restart_s'])}: {duration_text(k['failure_detection_s'])} "
             f"detection + {duration_text(k['restart_s'] - k['failure_detection_s'])} reload"),
        item("wall time lost, modelled for this plan", k["waste_fraction"], lost),
        item("wall time lost, assumed by plan train", assumed, f"{assumed:.0%}")],
        tables=list(tables), figures=["goodput"], paragraphs=[
            f"plan train's time to train and GPU-hours assume {k['run_goodput']:.0%} "
            "goodput whatever the plan: the published fleet figure that calibrates it "
            f"(run-goodput in catalog/data/calibration.yaml), {1 / k['run_goodput'] - 1:.1%} "
            f"on top of the failure-free time. The failure model above loses {lost} of wall "
            "time for this plan's size, checkpoints and restarts (first order); `infraplan "
            "simulate train` draws the run with that model, so its wall times differ from "
            "plan train's by the gap.",
            f"Failure rate: {k['derivation']}.", *notes])


def training_document(scenario, result, arch=None) -> dict:
    """The document of `plan_training(scenario)`'s result."""
    arch = arch or load_model(scenario.model)
    best = result.best[0]
    others = [p for p in result.by_accelerator if p.accelerator != best.accelerator]
    figures = {"frontier_gpu_hours": fig.frontier_figure(result)}
    costs = _costs([best, *result.frontier, *result.by_accelerator])
    cost_notes = [n for n in result.notes if n.startswith("no cost")]
    if all(id(p) in costs for p in [best, *result.frontier, *result.by_accelerator]) \
            and best.gpu_hours is not None:
        figures["frontier_usd"] = fig.frontier_figure(
            result, cost_usd=lambda p: fig.total_usd(costs[id(p)]))
    figures["step_breakdown"] = fig.step_breakdown_figure(*_breakdown_bars(result, others))
    bars = _memory_bars(scenario, arch, [best, *others])
    figures["memory"] = fig.memory_figure(bars)
    sim = _run_simulation(scenario, best, arch)  # its checkpoint plan is the Yield plan's
    checkpoints, figures["goodput"] = _checkpoints(scenario, arch, best,
                                                   sim.setup if sim else None)
    t = scenario.training
    nodes = math.ceil(best.plan.num_gpus / hardware.cluster(
        best.accelerator, scenario.hardware.system).system.accelerators_per_node)
    s: dict[str, dict] = {}
    s["Scale"] = section("SCALE", "Scale", items=[
        item("accelerators", best.plan.num_gpus, f"{best.plan.num_gpus:,} x {best.accelerator}"),
        item("nodes", nodes, f"{nodes:,}"),
        item("parallel layout", best.plan.describe(), best.plan.describe()),
        item("tokens to train", t.tokens, format_count(t.tokens)),
        item("time to train (with run goodput)", best.time_to_train_s, days(best.time_to_train_s)),
        item("plans evaluated", result.configs_evaluated,
             f"{result.configs_evaluated:,} of {result.candidates:,} candidates "
             f"({result.fitting:,} fit) in {duration_text(result.search_seconds)}")],
        tables=[_plans_table("best plans", result.best)], figures=["frontier_gpu_hours"])
    s["Compute"] = section("SCALE", "Compute", items=[
        item("step time", best.step_s, f"{best.step_s:,.3f} s"),
        item("tokens per second", best.tokens_per_s, f"{best.tokens_per_s:,.0f}"),
        item("tokens per second per GPU", best.tokens_per_s / best.plan.num_gpus,
             f"{best.tokens_per_s / best.plan.num_gpus:,.0f}"),
        item("MFU", best.mfu, f"{best.mfu:.1%}"), item("HFU", best.hfu, f"{best.hfu:.1%}"),
        item("memory per accelerator", best.memory_bytes,
             f"{best.memory_bytes / GiB:.1f} GiB of {best.capacity_bytes / GiB:.1f} GiB")],
        tables=[table("step time breakdown of the chosen plan (s)", ["part", "seconds", "share"],
                      [[COMPONENTS[k], f"{v:,.3f}", f"{v / best.step_s:.1%}"]
                       for k, v in best.breakdown_s.items() if v > 5e-4])],
        figures=["step_breakdown", "memory"])
    comm = [item(f"exposed {COMPONENTS[k]}", best.breakdown_s.get(k, 0.0),
                 f"{best.breakdown_s.get(k, 0.0):,.3f} s per step")
            for k in COMM_KINDS if best.breakdown_s.get(k, 0.0) > 0]
    comm += [item(f"hidden: {HIDDEN[k]}", v, f"{v:,.3f} s per step")
             for k, v in best.hidden_s.items()]
    s["Accelerator interconnect"] = section(
        "SCALE", "Accelerator interconnect", items=comm,
        not_applicable=None if comm else "the chosen plan exchanges no data between "
                                         "accelerators")
    stall = best.breakdown_s.get("data_stall", 0.0)
    s["Latency & locality"] = section(
        "SCALE", "Latency & locality",
        items=[item("training data tier", t.storage, t.storage),
               item("data-loading stall", stall, f"{stall:,.3f} s per step")] if t.storage
        else (), not_applicable=None if t.storage else
        "no storage tier given (training.storage), so no data-loading check")
    cost = costs.get(id(best))
    econ = [item("GPU-hours", best.gpu_hours, f"{best.gpu_hours:,.0f}")]
    if best.economics:
        e = best.economics
        # the card holds the figure as the paragraph below, its derivation, prints it
        econ.append(item("energy", e["energy_kwh"], f"{format_figure(e['energy_kwh'])} kWh"))
        cost_notes[:0] = economics_notes(e)
        if e["carbon_kg_co2e"] is not None:
            econ.append(item("carbon (kg CO2e)", e["carbon_kg_co2e"],
                             f"{format_figure(e['carbon_kg_co2e'])} kg CO2e ({e['region']})"))
    else:
        econ.append(item("energy (GPUs at TDP)", best.it_energy_kwh,
                         f"{best.it_energy_kwh:,.0f} kWh"))
    econ_tables, econ_figures = [], ["frontier_usd"] if "frontier_usd" in figures else []
    if cost:
        figures["cost"] = fig.cost_figure(cost)
        econ.append(item("cost", fig.total_usd(cost), usd(fig.total_usd(cost))))
        econ_tables.append(table("cost line items", ["item", "USD", "basis"],
                                 [[c["item"], usd(c["usd"]), c["basis"]] for c in cost]))
        econ_figures.append("cost")
    s["Economics"] = section("SCALE", "Economics", items=econ, tables=econ_tables,
                             figures=econ_figures, paragraphs=cost_notes)
    counts = param_counts(arch)
    c = scenario.constraints
    s["Define workload"] = section("DEPLOY", "Define workload", items=[
        item("model", arch.name, f"{arch.name} ({counts.total:,} parameters)"),
        item("tokens", t.tokens, format_count(t.tokens)),
        item("sequence length (tokens)", t.seq_len, f"{t.seq_len:,}"),
        item("global batch (sequences)", t.global_batch, f"{t.global_batch:,}"),
        item("precision / optimizer", best.precision, f"{best.precision} / {t.optimizer}"),
        item("accelerators compared", list(scenario.hardware.gpus),
             ", ".join(scenario.hardware.gpus)),
        item("constraints", {"deadline_days": c.deadline_days,
                             "budget_gpu_hours": c.budget_gpu_hours,
                             "budget_usd": c.budget_usd},
             ", ".join(constraint_terms(c)) or "none"),
        item("objective", scenario.objective,
             f"{OBJECTIVES[scenario.objective]} (objective: {scenario.objective})")])
    s["Estimate throughput"] = section("DEPLOY", "Estimate throughput", items=[
        item("tokens per second", best.tokens_per_s, f"{best.tokens_per_s:,.0f}"),
        item("step time", best.step_s, f"{best.step_s:,.3f} s"),
        item("time to train", best.time_to_train_s, days(best.time_to_train_s))])
    s["Pick platform"] = section(
        "DEPLOY", "Pick platform",
        tables=[_plans_table("best plan of each accelerator", result.by_accelerator),
                _plans_table(frontier_title(result), result.frontier)],
        paragraphs=[f"Why other choices lost: {r}" for r in result.rejected] + [
            f"note: {n}" for n in result.notes])
    s["Load-test"] = section("DEPLOY", "Load-test", not_applicable="a training job serves no "
                             "request load (failures and restarts are under Yield plan)")
    s["Observe"] = section("DEPLOY", "Observe", not_applicable="no observed run is attached "
                           "to this plan")
    run_tables, run_notes = _strategies(sim, best, cost)
    s["Yield plan"] = _yield_plan(checkpoints, [*run_notes,
                                                *_billing_note(scenario, checkpoints)],
                                  run_tables, sim)
    return fig.json_safe({
        "kind": "training", "title": scenario.name or f"{arch.name} training plan",
        "description": scenario.description, "model": scenario.model,
        "plan": result.to_json(), "checkpoints": checkpoints,
        "run": sim.to_json() if sim else None, "memory": bars,
        "costs": cost, "sections": ordered(s), "figures": figures})
