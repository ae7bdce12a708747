"""Capacity planning: the cheapest deployment that serves the traffic within its SLOs.

For every candidate replica (accelerator x TP x weight format x KV format x batch limit)
that fits in memory, find the fewest replicas that meet the SLOs at the planning rate:
a Poisson (or gamma, or trace) stream split evenly over R replicas is, per replica, the
same kind of stream at rate / R, so one replica is simulated at rate / R. More replicas
never hurt latency, so the smallest R is found by doubling then bisection. The cheapest
candidates are then re-simulated as whole deployments (every replica behind the
least-outstanding-requests router) to confirm them.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from infraplan.catalog import accelerator
from infraplan.errors import InputError
from infraplan.models import load_model, uncounted_notes
from infraplan.serving.capacity import idle_latency, saturated_requests_per_s
from infraplan.serving.deployment import Deployment, ResolvedReplica, resolve
from infraplan.serving.metrics import Slo, dropped_reasons, summarize
from infraplan.serving.nearby import runnable_nearby
from infraplan.serving.quantization import (CHECKPOINT_FORMAT, checkpoint_weight_dtype,
                                            sixteen_bit)
from infraplan.serving.scenario import ServeScenario
from infraplan.serving.simulate import simulate
from infraplan.serving.traffic import (ArrivalSpec, TrafficSpec, generate, mean_rate_per_s,
                                      with_rate)

CONFIRMED = 3  # cheapest candidates re-simulated as whole deployments
DIURNAL_WINDOW_REQUESTS = 2000  # requests simulated at the peak of a day-long curve


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

    def describe(self) -> str:
        d = self.deployment
        return (f"{d.replicas} x {d.tp} x {d.gpu} {d.weight_dtype}/kv {d.kv_dtype}"
                + (f", max_num_seqs {d.max_num_seqs}" if d.max_num_seqs else ""))

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
               "idle_slo_misses": self.idle_misses,
               "load_share": None if rate_per_s is None else self.load_share(rate_per_s)}
        if self.summary:
            s = self.summary
            out.update(ttft_p99_s=s["ttft_s"]["p99"], tpot_p99_s=s["tpot_s"]["p99"],
                       output_tokens_per_s=s["throughput"]["output_tokens_per_s"],
                       steady_output_tokens_per_s=s.get("steady", {}).get(
                           "output_tokens_per_s"),
                       usd_per_million_output_tokens=s.get("cost", {}).get(
                           "usd_per_million_output_tokens"))
        return out


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
                "simulations": self.simulations, "search_seconds": self.search_seconds,
                "notes": self.notes,
                "runnable_nearby": [d.model_dump() for d in self.runnable_nearby]}


def violations(summary: dict, slo: Slo) -> list[str]:
    out = []
    for name, limit, key in (("p99 TTFT", slo.ttft_p99_s, "ttft_s"),
                             ("p99 TPOT", slo.tpot_p99_s, "tpot_s"),
                             ("p99 end-to-end", slo.e2e_p99_s, "e2e_s")):
        value = summary[key]["p99"]
        if limit is not None and not value <= limit:
            out.append(f"{name} {value:.3g} s > {limit:g} s")
    if summary["dropped"]:
        reasons = summary["dropped_by_reason"]
        why = next(iter(reasons)) if len(reasons) == 1 else dropped_reasons(summary)
        out.append(f"{summary['dropped']:,} request{'s' * (summary['dropped'] != 1)} dropped "
                   f"({why})")
    return out


def offered_load(scenario: ServeScenario, base_dir: Path | None,
                 rate_per_s: float | None = None) -> tuple[float, str]:
    """(the rate a deployment must sustain, what it is: 'offered' for a steady stream's
    mean, 'peak' for a diurnal curve's top or the scenario's peak_rate_per_s); inf for an
    offline batch. `rate_per_s`: the planning rate when the caller has it already (a
    trace's is read from its file)."""
    if scenario.traffic.arrival.kind == "offline" and not scenario.peak_rate_per_s:
        return math.inf, "offered"
    peak = scenario.peak_rate_per_s or scenario.traffic.arrival.kind == "diurnal"
    rate = planning_rate(scenario, base_dir) if rate_per_s is None else rate_per_s
    return rate, "peak" if peak else "offered"


def planning_rate(scenario: ServeScenario, base_dir: Path | None) -> float:
    """The rate to provision for: the scenario's peak, the diurnal curve's top, or the mean."""
    if scenario.peak_rate_per_s:
        return scenario.peak_rate_per_s
    arrival = scenario.traffic.arrival
    if arrival.kind == "diurnal":
        return max(rate for _, rate in arrival.curve)
    rate = mean_rate_per_s(scenario.traffic, base_dir=base_dir)
    if not math.isfinite(rate):  # a trace whose requests all arrive at one instant
        raise InputError("traffic.arrival: every request of the trace arrives at the same "
                         "instant, so it has no rate to provision for",
                         fix="set peak_rate_per_s, or use simulate serve for a batch")
    return rate


def stationary_stream(traffic: TrafficSpec, rate: float, *,
                      base_dir: Path | None = None) -> TrafficSpec:
    """The traffic as a stationary stream at `rate` (a diurnal curve becomes Poisson)."""
    if traffic.arrival.kind == "diurnal":
        update = {"arrival": ArrivalSpec.model_validate({"kind": "poisson",
                                                         "rate_per_s": rate})}
        if traffic.num_requests is None:  # a day-long duration: simulate a window instead
            update.update(num_requests=DIURNAL_WINDOW_REQUESTS, duration_s=None)
        return traffic.model_copy(update=update)
    return with_rate(traffic, rate, base_dir=base_dir)  # a relative trace: the scenario's


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
    scenario, stored_note = _with_stored_format(scenario, arch)
    space = scenario.search
    prices = _prices(scenario)
    slo = scenario.slo.to_slo()
    rate = planning_rate(scenario, base_dir)
    candidates, rejected = [], []
    seqs = space.max_num_seqs or (None,)
    sims = 0
    stream = generate(stationary_stream(scenario.traffic, rate, base_dir=base_dir),
                      seed=scenario.seed, base_dir=base_dir)  # its lengths size the capacity
    grid, fp16_gpus = _grid(space, seqs)
    for step, (gpu, tp, wd, kv, ms) in enumerate(grid, 1):
        if progress:
            progress(step - 1, len(grid))
        dep = Deployment(model=scenario.model, gpu=gpu, tp=tp, weight_dtype=wd, kv_dtype=kv,
                         engine=space.engine, max_num_seqs=ms)
        cand = Candidate(dep)
        try:
            price = prices[gpu]
            if isinstance(price, InputError):
                raise price
            resolved = resolve(dep, base_dir=base_dir, arch=arch)
        except InputError as exc:
            cand.reason = str(exc)  # with its fix: a price to give, a TP that divides
            rejected.append(cand)
            continue
        cand.capacity_requests_per_s = saturated_requests_per_s(resolved, stream)
        replicas, summary, count, why = _fewest_replicas(
            scenario, resolved, rate, slo, space.max_replicas, price, base_dir,
            cand.capacity_requests_per_s)
        sims += count + 1
        cand.deployment = dep.model_copy(update={"replicas": replicas or space.max_replicas})
        cand.summary = summary
        if replicas is None:
            alone = idle_latency(resolved, stream)
            cand.idle_misses = violations(alone, slo)
            sims += 2
            if cand.idle_misses:
                n = alone["completed"] + alone["dropped"]
                why += (f"; out of reach at any replica count ({n:,} of its requests, "
                        "each alone on an idle replica: " + "; ".join(cand.idle_misses) + ")")
            cand.reason = why
            rejected.append(cand)
            continue
        cand.usd_per_hour = cand.deployment.num_gpus * price
        cand.resolved = resolved
        candidates.append(cand)
    ranked, confirmations = _confirm_cheapest(scenario, candidates, rate, slo, base_dir)
    sims += confirmations
    for cand in ranked:
        cand.economics = scenario.monthly_economics(cand.deployment.gpu,
                                                    cand.deployment.num_gpus)
    if scenario.budget_usd_per_month is not None:
        ranked, rejected = _within_budget(ranked, rejected, scenario.budget_usd_per_month)
    notes = [f"planned for {rate:.3g} requests/s",
             *stored_note, *uncounted_notes(arch)]
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
        notes.append(f"the diurnal mean is {mean:.3g} requests/s: about "
                     f"{max(1, math.ceil(best * mean / rate))} of the {best} replicas suffice "
                     "off-peak (autoscale)")
    plan = ServePlan(rate_per_s=rate, best=ranked[0] if ranked else None, ranked=ranked,
                     rejected=rejected, simulations=sims,
                     search_seconds=time.perf_counter() - start, notes=notes)
    if plan.none_built:
        priced = [g for g, p in prices.items() if not isinstance(p, InputError)]
        plan.runnable_nearby = runnable_nearby(scenario, priced, base_dir=base_dir, arch=arch)
        plan.search_seconds = time.perf_counter() - start
    return plan


def _with_stored_format(scenario: ServeScenario, arch) -> tuple[ServeScenario, list[str]]:
    """search.weight_dtypes with `checkpoint` resolved to the format the model's checkpoint
    stores; a search that names no weight formats also tries a quantized checkpoint's own
    (what its engine loads by default). Either way a note says what was searched."""
    space, stored = scenario.search, arch.stored
    if CHECKPOINT_FORMAT in space.weight_dtypes:
        own = checkpoint_weight_dtype(arch)
        formats = tuple(dict.fromkeys(own if f == CHECKPOINT_FORMAT else f
                                      for f in space.weight_dtypes))
        how = stored.describe() if stored else f"16-bit ({arch.dtype})"
        note = (f"weight formats searched: {', '.join(formats)}; {CHECKPOINT_FORMAT} is "
                f"{own}, as {arch.name}'s checkpoint stores its weights: {how}")
    elif stored is None or "weight_dtypes" in space.model_fields_set \
            or stored.weight_dtype in space.weight_dtypes:
        return scenario, []
    else:
        formats = (*space.weight_dtypes, stored.weight_dtype)
        note = (f"weight formats searched: {', '.join(formats[:-1])} and {formats[-1]}, the "
                f"last as {arch.name}'s checkpoint stores its weights: {stored.describe()}; "
                "set search.weight_dtypes to choose")
    space = space.model_copy(update={"weight_dtypes": formats})
    return scenario.model_copy(update={"search": space}), [note]


def _grid(space, seqs) -> tuple[list[tuple], list[str]]:
    """Every (gpu, tp, weight format, KV format, max_num_seqs) searched, with bf16 run as
    fp16 on a chip without bf16 (sixteen_bit; once if both were listed), and those chips."""
    grid, fp16_gpus = {}, []
    for gpu, tp, wd, kv, ms in itertools.product(space.gpus, space.tp, space.weight_dtypes,
                                                 space.kv_dtypes, seqs):
        chip = accelerator(gpu)
        key = (gpu, tp, sixteen_bit(wd, chip), sixteen_bit(kv, chip), ms)
        if key[2:4] != (wd, kv) and gpu not in fp16_gpus:
            fp16_gpus.append(gpu)
        grid.setdefault(key, None)
    return list(grid), fp16_gpus


def _prices(scenario: ServeScenario) -> dict[str, float | InputError]:
    """Each searched accelerator's USD per GPU-hour, or why it has none (its candidates are
    rejected with that reason); an InputError naming the pricing when none has a price,
    since the search would then reject everything and end blaming the SLOs."""
    prices: dict[str, float | InputError] = {}
    for gpu in scenario.search.gpus:
        try:
            prices[gpu] = scenario.price_per_gpu_hour(gpu)
        except InputError as exc:
            prices[gpu] = exc
    missing = [p.message for p in prices.values() if isinstance(p, InputError)]
    if len(missing) < len(prices):
        return prices
    raise InputError(f"pricing {scenario.pricing!r} prices none of search.gpus: "
                     + "; ".join(missing),
                     fix=f"set pricing to one the offers list for them, or give prices: "
                         f"{{{scenario.search.gpus[0]}: 2.50}} (USD per GPU-hour)")


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


def _per_replica(scenario, resolved: ResolvedReplica, rate: float, replicas: int, price,
                 base_dir) -> dict:
    requests = generate(stationary_stream(scenario.traffic, rate / replicas,
                                          base_dir=base_dir),
                        seed=scenario.seed, base_dir=base_dir)
    result = simulate(resolved.deployment, requests, resolved=resolved)
    return summarize(result, slo=scenario.slo.to_slo(), usd_per_gpu_hour=price)


def _fewest_replicas(scenario, resolved, rate, slo, max_replicas, price, base_dir,
                     capacity: float):
    """(replicas, summary at that count, simulations run, why none is enough)."""
    if capacity <= 0:
        return None, None, 0, "completes no request (see simulate serve)"
    need = math.floor(rate / capacity) + 1  # the fewest replicas each loaded below capacity
    if need > max_replicas:
        return None, None, 0, (f"needs {need} replicas to keep up with {rate:.3g} requests/s "
                               f"(one completes at most {capacity:.3g}/s), over max_replicas "
                               f"{max_replicas}")
    count, summaries = 0, {}

    def ok(r: int) -> bool:
        nonlocal count
        if r < need:
            return False
        if r not in summaries:
            summaries[r] = _per_replica(scenario, resolved, rate, r, price, base_dir)
            count += 1
        return not violations(summaries[r], slo)

    hi = need
    while not ok(hi):
        if hi >= max_replicas:
            return None, summaries[hi], count, (f"misses the SLOs even with {max_replicas} "
                                                "replicas: "
                                                + "; ".join(violations(summaries[hi], slo)))
        hi = min(hi * 2, max_replicas)
    lo = hi // 2  # fails (or 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi, summaries[hi], count, ""


def _rank_key(cand: Candidate) -> tuple:
    """Cheapest first; at equal cost fewer GPUs, then the lower p99 end-to-end latency
    (fp8 beside bf16 on the same GPUs serves faster for the same money)."""
    e2e_p99_s = cand.summary["e2e_s"]["p99"] if cand.summary else math.inf
    return (cand.usd_per_hour, cand.deployment.num_gpus,
            e2e_p99_s if math.isfinite(e2e_p99_s) else math.inf)


def _confirm_cheapest(scenario, candidates: list[Candidate], rate, slo,
                      base_dir) -> tuple[list[Candidate], int]:
    """The candidates ranked, the first CONFIRMED of them simulated as whole deployments.
    Confirming can add replicas, so a confirmed candidate may fall behind unconfirmed ones:
    re-rank and confirm the new leaders until the first CONFIRMED are all confirmed."""
    confirmed, sims = set(), 0
    while True:
        candidates.sort(key=_rank_key)
        pending = [c for c in candidates[:CONFIRMED] if id(c) not in confirmed]
        if not pending:
            return candidates, sims
        for cand in pending:
            sims += _confirm(scenario, cand, rate, slo, base_dir)
            confirmed.add(id(cand))


def _confirm(scenario, cand: Candidate, rate, slo, base_dir) -> int:
    """Simulate the whole deployment behind its router: add replicas until it meets the
    SLOs, or take them away while it still does. The replica count came from one replica
    at rate / replicas, a random split of the stream; a least-outstanding router pools the
    replicas' queues (join-the-shortest-queue beats random assignment; e.g. Harchol-Balter,
    Performance Modeling and Design of Computer Systems, ch. 24), so the deployment may
    meet the SLOs with fewer, and `simulate serve` of it would say so."""
    sims = 0
    price = cand.usd_per_hour / cand.deployment.num_gpus
    requests = generate(stationary_stream(scenario.traffic, rate, base_dir=base_dir),
                        seed=scenario.seed, base_dir=base_dir)
    # below this count the replicas are loaded past their saturated capacity
    floor = math.floor(rate / cand.capacity_requests_per_s) + 1 \
        if cand.capacity_requests_per_s else cand.deployment.replicas

    def run(replicas: int) -> dict:
        nonlocal sims
        sims += 1
        dep = cand.deployment.model_copy(update={"replicas": replicas})
        return summarize(simulate(dep, requests, resolved=cand.resolved), slo=slo,
                         usd_per_gpu_hour=price)

    replicas = cand.deployment.replicas
    summary = run(replicas)
    for _ in range(3):  # too few: add replicas
        if not violations(summary, slo):
            break
        replicas += 1
        summary = run(replicas)
    if not violations(summary, slo):
        for _ in range(4):  # enough: try one fewer while the SLOs hold
            if replicas - 1 < floor:
                break
            fewer = run(replicas - 1)
            if violations(fewer, slo):
                break
            replicas, summary = replicas - 1, fewer
    cand.deployment = cand.deployment.model_copy(update={"replicas": replicas})
    cand.summary = summary
    cand.usd_per_hour = price * cand.deployment.num_gpus
    return sims
