"""What `infraplan simulate serve` and `infraplan plan serve` read from a scenario YAML."""

from __future__ import annotations

import math
from pathlib import Path
from typing import ClassVar

import numpy as np
from pydantic import Field, PositiveInt, field_validator

from infraplan.catalog import distinct_accelerators, load_catalog
from infraplan.economics.cost import SECONDS_PER_MONTH, CostInputs, UsdPerGpuHour
from infraplan.economics.instances import Footprint
from infraplan.economics.spec import (EnergySpec, Pricing, check_price_keys, node_gpus,
                                      plan_economics, price_per_gpu_hour, priced)
from infraplan.errors import InputError, UnknownNameError, close_matches
from infraplan.models import ModelArch, uncounted_notes
from infraplan.serving.deployment import MAX_REPLICAS, Deployment
from infraplan.serving.lengths import FieldError, SpecModel
from infraplan.serving.metrics import Slo
from infraplan.serving.quantization import CHECKPOINT_FORMAT, kv_format, serving_weight_dtype
from infraplan.serving.traffic import (DAY_S, HOUR_S, Requests, TrafficSpec, mean_rate_per_s,
                                       rates_at)


class SloSpec(SpecModel):
    ttft_p99_s: float | None = Field(default=None, gt=0, description="p99 time to first token")
    tpot_p99_s: float | None = Field(default=None, gt=0, description="p99 time per output "
                                                                     "token")
    e2e_p99_s: float | None = Field(default=None, gt=0, description="p99 end-to-end latency")

    def to_slo(self) -> Slo:
        return Slo(ttft_p99_s=self.ttft_p99_s, tpot_p99_s=self.tpot_p99_s,
                   e2e_p99_s=self.e2e_p99_s)

    def unit_notes(self) -> list[str]:
        """A limit that reads like milliseconds written as seconds: a second or more a token
        is slower than anyone reads (about 4 tokens a second at 250 words a minute), and
        ten minutes to a first token is a batch job's wait, not an SLO's."""
        out = []
        for field, limit, usual in (("tpot_p99_s", 1.0, "0.05 for 50 ms"),
                                    ("ttft_p99_s", 600.0, "1.0 for a second")):
            value = getattr(self, field)
            if value is not None and value >= limit:
                out.append(f"slo.{field} is {value:g} s: SLOs are in seconds ({usual}); "
                           "if you meant milliseconds, divide by 1,000")
        return out


class SearchSpace(SpecModel):
    """The configurations `plan serve` compares; each list is searched in full."""

    gpus: tuple[str, ...] = Field(min_length=1, description="accelerators to compare")
    tp: tuple[PositiveInt, ...] = Field(default=(1, 2, 4, 8), min_length=1)
    weight_dtypes: tuple[str, ...] = Field(default=("bf16", "fp8"), min_length=1)
    kv_dtypes: tuple[str, ...] = Field(default=("bf16",), min_length=1)
    max_num_seqs: tuple[PositiveInt, ...] | None = Field(
        default=None, description="default: the engine's")
    engine: str = "vllm"
    max_replicas: int = Field(default=64, ge=1, le=MAX_REPLICAS)

    @field_validator("gpus")
    @classmethod
    def _known_gpus(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        try:
            return distinct_accelerators(names)
        except InputError as exc:
            raise InputError(f"has {exc.message}", fix=exc.fix) from None

    @field_validator("weight_dtypes")
    @classmethod
    def _known_weight_formats(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        out = []
        for name in names:
            if isinstance(name, str) and name.strip().lower() == CHECKPOINT_FORMAT:
                out.append(CHECKPOINT_FORMAT)  # resolved against the model by the planner
                continue
            try:
                out.append(serving_weight_dtype(name))
            except InputError as exc:
                close = close_matches(str(name).strip().lower(), (CHECKPOINT_FORMAT,))
                message = (f"not a serving weight format; did you mean {close[0]!r}?"
                           if close and "did you mean" not in exc.message else exc.message)
                raise InputError(f"has {name!r}, {message}",
                                 fix=f"{exc.fix}, or {CHECKPOINT_FORMAT} (the format the "
                                     "model's checkpoint stores)") from None
        return tuple(dict.fromkeys(out))

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, name: str) -> str:
        return load_catalog().engines.get(name).name

    @field_validator("kv_dtypes")
    @classmethod
    def _known_kv_formats(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        formats = []
        for name in names:
            try:
                formats.append(kv_format(name))
            except InputError as exc:
                raise InputError(f"entry {name!r} {exc.message}") from None
        return tuple(formats)


class ServeScenario(SpecModel):
    # a scenario is a document's top level: its paths start at its keys (traffic.input.mean),
    # and load_scenario names the file in front of them, as for training scenarios
    origin: ClassVar[str] = ""

    name: str = ""
    description: str = ""
    model: str
    traffic: TrafficSpec
    slo: SloSpec = SloSpec()
    peak_rate_per_s: float | None = Field(default=None, gt=0, description="plan for this "
                                                                          "rate (default: "
                                                                          "the traffic's "
                                                                          "peak)")
    deployment: dict | None = Field(default=None, description="simulate serve: the "
                                                              "configuration (model taken "
                                                              "from the top)")
    search: SearchSpace | None = Field(default=None, description="plan serve: what to "
                                                                 "compare")
    prices: dict[str, UsdPerGpuHour] = Field(default_factory=dict,
                                             description="USD per GPU-hour by accelerator")
    pricing: Pricing = "on_demand"
    budget_usd_per_month: float | None = Field(
        default=None, gt=0, description="plan serve: the most a month of the deployment may "
                                        "cost, every line item")
    costs: CostInputs = Field(default_factory=CostInputs, description="storage, egress, "
                                                                      "networking, monitoring")
    energy: EnergySpec = Field(default_factory=EnergySpec)
    seed: int = Field(default=0, ge=0)

    def _check(self) -> None:
        try:  # each price is bounded by its type
            check_price_keys(self.prices)
        except InputError as exc:
            message = f"has {exc.message}" if isinstance(exc, UnknownNameError) else \
                exc.message
            raise FieldError("prices", message, fix=exc.fix) from None
        if self.traffic.arrival.kind != "trace":  # a trace's rate needs its file
            self.check_peak()

    def check_peak(self, base_dir: Path | None = None) -> None:
        """A peak below the traffic's mean rate sizes a deployment that falls behind the
        traffic it is simulated on. `base_dir` finds a relative trace."""
        kind = self.traffic.arrival.kind
        if self.peak_rate_per_s is None or kind == "offline":
            return
        mean = mean_rate_per_s(self.traffic, base_dir=base_dir)
        if math.isfinite(mean) and self.peak_rate_per_s < mean:
            what = "mean over the day" if kind == "diurnal" else "rate"
            raise FieldError("peak_rate_per_s", f"{self.peak_rate_per_s:g} requests/s is below "
                             f"the traffic's {what}, {mean:.4g} requests/s: a deployment sized "
                             "for it falls behind the traffic",
                             fix=f"set peak_rate_per_s to at least {mean:.4g}, or remove it to "
                                 "plan for the traffic's peak")

    @classmethod
    def model_validate(cls, obj, **kwargs):  # type: ignore[override]
        """Also check the deployment's keys when the file is read (outside pydantic, so
        its errors keep their own path: deployment.<key>)."""
        scenario = super().model_validate(obj, **kwargs)
        if scenario.deployment is not None:
            if "model" in scenario.deployment:
                raise InputError("deployment.model is not a key: the deployment serves the "
                                 f"scenario's model ({scenario.model!r})",
                                 fix="remove deployment.model, or change the top-level model")
            scenario.deployment_spec()
        return scenario

    def price_per_gpu_hour(self, gpu: str, footprint: Footprint | None = None) -> float:
        """The scenario's price for an accelerator (keys may be aliases), else the catalog's
        for the scenario's pricing, on the whole instances `footprint` fills (None: one
        GPU), spread over the GPUs it uses."""
        return price_per_gpu_hour(gpu, prices=self.prices, pricing=self.pricing,
                                  footprint=footprint)

    def deployment_price(self, dep: Deployment) -> float:
        """What a GPU-hour of `dep` costs, its replicas packed on whole instances."""
        return self.price_per_gpu_hour(dep.gpu, replica_footprint(dep))

    def deployment_priced(self, dep: Deployment) -> tuple[float, str]:
        """deployment_price and where it came from (spec.priced's basis: the scenario's
        price, or the offer and its whole instances), as the compute line states it."""
        return priced(dep.gpu, prices=self.prices, pricing=self.pricing,
                      footprint=replica_footprint(dep))

    def monthly_economics(self, dep: Deployment) -> dict:
        """A deployment's month (30.44 days) as line items, energy and carbon."""
        month_s, n = SECONDS_PER_MONTH, dep.num_gpus
        return plan_economics(dep.gpu, n, n * month_s / 3600.0, month_s,
                              prices=self.prices, pricing=self.pricing, costs=self.costs,
                              energy=self.energy,
                              footprint=replica_footprint(dep),
                              user="a month of the deployment uses",
                              checkpoints=False).to_json()

    def deployment_spec(self, arch: ModelArch | None = None) -> Deployment:
        """The deployment; with no weight_dtype, a quantized checkpoint's own format (its
        quantization_config, as engines load it), else the chip's 16-bit type. `arch`
        stands in for the model (an uploaded config.json)."""
        if self.deployment is None:
            raise FieldError("deployment", "is required by simulate serve" + (
                "; this scenario has a search only" if self.search else ""),
                fix="add deployment: {gpu: h100, tp: 1, replicas: 1}" + (
                    ", or run plan serve on the search" if self.search else ""))
        raw = dict(self.deployment)
        raw.setdefault("model", self.model)
        return Deployment.model_validate(raw, context={"arch": arch})

    def window_notes(self, requests: Requests) -> list[str]:
        """A diurnal stream whose requests all arrive in hours below 90% of the curve's
        peak rate: the run shows only the hours it covers, and a reader of its latencies
        should know the peak was not among them."""
        arrival = self.traffic.arrival
        if arrival.kind != "diurnal" or not len(requests):
            return []
        span_h = float(requests.arrival_s.max()) / HOUR_S
        peak_h, peak_rate = max(arrival.curve, key=lambda point: point[1])
        hours = arrival.start_hour + np.linspace(0.0, min(span_h, 24.0), 1025)
        if rates_at(arrival, hours * HOUR_S).max() >= 0.9 * peak_rate:
            return []
        more = ("traffic.num_requests" if self.traffic.num_requests is not None
                else "traffic.duration_s")
        return [f"the {len(requests):,} requests arrive over hours {arrival.start_hour:g} to "
                f"{(arrival.start_hour + span_h) % 24:.2f} of the diurnal curve, not its peak "
                f"of {peak_rate:g} requests/s at hour {peak_h:g}: set "
                f"traffic.arrival.start_hour: {peak_h:g} to simulate the peak, or raise "
                f"{more} to cover more of the day (about "
                f"{mean_rate_per_s(self.traffic) * DAY_S:,.0f} requests a day)"]

    def simulation_notes(self, requests: Requests, arch: ModelArch) -> list[str]:
        """What a lone simulation of the scenario notes: the diurnal hours it covers, the
        checkpoint's format, the model's parts left uncounted."""
        return [*self.slo.unit_notes(), *self.window_notes(requests),
                *self.stored_format_notes(arch), *uncounted_notes(arch)]

    def stored_format_notes(self, arch: ModelArch) -> list[str]:
        """Why the deployment serves the format it does, when the checkpoint chose it."""
        stored = arch.stored
        if stored is None or self.deployment is None or "weight_dtype" in self.deployment:
            return []
        return [f"weights {stored.weight_dtype}: {arch.name}'s checkpoint stores them as "
                f"{stored.describe()}; set deployment.weight_dtype to serve another format"]



def replica_footprint(dep) -> Footprint:
    """How `dep` fills rented instances: its replicas of TP x PP GPUs, each on one instance
    that holds it up to a node (a TP group needs the node's NVLink, not GPUs on separate
    VMs)."""
    group = dep.tp * dep.pp
    return Footprint(min(group, node_gpus(dep.gpu)), group, dep.replicas)
