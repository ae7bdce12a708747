"""The JSON API under /api: the CLI's library calls behind pydantic request models.

Every request is bounded (GPU-count choices, accelerators compared, simulated requests,
uploaded config size); over a bound the answer is 413 or 422 with the reason. Names resolve
through the catalog only: no request can make the server read or write a file. Library
InputErrors become 422 with their message, in the request's terms (`min_count`, not
`hardware.min_count`: answers.py).
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field, StrictBool

from infraplan.catalog import load_catalog
from infraplan.economics.spec import Pricing
from infraplan.errors import InputError
from infraplan.serving.quantization import CHECKPOINT_FORMAT, SERVING_WEIGHT_DTYPES
from infraplan.workloads import PRECISION_DEFAULT, OptimizerName, Precision
from infraplan.web.answers import (SERVE_TERMS, TRAIN_TERMS, PlanResponse, in_request_terms,
                                   respond)
from infraplan.web.fields import Count, In, ModelPick, Number, TensorParallel
from infraplan.web.memory import MEMORY_TERMS, MemoryRequest
from infraplan.web.prices import FORMS, PricesIn, form_prices

MAX_ACCELERATORS = 3  # accelerator types compared in one search
MAX_GPUS = 4096  # largest GPU count a training search may consider
MAX_COUNT_CHOICES = 512  # GPU counts x accelerator types in one training search
MAX_SIM_REQUESTS = 20_000  # requests in one simulation
MAX_PLAN_REQUESTS = 5_000  # requests per simulation while planning (many simulations)
MAX_CONFIG_BYTES = 64 * 1024  # an uploaded config.json
SWEEP_REQUESTS = 800  # requests per load-sweep point in the web UI
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._ -]{0,99}")



class ErrorAnswer(BaseModel):
    """Every refused or failed request's answer: one line, the field first and the fix."""

    detail: str = Field(description="what is wrong, naming the field, and 'To fix: ...'")


# what each route answers besides 200 (FastAPI would document its own 422 list otherwise)
ERRORS: dict[int | str, dict[str, Any]] = {
    413: {"model": ErrorAnswer, "description": "the body or an uploaded config is too large"},
    422: {"model": ErrorAnswer, "description": "bad input: the field, why, and the fix"},
    500: {"model": ErrorAnswer, "description": "a defect (please report it)"}}

# a POST's body must be declared JSON (app.BodyLimit)
NOT_JSON: dict[int | str, dict[str, Any]] = {
    415: {"model": ErrorAnswer, "description": "the body is not declared JSON (Content-Type)"}}

router = APIRouter(prefix="/api", responses=ERRORS)


class TooLarge(InputError):
    """A request over one of the web caps that is about size: HTTP 413."""


def catalog_name(kind: str, name: str, field: str = "") -> str:
    """The canonical catalog name of `name`; anything that is not one (a path, a URL) is
    refused before the library sees it. A refusal opens with `field`, the request's field
    that named it (the page marks that field)."""
    table = {"model": "models", "accelerator": "accelerators", "storage tier": "storage",
             "engine": "engines"}[kind]
    try:
        if not NAME.fullmatch(name) or ".." in name:
            raise InputError(f"{kind} {name!r} is not a catalog name (letters, digits, '.', "
                             "'-', '_')", fix="pick one from /api/catalog; the web UI reads "
                             "no files" + (" (send a config.json's contents as config, in "
                                           "place of model)" if kind == "model" else ""))
        return getattr(load_catalog(), table).get(name).name
    except InputError as exc:
        if not field:
            raise
        raise InputError(f"{field}: {exc.message}", fix=exc.fix) from None


class TrainRequest(ModelPick):
    """A training plan: the fields of a `plan train` scenario the web form sets."""

    gpus: list[str] = Field(min_length=1, max_length=MAX_ACCELERATORS,
                            description="accelerators to compare")
    min_count: Count = Field(default=8, ge=1, le=MAX_GPUS, description="fewest GPUs")
    max_count: Count = Field(default=64, ge=1, le=MAX_GPUS, description="most GPUs")
    count_step: Count | None = Field(default=None, ge=1, le=MAX_GPUS,
                                     description="GPU count step (default: GPUs per node)")
    tokens: Number = Field(default=1e11, gt=0, le=1e16, description="tokens to train on")
    global_batch: Count = Field(default=256, ge=1, le=1 << 20,
                                description="sequences per optimizer step")
    seq_len: Count = Field(default=4096, ge=1, le=1 << 20, description="tokens per sequence")
    precision: Precision | None = Field(default=None, description=PRECISION_DEFAULT)
    optimizer: OptimizerName = "adamw"
    storage: str | None = Field(default=None, max_length=100,
                                description="storage tier the data is read from")
    deadline_days: Number | None = Field(default=None, gt=0, le=1e5)
    budget_gpu_hours: Number | None = Field(default=None, gt=0, le=1e12)
    pricing: Pricing = "on_demand"
    prices: PricesIn = Field(default=None, description=f"USD per GPU-hour: {FORMS}")
    top: Count = Field(default=5, ge=1, le=20, description="plans to show")


class TrafficIn(In):
    arrival: Literal["poisson", "gamma", "offline"] = "poisson"
    rate_per_s: Number = Field(default=10.0, gt=0, le=1e5, description="mean arrivals per s")
    cv: Number | None = Field(default=None, ge=0.01, le=20, description="gamma: burstiness "
                              "(the library's floor: the gamma's shape 1/cv^2 stays finite)")
    num_requests: Count = Field(default=1000, ge=1, le=MAX_SIM_REQUESTS)
    input_mean_tokens: Number = Field(default=1000, ge=1, le=1e6)
    input_sigma: Number = Field(default=0.8, gt=0, le=4)
    input_max_tokens: Count | None = Field(default=None, ge=1, le=10_000_000)
    output_mean_tokens: Number = Field(default=250, ge=1, le=1e6)
    output_sigma: Number = Field(default=0.8, gt=0, le=4)
    output_max_tokens: Count | None = Field(default=None, ge=1, le=10_000_000)

    def spec(self) -> dict:
        arrival: dict[str, Any] = {"kind": self.arrival}
        if self.arrival != "offline":
            arrival["rate_per_s"] = self.rate_per_s
        if self.arrival == "gamma":
            arrival["cv"] = self.cv if self.cv is not None else 2.0
        lengths = {}
        for name in ("input", "output"):
            spec = {"kind": "lognormal", "mean": getattr(self, f"{name}_mean_tokens"),
                    "sigma": getattr(self, f"{name}_sigma")}
            if getattr(self, f"{name}_max_tokens") is not None:
                spec["max"] = getattr(self, f"{name}_max_tokens")
            lengths[name] = spec
        return {"arrival": arrival, "num_requests": self.num_requests, **lengths}


class SloIn(In):
    ttft_p99_s: Number | None = Field(default=None, gt=0, le=3600)
    tpot_p99_s: Number | None = Field(default=None, gt=0, le=60)
    e2e_p99_s: Number | None = Field(default=None, gt=0, le=86400)


WeightDtype = Literal[SERVING_WEIGHT_DTYPES]  # the formats serving/quantization.py models
# in a search, also the format the model's checkpoint stores (resolved by the planner)
SearchedWeightDtype = Literal[(CHECKPOINT_FORMAT, *SERVING_WEIGHT_DTYPES)]
KvDtype = Literal["bf16", "fp16", "fp8"]


class _Serve(ModelPick):
    traffic: TrafficIn = TrafficIn()
    slo: SloIn = SloIn()
    engine: str = Field(default="vllm", max_length=100)
    pricing: Pricing = "on_demand"
    prices: PricesIn = Field(default=None, description=f"USD per GPU-hour: {FORMS}")
    seed: Count = Field(default=0, ge=0, le=2**31 - 1)


class SimulateServeRequest(_Serve):
    """One deployment under traffic: `simulate serve`."""

    gpu: str = Field(max_length=100, description="accelerator name or alias")
    tp: TensorParallel = 1
    replicas: Count = Field(default=1, ge=1, le=64)
    weight_dtype: WeightDtype | None = Field(
        default=None, description="default: the format the checkpoint stores (a quantized "
        "one's own, else 16-bit)")
    kv_dtype: KvDtype | None = None
    sweep: StrictBool = Field(default=True, description="also simulate 25-125% of the rate")


class PlanServeRequest(_Serve):
    """The cheapest deployment that meets the SLOs: `plan serve`."""

    gpus: list[str] = Field(min_length=1, max_length=MAX_ACCELERATORS)
    tp: list[TensorParallel] = Field(default=[1, 2], min_length=1, max_length=4)
    weight_dtypes: list[SearchedWeightDtype] = Field(
        default=[CHECKPOINT_FORMAT, "fp8"], min_length=1, max_length=3,
        description=f"{CHECKPOINT_FORMAT}: the format the model's checkpoint stores")
    kv_dtypes: list[KvDtype] = Field(default=["bf16"], min_length=1, max_length=2)
    max_replicas: Count = Field(default=16, ge=1, le=64)


class InspectRequest(In):
    """An uploaded config.json (parsed in memory, never written) or a catalog model."""

    config: dict[str, Any] | None = Field(default=None, description="a Hugging Face "
                                          "config.json's content")
    model: str | None = Field(default=None, max_length=100)
    name: str = Field(default="uploaded", max_length=100)
    seq_len: Count = Field(default=4096, ge=1, le=1 << 20)


@router.get("/catalog/{kind}")
@in_request_terms(BaseModel)  # no request fields: catalog names only
def catalog(kind: Literal["models", "gpus", "systems", "networks", "storage", "engines",
                          "offers", "prices"],
            gpu: str | None = None) -> list[dict[str, Any]]:
    """What `infraplan catalog KIND [--gpu GPU] --json` prints: `gpu` picks one
    accelerator's offers, cheapest on-demand first."""
    from infraplan.report.catalog import LISTINGS, offers

    if gpu is not None and kind not in ("offers", "prices"):
        raise InputError(f"gpu picks one accelerator's offers; /api/catalog/{kind} lists "
                         "every row", fix=f"drop gpu, or ask /api/catalog/offers?gpu={gpu}")
    listing = LISTINGS[kind]() if gpu is None else offers(catalog_name("accelerator", gpu))
    return json.loads(json.dumps(listing[2], default=str))


@router.post("/plan/train", responses=NOT_JSON)
@in_request_terms(TrainRequest, "hardware|training|constraints", *TRAIN_TERMS)
def plan_train(req: TrainRequest) -> PlanResponse:
    """`infraplan plan train`: ranked plans, frontier, the report document."""
    from infraplan.report.document_train import training_document
    from infraplan.training.plan_train import knobs_for, plan_training
    from infraplan.scenario_files import parse_spec
    from infraplan.workloads import TrainScenario

    model, arch = _model(req)
    gpus = [catalog_name("accelerator", g, "gpus") for g in req.gpus]  # deduped later
    raw = {"name": f"{model} training", "model": model,
           "training": {"tokens": req.tokens, "global_batch": req.global_batch,
                        "seq_len": req.seq_len, "precision": req.precision,
                        "optimizer": req.optimizer,
                        "storage": req.storage and catalog_name("storage tier", req.storage,
                                                                "storage")},
           "hardware": {"gpus": gpus, "min_count": req.min_count, "max_count": req.max_count,
                        "count_step": req.count_step},
           "constraints": {"deadline_days": req.deadline_days,
                           "budget_gpu_hours": req.budget_gpu_hours}, "top": req.top,
           "pricing": req.pricing, "prices": form_prices(req.prices, gpus)}
    scenario = parse_spec(raw, TrainScenario, "request")
    counts = knobs_for(scenario, gpus[0]).gpus
    if len(counts) * len(gpus) > MAX_COUNT_CHOICES:
        raise _too_many_counts(req, counts, len(gpus))
    result = plan_training(scenario, arch=arch)
    return respond(dict(model=scenario.model, **result.to_json()),
                    training_document(scenario, result, arch=arch))


def _too_many_counts(req: TrainRequest, counts: tuple[int, ...], accelerators: int):
    """The search-space cap's refusal, about count_step: the step that would fit."""
    from infraplan.training.plan_train import gpu_counts

    step = req.count_step or (counts[-1] - counts[-2])  # default: the GPUs per node
    fits = next((s for s in range(step + 1, req.max_count + 1)
                 if len(gpu_counts(req.min_count, req.max_count, s)) * accelerators
                 <= MAX_COUNT_CHOICES), None)
    raise InputError(
        f"count_step: the search space of {req.min_count}..{req.max_count} GPUs in steps "
        f"of {step} is "
        f"{len(counts):,} GPU counts" + (f" x {accelerators} accelerators"
                                         if accelerators > 1 else "")
        + f", over the web's cap of {MAX_COUNT_CHOICES} searched",
        fix=(f"raise count_step to {fits} or more, " if fits else "")
        + "narrow min_count..max_count" + (" or compare fewer accelerators"
                                           if accelerators > 1 else "")
        + " (or run `infraplan plan train` locally)")


def _model(req) -> tuple[str, Any]:
    """(model name, architecture or None): a catalog model, or an uploaded config.json."""
    if (req.config is None) == (req.model is None):
        raise InputError("give exactly one of model (a catalog name) or config (an uploaded "
                         "config.json)")
    if req.config is None:
        return catalog_name("model", req.model, "model"), None
    arch = uploaded_arch(req.config, req.name)
    return arch.name, arch


def _serve_scenario(req: _Serve, extra: dict, gpus: list[str]):
    from infraplan.serving.scenario import ServeScenario

    model, _ = _model(req)
    raw = {"name": f"{model} serving", "model": model,
           "traffic": req.traffic.spec(), "slo": req.slo.model_dump(exclude_none=True),
           "pricing": req.pricing, "prices": form_prices(req.prices, gpus), "seed": req.seed,
           **extra}
    return ServeScenario.model_validate(raw)


@router.post("/simulate/serve", responses=NOT_JSON)
@in_request_terms(SimulateServeRequest, "deployment", *SERVE_TERMS)
def simulate_serve(req: SimulateServeRequest) -> PlanResponse:
    """`infraplan simulate serve`: latency, throughput, KV use and cost of one deployment."""
    from infraplan.report.document_serve import serving_document

    deployment = {"gpu": catalog_name("accelerator", req.gpu, "gpu"), "tp": req.tp,
                  "replicas": req.replicas, "weight_dtype": req.weight_dtype,
                  "kv_dtype": req.kv_dtype,
                  "engine": catalog_name("engine", req.engine, "engine")}
    scenario = _serve_scenario(req, {"deployment": {k: v for k, v in deployment.items()
                                                    if v is not None}}, [deployment["gpu"]])
    doc = serving_document(scenario, plan=False, sweep=req.sweep,
                           sweep_requests=SWEEP_REQUESTS, arch=_model(req)[1])
    return respond(doc["simulation"], doc)


@router.post("/plan/serve", responses=NOT_JSON)
@in_request_terms(PlanServeRequest, "search", *SERVE_TERMS)
def plan_serve(req: PlanServeRequest) -> PlanResponse:
    """`infraplan plan serve`: the cheapest deployment meeting the SLOs, then simulated."""
    from infraplan.report.document_serve import serving_document

    if req.traffic.num_requests > MAX_PLAN_REQUESTS:
        raise InputError(f"traffic.num_requests {req.traffic.num_requests:,} exceeds the "
                         f"planning cap of {MAX_PLAN_REQUESTS:,} (each plan runs dozens of "
                         "simulations)", fix=f"use at most {MAX_PLAN_REQUESTS:,} requests")
    if req.traffic.arrival == "offline":
        raise InputError("traffic.arrival: planning needs arriving traffic (poisson or gamma)",
                         fix="use /api/simulate/serve for an offline batch")
    search = {"gpus": [catalog_name("accelerator", g, "gpus") for g in req.gpus],
              "tp": sorted(set(req.tp)), "weight_dtypes": list(dict.fromkeys(req.weight_dtypes)),
              "kv_dtypes": list(dict.fromkeys(req.kv_dtypes)),
              "engine": catalog_name("engine", req.engine, "engine"),
              "max_replicas": req.max_replicas}
    scenario = _serve_scenario(req, {"search": search}, search["gpus"])
    doc = serving_document(scenario, plan=True, sweep=True, sweep_requests=SWEEP_REQUESTS,
                           arch=_model(req)[1])
    return respond(doc["plan"], doc)


@router.post("/memory", responses=NOT_JSON)
@in_request_terms(MemoryRequest, "hardware|parallelism|training|finetune", *MEMORY_TERMS)
def memory(req: MemoryRequest) -> PlanResponse:
    """`infraplan memory`: memory per accelerator of one plan, whether it fits, the single
    changes that make it fit; `result` is what `memory --json` prints."""
    from infraplan.web.memory import memory_answer, memory_scenario

    model, arch = _model(req)
    scenario = memory_scenario(req, model, catalog_name("accelerator", req.gpu))
    return respond(*memory_answer(scenario, arch))


@router.post("/models/inspect", responses=NOT_JSON)
@in_request_terms(InspectRequest)
def inspect_model(req: InspectRequest) -> dict[str, Any]:
    """Architecture math of an uploaded config.json (or a catalog model): what `infraplan
    model NAME --json` prints."""
    from infraplan.models import load_model
    from infraplan.report.model import arch_summary

    if (req.config is None) == (req.model is None):
        raise InputError("give exactly one of config (a config.json's content) or model "
                         "(a catalog name)")
    if req.config is None:
        arch = load_model(catalog_name("model", req.model, "model"))
    else:
        arch = uploaded_arch(req.config, req.name)
    return arch_summary(arch, req.seq_len)


def uploaded_arch(config: dict[str, Any], name: str):
    """The architecture of an uploaded config.json, parsed in memory (size capped)."""
    from infraplan.models.families import arch_from_config

    size = len(json.dumps(config))
    if size > MAX_CONFIG_BYTES:
        raise TooLarge(f"config: {size:,} bytes exceeds the cap of {MAX_CONFIG_BYTES:,}",
                       fix="upload the model's config.json only (no weights or tokenizer)")
    try:
        return arch_from_config(config, name=name, origin="config.json")
    except InputError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, ArithmeticError) as exc:
        raise InputError(f"config.json: not a supported model config "
                         f"({type(exc).__name__}: {exc})",
                         fix="upload a Hugging Face config.json of a supported family") \
            from None
