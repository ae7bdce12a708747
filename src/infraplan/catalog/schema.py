"""Schemas of the catalog's rows. Every row carries `source` and `retrieved`.

Quantities in the data files may be written with their unit ("80 GiB", "3.35 TB/s",
"400 Gb/s", "989.4 TFLOP/s"); the field name says the SI unit they are stored in.
Bandwidths of links are stored per direction: vendors quote NVLink as the bidirectional sum
("900 GB/s" for NVLink 4 is 450 GB/s each way), so the data says which one it gives.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Literal

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, field_validator,
                      model_validator)

from infraplan.errors import InputError
from infraplan.units import parse_quantity

SLUG = re.compile(r"^[a-z0-9][a-z0-9.\-]*$")

DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8", "int4")
Dtype = Literal["fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8", "int4"]
HostCpu = Literal["x86", "grace"]  # host CPU families whose speed the catalog tells apart


def _quantity(dimension: str):
    def parse(value):
        return parse_quantity(value, dimension, field=dimension)

    return BeforeValidator(parse)


Bytes = Annotated[float, _quantity("bytes"), Field(gt=0)]
BytesPerS = Annotated[float, _quantity("bytes_per_s"), Field(gt=0)]
FlopsPerS = Annotated[float, _quantity("flops"), Field(gt=0)]
Watts = Annotated[float, _quantity("watts"), Field(gt=0)]
Seconds = Annotated[float, _quantity("seconds"), Field(ge=0)]


class Row(BaseModel):
    """A named catalog row with provenance."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="lower-case slug, the canonical name")
    aliases: tuple[str, ...] = Field(default=(), description="other names people type")
    source: str = Field(min_length=3, description="where each figure was read")
    retrieved: dt.date = Field(description="when the source was read")
    notes: str = ""

    @field_validator("name")
    @classmethod
    def _slug(cls, name: str) -> str:
        if not SLUG.match(name):
            raise ValueError(f"name {name!r} must be a lower-case slug like 'h100-sxm5-80gb'")
        return name


class Link(BaseModel):
    """A chip's scale-up link (NVLink, Infinity Fabric, ICI) or its PCIe host link."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["nvlink2", "nvlink3", "nvlink4", "nvlink5", "pcie3", "pcie4", "pcie5",
                  "pcie6", "infinity-fabric", "ici", "none"]
    bandwidth_bytes_per_s_per_direction: BytesPerS | None = Field(
        default=None, description="per GPU, one direction (vendor bidirectional figure / 2)")
    quoted: str = Field(default="", description="the figure as the vendor quotes it")


class Accelerator(Row):
    vendor: Literal["nvidia", "amd", "google", "intel", "generic"]
    architecture: str
    form_factor: Literal["sxm", "pcie", "oam", "tpu", "cpu"]
    memory_bytes: Bytes = Field(description="device memory the framework can allocate from")
    memory_type: str
    memory_bandwidth_bytes_per_s: BytesPerS
    l2_bandwidth_bytes_per_s: BytesPerS | None = Field(
        default=None, description="measured L2 read bandwidth for loads spread over the "
                                  "whole cache (serves data that kernels re-read while it "
                                  "is still cached)")
    peak_flops: dict[Dtype, FlopsPerS] = Field(
        description="dense peak per dtype (not the 2:4 sparsity figure); int types in OP/s")
    compute_units: int | None = Field(default=None, ge=1,
                                      description="SMs / CUs that GEMM tiles spread over")
    tdp_watts: Watts
    scale_up_link: Link = Field(description="GPU-to-GPU link inside a node or slice")
    host_link: Link = Field(description="link to the host CPU and NICs")
    compute_twin: str | None = Field(
        default=None, description="an accelerator with the same compute die, SM count and "
        "clocks (H200 and H100 SXM): its kernel measurements hold for this chip too")

    @property
    def sixteen_bit(self) -> str:
        """The 16-bit type it computes in: bf16, or fp16 where it has none (V100, T4)."""
        return "bf16" if "bf16" in self.peak_flops else "fp16"

    def peak_flops_for(self, dtype: str) -> float:
        """Dense peak FLOP/s for a training/inference dtype, with the usual fallbacks.

        A chip without fp8 runs fp8 models at its 16-bit rate (weights are upcast), int4 at
        int8, tf32 at fp32. bf16 and fp16 never stand in for each other: V100 and T4 have
        no bf16 tensor cores, TPUs no fp16.
        """
        fallbacks = {"fp8": ("fp8", "bf16", "fp16"), "int8": ("int8", "fp8", "bf16", "fp16"),
                     "int4": ("int4", "int8", "fp8", "bf16"), "fp4": ("fp4", "fp8", "bf16"),
                     "tf32": ("tf32", "fp32"), "fp32": ("fp32",), "fp64": ("fp64", "fp32")}
        for candidate in fallbacks.get(dtype, (dtype,)):
            if candidate in self.peak_flops:
                return self.peak_flops[candidate]
        raise InputError(f"{self.name} has no peak FLOP/s for {dtype!r}",
                         fix=f"use one of {', '.join(self.peak_flops)}")


class System(Row):
    """A node type: accelerators in one chassis (or one TPU host) and how they connect."""

    accelerator: str = Field(description="name of an accelerator row")
    accelerators_per_node: int = Field(ge=1)
    intra_node_fabric: Literal["nvswitch", "nvlink-bridge", "pcie", "infinity-fabric",
                               "ici", "none"]
    intra_node_bandwidth_bytes_per_s_per_direction: BytesPerS = Field(
        description="per accelerator, what a collective inside the node can use each way")
    network: str = Field(description="name of the default network row for scale-out")
    nics_per_node: int = Field(ge=0)
    host_memory_bytes: Bytes | None = None
    cpu_cores: int | None = Field(default=None, ge=1)
    host_cpu: HostCpu = Field(default="x86", description="the host CPU family: x86 (Xeon, "
                              "EPYC) or grace (NVIDIA Grace, Arm Neoverse V2)")
    local_storage: str | None = Field(default=None, description="name of a storage row")
    max_nodes_per_pod: int | None = Field(default=None, ge=1,
                                          description="TPU slices: largest slice in nodes")
    scale_up_domain_accelerators: int | None = Field(
        default=None, ge=1, description="accelerators on one NVLink fabric when it spans "
        "several nodes (GB200 NVL72: 72 over 18 trays of 4); empty: the node")

    @model_validator(mode="after")
    def _domain_holds_whole_nodes(self) -> System:
        domain = self.scale_up_domain_accelerators
        if domain is not None and (domain <= self.accelerators_per_node
                                   or domain % self.accelerators_per_node):
            raise ValueError(f"scale_up_domain_accelerators ({domain}) must be a multiple of "
                             f"accelerators_per_node ({self.accelerators_per_node}) larger "
                             "than it; leave it empty when the node is the whole domain")
        return self

    @property
    def scale_up_accelerators(self) -> int:
        """Accelerators a collective reaches without a NIC: the node, or the rack-scale
        NVLink domain the node belongs to."""
        return self.scale_up_domain_accelerators or self.accelerators_per_node


class Network(Row):
    kind: Literal["infiniband", "roce", "ethernet", "efa", "ici", "gpudirect-tcpx"]
    bandwidth_bytes_per_s_per_direction: BytesPerS = Field(description="per port / NIC")
    latency_s: Seconds = Field(description="one-way small-message latency, host to host")
    quoted: str = ""


class StorageTier(Row):
    kind: Literal["local-nvme", "nfs", "parallel-fs", "object"]
    read_bytes_per_s_per_node: BytesPerS
    write_bytes_per_s_per_node: BytesPerS
    read_bytes_per_s_aggregate: BytesPerS | None = Field(
        default=None, description="whole file system; None = scales with nodes")
    write_bytes_per_s_aggregate: BytesPerS | None = None
    aggregate_basis: str = Field(
        default="", description="what the aggregates stand for when they are not the whole "
                                "tier's (an object store's prefix), shown with them")
    latency_s: Seconds
    price_usd_per_gb_month: float | None = Field(default=None, ge=0)
    example_products: str = ""

    @property
    def node_local(self) -> bool:
        """On the node's own disks (kind local-nvme): what is written there goes with the
        node, on a failure of it or when a spot preemption takes it back."""
        return self.kind == "local-nvme"


class ModelEntry(Row):
    """A shipped architecture: an HF-style config.json beside this index."""

    config_file: str = Field(description="file name under catalog/data/models/")
    hf_repo: str = ""
    family: str = ""


class Constant(Row):
    """A named modelling constant (an overhead, an efficiency) with its justification."""

    value: float
    unit: str


class Measurement(Row):
    """A published micro-benchmark on one accelerator or node type: what a kernel or a
    collective actually achieves, as opposed to the datasheet peak."""

    target: str = Field(description="accelerator name, or system name for collectives")
    kind: Literal["gemm", "attention_forward", "attention_backward", "attention_fwd_bwd",
                  "memory_bandwidth", "allreduce_intra_node", "allreduce_intra_node_nvls",
                  "allreduce_inter_node",
                  "alltoall_intra_node", "alltoall_inter_node"]
    dtype: str | None = Field(default=None, description="bf16, fp16, fp8 for compute kinds")
    achieved_flops: FlopsPerS | None = Field(default=None, description="compute kinds")
    achieved_bytes_per_s: BytesPerS | None = Field(
        default=None, description="memory bandwidth, or collective bus bandwidth (busbw)")
    problem: str = Field(description="shape / message size / head dim the figure is for")
    software: str = Field(description="library and version (cuBLAS 12.x, FlashAttention-2)")
    training_default: str | None = Field(
        default=None, description="the training stack that runs this kernel by default on "
        "this chip, and where that is documented; a training step's attention is priced "
        "from such kernels when the chip has any, not from the fastest one published")


class Calibration(Constant):
    """A modelling constant, with the development rows it was fitted on (empty when it is
    set from a measurement or a document instead)."""

    fitted_on: tuple[str, ...] = ()
