"""Capacity planning: the cheapest deployment that serves the traffic within its SLOs.

For every candidate replica (accelerator x TP x weight format x KV format x batch limit)
that fits in memory, find the fewest replicas that meet the SLOs at the planning rate
(`provision`), rank by cost, and confirm the cheapest as whole deployments behind their
router; say why every rejected candidate failed.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from infraplan.errors import InputError
from infraplan.models import load_model, uncounted_notes
from infraplan.serving.capacity import idle_latency, saturated_requests_per_s
from infraplan.serving.curve_price import CURVE_LABEL, curve_usd_per_million_output
from infraplan.serving.deployment import Deployment, ResolvedReplica, resolve
from infraplan.serving.nearby import runnable_nearby
from infraplan.serving.provision import (confirm_cheapest, fewest_replicas, planning_rate,
                                         violations)
from infraplan.serving.scenario import ServeScenario
from infraplan.serving.search_space import (ignored_deployment_note, search_grid,
                                            searched_prices, with_stored_format)
from infraplan.serving.traffic import generate, mean_rate_per_s
from infraplan.serving.window import fewest_settling, stationary_stream
from infraplan.reprs import compact_repr
from infraplan.units import three_figures


@dataclass
class Candidate:
    deployment: Deployment
    usd_per_hour: float = math.inf
    summary: dict | None = None
    reason: str | None = None  # why it was rejected
    # its step model and memory plan, built once (a cache: left out of the repr)
    resolved: ResolvedReplica | None = field(default=None, repr=False)
    economics: dict | None = None  # a month of it: cost line items, energy, carbon
    capacity_requests_per_s: float | None = None  # one replica, saturated (keeps_up)
    # SLOs missed by the stream's requests alone on an idle replica (rejected ones only):
    # no replica count can meet these
    idle_misses: list[str] = field(default_factory=list)
    # simulated as a whole deployment behind its router (provision.confirm_deployment);
    # otherwise its replica count is the per-replica search's, which can be high
    confirmed: bool = False
    # what its fewest replicas that keep up cost an hour (_floor_usd_per_hour); no count
    # that meets the SLOs costs less
    floor_usd_per_hour: float = 0.0
    # a diurnal scenario's $/M output tokens over a month of its curve (curve_price.py)
    curve_usd_per_million_output: float | None = None
    # False: no replica count up to max_replicas was enough (describe() says so; its reason
    # too, so the repr leaves it out)
    replicas_found: bool = field(default=True, repr=False)

    __repr__ = compact_repr  # its economics' formulas and sources print their start

    def listed(self) -> str:
        """describe(), marked '*' unless simulated whole (UNCONFIRMED_NOTE says why)."""
        return self.describe() + ("" if self.confirmed else " *")

    def describe(self) -> str:
        """'3 x 2 x h100 fp8/kv bf16'; 'replicas of 2 x h100 ...' when no replica count
        met the SLOs (the deployment then holds max_replicas, a cap, not a count tried)."""
        d = self.deployment
        shape = d.shape() if self.replicas_found else f"replicas of {d.replica_shape()}"
        return (f"{shape} {d.weight_dtype}/kv {d.kv_dtype}"
                + (f", max_num_seqs {d.max_num_seqs}" if d.max_num_seqs else ""))

    def gpus_text(self) -> str:
        """The GPUs used, and those billed when whole instances bill more ('6 (8 billed)':
        3 replicas of 2 on 8-GPU instances cost what 8 GPUs do)."""
        used = self.deployment.num_gpus
        billed = (self.economics or {}).get("billed_gpus") or used
        return f"{used:,}" + (f" ({billed:,} billed)" if billed > used else "")

    def usd_per_million_output(self) -> float | None:
        """Over the day's curve when the traffic has one, else at the simulated rate."""
        if self.curve_usd_per_million_output is not None:
            return self.curve_usd_per_million_output
        return (self.summary or {}).get("cost", {}).get("usd_per_million_output_tokens")

    def load_share(self, rate_per_s: float) -> float | None:
        """The planning rate as a share of what the replicas complete saturated: well
        below 1 when the latency SLOs, not throughput, set the replica count."""
        if not self.capacity_requests_per_s:
            return None
        return rate_per_s / (self.deployment.replicas * self.capacity_requests_per_s)

    def to_json(self, rate_per_s: float | None = None) -> dict:
        out = {"deployment": self.deployment.model_dump(), "describe": self.describe(),
               "usd_per_hour": self.usd_per_hour if math.isfinite(self.usd_per_hour)
               else None, "rejected": self.reason, "economics_per_month": self.economics,
               "capacity_requests_per_s_per_replica": self.capacity_requests_per_s,
               "idle_slo_misses": self.idle_misses, "confirmed": self.confirmed,
               "floor_usd_per_hour": self.floor_usd_per_hour or None,
               "load_share": None if rate_per_s is None else self.load_share(rate_per_s)}
        if self.summary:
            s = self.summary
            out.update(ttft_p99_s=s["ttft_s"]["p99"], tpot_p99_s=s["tpot_s"]["p99"],
                       output_tokens_per_s=s["throughput"]["output_tokens_per_s"],
                       steady_output_tokens_per_s=s.get("steady", {}).get(
                           "output_tokens_per_s"),
                       usd_per_million_output_tokens=self.usd_per_million_output(),
                       usd_per_million_output_tokens_basis=CURVE_LABEL
                       if self.curve_usd_per_million_output is not None else
                       "at the simulated rate")
        return out


UNCONFIRMED_NOTE = ("* replicas sized on one replica's share of a random split; only "
                    "the cheapest were simulated whole behind their router, which may meet "
                    "the SLOs with fewer")


@dataclass
class ServePlan:
    rate_per_s: float
    best: Candidate | None
    ranked: list[Candidate]
    rejected: list[Candidate]
    simulations: int
    search_seconds: float
    notes: list[str] = field(default_factory=list)
    # when none could be built: the smallest configurations outside the search that can
    runnable_nearby: list[Deployment] = field(default_factory=list)
    # fit and keep up, but cost more at their fewest replicas than the LISTED cheapest that
    # meet the SLOs: not simulated (plan_serving)
    not_simulated: list[Candidate] = field(default_factory=list)

    @property
    def unconfirmed_notes(self) -> list[str]:
        """UNCONFIRMED_NOTE when a ranked configuration is marked '*' (Candidate.listed)."""
        return [] if all(c.confirmed for c in self.ranked) else [UNCONFIRMED_NOTE]

    @property
    def price_notes(self) -> list[str]:
        """Why one accelerator costs more per GPU-hour in some rows: a replica's GPUs rent
        in one instance, and the cheapest offer that large may cost more a GPU-hour."""
        by_gpu: dict[str, dict[float, tuple[int, str]]] = {}
        for c in self.ranked:
            e, n = c.economics or {}, c.deployment.tp * c.deployment.pp
            if e.get("usd_per_gpu_hour") is not None:
                prices = by_gpu.setdefault(c.deployment.gpu, {})
                price = e["usd_per_gpu_hour"]
                if price not in prices or n < prices[price][0]:
                    prices[price] = (n, e["price_basis"])
        return [f"{gpu}'s price a GPU-hour depends on the replica's size, as its GPUs rent in "
                "one instance: " + "; ".join(f"${p:,.2f}/GPU-h from {n}-GPU replicas ({basis})"
                                             for p, (n, basis) in sorted(
                                                 prices.items(), key=lambda kv: kv[1][0]))
                for gpu, prices in by_gpu.items() if len(prices) > 1]

    @property
    def not_simulated_notes(self) -> list[str]:
        """Why the search left some configurations unsimulated (plan_serving), in a line."""
        if not self.not_simulated:
            return []
        n = len(self.not_simulated)
        floor = min(c.floor_usd_per_hour for c in self.not_simulated)
        return [f"not simulated: {n:,} more configuration{'s' * (n != 1)} that fit and keep "
                f"up, each costing more at its fewest replicas (from ${floor:,.2f}/h) than "
                f"the {LISTED} cheapest that meet the SLOs"]

    @property
    def none_built(self) -> bool:
        """Every configuration was rejected before simulation (memory, divisibility,
        price): neither the SLOs nor the replica cap are to blame."""
        return self.best is None and all(c.capacity_requests_per_s is None
                                         for c in self.rejected)

    @property
    def verdict(self) -> str:
        """Why no configuration was kept, in a line ('' when one was)."""
        if self.best is not None:
            return ""
        return ("no configuration in the search can run the model" if self.none_built
                else "no configuration meets the SLOs")

    @property
    def slos_out_of_reach(self) -> bool:
        """No configuration was kept and every one that was simulated misses the SLOs alone
        on an idle replica: more replicas cannot help."""
        simulated = [c for c in self.rejected if c.capacity_requests_per_s is not None]
        return self.best is None and bool(simulated) and all(c.idle_misses for c in simulated)

    def to_json(self) -> dict:
        return {"planning_rate_per_s": self.rate_per_s,
                "best": self.best.to_json(self.rate_per_s) if self.best else None,
                "alternatives": [c.to_json(self.rate_per_s) for c in self.ranked],
                "rejected": [c.to_json(self.rate_per_s) for c in self.rejected],
                "not_simulated": [c.to_json(self.rate_per_s) for c in self.not_simulated],
                "simulations": self.simulations, "search_seconds": self.search_seconds,
                "notes": self.notes,
                "runnable_nearby": [d.model_dump() for d in self.runnable_nearby]}


def plan_serving(scenario: ServeScenario, *, base_dir: Path | None = None,
                 progress=None, arch=None) -> ServePlan:
    """The cheapest configuration meeting the SLOs; `progress(done, total)` per candidate;
    `arch` stands in for scenario.model (an uploaded config.json)."""
    start = time.perf_counter()
    space = scenario.search
    if space is None:
        raise InputError("plan serve needs a search: section in the scenario (what to compare)"
                         + ("; this one has a deployment only" if scenario.deployment
                            else ""),
                         fix="add search: {gpus: [h100, a100-sxm4-80gb]}"
                             + (", or run simulate serve on the deployment"
                                if scenario.deployment else ""))
    if scenario.traffic.arrival.kind == "offline":
        raise InputError("plan serve needs arriving traffic (poisson, gamma, diurnal or trace)",
                         fix="use simulate serve for an offline batch")
    arch = arch or load_model(scenario.model, base_dir=base_dir)
    scenario, stored_note = with_stored_format(scenario, arch)
    space = scenario.search
    prices = searched_prices(scenario)
    slo = scenario.slo.to_slo()
    rate = planning_rate(scenario, base_dir)
    seqs = space.max_num_seqs or (None,)
    stream = generate(stationary_stream(scenario.traffic, rate, base_dir=base_dir),
                      seed=scenario.seed, base_dir=base_dir)  # its lengths size the capacity
    grid, fp16_gpus = search_grid(space, seqs)
    built, rejected = [], []
    for step, key in enumerate(grid, 1):
        if progress:
            progress(step - 1, 2 * len(grid))
        cand = _built(scenario, key, prices, stream, base_dir, arch)
        (rejected if cand.reason else built).append(cand)
    sims = len(built)  # a saturated run each
    # Cheapest floor first: once LISTED candidates meet the SLOs, one whose fewest replicas
    # already cost more than all of them cannot rank among them (its cost only grows with
    # replicas) and is not simulated; the cheapest is the same as with every one simulated
    for cand in built:
        cand.floor_usd_per_hour = _floor_usd_per_hour(scenario, cand, rate, space.max_replicas)
    built.sort(key=lambda c: c.floor_usd_per_hour)
    candidates, bounded = [], []

    def provision(group: list[Candidate]) -> None:
        nonlocal sims
        for cand in group:
            if progress:
                progress(len(grid) + built.index(cand), 2 * len(grid))
            if _outranked(cand, candidates):
                bounded.append(cand)
                continue
            sims += _provision(scenario, cand, rate, slo, space.max_replicas, stream, base_dir)
            (candidates if cand.reason is None else rejected).append(cand)

    provision(built)
    while True:  # confirming adds replicas: a floor under the listed costs is simulated now
        ranked, confirmations = confirm_cheapest(scenario, candidates, rate, slo, base_dir)
        sims += confirmations
        revisit = [c for c in bounded if not _outranked(c, ranked)]
        if not revisit:
            break
        bounded = [c for c in bounded if c not in revisit]
        provision(revisit)
    for cand in ranked:
        cand.economics = scenario.monthly_economics(cand.deployment)
        cand.curve_usd_per_million_output = curve_usd_per_million_output(
            scenario, _month_usd(cand), base_dir)
    if scenario.budget_usd_per_month is not None:
        ranked, rejected = _within_budget(ranked, rejected, scenario.budget_usd_per_month)
    notes = [f"planned for {three_figures(rate)} requests/s", *scenario.slo.unit_notes(),
             *stored_note, *uncounted_notes(arch), *ignored_deployment_note(scenario, arch)]
    if fp16_gpus:
        notes.append(f"{' and '.join(fp16_gpus)} {'have' if len(fp16_gpus) > 1 else 'has'} "
                     "no bf16: the searched bf16 formats run there as fp16, as an engine "
                     "serves a bf16 checkpoint on such a chip")
    if not slo.given():  # then only keeping up counts: the queue may be long, not growing
        notes.append("no SLO set: the cheapest configuration that keeps up with the traffic, "
                     "at any latency (set slo: ttft_p99_s, tpot_p99_s, e2e_p99_s)")
    if scenario.traffic.arrival.kind == "diurnal" and ranked:
        mean = mean_rate_per_s(scenario.traffic)
        best = ranked[0].deployment.replicas
        notes.append(f"the diurnal mean is {three_figures(mean)} requests/s: about "
                     f"{max(1, math.ceil(best * mean / rate))} of the cheapest's {best} "
                     "replicas suffice off-peak (autoscale)")
    plan = ServePlan(rate_per_s=rate, best=ranked[0] if ranked else None, ranked=ranked,
                     rejected=rejected, not_simulated=bounded, simulations=sims,
                     search_seconds=time.perf_counter() - start, notes=notes)
    if plan.none_built:
        priced = [g for g, p in prices.items() if not isinstance(p, InputError)]
        plan.runnable_nearby = runnable_nearby(scenario, priced, base_dir=base_dir, arch=arch)
        plan.search_seconds = time.perf_counter() - start
    return plan


LISTED = 10  # configurations that meet the SLOs to rank before bounding the rest


def _built(scenario, key: tuple, prices: dict, stream, base_dir, arch) -> Candidate:
    """The candidate of one grid entry, resolved with its saturated rate measured; or with
    the reason it cannot be (no price for its instances, a TP that does not divide, no
    room in memory)."""
    gpu, tp, wd, kv, ms = key
    dep = Deployment(model=scenario.model, gpu=gpu, tp=tp, weight_dtype=wd, kv_dtype=kv,
                     engine=scenario.search.engine, max_num_seqs=ms)
    cand = Candidate(dep)
    try:
        if isinstance(prices[gpu], InputError):
            raise prices[gpu]
        scenario.deployment_price(dep)  # no price for its instances: fails here
        cand.resolved = resolve(dep, base_dir=base_dir, arch=arch)
    except InputError as exc:
        cand.reason = str(exc)  # with its fix: a price to give, a TP that divides
        return cand
    cand.capacity_requests_per_s = saturated_requests_per_s(cand.resolved, stream)
    return cand


def _floor_usd_per_hour(scenario, cand: Candidate, rate: float, max_replicas: int) -> float:
    """What `cand`'s fewest replicas that keep up (window.fewest_settling) cost an hour: no
    count that meets the SLOs costs less (more replicas, more instances). 0 when that count
    is past max_replicas or it completes nothing: the search then says why at no cost."""
    cap = cand.capacity_requests_per_s
    need = fewest_settling(rate, cap) if cap else max_replicas + 1
    if need > max_replicas:
        return 0.0
    dep = cand.deployment.model_copy(update={"replicas": need})
    return dep.num_gpus * scenario.deployment_price(dep)


def _outranked(cand: Candidate, feasible: list[Candidate]) -> bool:
    """LISTED candidates meet the SLOs for less than `cand` costs at its fewest replicas."""
    if len(feasible) < LISTED:
        return False
    return cand.floor_usd_per_hour > sorted(c.usd_per_hour for c in feasible)[LISTED - 1]


def _provision(scenario, cand: Candidate, rate: float, slo, max_replicas: int, stream,
               base_dir) -> int:
    """Find `cand`'s fewest replicas meeting the SLOs (provision.fewest_replicas), or the
    reason none does; the simulations run."""
    resolved = cand.resolved
    replicas, summary, count, why = fewest_replicas(
        scenario, resolved, rate, slo, max_replicas, None, base_dir,
        cand.capacity_requests_per_s)
    cand.deployment = cand.deployment.model_copy(update={"replicas": replicas or max_replicas})
    cand.replicas_found = replicas is not None
    cand.summary = summary
    if replicas is not None:
        cand.usd_per_hour = cand.deployment.num_gpus * scenario.deployment_price(
            cand.deployment)
        return count
    alone = idle_latency(resolved, stream)
    cand.idle_misses = violations(alone, slo)
    if cand.idle_misses:
        n = alone["completed"] + alone["dropped"]
        why += (f"; out of reach at any replica count ({n:,} of its requests, each alone on "
                "an idle replica: " + "; ".join(cand.idle_misses) + ")")
    cand.reason = why
    cand.resolved = None
    return count + 2


def _month_usd(cand: Candidate) -> float:
    return cand.economics["cost"]["total_usd"]


def _within_budget(ranked: list[Candidate], rejected: list[Candidate], budget: float):
    """Keep the configurations whose month fits the budget; when none does, say which came
    closest and by how much they miss."""
    within = [c for c in ranked if _month_usd(c) <= budget]
    if ranked and not within:
        closest = sorted(ranked, key=_month_usd)[:3]
        misses = "; ".join(f"{c.describe()} at ${_month_usd(c):,.0f} (+"
                           f"{_month_usd(c) / budget - 1:.0%})" for c in closest)
        raise InputError(f"no configuration that meets the SLOs fits the budget of "
                         f"${budget:,.0f} a month; closest: {misses}",
                         fix="raise budget_usd_per_month, relax the SLOs or allow cheaper "
                             "accelerators")
    for c in ranked:
        if c not in within:
            c.reason = (f"over budget: ${_month_usd(c):,.0f} a month > ${budget:,.0f} "
                        f"(+{_month_usd(c) / budget - 1:.0%})")
    return within, rejected + [c for c in ranked if c not in within]
