"""From catalog rows to what the kernel and collective models need: achievable rates.

Achievable = datasheet peak x the fraction a published micro-benchmark reached on that chip,
or for kernels on its compute twin (catalog/data/measurements.yaml; a named default where none
is published) x, for compute inside a training step, the calibrated `training-derate`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from infraplan.catalog import load_catalog
from infraplan.catalog.schema import Accelerator, Network, System
from infraplan.errors import InputError
from infraplan.physics.collectives import Fabric
from infraplan.physics.compute import Device


def calibration(name: str) -> float:
    return load_catalog().calibration.get(name).value


def _best_fraction(target: str | tuple[str, ...], kinds: tuple[str, ...], peak: float, *,
                   dtypes: tuple[str, ...] | None = None, use_bytes: bool = False,
                   pick=max, training_defaults: bool = False,
                   defaults_only: bool = False) -> float | None:
    """Published achieved/peak among matching measurements of `target` (a name or several),
    the highest by default (None if none): kernels are judged by what a well-shaped problem
    reaches. `training_defaults`: only the kernels a training stack runs by default, when
    any of the matching measurements is one; `defaults_only`: those kernels or nothing."""
    targets = (target,) if isinstance(target, str) else target

    def achieved(m):
        return m.achieved_bytes_per_s if use_bytes else m.achieved_flops

    rows = [m for m in load_catalog().measurements
            if m.target in targets and m.kind in kinds and achieved(m)
            and (dtypes is None or m.dtype in dtypes)]
    if defaults_only or (training_defaults and any(m.training_default for m in rows)):
        rows = [m for m in rows if m.training_default]
    fractions = [min(achieved(m) / peak, 1.0) for m in rows]
    return pick(fractions) if fractions else None


_SIXTEEN_BIT = ("bf16", "fp16")


# Whose GEMM measurements give a dtype's achievable share of its own peak, in order. A chip
# with no published fp4 GEMM takes its fp8 share: Blackwell runs block-scaled fp4 MMAs on
# the fp8 tensor-core pipeline at twice the rate, with the same tiles, waves and epilogue.
_GEMM_MEASURED_AS = {"fp8": (("fp8",),), "fp32": (("fp32",),), "int8": (("int8",),),
                     "fp4": (("fp4",), ("fp8",))}


def _gemm_fraction(gpu: Accelerator, kernels_of: tuple[str, ...], dtype: str,
                   peak: float) -> float:
    """Achievable share of `peak` for GEMMs in `dtype`: the chip's own measurements, else a
    stand-in format's share of that format's peak, else the named default."""
    own, *proxies = _GEMM_MEASURED_AS.get(dtype, (_SIXTEEN_BIT,))
    fraction = _best_fraction(kernels_of, ("gemm",), peak, dtypes=own)
    for proxy in proxies:
        if fraction:
            break
        fraction = _best_fraction(kernels_of, ("gemm",), gpu.peak_flops_for(proxy[0]),
                                  dtypes=proxy)
    return fraction or calibration("default-gemm-fraction")


def gemm_dtype(precision: str) -> str:
    return {"fp32": "fp32", "fp8": "fp8"}.get(precision, precision)


# What a kernel runs inside: a training step (forward + backward attention, the training
# derate, the sharp roofline) or an inference engine step (forward attention only, the
# serving derate and roofline exponent). The training development set prefers the sharp
# roofline (mean |log error| 0.072 against 0.077 at p = 2 and 0.099 at p = 1, each with
# its derate refitted): its GEMMs run far from the ridge point, where the two agree.
_USES = {"training": ("training-derate", None), "serving": ("serving-derate",
                                                        "serving-roofline-exponent")}


def _attention_fractions(kernels_of: tuple[str, ...], peak16: float,
                         training: bool) -> tuple[float, float]:
    """(forward, backward) achievable/peak of the fused attention kernel.

    An engine step runs the forward only. A training step runs the kernel its stack picks
    (Transformer Engine: cuDNN on Hopper), which need not be the fastest one published
    (FlashAttention-3). Where that default kernel is measured forward and backward, each
    pass runs at its own rate (cuDNN on H100: 595 / 516 TFLOP/s on one problem). Otherwise
    both run at the best whole-pass or backward figure (the backward carries 2.5 of the 3.5
    FLOP units); a chip with forward kernels alone (a new chip) runs its backward at a
    measured share of the forward's rate."""
    def best(kinds, defaults_only=False):
        return _best_fraction(kernels_of, kinds, peak16, dtypes=_SIXTEEN_BIT,
                              training_defaults=training, defaults_only=defaults_only)

    if not training:
        forward = best(("attention_forward",)) or calibration("default-attention-fraction")
        return forward, forward
    forward = best(("attention_forward",), defaults_only=True)
    backward = best(("attention_backward",), defaults_only=True)
    if forward and backward:
        return forward, backward
    both = best(("attention_fwd_bwd", "attention_backward"))
    if both:
        return both, both
    forward = best(("attention_forward",))
    if forward:
        return forward, forward * calibration("attention-backward-forward-ratio")
    default = calibration("default-attention-fraction")
    return default, default


@lru_cache(maxsize=128)
def device(gpu_name: str, precision: str, *, use: str = "training") -> Device:
    """Achievable rates of `gpu_name` for GEMMs in `precision`, inside a training step or an
    inference engine's step (`use`)."""
    derate_name, exponent_name = _USES[use]
    gpu = load_catalog().accelerators.get(gpu_name)
    # kernels on a chip with the same compute die run alike (memory bandwidth does not carry)
    kernels_of = (gpu.name, gpu.compute_twin) if gpu.compute_twin else (gpu.name,)
    dtype = gemm_dtype(precision)
    peak = gpu.peak_flops_for(dtype)
    gemm = _gemm_fraction(gpu, kernels_of, dtype, peak)
    # attention runs in 16-bit even in fp8 training (Transformer Engine default)
    peak16 = gpu.peak_flops_for("bf16" if "bf16" in gpu.peak_flops else "fp16") \
        if any(d in gpu.peak_flops for d in _SIXTEEN_BIT) else peak
    attention, attention_backward = _attention_fractions(kernels_of, peak16,
                                                         training=use == "training")
    memory = _best_fraction(gpu.name, ("memory_bandwidth",), gpu.memory_bandwidth_bytes_per_s,
                            use_bytes=True) or calibration("default-memory-fraction")
    derate = calibration(derate_name)
    # vector cores run a GEMV with fp32 FMAs whatever the operands' type (dequantised
    # weights, fp32 accumulation), at the fp32 peak; an fp32 GEMM runs there anyway
    vector = min(1.0, gpu.peak_flops.get("fp32", 0.0) / peak)
    sixteen = next((d for d in _SIXTEEN_BIT if d in gpu.peak_flops), None)
    gemm16 = gpu.peak_flops[sixteen] * _gemm_fraction(gpu, kernels_of, sixteen, gpu.peak_flops[
        sixteen]) * derate if sixteen and dtype not in _SIXTEEN_BIT else 0.0
    return Device(gemm_flops=peak * gemm * derate, attention_flops=peak16 * attention * derate,
                  attention_backward_flops=peak16 * attention_backward * derate,
                  memory_bytes_per_s=gpu.memory_bandwidth_bytes_per_s * memory,
                  compute_units=gpu.compute_units,
                  kernel_overhead_s=calibration("kernel-overhead"),
                  gemm_k_overhead=calibration("gemm-k-overhead"),
                  roofline_exponent=calibration(exponent_name) if exponent_name else math.inf,
                  vector_share=vector, gemm16_flops=gemm16)


@dataclass(frozen=True, eq=False)
class Cluster:
    """One accelerator type in nodes of `system`, connected by `network`."""

    gpu: Accelerator
    system: System
    network: Network

    @property
    def nic_bytes_per_s_per_gpu(self) -> float:
        return (self.system.nics_per_node * self.network.bandwidth_bytes_per_s_per_direction
                / self.system.accelerators_per_node)


@lru_cache(maxsize=128)
def cluster(gpu_name: str, system: str | System | None = None) -> Cluster:
    """`system`: a catalog name, a System row (for example one from `with_network`), or
    None for the accelerator's default node type."""
    catalog = load_catalog()
    gpu = catalog.accelerators.get(gpu_name)
    system = catalog.node_for(gpu.name, system)
    return Cluster(gpu=gpu, system=system, network=catalog.networks.get(system.network))


def with_network(system: str | System, network: str, nics_per_node: int | None = None
                 ) -> System:
    """A node type with its scale-out network replaced (a budget cluster on 100 GbE, say):
    same chassis and intra-node links, `nics_per_node` ports of `network` (default: as many
    ports as the node had). Named '<system>+<network>-x<nics>'."""
    catalog = load_catalog()
    base = catalog.systems.get(system) if isinstance(system, str) else system
    net = catalog.networks.get(network)
    nics = base.nics_per_node if nics_per_node is None else nics_per_node
    if nics < 1:
        raise InputError(f"nics_per_node must be >= 1 to reach other nodes, got {nics}")
    return base.model_copy(update={"name": f"{base.name}+{net.name}-x{nics}",
                                   "network": net.name, "nics_per_node": nics})


def fabric(c: Cluster) -> Fabric:
    return _fabric(c.gpu.name, c.system)


@lru_cache(maxsize=128)
def _fabric(gpu_name: str, system: System) -> Fabric:
    c = cluster(gpu_name, system)
    # measurements name the catalog node; a re-networked node keeps its intra-node ones
    base_name, _, network_swap = c.system.name.partition("+")
    intra_nominal = c.system.intra_node_bandwidth_bytes_per_s_per_direction
    # Ring figures only: NVLink SHARP (NVLS) all-reduce beats the link rate but serves only
    # some collectives, and the model here is ring/tree (NVLS rows are their own kind, so a
    # node measured only with NVLS takes the default bus fraction).
    # PCIe-only nodes without a measurement of their own: peer traffic crosses the CPU's root
    # complex and memory, so rings there reach a smaller share of the link rate
    default_intra = "default-pcie-bus-fraction" if c.system.intra_node_fabric == "pcie" \
        else "default-intra-node-bus-fraction"
    intra = _best_fraction(base_name, ("allreduce_intra_node",), intra_nominal,
                           use_bytes=True, pick=min) or calibration(default_intra)
    # a rack-scale NVLink domain (GB200 NVL72) is one "node" to the collectives: its GPUs
    # reach each other over NVSwitch, and only traffic leaving the domain takes the NICs
    g = c.system.scale_up_accelerators
    inter_nominal = min(intra_nominal, g * c.nic_bytes_per_s_per_gpu)
    inter = (None if network_swap else _best_fraction(
        base_name, ("allreduce_inter_node",), inter_nominal, use_bytes=True, pick=min)) \
        or calibration("default-inter-node-bus-fraction")
    software = calibration("collective-latency")
    return Fabric(gpus_per_node=g, intra_bytes_per_s=intra_nominal * intra,
                  inter_bytes_per_s=c.nic_bytes_per_s_per_gpu * inter,
                  intra_latency_s=software, inter_latency_s=software + c.network.latency_s)
