"""Workload specs: what a scenario file (YAML), the CLI and the web form describe.

Every field documents itself and validates on construction; a typo in a key gets "did you
mean" against the fields that exist, a bad value names the field and what it accepts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (ConfigDict, Field, PositiveInt, ValidationError,
                      field_validator, model_validator)

from infraplan.economics.cost import CostInputs, UsdPerGpuHour
from infraplan.economics.spec import EnergySpec, Pricing
from infraplan.errors import InputError
from infraplan.reliability.run_spec import DEFAULT_CHECKPOINT_TIER, RunSpec
from infraplan.files import on_disk, read_user_file, too_big_to_read
from infraplan.spec_checks import FieldError, StrictNumbers, describe_errors, given


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
            raise ValueError("sequence_parallel splits activations over the tensor-parallel "
                             "ranks: it needs tp > 1")
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


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice in one mapping is an error (PyYAML
    keeps the last one silently, so a pasted second `hardware:` would win unnoticed)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *defaults`: merged by SafeLoader, and overridable by design
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (list, dict)):  # `? [a, b]` or `{a: 1}: x`: unhashable
                raise InputError(f"the key at line {key_node.start_mark.line + 1} is a "
                                 f"{'list' if isinstance(key, list) else 'mapping'}, "
                                 "not a name", fix="write each key as a plain name (key: value)")
            if isinstance(key, str) and key in seen:
                raise InputError(f"the key {key!r} is given twice at line "
                                 f"{key_node.start_mark.line + 1}",
                                 fix="keep one of the two (YAML would keep the last silently)")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def parse_yaml(text: str, origin: str) -> Any:
    """The YAML document in `text`, each mapping's keys unique; what cannot be read is an
    InputError naming `origin` and, where PyYAML locates it, the line."""
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except InputError as exc:  # a key given twice, or a key that is not a name
        raise InputError(f"{origin}: {exc.message}", fix=exc.fix) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise InputError(f"{origin}: not valid YAML{where} "
                         f"({getattr(exc, 'problem', exc)})",
                         fix="check the indentation and brackets there; quote a value that "
                             "holds ': ' or ' #'") from None
    except (RecursionError, ValueError) as exc:
        raise too_big_to_read(origin, exc, fix="write the scenario as a few levels of keys "
                              "and each number with its real size (see examples/)") from None


def load_scenario(path: str | Path, model: type[_Spec] = MemoryScenario,
                  overrides: dict[str, Any] | None = None) -> _Spec:
    """Read a scenario YAML; `overrides` ({"parallelism.tp": 8}) win over the file."""
    path = Path(path)
    text = read_user_file(path, "scenario file",
                          fix="give the path of a scenario YAML (see examples/)")
    return scenario_from(parse_yaml(text, path.name), path, model, overrides)


def scenario_from(raw: Any, path: Path, model: type[_Spec] = MemoryScenario,
                  overrides: dict[str, Any] | None = None) -> _Spec:
    """The scenario of `path`'s parsed YAML `raw`: a model named relative to the file is
    found beside it."""
    if not isinstance(raw, dict):
        keys = ", ".join([k for k in model.model_fields if k not in ("name", "description")][:3])
        what = "is empty" if raw is None else f"holds a {type(raw).__name__}, not keys"
        raise InputError(f"{path.name} {what}", fix=f"write a mapping of keys ({keys}, ...); "
                         "see examples/")
    raw = apply_overrides(raw, overrides or {})
    if isinstance(raw.get("model"), str):
        local = path.parent / raw["model"]
        if on_disk(local):
            raw["model"] = str(local)
    spec = parse_spec(raw, model, path.name)
    _check_names(spec, path)
    return spec


def _check_names(spec: _Spec, path: Path) -> None:
    """The names a scenario's own validators do not look up: its model, and a memory
    scenario's accelerator and LoRA targets. Looked up when the file is read, so that a
    miss names the file and the field as every other key's does, a plan scenario's GPUs
    among them (they surfaced when planning, as a bare 'unknown model', 'unknown
    accelerator', 'unknown LoRA target'). The flag form, with no file, keeps the bare
    message: the flag it names is the user's own."""
    from infraplan.catalog import accelerator
    from infraplan.models import load_model  # the catalog's models: loaded on first use
    from infraplan.physics.memory.states import lora_targets

    lookups = [("model:", lambda: load_model(spec.model, base_dir=path.parent))]
    if isinstance(spec, MemoryScenario):
        lookups += [("hardware.gpu", lambda: accelerator(spec.hardware.gpu)),
                    ("finetune.lora_targets", lambda: lora_targets(spec.finetune.lora_targets))]
    for field, lookup in lookups:
        try:
            lookup()
        except InputError as exc:
            raise InputError(f"{path.name}: {field} {exc.message}", fix=exc.fix) from None


DROP = object()  # an override that removes the file's key (see fit_check.memory_overrides)


def apply_overrides(raw: dict, overrides: dict[str, Any]) -> dict:
    """`raw` with each dotted path set to its value; None leaves the path as it is."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in raw.items()}
    for dotted, value in overrides.items():
        if value is None:
            continue
        node = out
        *parents, leaf = dotted.split(".")
        for part in parents:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        if value is DROP:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    return out


def _hardware_has(raw: dict, key: str) -> bool:
    return isinstance(raw.get("hardware"), dict) and key in raw["hardware"]


# hardware fields of one kind only: a memory scenario's one GPU and its count, a plan's
# list of GPUs and the counts to search
MEMORY_HARDWARE = ("gpu", "num_gpus")
PLAN_HARDWARE = ("gpus", "counts", "min_count", "max_count", "count_step")


def _hardware_is(raw: dict, kind: tuple[str, ...], other: tuple[str, ...]) -> bool:
    """The hardware has fields of `kind` only: with fields of both (a misspelt `gpu:
    [h100]` beside `counts:`), it is a typo for validation to name, not another kind."""
    return any(_hardware_has(raw, k) for k in kind) and \
        not any(_hardware_has(raw, k) for k in other) and \
        not (kind is MEMORY_HARDWARE and isinstance(raw["hardware"].get("gpu"), list))


# A scenario of one kind handed to another command: (expected model, what marks the other
# kind, what the file is, the commands that take it).
KIND_MIXUPS = (
    ("TrainScenario", lambda raw: "traffic" in raw, "a serving scenario (it has traffic:)",
     "infraplan plan serve / simulate serve"),
    ("ServeScenario", lambda raw: "training" in raw,
     "a training or memory scenario (it has training:)",
     "infraplan plan train / simulate train / memory"),
    ("MemoryScenario", lambda raw: "traffic" in raw, "a serving scenario (it has traffic:)",
     "infraplan plan serve / simulate serve"),
    ("MemoryScenario", lambda raw: _hardware_is(raw, PLAN_HARDWARE, MEMORY_HARDWARE),
     "a plan scenario (its hardware lists gpus: to compare)",
     "infraplan plan train / simulate train"),
    ("TrainScenario", lambda raw: _hardware_is(raw, MEMORY_HARDWARE, PLAN_HARDWARE),
     "a memory scenario (its hardware names one gpu:)", "infraplan memory"),
)


def parse_spec(raw: dict, model: type[_Spec], origin: str) -> _Spec:
    for expected, marked, what, commands in KIND_MIXUPS:
        if model.__name__ == expected and marked(raw):
            raise InputError(f"{origin}: {what}, not what this command reads",
                             fix=f"run it with {commands}")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise InputError(f"{origin}: {describe_errors(exc, model)}") from None
    except InputError as exc:  # a SpecModel's own message (serving scenarios): name the file
        raise InputError(f"{origin}: {exc.message}", fix=exc.fix) from None


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
            raise FieldError("min_count", f"{self.min_count} exceeds max_count {self.max_count}")
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
            raise ValueError("sequence_parallel splits activations over the tensor-parallel "
                             "ranks: it needs tp > 1")
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
