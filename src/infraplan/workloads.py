"""Workload specs: what a scenario file (YAML), the CLI and the web form describe.

Every field documents itself and validates on construction; a typo in a key gets "did you
mean" against the fields that exist, a bad value names the field and what it accepts.
"""

from __future__ import annotations

from typing import Literal

from pydantic import (ConfigDict, Field, PositiveInt,
                      field_validator, model_validator)

from infraplan.economics.cost import CostInputs, UsdPerGpuHour
from infraplan.economics.spec import EnergySpec, Pricing
from infraplan.errors import InputError
from infraplan.reliability.run_spec import DEFAULT_CHECKPOINT_TIER, RunSpec
from infraplan.spec_checks import FieldError, StrictNumbers, given


# Bounds far above any real job, so that a typo (an extra zero run, 1e300) is refused with
# its field named instead of overflowing the arithmetic: the longest contexts are 1-10M
# tokens, the largest pre-training runs 15-36T tokens and batches of thousands of sequences.
MAX_SEQ_LEN = 2**27
MAX_TRAINING_TOKENS = 1e16
MAX_GLOBAL_BATCH = 2**30
MAX_ACCELERATORS = 2**17
# A memory scenario's sequence length when it names none, as `infraplan memory`'s flags
DEFAULT_SEQ_LEN = 4096

# The knobs' choices, named once for the scenarios here and the web requests that set them
Precision = Literal["bf16", "fp16", "fp8", "fp32"]
# A training precision left out is 16-bit: bf16, or fp16 on chips without bf16 tensor cores
# (V100, T4), as mixed-precision recipes for those chips do (Accelerator.sixteen_bit).
PRECISION_DEFAULT = "16-bit: bf16, or fp16 on chips without bf16 (V100, T4)"
GradDtype = Literal["fp32", "bf16", "fp16"]
OptimizerName = Literal["adamw", "adamw-bf16", "adamw-8bit", "sgd-momentum"]
Kernels = Literal["fused", "eager"]
FinetuneMethod = Literal["full", "lora", "qlora"]
Recompute = Literal["none", "selective", "full"]


class _Spec(StrictNumbers):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Hardware(_Spec):
    gpu: str = Field(description="accelerator name or alias from the catalog ('h100')")
    num_gpus: int = Field(default=1, ge=1, le=MAX_ACCELERATORS,
                          description="accelerators in the job")


class Parallelism(_Spec):
    tp: int = Field(default=1, ge=1, description="tensor-parallel degree")
    pp: int = Field(default=1, ge=1, description="pipeline stages")
    dp: int | None = Field(default=None, ge=1,
                           description="data-parallel replicas (default: what the GPUs allow)")
    cp: int = Field(default=1, ge=1, description="context-parallel degree")
    ep: int = Field(default=1, ge=1, description="expert-parallel degree (MoE)")
    etp: int | None = Field(default=None, ge=1, description="the routed experts' tensor "
                            "parallelism (default: tp); 1 folds whole experts over the TP "
                            "ranks so that EP may span them")
    vp: int = Field(default=1, ge=1, description="virtual stages per pipeline rank")
    zero: Literal[0, 1, 2, 3] = Field(default=0, description="ZeRO stage; 3 = FSDP full shard")
    sequence_parallel: bool = False
    micro_batch: int = Field(default=1, ge=1, description="sequences per micro-batch")
    recompute: Recompute = "none"
    recompute_fraction: float = Field(default=1.0, gt=0, le=1,
                                      description="with full: share of each stage's layers "
                                                  "recomputed, the rest selective")

    @model_validator(mode="after")
    def _knobs_that_apply(self):
        if given(self, "recompute_fraction") and self.recompute != "full":
            raise ValueError("recompute_fraction applies only with recompute: full (it would "
                             "be ignored)")
        if self.sequence_parallel and self.tp == 1:
            raise FieldError("sequence_parallel", "splits activations over the "
                             "tensor-parallel ranks: it needs tp > 1",
                             fix="set sequence_parallel: false, or tp above 1")
        return self


class Training(_Spec):
    seq_len: int = Field(default=DEFAULT_SEQ_LEN, ge=1, le=MAX_SEQ_LEN,
                         description="tokens per sequence")
    global_batch: int | None = Field(default=None, ge=1, le=MAX_GLOBAL_BATCH,
                                     description="sequences per optimizer step")
    tokens: float | None = Field(default=None, gt=0, le=MAX_TRAINING_TOKENS,
                                 description="tokens to train on")
    precision: Precision | None = Field(default=None, description=PRECISION_DEFAULT)
    grad_dtype: GradDtype | None = Field(
        default=None, description="gradient dtype; fp32 = Megatron-LM main grads")
    optimizer: OptimizerName = "adamw"
    kernels: Kernels = Field(
        default="fused", description="fused: flash attention + fused norms/SwiGLU; eager: "
                                     "plain PyTorch ops with the s x s attention scores")


class FineTune(_Spec):
    method: FinetuneMethod = "full"
    lora_rank: int = Field(default=16, ge=1)
    lora_targets: tuple[str, ...] = Field(
        default=("all-linear",), min_length=1,
        description="groups (attention, mlp, all-linear) or module names (q_proj, v_proj, ...)")

    @field_validator("lora_targets", mode="before")
    @classmethod
    def _one_line(cls, value):
        """'all-linear' or 'q_proj, v_proj' as PEFT's target_modules string and the CLI's
        --lora-targets read: the list of its comma-separated names."""
        if isinstance(value, str):
            return [name.strip() for name in value.split(",") if name.strip()]
        return value

    @model_validator(mode="after")
    def _adapters_need_lora(self):
        adapters = [name for name in ("lora_rank", "lora_targets") if given(self, name)]
        if adapters and self.method == "full":
            verb = "applies" if len(adapters) == 1 else "apply"
            raise ValueError(f"{' and '.join(adapters)} {verb} only with method lora or "
                             "qlora (it would be ignored)")
        return self


class MemoryScenario(_Spec):
    """What `infraplan memory SCENARIO.yaml` reads."""

    name: str = ""
    description: str = ""
    model: str = Field(description="catalog model name or a config.json path (relative to "
                                   "the scenario file)")
    hardware: Hardware
    training: Training = Training()  # every field has a default, as the flag form's
    parallelism: Parallelism = Parallelism()
    finetune: FineTune = FineTune()


class TrainHardware(_Spec):
    gpus: tuple[str, ...] = Field(min_length=1, description="accelerator names to compare")
    counts: tuple[PositiveInt, ...] | None = Field(
        default=None, min_length=1, description="GPU counts allowed (default: "
                                                "min_count..max_count)")
    min_count: int = Field(default=8, ge=1)
    # The largest clusters built hold on the order of 100,000 accelerators; 2^17 bounds the
    # search (its time grows with the number of counts) well above them.
    max_count: int = Field(default=1024, ge=1, le=MAX_ACCELERATORS)
    count_step: int | None = Field(default=None, ge=1,
                                   description="default: the accelerators per node")
    system: str | None = Field(default=None, description="node type (default: the GPU's)")
    network: str | None = Field(
        default=None, description="scale-out network replacing the node type's "
        "('ethernet-100g'; 'infraplan catalog networks')")
    nics_per_node: int | None = Field(default=None, ge=1,
                                      description="ports of `network` per node")


    @field_validator("gpus")
    @classmethod
    def _each_accelerator_once(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        from infraplan.catalog import distinct_accelerators

        return distinct_accelerators(names)  # aliases of one accelerator would plan it twice

    # Catalog names are looked up here, so that a miss names its file and field as the
    # other checks do ('s.yaml: hardware.system unknown system ...'), not later in the search
    @field_validator("system", "network")
    @classmethod
    def _known_node(cls, name: str | None, info) -> str | None:
        from infraplan.catalog import load_catalog

        if name is not None:
            table = {"system": "systems", "network": "networks"}[info.field_name]
            getattr(load_catalog(), table).get(name)  # UnknownNameError: did you mean
        return name

    @model_validator(mode="after")
    def _counts_or_range(self):
        if self.counts is not None and (given(self, "min_count") or given(self, "max_count")):
            raise ValueError("give counts or min_count/max_count, not both (counts would "
                             "win and the range would be ignored)")
        if self.counts is not None and max(self.counts) > MAX_ACCELERATORS:
            raise ValueError(f"counts must be <= {MAX_ACCELERATORS:,} (got {max(self.counts)})")
        if self.counts is None and self.min_count > self.max_count:
            raise FieldError("min_count", f"{self.min_count} exceeds max_count {self.max_count}",
                             fix=f"lower min_count to {self.max_count} or less, or raise "
                                 f"max_count to {self.min_count} or more")
        return self

    @model_validator(mode="after")
    def _system_holds_the_gpus(self):
        from infraplan.physics import hardware

        for gpu in self.gpus if self.system is not None else ():
            try:
                hardware.cluster(gpu, self.system)
            except InputError as exc:  # a node type of another accelerator
                raise FieldError("system", exc.message, fix=exc.fix) from None
        return self


class TrainJob(_Spec):
    tokens: float = Field(gt=0, le=MAX_TRAINING_TOKENS, description="tokens to train on")
    global_batch: int = Field(ge=1, le=MAX_GLOBAL_BATCH,
                              description="sequences per optimizer step")
    seq_len: int = Field(ge=1, le=MAX_SEQ_LEN)
    precision: Precision | None = Field(default=None, description=PRECISION_DEFAULT)
    grad_dtype: GradDtype | None = None
    optimizer: OptimizerName = "adamw"
    kernels: Kernels = "fused"
    storage: str | None = Field(default=None, description="storage tier the data is read from")
    data_bytes_per_token: float | None = Field(
        default=None, gt=0, description="bytes read per token (default: a 4-byte token id; "
                                        "raw text ~4-6, image-text pairs far more)")

    @field_validator("storage")
    @classmethod
    def _known_tier(cls, name: str | None) -> str | None:
        from infraplan.catalog import load_catalog

        if name is not None:
            load_catalog().storage.get(name)  # UnknownNameError: did you mean, how to list
        return name


class Pins(_Spec):
    """Knobs fixed by the user; anything left out is searched."""

    tp: int | None = Field(default=None, ge=1)
    pp: int | None = Field(default=None, ge=1)
    dp: int | None = Field(default=None, ge=1)
    cp: int | None = Field(default=None, ge=1)
    ep: int | None = Field(default=None, ge=1)
    etp: int | None = Field(default=None, ge=1, description="the routed experts' tensor "
                            "parallelism; left out, both tp and 1 (folded) are searched")
    vp: int | None = Field(default=None, ge=1)
    zero: Literal[0, 1, 2, 3] | None = None
    micro_batch: int | None = Field(default=None, ge=1)
    recompute: Literal["none", "selective", "full", "auto"] | None = None
    sequence_parallel: bool | None = None
    tp_comm_overlap: bool | None = None
    ep_comm_overlap: Literal[True, False, "auto"] | None = Field(
        default=None, description="MoE all-to-alls beside another micro-batch's compute "
        "(Megatron-Core --overlap-moe-expert-parallel-comm, DualPipe): true, false (the "
        "default: a stack without it) or auto (search both)")

    @model_validator(mode="after")
    def _sequence_parallel_needs_tp(self):
        if self.sequence_parallel and self.tp == 1:
            raise FieldError("sequence_parallel", "splits activations over the "
                             "tensor-parallel ranks: it needs tp > 1",
                             fix="set sequence_parallel: false, or tp above 1")
        # Megatron-LM's --tp-comm-overlap pipelines the sequence-parallel all-gathers and
        # reduce-scatters with the GEMMs: it needs both (space.py's rule)
        if self.tp_comm_overlap and (self.tp == 1 or self.sequence_parallel is False):
            got = "tp: 1" if self.tp == 1 else "sequence_parallel: false"
            raise FieldError("tp_comm_overlap", "overlaps the sequence-parallel collectives "
                             f"with the GEMMs: it needs tp > 1 and sequence_parallel (got "
                             f"{got})", fix=f"remove pin.tp_comm_overlap, or the pin {got}")
        return self


class Constraints(_Spec):
    deadline_days: float | None = Field(default=None, gt=0)
    budget_gpu_hours: float | None = Field(default=None, gt=0)
    budget_usd: float | None = Field(default=None, gt=0, description="total cost, every "
                                                                    "line item")


class TrainScenario(_Spec):
    """What `infraplan plan train SCENARIO.yaml` reads."""

    name: str = ""
    description: str = ""
    model: str
    training: TrainJob
    hardware: TrainHardware
    pin: Pins = Pins()
    constraints: Constraints = Constraints()
    objective: Literal["time", "cost"] = Field(default="time", description="rank plans by "
                                               "time to train or by total cost")
    prices: dict[str, UsdPerGpuHour] = Field(
        default_factory=dict, description="USD per GPU-hour by accelerator (default: the "
                                          "cheapest offer for `pricing`)")
    pricing: Pricing = "on_demand"
    costs: CostInputs = CostInputs()
    energy: EnergySpec = EnergySpec()
    run: RunSpec = Field(default_factory=RunSpec, description="simulate train: failures, "
                                                              "spot, checkpoints")
    top: int = Field(default=5, ge=1, le=50, description="plans to show")

    @property
    def checkpoint_tier(self) -> str:
        """The storage tier the run writes its checkpoints to: run.checkpoint_storage, else
        training.storage unless it is the nodes' own disks (a checkpoint must outlive the
        node), else DEFAULT_CHECKPOINT_TIER."""
        return self._named_checkpoint_tier() or DEFAULT_CHECKPOINT_TIER

    def _named_checkpoint_tier(self) -> str | None:
        from infraplan.catalog import load_catalog

        if self.run.checkpoint_storage or self.training.storage is None:
            return self.run.checkpoint_storage
        local = load_catalog().storage.get(self.training.storage).node_local
        return None if local else self.training.storage

    def billed_costs(self) -> CostInputs:
        """costs: with the data and the checkpoints billed on the tiers the scenario names
        for them (training.storage, run.checkpoint_storage) unless costs names its own, so
        that the bill and the plan agree. Checkpoints on the default tier are billed at
        costs' default (object storage): the kept copies, not the fast tier they pass."""
        from infraplan.catalog import load_catalog

        used = {"dataset": self.training.storage, "checkpoint": self._named_checkpoint_tier()}
        update = {}
        for which, used_tier in used.items():
            if f"{which}_tier" in self.costs.model_fields_set or used_tier is None \
                    or not getattr(self.costs, f"{which}_gb"):
                continue
            tier = load_catalog().storage.get(used_tier)
            if tier.price_usd_per_gb_month is None \
                    and getattr(self.costs, f"{which}_usd_per_gb_month") is None:
                raise InputError(
                    f"costs.{which}_gb: the plan keeps it on {tier.name}, which has no "
                    "price_usd_per_gb_month (bundled with a node or bought outright)",
                    fix=f"set costs.{which}_usd_per_gb_month (0 if it is already paid for), "
                    f"or costs.{which}_tier to the tier that holds it")
            update[f"{which}_tier"] = tier.name
        return self.costs.model_copy(update=update) if update else self.costs

    @field_validator("prices")
    @classmethod
    def _known_accelerators(cls, prices: dict[str, float]) -> dict[str, float]:
        from infraplan.economics.spec import check_price_keys

        check_price_keys(prices)  # UnknownNameError: did you mean, how to list them
        return prices
