"""Whole instances: clouds rent a node's GPUs together, so a job that fills part of an
instance pays for all of it.

A job sits on instances as `groups` groups of `group_gpus` accelerators: a serving
replica's TP x PP GPUs share one instance's NVLink, so replicas pack floor(c / g) to an
instance of c GPUs; a training job's GPUs pack c to an instance (groups of one). An
instance must hold at least `min_instance_gpus` (the job's GPUs up to a node: a TP group
needs the node's NVLink, not GPUs on separate VMs).

The offer billed is the one whose whole instances cost least for the job, not the cheapest
GPU-hour: three 2-GPU replicas on 8-GPU instances at $2.95 pay for 8 GPUs ($23.60/h), more
than on 2-GPU instances at $3.50 (6 GPUs, $21.00/h). An offer rented in several sizes at one
per-GPU rate (offers.Offer.sizes) is tried at each size that holds `min_instance_gpus`; the job
rents instances of one size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infraplan.economics.offers import Offer, cheapest, offers_for


@dataclass(frozen=True)
class Footprint:
    """How a job occupies rented instances (module docstring)."""

    min_instance_gpus: int = 1
    group_gpus: int = 1
    groups: int = 1

    @property
    def gpus(self) -> int:
        return self.group_gpus * self.groups

    def billed_gpus(self, instance_gpus: int) -> int:
        """GPUs paid for on instances of `instance_gpus`: groups that fit pack
        floor(c / g) to an instance, a larger group takes ceil(g / c) instances of its own."""
        c, g = instance_gpus, self.group_gpus
        if g <= c:
            return math.ceil(self.groups / (c // g)) * c
        return self.groups * math.ceil(g / c) * c


def training_footprint(num_gpus: int, node_gpus: int) -> Footprint:
    """A training job of `num_gpus` on nodes of `node_gpus`: its instances hold all its
    GPUs up to a node."""
    return Footprint(int(min(num_gpus, node_gpus)), 1, int(num_gpus))


@dataclass(frozen=True)
class Rental:
    """The offer a job rents and what it pays per GPU-hour it uses."""

    offer: Offer
    pricing: str
    footprint: Footprint
    billed_gpus: int  # whole instances; the job's own GPUs when no offer is large enough
    instance_gpus: int  # the size of the instances rented (one of offer.instance_sizes)

    @property
    def offer_usd_per_gpu_hour(self) -> float:
        return self.offer.usd_per_gpu_hour(self.pricing)

    @property
    def usd_per_gpu_hour(self) -> float:
        """The instances' bill spread over the GPUs the job uses."""
        return self.offer_usd_per_gpu_hour * self.billed_gpus / self.footprint.gpus

    @property
    def fits(self) -> bool:
        return self.instance_gpus >= self.footprint.min_instance_gpus

    def basis(self) -> str:
        """Where the price comes from, in words (the line item's basis): the offer, its
        region, when its price was observed, and whether the row is an estimate (not the
        provider's own figure; offers.py)."""
        o, fp = self.offer, self.footprint
        where = f" ({', '.join(filter(None, (o.region, o.observed)))}" \
            + (", an estimate)" if o.estimate else ")")
        label = self.pricing.replace("_", "-")
        if not self.fits:
            size = (f" (none in the table holds {fp.min_instance_gpus} in one instance)"
                    if fp.min_instance_gpus > 1 else "")
            return f"cheapest {label} offer{size}: {o.provider} {o.instance_type}{where}"
        size = f" of {fp.min_instance_gpus}+ GPUs an instance" \
            if fp.min_instance_gpus > 1 else ""
        text = f"cheapest {label} offer{size}: {o.provider} {o.instance_type}{where}"
        if len(o.instance_sizes) > 1:
            text += f" in {self.instance_gpus}-GPU instances"
        if self.billed_gpus > fp.gpus:
            text += (f"; whole {self.instance_gpus}-GPU instances billed, {self.billed_gpus} "
                     f"GPUs at ${self.offer_usd_per_gpu_hour:,.2f}/GPU-h for the {fp.gpus} used")
        return text


def rent(accelerator: str, pricing: str, footprint: Footprint, *,
         offers: list[Offer] | None = None) -> Rental:
    """The offer and instance size whose whole instances cost the job least among those
    holding `footprint.min_instance_gpus`; when none is that large, the cheapest GPU-hour of
    any size, billed per GPU (offers.cheapest). An InputError says what exists when no offer
    has a `pricing` price. `offers`: a table instead of the shipped one."""
    fitting = [(o, size) for o in offers_for(accelerator, pricing=pricing, offers=offers)
               for size in o.instance_sizes if size >= footprint.min_instance_gpus]
    if not fitting:
        offer = cheapest(accelerator, pricing, offers=offers)
        return Rental(offer, pricing, footprint, footprint.gpus, offer.largest)
    # offers_for sorts by GPU-hour price and sizes rise: min keeps the first of equal bills
    best, size = min(fitting, key=lambda pair: footprint.billed_gpus(pair[1])
                     * pair[0].usd_per_gpu_hour(pricing))
    return Rental(best, pricing, footprint, footprint.billed_gpus(size), size)
