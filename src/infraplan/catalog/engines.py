"""Schemas of the inference engines' rows: scheduler defaults, and the rules that hold
for a span of an engine's releases (kernels, CPU time, how static batches run)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from infraplan.catalog.schema import Accelerator, Bytes, HostCpu, Row, Seconds
from infraplan.errors import InputError


class LargeMemoryDefaults(BaseModel):
    """Engine defaults that change on big GPUs (vLLM raises its batch limits on >= 70 GiB
    chips other than A100)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_memory_bytes: Bytes
    exclude_architectures: tuple[str, ...] = ()
    max_num_seqs: int = Field(ge=1)
    max_num_batched_tokens: int = Field(ge=1)


# An engine release number (0.8.0, 1.0), optionally a pre-release build of it (0.7a, 1.0rc2).
PRERELEASE_TAG = r"(?:a|b|rc)\d*"
RELEASE = re.compile(rf"(\d+(?:\.\d+)*)({PRERELEASE_TAG})?")


def release(version: str) -> tuple[int, ...]:
    """'0.8.0' -> (0, 8, 0); the leading numbers of a release name ('1.0rc2' -> (1, 0))."""
    found = RELEASE.match(version.strip())
    if not found:
        raise InputError(f"engine_version {version!r} is not a release number",
                         fix="write it like '0.8.0' or '1.0'")
    return tuple(int(part) for part in found.group(1).split("."))


class GroupedDecode(BaseModel):
    """From release `since` on, the engine's decode attention kernel serves all the query
    heads that share a KV head in one pass, reading that head's cache once, for the shapes
    listed (None: any). Other shapes fall back to a kernel that runs one thread block per
    query head and reads the shared cache once per query head."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    since: str = Field(pattern=rf"^{RELEASE.pattern}$")
    group_sizes: tuple[int, ...] | None = Field(
        default=None, description="query heads per KV head it groups (None: up to "
                                  "max_group_size)")
    max_group_size: int = Field(default=1, ge=1)
    head_dims: tuple[int, ...] | None = None
    prerelease_builds: tuple[Annotated[str, Field(pattern=rf"^{RELEASE.pattern}$")], ...] = \
        Field(default=(), description="builds older than `since` that are known to carry "
                                      "the kernel already (vendor pre-release builds "
                                      "measured in blogs, such as TensorRT-LLM 'v0.7a')")
    source: str = Field(min_length=3)

    def covers(self, version: str | None) -> bool:
        """Whether release `version` (None: the newest) has this kernel."""
        if version is None:
            return True
        return release(self.since) <= release(version) \
            or version.strip().lower() in {b.lower() for b in self.prerelease_builds}

    def groups(self, group_size: int, head_dim: int) -> bool:
        sizes_ok = group_size in self.group_sizes if self.group_sizes is not None \
            else group_size <= self.max_group_size
        return sizes_ok and (self.head_dims is None or head_dim in self.head_dims)


# A layer's GEMM inputs, in order: what the QKV, output, gate/up and down GEMMs read
ALL_GEMM_INPUTS = ("qkv", "attention_output", "gate_up", "mlp_activation")


class ReleaseRange(BaseModel):
    """Releases from `since` (None: every earlier one) up to, not including, `until` (None:
    every later one, the newest included). The newest release (a deployment that names
    none) is in a range only if the range has no `until`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    since: str | None = Field(default=None, pattern=rf"^{RELEASE.pattern}$")
    until: str | None = Field(default=None, pattern=rf"^{RELEASE.pattern}$")
    source: str = Field(min_length=3)

    @model_validator(mode="after")
    def _ordered(self) -> ReleaseRange:
        if self.since is None and self.until is None:
            raise ValueError("a release range needs since, until or both")
        if self.since is not None and self.until is not None \
                and release(self.since) >= release(self.until):
            raise ValueError(f"since {self.since!r} must be an earlier release than until "
                             f"{self.until!r}")
        return self

    def covers_release(self, version: str | None) -> bool:
        if version is None:
            return self.until is None
        return (self.until is None or release(version) < release(self.until)) \
            and (self.since is None or release(self.since) <= release(version))


def overlapping(ranges) -> tuple[ReleaseRange, ReleaseRange] | None:
    """The first two of `ranges` that share a release, taken in order of `since`."""
    ordered = sorted(ranges, key=lambda r: release(r.since) if r.since else ())
    for earlier, later in zip(ordered, ordered[1:]):
        if earlier.until is None or later.since is None \
                or release(later.since) < release(earlier.until):
            return earlier, later
    return None


class UnfusedQuantization(ReleaseRange):
    """Releases in range quantize every GEMM input of the listed weight formats in a kernel
    of its own before the GEMM (QKV, attention output, gate/up, MLP activation: four a
    layer) instead of fusing it into the kernel before."""

    formats: tuple[Literal["fp8", "int8", "fp4"], ...] = Field(
        min_length=1, description="formats whose activations are quantized (W8A8, W4A4)")

    def covers(self, weight_format: str, version: str | None) -> bool:
        """Whether release `version` (None: the newest) quantizes `weight_format` so."""
        return weight_format in self.formats and self.covers_release(version)


class SequenceOverhead(ReleaseRange):
    """Releases in range spend `seconds` of CPU time per running sequence in every step
    while the GPU waits: scheduling, input preparation, sampling and output processing
    written as Python loops over the batch."""

    seconds: Seconds = Field(description="per running sequence, per step")


class ExecutorStaticBatches(ReleaseRange):
    """Releases in range run a static batch (one generate() call on a batch of requests)
    through the in-flight batching executor instead of a session with a contiguous cache:
    the cache is paged and takes `kv_memory_fraction` of memory under the engine's
    kv_memory_rule, and requests it cannot hold wait until earlier ones finish instead of
    failing the batch."""

    kv_memory_fraction: float | None = Field(
        default=None, gt=0, le=1, description="the runtime's default share for the cache "
                                              "(empty: the engine's kv_memory_fraction)")
    unversioned: bool = Field(default=True, description="whether a deployment that names no "
                                                        "release runs its batches this way")


class HostTimePerSequence(ReleaseRange):
    """Releases in range run their executor loop on the host beside the GPU (the next step
    is launched before the host has finished with the last one), spending `seconds` of host
    time per scheduled sequence: a step lasts at least that times its sequences. Measured on
    one kind of host CPU, since the loop is single-threaded Python and the CPU's speed sets
    its time."""

    host_cpu: HostCpu
    seconds: Seconds = Field(description="per scheduled sequence, per step")


class BlockSizes(BaseModel):
    """The KV-cache block sizes (tokens per block) an engine accepts: the sizes `listed`,
    or any power of two; a row without this rule accepts any size."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    listed: tuple[Annotated[int, Field(ge=1)], ...] = ()
    powers_of_two: bool = False
    source: str = Field(min_length=3)

    @model_validator(mode="after")
    def _one_rule(self) -> BlockSizes:
        if bool(self.listed) == self.powers_of_two:
            raise ValueError("give either listed sizes or powers_of_two: true")
        return self

    def accepts(self, size: int) -> bool:
        return size in self.listed if self.listed else size & (size - 1) == 0

    @property
    def choices(self) -> str:
        return ", ".join(map(str, self.listed)) if self.listed else "a power of two"


class MissingFormats(BaseModel):
    """Weight formats an engine has no kernel for on some chip architectures."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    formats: tuple[str, ...] = Field(min_length=1)
    architectures: tuple[str, ...] = Field(min_length=1)
    source: str = Field(min_length=3)


class Sourced(BaseModel):
    """A restriction an engine's own code or documentation states, with where."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    values: tuple[str, ...] = Field(min_length=1)
    source: str = Field(min_length=3)


class Engine(Row):
    """An inference engine's scheduler defaults: what a deployment gets unless it says
    otherwise."""

    max_num_seqs: int = Field(ge=1, description="sequences running at once")
    max_num_batched_tokens: int = Field(ge=1, description="tokens one step may process")
    large_memory_defaults: LargeMemoryDefaults | None = None
    max_num_seqs_by_accelerator: dict[str, Annotated[int, Field(ge=1)]] = Field(
        default_factory=dict,
        description="max_num_seqs by device: the first key (lower case) that the "
                    "accelerator's name contains wins; LMDeploy matches its table against "
                    "the CUDA device name the same way")
    block_size: int = Field(ge=1, description="tokens per paged KV-cache block")
    block_sizes: BlockSizes | None = Field(
        default=None, description="the block sizes a deployment may set; None: any")
    missing_weight_formats: tuple[MissingFormats, ...] = Field(
        default=(), description="weight formats it cannot serve on some architectures; "
                                "empty: every format everywhere (no claim made)")
    vendors: Sourced | None = Field(
        default=None, description="the accelerator vendors it runs on; None: any (no claim "
                                  "made)")
    missing_kv_formats: Sourced | None = Field(
        default=None, description="KV-cache formats it cannot store; None: no claim made")
    batched_tokens_floor: str | None = Field(
        default=None, description="where the engine refuses max_num_batched_tokens below "
                                  "max_num_seqs at launch; None: no such check")
    chunked_prefill: bool = Field(description="prefill chunks share steps with decodes")
    kv_memory_fraction: float = Field(gt=0, le=1)
    kv_memory_rule: Literal["of_total", "of_free"] = Field(
        description="of_total: fraction x device memory holds weights, activations and KV "
                    "(vLLM gpu_memory_utilization); of_free: KV gets the fraction of what is "
                    "free after weights and activations (TensorRT-LLM)")
    kv_policy: Literal["on_demand", "reserve"] = Field(
        description="on_demand: blocks allocated as sequences grow, preemption by recompute "
                    "when they run out (vLLM); reserve: a request is admitted only if its "
                    "whole prompt + output fits (TensorRT-LLM GUARANTEED_NO_EVICT)")
    rejects_beyond_model_context: bool = Field(
        default=False, description="refuses a request whose prompt + output exceed the "
        "model's max_position_embeddings (the default context limit is the model config's); "
        "false: the limit is set when the engine is built or launched (TensorRT-LLM "
        "max_seq_len)")
    step_overhead_s: Seconds = Field(description="per-step CPU time: scheduling, sampling, "
                                                 "launch, not hidden behind the GPU")
    step_overhead_per_sequence: tuple[SequenceOverhead, ...] = Field(
        default=(), description="releases whose per-step CPU time also grows with the "
                                "running sequences; empty or uncovered: step_overhead_s alone")
    host_time_per_sequence: tuple[HostTimePerSequence, ...] = Field(
        default=(), description="releases whose host loop runs beside the GPU and bounds a "
                                "step from below by its sequences, per host CPU")
    executor_static_batches: tuple[ExecutorStaticBatches, ...] = Field(
        default=(), description="releases whose static batches run through the in-flight "
                                "batching executor; uncovered: a contiguous cache sized for "
                                "the batch, in all the memory left")
    context_bytes: Bytes | None = Field(
        default=None, description="device memory the engine's process holds besides weights, "
                                  "activation buffers and KV cache (CUDA context, kernel "
                                  "libraries); None: the catalog's cuda-context overhead")
    grouped_decode: tuple[GroupedDecode, ...] = Field(
        default=(), description="releases of the decode attention kernel, oldest first; "
                                "empty: every release groups any GQA shape (FlashAttention / "
                                "FlashInfer decode)")
    unfused_quantization: tuple[UnfusedQuantization, ...] = Field(
        default=(), description="releases that quantize each GEMM input in its own kernel")

    def quantized_gemm_inputs(self, weight_format: str, version: str | None,
                              least: tuple[str, ...]) -> tuple[str, ...]:
        """The GEMM inputs a layer quantizes in element-wise kernels of their own: all four
        where a release quantizes every input on its own, else the format's own `least`
        (quantization.WeightFormat)."""
        if any(rule.covers(weight_format, version) for rule in self.unfused_quantization):
            return ALL_GEMM_INPUTS
        return least

    @model_validator(mode="after")
    def _release_ranges_do_not_overlap(self) -> Engine:
        groups = {"step_overhead_per_sequence": self.step_overhead_per_sequence,
                  "executor_static_batches": self.executor_static_batches}
        for cpu in {rule.host_cpu for rule in self.host_time_per_sequence}:
            groups[f"host_time_per_sequence ({cpu} hosts)"] = [
                rule for rule in self.host_time_per_sequence if rule.host_cpu == cpu]
        for field, rules in groups.items():
            pair = overlapping(rules)
            if pair is not None:
                end = f"up to {pair[0].until!r}" if pair[0].until else "with no until"
                raise ValueError(f"{field}: the range {end} overlaps the next one; give "
                                 "each release one rule")
        return self

    @model_validator(mode="after")
    def _default_block_size_accepted(self) -> Engine:
        if self.block_sizes is not None and not self.block_sizes.accepts(self.block_size):
            raise ValueError(f"block_size {self.block_size} is not one of its own block_sizes "
                             f"({self.block_sizes.choices})")
        return self

    def check_block_size(self, size: int) -> None:
        """An InputError for a block size this engine refuses at launch."""
        rule = self.block_sizes
        if rule is not None and not rule.accepts(size):
            near = min(rule.listed, key=lambda s: abs(s - size)) if rule.listed else \
                min((1 << size.bit_length() - 1, 1 << size.bit_length()),
                    key=lambda s: abs(s - size))
            raise InputError(f"block_size {size:,} is not one {self.name} accepts "
                             f"({rule.choices})",
                             fix=f"set block_size to {near} (or leave it out for "
                                 f"{self.name}'s {self.block_size})")

    def check_runs_on(self, gpu: Accelerator) -> None:
        """An InputError when this engine does not run on `gpu`'s vendor's chips."""
        if self.vendors is not None and gpu.vendor not in self.vendors.values:
            raise InputError(f"{self.name} runs on {' and '.join(self.vendors.values)} "
                             f"accelerators only; {gpu.name} is {gpu.vendor}'s",
                             fix=f"serve {gpu.name} with another engine (vllm or sglang), or "
                                 f"pick an {self.vendors.values[0]} accelerator")

    def check_kv_format(self, kv_format: str) -> None:
        """An InputError for a KV-cache format this engine cannot store."""
        missing = self.missing_kv_formats
        if missing is not None and kv_format in missing.values:
            raise InputError(f"deployment.kv_dtype {kv_format}: {self.name} has no "
                             f"{kv_format} KV cache",
                             fix="use kv_dtype fp8 (or the model's 16-bit type), or another "
                                 "engine")

    def check_batch_limits(self, max_num_seqs: int, max_num_batched_tokens: int) -> None:
        """An InputError for batch limits this engine refuses at launch."""
        if self.batched_tokens_floor is not None and max_num_batched_tokens < max_num_seqs:
            raise InputError(f"deployment.max_num_batched_tokens {max_num_batched_tokens:,} "
                             f"is below max_num_seqs {max_num_seqs:,}: {self.name} refuses "
                             "it at launch (every running sequence needs a token a step)",
                             fix=f"raise max_num_batched_tokens to {max_num_seqs:,} or more, "
                                 f"or lower max_num_seqs to {max_num_batched_tokens:,}")

    def weight_formats_missing(self, gpu: Accelerator) -> set[str]:
        """The weight formats this engine has no kernel for on `gpu`'s architecture."""
        return {f for rule in self.missing_weight_formats
                if gpu.architecture in rule.architectures for f in rule.formats}

    def check_weight_format(self, weight_format: str, gpu: Accelerator,
                            formats: tuple[str, ...]) -> None:
        """An InputError for a weight format this engine has no kernel for on `gpu`'s
        architecture, naming those of `formats` it does run there."""
        missing = self.weight_formats_missing(gpu)
        if weight_format in missing:
            # bf16 only where the chip has it: vLLM refuses bf16 below compute capability 8.0
            runs = [f for f in formats if f not in missing
                    and (f != "bf16" or "bf16" in gpu.peak_flops)]
            raise InputError(f"{self.name} has no {weight_format} weight kernel for "
                             f"{gpu.name} ({gpu.architecture})",
                             fix=f"use weight_dtype {' or '.join(runs)} there, or a newer "
                                 f"accelerator for {weight_format}")

    def overhead_s_per_sequence(self, version: str | None) -> float:
        """CPU seconds per running sequence per step in release `version` (None: newest)."""
        return next((rule.seconds for rule in self.step_overhead_per_sequence
                     if rule.covers_release(version)), 0.0)

    def host_s_per_sequence(self, version: str | None, host_cpu: str) -> float:
        """Host seconds per scheduled sequence that release `version` (None: newest) spends
        beside the GPU on a `host_cpu` host; 0 where no row covers it."""
        return next((rule.seconds for rule in self.host_time_per_sequence
                     if rule.host_cpu == host_cpu and rule.covers_release(version)), 0.0)

    def static_batch_executor(self, version: str | None) -> ExecutorStaticBatches | None:
        """The rule under which release `version` runs static batches through its in-flight
        batching executor; None: a contiguous cache sized for the batch. A deployment that
        names no release gets a rule only if it is `unversioned` (TensorRT-LLM's is not: the
        static-batch tables of its performance pages, 0.5-0.9 on gptSessionBenchmark, name
        no release)."""
        return next((rule for rule in self.executor_static_batches
                     if rule.covers_release(version) and (version or rule.unversioned)), None)

    def decode_kv_reads(self, group_size: int, head_dim: int, version: str | None) -> int:
        """How often one decode step reads each cached KV head: once where the kernel
        groups the `group_size` query heads that share it, else once per query head.
        `version` None is the newest release; one older than every entry groups nothing."""
        if not self.grouped_decode or group_size == 1:
            return 1
        rules = [r for r in self.grouped_decode if r.covers(version)]
        return 1 if rules and rules[-1].groups(group_size, head_dim) else group_size

    def batch_limits(self, gpu: Accelerator) -> tuple[int, int]:
        """(max_num_seqs, max_num_batched_tokens) this engine picks on `gpu`."""
        big = self.large_memory_defaults
        if big and gpu.memory_bytes >= big.min_memory_bytes \
                and gpu.architecture not in big.exclude_architectures:
            return big.max_num_seqs, big.max_num_batched_tokens
        seqs = next((n for key, n in self.max_num_seqs_by_accelerator.items()
                     if key in gpu.name.lower()), self.max_num_seqs)
        return seqs, self.max_num_batched_tokens

