"""Collective communication times over a two-level topology (NVLink/NVSwitch or PCIe inside a
node, NICs between nodes), vectorised over plans.

Cost model: latency + size / bandwidth (Hockney), per algorithm (Thakur, Rabenseifner and
Gropp 2005; the NCCL docs' "bus bandwidth"):
  ring all-reduce       2 (n-1)/n S / B + 2 (n-1) a
  tree all-reduce       2 S / B + 2 log2(n) a        (NCCL's double binary tree)
  reduce-scatter and all-gather (ring)   (n-1)/n S / B + (n-1) a
  all-to-all            the bytes leaving each rank over the link they cross
  send/recv             S / B + a
B is the bus bandwidth of the slowest link a ring crosses. A group with k ranks per node
crossing nodes is limited by the NICs those k ranks use (rail-optimised fabrics: one NIC
per GPU): B = k x NIC bandwidth per GPU, capped by the intra-node bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class Fabric:
    # GPUs on one scale-up fabric: the node, or a rack-scale NVLink domain of several
    # nodes (GB200 NVL72); "node" below means that domain
    gpus_per_node: int
    intra_bytes_per_s: float  # per GPU, per direction, bus efficiency applied
    inter_bytes_per_s: float  # NIC bandwidth per GPU, per direction, efficiency applied
    intra_latency_s: float
    inter_latency_s: float


@dataclass(frozen=True)
class Group:
    """Ranks of one collective: `size` ranks, `per_node` of them in each node."""

    size: np.ndarray
    per_node: np.ndarray

    @property
    def crosses_nodes(self) -> np.ndarray:
        return self.size > self.per_node


def group(size, stride, fabric: Fabric) -> Group:
    """A group of `size` ranks whose members are `stride` ranks apart (Megatron-LM orders
    ranks TP fastest, then CP, then DP, then PP)."""
    size = np.asarray(size, dtype=float)
    stride = np.asarray(stride, dtype=float)
    fit = np.maximum(np.floor(fabric.gpus_per_node / stride), 1.0)
    return Group(size=size, per_node=np.minimum(size, fit))


def bus_bandwidth(g: Group, fabric: Fabric) -> np.ndarray:
    inter = np.minimum(g.per_node * fabric.inter_bytes_per_s, fabric.intra_bytes_per_s)
    return np.where(g.crosses_nodes, inter, fabric.intra_bytes_per_s)


def _latency(g: Group, fabric: Fabric) -> np.ndarray:
    return np.where(g.crosses_nodes, fabric.inter_latency_s, fabric.intra_latency_s)


def all_reduce(size_bytes, g: Group, fabric: Fabric) -> np.ndarray:
    """The faster of ring and tree; zero for a group of one."""
    n = g.size
    bw = bus_bandwidth(g, fabric)
    a = _latency(g, fabric)
    ring = 2 * (n - 1) / n * size_bytes / bw + 2 * (n - 1) * a
    tree = 2 * size_bytes / bw + 2 * np.ceil(np.log2(np.maximum(n, 1))) * a
    return np.where(n > 1, np.minimum(ring, tree), 0.0)


def reduce_scatter(size_bytes, g: Group, fabric: Fabric) -> np.ndarray:
    """Ring reduce-scatter of a `size_bytes` buffer (each rank keeps 1/n); also the time of
    the all-gather that rebuilds it."""
    n = g.size
    t = (n - 1) / n * size_bytes / bus_bandwidth(g, fabric) + (n - 1) * _latency(g, fabric)
    return np.where(n > 1, t, 0.0)


all_gather = reduce_scatter


def all_to_all(size_bytes, g: Group, fabric: Fabric, remote_share=None) -> np.ndarray:
    """Each rank sends (n-1)/n of its `size_bytes` buffer: the part for ranks in its node
    over the intra-node links, the rest over its NIC; both run at once. `remote_share`
    overrides the share that leaves the node (default (n-k)/n) for a dispatcher that
    sends a token once per destination node and forwards it inside that node."""
    n, k = g.size, g.per_node
    remote = (n - k) / n if remote_share is None else remote_share
    intra = (k - 1) / n * size_bytes / fabric.intra_bytes_per_s
    inter = remote * size_bytes / fabric.inter_bytes_per_s
    t = np.maximum(intra, inter) + (n - 1) * _latency(g, fabric)
    return np.where(n > 1, t, 0.0)


def send_recv(size_bytes, same_node, fabric: Fabric) -> np.ndarray:
    bw = np.where(same_node, fabric.intra_bytes_per_s, fabric.inter_bytes_per_s)
    lat = np.where(same_node, fabric.intra_latency_s, fabric.inter_latency_s)
    return size_bytes / bw + lat
