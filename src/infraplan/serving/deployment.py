"""A serving deployment: model, accelerator, parallelism, precision, engine and scheduler
limits, and what it resolves to (step-time tables, KV capacity, batch limits)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from infraplan.catalog import accelerator, load_catalog
from infraplan.catalog.engines import RELEASE, Engine
from infraplan.catalog.schema import Accelerator
from infraplan.errors import InputError
from infraplan.models import ModelArch, load_model, param_counts
from infraplan.serving import trtllm_bench
from infraplan.serving.lengths import FieldError, SpecModel
from infraplan.serving.memory import ReplicaMemory, replica_memory
from infraplan.serving.quantization import (SERVING_WEIGHT_DTYPES, kv_format,
                                           serving_weight_dtype, weight_format)
from infraplan.serving.step_time import Speculation, StepModel, build_step_model

MAX_REPLICAS = 4096  # a simulation keeps every replica's engine state in memory


class Speculative(SpecModel):
    method: Literal["draft", "ngram"] = Field(
        description="draft: a small model proposes tokens; ngram: prompt lookup (free)")
    num_tokens: int = Field(default=4, ge=1, le=16, description="tokens drafted per step")
    acceptance_rate: float = Field(gt=0, le=1, description="probability each drafted token "
                                                           "is accepted (measure it on your "
                                                           "traffic)")
    draft_model: str | None = Field(default=None, description="catalog name or config.json")

    @model_validator(mode="after")
    def _draft_named(self):
        if self.method == "draft" and not self.draft_model:
            raise FieldError("draft_model", "is required when method is 'draft'")
        return self


class Deployment(SpecModel):
    """One configuration: `replicas` copies of a `tp`-GPU engine behind a router."""

    origin: ClassVar[str] = "deployment"

    model: str = Field(description="catalog model name or config.json path")
    gpu: str = Field(description="accelerator name or alias from the catalog")
    system: str | None = Field(
        default=None, description="node type from the catalog (systems.yaml) holding the "
        "gpu: its links carry the tensor-parallel collectives and its host CPU runs the "
        "engine's loop; None: the accelerator's default node")
    tp: int = Field(default=1, ge=1, description="tensor-parallel GPUs per replica")
    pp: int = Field(default=1, ge=1, description="pipeline stages per replica (a "
                                                 "throughput model: see step_time.py)")
    replicas: int = Field(default=1, ge=1, le=MAX_REPLICAS)
    weight_dtype: str = Field(default="bf16", description="bf16, fp16, fp8, int8, int4, fp4 "
                              "(NVFP4); default: a quantized checkpoint's own format, "
                              "else the chip's 16-bit type")
    kv_dtype: str | None = Field(default=None,
                                 description="KV-cache dtype (default: 16-bit; fp8 halves it)")
    engine: str = Field(default="vllm", description="vllm, tensorrt-llm or sglang")
    engine_version: str | None = Field(
        default=None, description="the engine's release ('0.8.0', or a pre-release build "
        "such as '0.7a'); None: the newest. Older releases lack kernels (TensorRT-LLM "
        "before XQA)")
    max_num_seqs: int | None = Field(default=None, ge=1)
    max_num_batched_tokens: int | None = Field(default=None, ge=1)
    block_size: int | None = Field(default=None, ge=1)
    chunked_prefill: bool | None = None
    kv_policy: Literal["on_demand", "reserve"] | None = None
    memory_fraction: float | None = Field(default=None, gt=0, le=1)
    batching: Literal["continuous", "static"] = "continuous"
    batch_size: int | None = Field(default=None, ge=1, description="static batching: "
                                                                   "requests per batch")
    router: Literal["round_robin", "least_outstanding"] = "least_outstanding"
    speculative: Speculative | None = None
    expert_imbalance: float = Field(default=1.0, ge=1.0, allow_inf_nan=False,
                                    description="MoE: busiest expert's load / mean load")
    tuning: Literal["engine", "trtllm-bench"] = Field(
        default="engine", description="engine: the engine's default batch limits; "
                                      "trtllm-bench: sized from the request lengths as "
                                      "trtllm-bench does for throughput runs")

    @model_validator(mode="before")
    @classmethod
    def _default_weight_format(cls, raw, info: ValidationInfo):
        """No weight_dtype given: a quantized checkpoint's own format (models.stored), else
        the chip's 16-bit type (fp16 on Volta and Turing). The validation context may give
        `arch` (an uploaded config.json in place of the model) or the `base_dir` that a
        model path is relative to."""
        if not isinstance(raw, dict) or "weight_dtype" in raw:
            return raw
        context = info.context or {}
        model, gpu = raw.get("model"), raw.get("gpu")
        arch = context.get("arch")
        try:  # a model or gpu that does not load is refused by its own check, later
            if arch is None and isinstance(model, str):
                arch = load_model(model, base_dir=context.get("base_dir"))
        except InputError:
            arch = None
        if arch is not None and arch.stored is not None:
            return {**raw, "weight_dtype": arch.stored.weight_dtype}
        try:
            return {**raw, "weight_dtype": accelerator(gpu).sixteen_bit} \
                if isinstance(gpu, str) else raw
        except InputError:
            return raw

    @field_validator("engine_version")
    @classmethod
    def _release_number(cls, version: str | None) -> str | None:
        if version is not None and not RELEASE.fullmatch(version.strip()):
            raise ValueError("must be a release number like '0.8.0'; "
                             "leave it out for the newest release")
        return version

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, name: str) -> str:
        load_catalog().accelerators.get(name)  # UnknownNameError: did you mean, how to list
        return name

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, name: str) -> str:
        return load_catalog().engines.get(name).name

    @field_validator("kv_dtype")
    @classmethod
    def _known_kv_format(cls, name: str | None) -> str | None:
        return None if name is None else kv_format(name)

    @field_validator("weight_dtype")
    @classmethod
    def _known_weight_format(cls, name: str) -> str:
        try:
            return serving_weight_dtype(name)
        except InputError as exc:
            raise InputError(f"is {exc.message}", fix=exc.fix) from None

    @model_validator(mode="after")
    def _static_needs_batch(self):
        """batch_size with static batching only, and within max_num_seqs (the step
        tables' rows: a larger batch has sequences the engine has no slot for)."""
        if self.batching == "static" and self.batch_size is None:
            raise FieldError("batch_size", "is required when batching is 'static'",
                             fix="set batch_size (requests per batch)")
        if self.batching != "static" and self.batch_size is not None:
            raise FieldError("batch_size", "applies only to batching: static",
                             fix="add batching: static, or leave batch_size out")
        if self.batching == "static" and self.batch_size > (self.max_num_seqs or self.batch_size):
            raise FieldError("batch_size", f"{self.batch_size:,} is more than max_num_seqs "
                             f"{self.max_num_seqs:,}: the engine runs at most max_num_seqs "
                             "sequences at once", fix=f"lower batch_size to "
                             f"{self.max_num_seqs:,}, or leave max_num_seqs out (a static "
                             "batch sets it)")
        return self

    @model_validator(mode="after")
    def _engine_takes_block_size(self):
        if self.block_size is not None:
            try:
                load_catalog().engines.get(self.engine).check_block_size(self.block_size)
            except InputError as exc:
                raise FieldError("block_size", exc.message.removeprefix("block_size "),
                                 fix=exc.fix) from None
        return self

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp * self.replicas

    def shape(self, gpu: str | None = None) -> str:
        """'4 x 1 x h100' (replicas x GPUs a replica x accelerator); with pipeline stages,
        '1 x 4 x h100 (TP 2 x PP 2)', so the count multiplies out to the GPUs billed.
        `gpu`: the accelerator's name to show (the catalog's, for the scenario's alias)."""
        return f"{self.replicas} x {self.replica_shape(gpu)}"

    def replica_shape(self, gpu: str | None = None) -> str:
        """One replica's part of shape(): '1 x h100', '4 x h100 (TP 2 x PP 2)'."""
        return f"{self.tp * self.pp} x {gpu or self.gpu}" + (
            f" (TP {self.tp} x PP {self.pp})" if self.pp > 1 else "")

    def speculation(self) -> str:
        """', speculative draft llama-3.2-1b (4 tokens, acceptance 0.7)', or ''."""
        spec = self.speculative
        if spec is None:
            return ""
        what = spec.draft_model if spec.method == "draft" else "n-gram"
        return (f", speculative {what} ({spec.num_tokens} tokens, acceptance "
                f"{spec.acceptance_rate:g})")


@dataclass(frozen=True)
class ResolvedReplica:
    """What the simulator needs for one replica of a deployment."""

    deployment: Deployment
    arch: ModelArch
    gpu: Accelerator
    engine: Engine
    step: StepModel
    memory: ReplicaMemory
    max_num_seqs: int
    max_num_batched_tokens: int
    chunked_prefill: bool
    kv_policy: str
    kv_dtype: str  # the cache's format: the deployment's, else the chip's 16-bit type
    static_executor: bool = False  # static batches run through the in-flight batcher

    def settings(self) -> dict:
        """The deployment as simulated: the catalog's accelerator name, and the engine's
        defaults where the deployment left a setting out (KV format, batch limits, block
        size, chunked prefill, KV policy)."""
        return {**self.deployment.model_dump(), "gpu": self.gpu.name,
                "kv_dtype": self.kv_dtype,
                "max_num_seqs": self.max_num_seqs,
                "max_num_batched_tokens": self.max_num_batched_tokens,
                "block_size": self.memory.block_size, "chunked_prefill": self.chunked_prefill,
                "kv_policy": self.kv_policy}


def resolve(dep: Deployment, *, base_dir: Path | None = None,
            mean_lengths: tuple[float, float] | None = None,
            arch: ModelArch | None = None) -> ResolvedReplica:
    """Look everything up and build the step model and the memory plan.

    `mean_lengths` (input, output) sizes the batch limits when `tuning` is trtllm-bench;
    `arch` stands in for dep.model (an uploaded config.json)."""
    catalog = load_catalog()
    arch = arch or load_model(dep.model, base_dir=base_dir)
    gpu = catalog.accelerators.get(dep.gpu)
    engine = catalog.engines.get(dep.engine)
    heads = arch.attention.num_heads
    if dep.pp > arch.num_layers:
        raise InputError(f"pp={dep.pp} is more stages than {arch.name}'s {arch.num_layers} "
                         "layers", fix="lower pp")
    if heads % dep.tp:
        fits = ", ".join(str(t) for t in (1, 2, 4, 8, 16, 32, 64) if heads % t == 0)
        raise InputError(f"tp={dep.tp} does not divide {arch.name}'s {heads} attention heads",
                         fix=f"pick a tp that divides the head count ({fits})")
    _check_bf16(dep, gpu)
    engine.check_runs_on(gpu)
    engine.check_weight_format(serving_weight_dtype(dep.weight_dtype), gpu,
                               SERVING_WEIGHT_DTYPES)
    if dep.kv_dtype is not None:
        engine.check_kv_format(dep.kv_dtype)
    _check_expert_imbalance(dep.expert_imbalance, arch)
    replica = _resolve(dep, arch, gpu, engine, mean_lengths, base_dir)
    engine.check_batch_limits(replica.max_num_seqs, replica.max_num_batched_tokens)
    return replica


def _check_bf16(dep: Deployment, gpu: Accelerator) -> None:
    """bf16 weights or KV cache only on a chip that computes in bf16 (the catalog gives
    Volta and Turing no bf16 peak). vLLM's _check_if_gpu_supports_dtype: "Bfloat16 is only
    supported on GPUs with compute capability of at least 8.0 ... You can use float16
    instead"; fp16 takes the same two bytes per value."""
    if "bf16" in gpu.peak_flops:
        return
    for name in ("weight_dtype", "kv_dtype"):
        if getattr(dep, name) == "bf16":
            raise InputError(f"{name} bf16 does not run on {gpu.name}: "
                             f"{gpu.architecture} has no bf16 arithmetic",
                             fix=f"use {name} fp16 (the same two bytes per value)")


def _check_expert_imbalance(imbalance: float, arch: ModelArch) -> None:
    """The busiest expert takes at most every token of the batch, k of the E experts'
    slots per token: its load is at most E / k times the mean (busiest / mean <= E / k)."""
    if imbalance == 1.0:
        return
    if not arch.is_moe:
        raise InputError(f"deployment.expert_imbalance={imbalance:g} is for mixture-of-experts "
                         f"models; {arch.name} has no routed experts",
                         fix="remove expert_imbalance")
    most = arch.moe.num_experts / arch.moe.experts_per_token
    if imbalance > most:
        raise InputError(
            f"deployment.expert_imbalance={imbalance:g} is more than {arch.name} can reach: "
            f"with {arch.moe.num_experts} experts and {arch.moe.experts_per_token} per token "
            f"the busiest takes at most {most:g} times the mean load (every token)",
            fix=f"set expert_imbalance between 1 and {most:g} (busiest / mean expert load)")


def _draft_arch(target: ModelArch, draft_model: str, base_dir: Path | None) -> ModelArch:
    """The draft model, refused where no engine would run it or it could not pay: another
    vocabulary (vLLM's SpeculativeConfig.verify_equal_vocab_size_if_draft_model: "Target
    and draft model should have the same vocabulary size"), or a draft at least as large
    as the target (each drafted token would cost a target step or more)."""
    try:
        draft = load_model(draft_model, base_dir=base_dir)
    except InputError as exc:  # the same words as a bad top-level model: name the field
        raise InputError(f"deployment.speculative.draft_model: {exc.message}",
                         fix=exc.fix) from None
    if draft.vocab_size != target.vocab_size:
        raise InputError(
            f"deployment.speculative.draft_model {draft.name} has a vocabulary of "
            f"{draft.vocab_size:,} tokens, {target.name} {target.vocab_size:,}: engines "
            "refuse a draft with another tokenizer",
            fix=f"pick a smaller model of {target.name}'s family (same tokenizer), or "
                "method: ngram")
    drafted, verified = param_counts(draft).active, param_counts(target).active
    if drafted >= verified:
        raise InputError(
            f"deployment.speculative.draft_model {draft.name} has {drafted / 1e9:,.3g}B "
            f"active parameters, no fewer than {target.name}'s {verified / 1e9:,.3g}B: every "
            "drafted token would cost as much as the step it saves",
            fix="pick a draft model much smaller than the target, or method: ngram")
    return draft


@lru_cache(maxsize=256)
def _draft_step(draft_model: str, base_dir: Path | None, gpu_name: str, tp: int,
                max_tokens: int, max_seqs: int) -> StepModel:
    """The draft model's steps run inside the target's step: no engine overhead of their
    own."""
    gpu = load_catalog().accelerators.get(gpu_name)
    arch = load_model(draft_model, base_dir=base_dir)
    act = gpu.sixteen_bit  # 16-bit, fp16 where the chip has no bf16
    return build_step_model(arch, gpu, tp=tp, weights=weight_format(act, gpu, act),
                            kv_dtype=act, max_tokens=max_tokens, max_seqs=max_seqs,
                            overhead_s=0.0)


def _decode_kv_reads(arch: ModelArch, engine: Engine, dep: Deployment) -> int:
    """Reads of each cached KV head per decode step (Engine.decode_kv_reads): the query
    heads one GPU holds per KV head it holds (KV heads are replicated when tp exceeds them)."""
    at = arch.attention
    if at.kind == "mla":
        return 1
    group = (at.num_heads // dep.tp) // max(1, at.num_kv_heads // dep.tp)
    return engine.decode_kv_reads(group, at.head_dim, dep.engine_version)


def _resolve(dep: Deployment, arch: ModelArch, gpu: Accelerator, engine: Engine,
             mean_lengths, base_dir) -> ResolvedReplica:
    node = load_catalog().node_for(gpu.name, dep.system, what="system")
    act = gpu.sixteen_bit
    weights = weight_format(dep.weight_dtype, gpu, act)
    if weights.gemm_dtype == weights.name != act:  # activations quantized, not weight-only
        weights = replace(weights, quantized_inputs=engine.quantized_gemm_inputs(
            weights.name, dep.engine_version, weights.quantized_inputs))
    kv_dtype = dep.kv_dtype or act
    max_seqs, max_tokens = engine.batch_limits(gpu)
    static = dep.batch_size if dep.batching == "static" else None
    block = dep.block_size or engine.block_size
    # A static batch's activations and logits are reserved like max_num_seqs'. Its cache is
    # allocated for the batch alone (TensorRT-LLM's GptSession, which gptSessionBenchmark
    # runs, sizes a contiguous cache for batch x sequence length; the 0.6.1 performance
    # page builds its GPT-J and Llama engines without --paged_kv_cache), so it may take all
    # the memory left: the engine's fraction is headroom for continuous batching. A release
    # that runs static batches through its executor pages the cache at the runtime's share.
    executor = engine.static_batch_executor(dep.engine_version) if static else None
    fraction = dep.memory_fraction or (
        (executor.kv_memory_fraction if executor else 1.0) if static else None)

    spec = dep.speculative
    draft = _draft_arch(arch, spec.draft_model, base_dir) \
        if spec is not None and spec.method == "draft" else None

    def sized(seqs: int, tokens: int) -> tuple[int, int, ReplicaMemory]:
        """The limits the deployment pins, else (seqs, tokens), and the memory they leave."""
        seqs, tokens = dep.max_num_seqs or static or seqs, dep.max_num_batched_tokens or tokens
        return seqs, tokens, replica_memory(
            arch, gpu, engine, tp=dep.tp, pp=dep.pp, weights=weights, kv_dtype=kv_dtype,
            max_num_batched_tokens=tokens, max_num_seqs=seqs, block_size=block,
            memory_fraction=fraction, draft=draft)

    if dep.tuning == "trtllm-bench" and mean_lengths is not None:
        # The engine is built with the limits trtllm-bench picks from its own estimate of
        # the cache, so its activation and logits buffers are sized by them; the runtime
        # then gives the cache its fraction of what is free.
        max_seqs, max_tokens = trtllm_bench.limits(trtllm_bench.kv_tokens_estimate(
            arch, gpu, tp=dep.tp, pp=dep.pp, weight_dtype=weights.name, kv_dtype=kv_dtype),
            *mean_lengths, pp=dep.pp)
    max_seqs, max_tokens, memory = sized(max_seqs, max_tokens)
    if spec is not None:
        spec = Speculation(num_tokens=spec.num_tokens, acceptance_rate=spec.acceptance_rate,
                           draft=_draft_step(spec.draft_model, base_dir, gpu.name, dep.tp,
                                             max_tokens, max_seqs) if draft else None)
    step = build_step_model(arch, gpu, tp=dep.tp, pp=dep.pp, weights=weights, kv_dtype=kv_dtype,
                            max_tokens=max(max_tokens, max_seqs * (
                                spec.num_tokens + 1 if spec else 1)),
                            max_seqs=max_seqs, overhead_s=engine.step_overhead_s,
                            overhead_s_per_sequence=engine.overhead_s_per_sequence(
                                dep.engine_version),
                            host_s_per_sequence=engine.host_s_per_sequence(
                                dep.engine_version, node.host_cpu),
                            expert_imbalance=dep.expert_imbalance, speculation=spec,
                            decode_kv_reads=_decode_kv_reads(arch, engine, dep), system=node)
    chunked = engine.chunked_prefill if dep.chunked_prefill is None else dep.chunked_prefill
    return ResolvedReplica(deployment=dep, arch=arch, gpu=gpu, engine=engine, step=step,
                           memory=memory, max_num_seqs=max_seqs,
                           max_num_batched_tokens=max_tokens, chunked_prefill=chunked,
                           kv_policy=dep.kv_policy or engine.kv_policy, kv_dtype=kv_dtype,
                           static_executor=executor is not None)
