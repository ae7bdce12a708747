"""The shipped catalog: accelerators, systems, networks, storage tiers and model architectures.

Each table is a YAML file under `catalog/data/`; every row names its source and the date it
was read. Adding a GPU or a model is a data change. Cloud prices live in `data/offers.csv`,
read by `infraplan.economics.offers`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from infraplan.catalog.engines import Engine
from infraplan.catalog.schema import (Accelerator, Calibration, Constant, Measurement, ModelEntry,
                                     Network, StorageTier, System)
from infraplan.catalog.table import Table, load_table
from infraplan.errors import InputError, UnknownNameError

DATA_DIR = Path(__file__).parent / "data"
MODELS_DIR = DATA_DIR / "models"


def _kernel_peaks(gpu: Accelerator) -> dict:
    return {dtype: peak for dtype, peak in gpu.peak_flops.items() if dtype != "fp64"}


@dataclass(frozen=True)
class Catalog:
    accelerators: Table[Accelerator]
    systems: Table[System]
    networks: Table[Network]
    storage: Table[StorageTier]
    models: Table[ModelEntry]
    memory_overheads: Table[Constant]
    calibration: Table[Calibration]
    measurements: Table[Measurement]
    engines: Table[Engine]
    reliability: Table[Constant]

    def check_references(self) -> None:
        """Every name a row points at exists (a system's GPU, network, local storage) and a
        compute twin has the same SM count and peaks. FP64 may differ (the H800 is an H100
        with FP64 cut): no modelled kernel runs in it."""
        for system in self.systems:
            self.accelerators.get(system.accelerator)
            self.networks.get(system.network)
            if system.local_storage:
                self.storage.get(system.local_storage)
        for gpu in self.accelerators:
            if gpu.compute_twin:
                twin = self.accelerators.get(gpu.compute_twin)
                if (_kernel_peaks(twin), twin.compute_units) != (_kernel_peaks(gpu),
                                                                  gpu.compute_units):
                    raise InputError(f"accelerators.yaml: {gpu.name!r} names {twin.name!r} as "
                                     "its compute twin, but their peak FLOP/s or SM counts "
                                     "differ (FP64 aside)",
                                     fix="remove compute_twin or fix the peaks")
        for m in self.measurements:
            if m.target not in self.accelerators and m.target not in self.systems:
                raise InputError(f"measurements.yaml: {m.name!r} targets unknown {m.target!r}")
        for entry in self.models:
            if not (MODELS_DIR / entry.config_file).is_file():
                raise InputError(f"models.yaml: {entry.name!r} points at missing "
                                 f"{entry.config_file!r}")

    def price_per_gpu_hour(self, accelerator_name: str, pricing: str = "on_demand") -> float:
        """The lowest price of one accelerator-hour (USD) in the offers table."""
        from infraplan.economics.offers import price_per_gpu_hour  # offers reads this catalog

        return price_per_gpu_hour(accelerator_name, pricing)

    def hardware(self, name: str) -> tuple[Accelerator, System | None]:
        """An accelerator, or a node type and the accelerator it holds: (accelerator, the
        named node or None for the accelerator's default). Accelerator names win where a
        node type's alias spells the same."""
        if name in self.accelerators:
            return self.accelerators.get(name), None
        if name in self.systems:
            node = self.systems.get(name)
            return self.accelerators.get(node.accelerator), node
        raise UnknownNameError(
            "accelerator or node type", name,
            self.accelerators.names() + self.accelerators.aliases() + self.systems.names()
            + self.systems.aliases(),
            fix="run 'infraplan catalog gpus' or 'infraplan catalog systems' to list them",
            canonical={**self.accelerators.canonical(), **self.systems.canonical()})

    def system_for(self, accelerator_name: str) -> System:
        """The default node type of an accelerator: the first system row that holds it."""
        gpu = self.accelerators.get(accelerator_name)
        for system in self.systems:
            if system.accelerator == gpu.name:
                return system
        raise InputError(f"no system in the catalog holds {gpu.name!r}",
                         fix="add a row to catalog/data/systems.yaml")

    def node_for(self, accelerator_name: str, system: str | System | None = None, *,
                 what: str = "node type") -> System:
        """The node type an accelerator runs in: `system` (a name or a row) or, None, its
        default; an InputError, naming the node as `what`, when it holds another
        accelerator (its links, NICs and host would be another chip's)."""
        gpu = self.accelerators.get(accelerator_name)
        if system is None:
            return self.system_for(gpu.name)
        node = self.systems.get(system) if isinstance(system, str) else system
        if node.accelerator != gpu.name:
            holders = ", ".join(s.name for s in self.systems if s.accelerator == gpu.name)
            raise InputError(f"{what} {node.name!r} holds {node.accelerator}, not "
                             f"{gpu.name}",
                             fix=f"plan {node.accelerator} on it, or pick a node type that "
                                 f"holds {gpu.name} ({holders or 'add one to systems.yaml'})")
        return node


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    catalog = Catalog(
        accelerators=load_table(DATA_DIR / "accelerators.yaml", Accelerator, "accelerator", "gpus"),
        systems=load_table(DATA_DIR / "systems.yaml", System, "system", "systems"),
        networks=load_table(DATA_DIR / "networks.yaml", Network, "network", "networks"),
        storage=load_table(DATA_DIR / "storage.yaml", StorageTier, "storage tier", "storage"),
        models=load_table(DATA_DIR / "models.yaml", ModelEntry, "model", "models"),
        memory_overheads=load_table(DATA_DIR / "memory_overheads.yaml", Constant,
                                    "memory overhead"),
        calibration=load_table(DATA_DIR / "calibration.yaml", Calibration, "calibration"),
        measurements=load_table(DATA_DIR / "measurements.yaml", Measurement, "measurement")
        if (DATA_DIR / "measurements.yaml").is_file() else Table("measurement", []),
        engines=load_table(DATA_DIR / "engines.yaml", Engine, "engine", "engines"),
        reliability=load_table(DATA_DIR / "reliability.yaml", Constant, "reliability figure"),
    )
    catalog.check_references()
    return catalog


def accelerator(name: str) -> Accelerator:
    """Look an accelerator up by name or alias ('h100', 'H100-SXM', 'a100-sxm4-80gb')."""
    return load_catalog().accelerators.get(name)


def distinct_accelerators(names) -> tuple[str, ...]:
    """Canonical names, each once: 'h100' and 'H100-SXM5' are one accelerator to compare."""
    return tuple(dict.fromkeys(accelerator(name).name for name in names))
