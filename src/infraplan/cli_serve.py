"""`infraplan plan serve` and `infraplan simulate serve`: registered by src/infraplan/cli.py.
Bad input raises InputError, which the CLI prints on one line and exits 2."""

from __future__ import annotations

from infraplan.errors import InputError
from infraplan.report.output import emit, progress


def seed_override(args) -> dict:
    """The scenario override `--seed N` makes ({} when the flag is not given)."""
    return {args.seed_field: args.seed} if getattr(args, "seed", None) is not None else {}


def _load_serve(args):
    from pathlib import Path

    from infraplan.serving.scenario import ServeScenario
    from infraplan.scenario_files import load_scenario

    return load_scenario(args.scenario, ServeScenario, seed_override(args)), \
        Path(args.scenario).parent


def run_plan_serve(args) -> int:
    from infraplan.report.serving import plan_report
    from infraplan.serving.nearby import describe_fix
    from infraplan.serving.planner import plan_serving

    scenario, base = _load_serve(args)
    with progress(args, "simulating configurations") as tick:
        plan = plan_serving(scenario, base_dir=base, progress=tick)
    name = scenario.name or scenario.model
    best = plan.best
    emit(args, "plan_serve", dict(model=scenario.model, seed=scenario.seed, **plan.to_json()),
         lambda: plan_report(name, plan, scenario.seed),
         lambda: f"cheapest: {best.describe()} at ${best.usd_per_hour:,.2f}/h"
         if best else plan.verdict)
    if best is None:  # an impossible plan: the output above says why each one lost
        if plan.none_built:
            nearby = plan.runnable_nearby
            raise InputError(
                f"no configuration in the search can run {scenario.model}: all "
                f"{len(plan.rejected)} were rejected before simulation (reasons above)",
                fix=("search what can: " + describe_fix(nearby)) if nearby else
                "allow accelerators with more memory (search.gpus), or a smaller model")
        if plan.slos_out_of_reach:
            fix = ("relax the SLOs (every configuration misses them alone on an idle replica, "
                   "so more replicas cannot help) or allow other accelerators, TP degrees or "
                   "formats")
        else:
            fix = ("relax the SLOs, raise search.max_replicas or allow other accelerators, "
                   "TP degrees or formats")
        raise InputError(f"no configuration meets the SLOs at {plan.rate_per_s:.3g} "
                         f"requests/s ({len(plan.rejected)} rejected)", fix=fix)
    return 0


def run_simulate_serve(args) -> int:
    from infraplan.units import duration_text
    from infraplan.report.serving import simulation_report
    from infraplan.serving.capacity import accepted_share, capacity_summary
    from infraplan.serving.metrics import output_rate
    from infraplan.serving.provision import offered_load
    from infraplan.serving.run import dropped_note, simulate_scenario, simulation_json

    scenario, base = _load_serve(args)
    with progress(args, "simulating requests") as tick:
        sim = simulate_scenario(scenario, base, progress=tick)
    dep, r = sim["deployment"], sim["result"].replica
    capacity = capacity_summary(r, sim["result"].requests, dep.replicas,
                                *offered_load(scenario, base),
                                accepted_share=accepted_share(sim["summary"]))
    data = simulation_json(scenario, sim, capacity)  # its first note: dropped_note's
    warning = dropped_note(sim)
    # a static batch runs batch_size sequences whatever max_num_seqs allows
    batching = (f"static batches of {dep.batch_size:,}" if dep.batching == "static" else
                f"max_num_seqs {r.max_num_seqs}")
    describe = (f"{r.arch.name} on {dep.shape(r.gpu.name)}, {dep.engine}, "
                f"weights {dep.weight_dtype}, KV {data['deployment']['kv_dtype']}"
                f"{dep.speculation()}, {batching}, max_num_batched_tokens "
                f"{r.max_num_batched_tokens}"
                + (" (continuous batching)" if dep.batching != "static" else "")
                + f"; seed {scenario.seed}")
    rate, basis = output_rate(data)  # the report's headline figure, the cost's
    dropped = (f"{data['dropped']:,} of {data['requests']:,} requests dropped "
               f"({data['dropped'] / data['requests']:.0%}); " if data["dropped"] else "")
    return emit(args, "simulate_serve", data,
                lambda: simulation_report(scenario.name or scenario.model, describe, data,
                                          data["notes"][1:] if warning else data["notes"],
                                          warning=warning),
                lambda: f"seed {scenario.seed}: {dropped}{rate:,.0f} output tok/s {basis}, "
                f"p99 TTFT {duration_text(data['ttft_s']['p99'])}, p99 TPOT "
                f"{duration_text(data['tpot_s']['p99'])}, " + (
                    f"{data['slo_attainment']:.1%} within SLOs" if data["slo"] else
                    "no SLO set"))
