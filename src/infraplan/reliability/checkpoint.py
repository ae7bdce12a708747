"""Checkpoints: their size, how long they take to write, and how often to take them.

Size: what a restart needs, the 16-bit weights plus the optimizer state (fp32 master
weights and Adam's m and v: K = 12 bytes per parameter in the ZeRO paper's accounting), so
14 bytes per parameter for mixed-precision Adam; sharded over the ranks that hold it.

Write time: the bytes over the slower of what the writing nodes can push
(per-node bandwidth x nodes) and what the storage tier takes in total, plus its latency.
An asynchronous checkpoint (PyTorch DCP async_save, Megatron's async checkpointing) blocks
training only while the state is copied to host memory; the upload then overlaps training.

Interval: with checkpoint cost C and job MTBF M, Young (1974) minimises the expected waste
W(tau) = C / tau + tau / (2 M) (time spent checkpointing plus the half interval of work a
failure destroys on average), giving tau = sqrt(2 M C). Daly (2006, eq. 37) refines it for
C not small against M: tau = sqrt(2 C M) [1 + sqrt(C / (2M)) / 3 + C / (18 M)] - C for
C < 2M, else M. The restart (reload) time R adds R / M of waste per unit time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infraplan.catalog.schema import StorageTier
from infraplan.physics.memory.states import optimizer, weight_bytes_per_param
from infraplan.checks import check_number


def checkpoint_bytes(num_params: float, *, precision: str = "bf16",
                     optimizer_name: str = "adamw") -> float:
    """Bytes of a full training checkpoint: weights plus optimizer state."""
    per_param = weight_bytes_per_param(precision) + optimizer(
        optimizer_name).state_bytes_per_param(precision)
    return num_params * per_param


def transfer_time_s(size_bytes: float, tier: StorageTier, nodes: int, *,
                    write: bool = True) -> float:
    """Seconds to write (or read) `size_bytes` spread evenly over `nodes` writers."""
    check_number("size_bytes", size_bytes, ge=0)
    check_number("nodes", nodes, ge=1, integer=True)
    per_node = tier.write_bytes_per_s_per_node if write else tier.read_bytes_per_s_per_node
    total = tier.write_bytes_per_s_aggregate if write else tier.read_bytes_per_s_aggregate
    rate = per_node * nodes if total is None else min(per_node * nodes, total)
    return tier.latency_s + size_bytes / rate


def young_interval_s(checkpoint_s: float, mtbf_s: float) -> float:
    """Young (1974): tau = sqrt(2 M C)."""
    _check(checkpoint_s, mtbf_s)
    return math.sqrt(2.0 * mtbf_s * checkpoint_s)


def daly_interval_s(checkpoint_s: float, mtbf_s: float) -> float:
    """Daly (2006) higher-order optimum; equals Young's as C / M -> 0."""
    _check(checkpoint_s, mtbf_s)
    c, m = checkpoint_s, mtbf_s
    if c >= 2 * m:
        return m
    x = c / (2 * m)
    return math.sqrt(2 * c * m) * (1 + math.sqrt(x) / 3 + x / 9) - c


def waste_fraction(interval_s: float, checkpoint_s: float, mtbf_s: float,
                   restart_s: float = 0.0) -> float:
    """First-order share of wall time lost: checkpointing, recomputing lost work, restarting."""
    _check(checkpoint_s, mtbf_s)
    check_number("interval_s", interval_s, gt=0)
    check_number("restart_s", restart_s, ge=0)
    return checkpoint_s / interval_s + interval_s / (2 * mtbf_s) + restart_s / mtbf_s


@dataclass(frozen=True)
class CheckpointPlan:
    size_bytes: float
    blocking_s: float  # what training waits for per checkpoint
    write_s: float  # until the checkpoint is durable
    interval_s: float  # the interval used: Daly's, raised to the write when shorter
    waste_fraction: float  # at interval_s
    daly_interval_s: float  # Daly's own, for blocking_s and the job's MTBF

    @property
    def raised_to_write(self) -> bool:
        """Daly's interval is shorter than a checkpoint takes to become durable: the
        interval used is the write, since a checkpoint cannot start before the last one
        has landed."""
        return self.interval_s > self.daly_interval_s


def plan_checkpoints(num_params: float, tier: StorageTier, *, nodes: int, num_gpus: int,
                     mtbf_s: float, restart_s: float | None = None, asynchronous: bool = True,
                     host_copy_bytes_per_s_per_gpu: float = 25e9,
                     precision: str = "bf16", optimizer_name: str = "adamw") -> CheckpointPlan:
    """Size, cost and interval of a job's checkpoints: Daly's, or the write when that is
    longer (a checkpoint starts only once the last one is durable).

    Asynchronous: training blocks only for the device-to-host copy, each GPU copying its
    shard over its host link (default 25 GB/s, a PCIe Gen5 x16 link's practical rate).
    Restart (default): reading the checkpoint back from the same tier."""
    check_number("num_params", num_params, gt=0)
    check_number("num_gpus", num_gpus, ge=1, integer=True)
    check_number("host_copy_bytes_per_s_per_gpu", host_copy_bytes_per_s_per_gpu, gt=0)
    check_number("mtbf_s", mtbf_s, gt=0)
    size = checkpoint_bytes(num_params, precision=precision, optimizer_name=optimizer_name)
    write = transfer_time_s(size, tier, nodes)
    blocking = size / (num_gpus * host_copy_bytes_per_s_per_gpu) if asynchronous else write
    restart = transfer_time_s(size, tier, nodes, write=False) if restart_s is None \
        else restart_s
    daly = daly_interval_s(blocking, mtbf_s)
    interval = max(daly, write if asynchronous else blocking)
    return CheckpointPlan(size_bytes=size, blocking_s=blocking, write_s=write,
                          interval_s=interval,
                          waste_fraction=waste_fraction(interval, blocking, mtbf_s, restart),
                          daly_interval_s=daly)


def _check(checkpoint_s: float, mtbf_s: float) -> None:
    check_number("checkpoint_s", checkpoint_s, gt=0)
    check_number("mtbf_s", mtbf_s, gt=0)
