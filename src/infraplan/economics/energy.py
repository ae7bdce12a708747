"""Energy (kWh) and carbon (kg CO2e) of running accelerators, with grid intensity by region.

    energy_kwh = (num_gpus x gpu_w + nodes x host_w_per_node) x utilization x hours x pue / 1000
    carbon_kg  = energy_kwh x g_co2e_per_kwh / 1000

- gpu_w is the accelerator's TDP (`infraplan.catalog.accelerator(name).tdp_watts`).
- utilization is the average draw as a fraction of the maximum. Power is taken as linear in
  load from zero: idle draw is not modelled, and a busy GPU often runs below its TDP, so
  utilization = 1 is an upper bound.
- host_w_per_node is the rest of the server: CPUs, memory, NICs, NVSwitches, fans, disks,
  power-supply losses. Default 0 (GPU boards only). For an 8-GPU HGX/DGX node use
  DGX_H100_HOST_W_PER_NODE = 10,200 W - 8 x 700 W = 4,600 W (575 W per GPU): NVIDIA gives
  10.2 kW maximum system power for DGX H100/H200 (DGX H100/H200 User Guide, six 3.3 kW PSUs
  in 4+2; see catalog/data/onprem.yaml, dgx-h100) against a 700 W H100 SXM TDP. It is a
  maximum, so it too is scaled by utilization.
- pue (power usage effectiveness) = facility energy / IT energy: cooling and power
  conversion. Typical values: 1.58 industry average, 1.3 new builds (onprem.yaml, facility);
  hyperscale clouds report lower fleet averages.
- hours = duration_s / 3600; 1 kWh = 3.6e6 J.

Grid intensity (g CO2e per kWh, location-based) comes from catalog/data/grid_intensity.yaml:
Google Cloud's published per-region figures, AWS/Azure regions mapped to the same grid
(estimates, marked), and national averages (Ember, EPA eGRID).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np
from pydantic import Field

from infraplan.catalog import DATA_DIR, accelerator, load_catalog
from infraplan.catalog.schema import Row
from infraplan.catalog.table import Table, load_table
from infraplan.errors import InputError
from infraplan.units import format_figure

JOULES_PER_KWH = 3.6e6
SECONDS_PER_HOUR = 3_600.0
# NVIDIA DGX H100 maximum system power (10.2 kW) minus 8 x H100 SXM TDP (700 W): see the top.
DGX_H100_SYSTEM_W = 10_200.0
DGX_H100_HOST_W_PER_NODE = DGX_H100_SYSTEM_W - 8 * 700.0  # 4,600 W


class GridIntensity(Row):
    """Average grid carbon intensity of a cloud region, a country or the world."""

    kind: Literal["cloud-region", "country", "world"]
    provider: Literal["gcp", "aws", "azure", ""] = ""
    g_co2e_per_kwh: float = Field(ge=0, description="grams CO2-equivalent per kWh, location-based")
    year: int = Field(ge=1990, le=2100, description="the year the figure describes")
    estimate: bool = Field(default=False, description="borrowed from the same grid, see notes")


@lru_cache(maxsize=1)
def grid_table() -> Table[GridIntensity]:
    return load_table(DATA_DIR / "grid_intensity.yaml", GridIntensity, "grid region")


def grid_intensity(region: str) -> GridIntensity:
    """The grid row for a cloud region ('us-east-1', 'europe-west4'), a country ('germany',
    'de') or 'world'. An unknown name raises UnknownNameError with close matches."""
    return grid_table().get(region, fix="use a region or country from "
                            "catalog/data/grid_intensity.yaml, or give g_co2e_per_kwh directly")


def _checked(name: str, value, *, low: float = 0.0, high: float = math.inf):
    """value as float or float array, every element finite and in [low, high]."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a number (got {value!r})") from None
    if arr.size and (not np.all(np.isfinite(arr)) or np.any(arr < low) or np.any(arr > high)):
        bound = f">= {low:g}" if high == math.inf else f"between {low:g} and {high:g}"
        raise InputError(f"{name} must be {bound} (got {value!r})")
    return float(arr) if arr.ndim == 0 else arr


def energy_kwh(num_gpus, gpu_w, utilization, duration_s, *, pue,
               host_w_per_node=0.0, gpus_per_node: int = 8):
    """kWh drawn from the grid; the formula and its assumptions are at the top of the module.

    Every argument may be a NumPy array (broadcast together) to evaluate a plan space at once.
    nodes = ceil(num_gpus / gpus_per_node); host power only counts when host_w_per_node > 0.
    """
    num_gpus = _checked("num_gpus", num_gpus)
    gpu_w = _checked("gpu_w", gpu_w)
    utilization = _checked("utilization", utilization, high=1.0)
    duration_s = _checked("duration_s", duration_s)
    pue = _checked("pue", pue, low=1.0)
    host_w_per_node = _checked("host_w_per_node", host_w_per_node)
    if gpus_per_node < 1:
        raise InputError(f"gpus_per_node must be >= 1 (got {gpus_per_node!r})")
    nodes = np.ceil(np.asarray(num_gpus) / gpus_per_node)
    it_w = np.asarray(num_gpus) * gpu_w + nodes * host_w_per_node
    kwh = it_w * utilization * (np.asarray(duration_s) / SECONDS_PER_HOUR) * pue / 1000.0
    return float(kwh) if np.ndim(kwh) == 0 else kwh


def carbon_kg(kwh, g_co2e_per_kwh):
    """kg CO2e = kWh x (g CO2e / kWh) / 1000. Arrays broadcast."""
    kwh = _checked("energy_kwh", kwh)
    g_co2e_per_kwh = _checked("g_co2e_per_kwh", g_co2e_per_kwh)
    kg = np.asarray(kwh) * g_co2e_per_kwh / 1000.0
    return float(kg) if np.ndim(kg) == 0 else kg


@dataclass(frozen=True)
class EnergyEstimate:
    energy_kwh: float
    carbon_kg_co2e: float | None  # None when no region or intensity was given
    g_co2e_per_kwh: float | None
    region: str | None
    formula: str
    intensity_note: str = ""  # source, year, and whether the grid figure is an estimate
    host_note: str = ""  # when the servers' own draw is left out: how to count it


def host_note(accelerator_name: str) -> str:
    """What an energy figure of the GPUs alone leaves out, and the host draw to set, taken
    from the accelerator's server in catalog/data/onprem.yaml (its maximum system power less
    its GPUs' TDP) or, without one, the DGX H100's."""
    from infraplan.economics.tco import load_onprem  # tco imports this module

    gpu = accelerator(accelerator_name)
    rows = [r for r in load_onprem().servers if r.accelerator == gpu.name]
    if rows:
        r = rows[0]
        example = (f"{r.name}: {r.system_power_w - r.gpus_per_server * gpu.tdp_watts:,.0f} W,"
                   f" its {r.system_power_w:,.0f} W maximum less {r.gpus_per_server} x "
                   f"{gpu.tdp_watts:,.0f} W")
    else:
        example = f"a DGX H100's is {DGX_H100_HOST_W_PER_NODE:,.0f} W"
    return ("the servers' own draw (CPUs, memory, NICs, fans) is not counted; set "
            f"energy.host_w_per_node to add it ({example})")


def estimate_energy(accelerator_name: str, num_gpus: int, duration_s: float, *,
                    utilization: float, pue: float, region: str | None = None,
                    g_co2e_per_kwh: float | None = None, host_w_per_node: float = 0.0,
                    gpus_per_node: int | None = None) -> EnergyEstimate:
    """Energy and carbon of `num_gpus` accelerators running for `duration_s`.

    The TDP comes from the catalog. Carbon uses `g_co2e_per_kwh` if given, else the grid row
    of `region`; with neither, carbon is None. gpus_per_node defaults to the accelerator's
    default node type in the catalog (only needed when host_w_per_node > 0).
    """
    gpu = accelerator(accelerator_name)
    if gpus_per_node is None:
        gpus_per_node = 8
        if host_w_per_node:
            gpus_per_node = load_catalog().system_for(gpu.name).accelerators_per_node
    kwh = energy_kwh(num_gpus, gpu.tdp_watts, utilization, duration_s, pue=pue,
                     host_w_per_node=host_w_per_node, gpus_per_node=gpus_per_node)
    host = (f" + ceil({num_gpus}/{gpus_per_node}) nodes x {host_w_per_node:,.0f} W host"
            if host_w_per_node else "")
    formula = (f"({num_gpus} x {gpu.tdp_watts:,.0f} W{host or ' GPUs only'}) x "
               f"{utilization:g} utilization x "
               f"{format_figure(duration_s / SECONDS_PER_HOUR)} h x PUE {pue:g} = "
               f"{format_figure(kwh)} kWh")
    note, name = "", None
    if g_co2e_per_kwh is None and region is not None:
        row = grid_intensity(region)
        g_co2e_per_kwh, name = row.g_co2e_per_kwh, row.name
        note = f"{row.name}: {row.g_co2e_per_kwh:g} g/kWh ({row.year}" + \
               (", estimate" if row.estimate else "") + f"); source: {row.source}"
    carbon = None
    if g_co2e_per_kwh is not None:
        carbon = carbon_kg(kwh, g_co2e_per_kwh)
        formula += f"; x {g_co2e_per_kwh:g} g CO2e/kWh = {format_figure(carbon)} kg CO2e"
    return EnergyEstimate(energy_kwh=kwh, carbon_kg_co2e=carbon, g_co2e_per_kwh=g_co2e_per_kwh,
                          region=name or region, formula=formula, intensity_note=note,
                          host_note="" if host_w_per_node else host_note(gpu.name))
