"""When no configuration of a serving search can even be built (the weights leave no room
for the KV cache, a TP degree does not divide the heads): the smallest configurations just
outside the search that can, so that the fix names values to add rather than a direction.
"""

from __future__ import annotations

from pathlib import Path

from infraplan.catalog import accelerator, load_catalog
from infraplan.errors import InputError
from infraplan.serving.deployment import Deployment, resolve
from infraplan.serving.quantization import sixteen_bit
from infraplan.serving.scenario import ServeScenario

# smaller weight formats tried after the searched ones (quantization.smaller_weight_formats:
# the formats any GPU can serve, weight-only where it lacks the tensor path)
PORTABLE_FORMATS = ("fp8", "int4")


def runnable_nearby(scenario: ServeScenario, gpus: list[str], *,
                    base_dir: Path | None = None, arch=None, limit: int = 3
                    ) -> list[Deployment]:
    """For each of `gpus` (the searched accelerators with a price), the fewest GPUs per
    replica that can hold the model (TP over the powers of two within its scale-up domain,
    so that a replica's TP stays on NVLink) in any of the searched weight formats or the
    smaller fp8 and int4, and the fewest in a searched format if that takes more. Only
    memory and divisibility are judged (resolve), not the SLOs; the `limit` with the
    fewest GPUs."""
    space = scenario.search
    formats = tuple(dict.fromkeys((*space.weight_dtypes, *PORTABLE_FORMATS)))
    found = []
    for gpu in gpus:
        domain = load_catalog().system_for(gpu).scale_up_accelerators
        tps = sorted({1 << k for k in range(domain.bit_length())}
                     | {t for t in space.tp if t <= domain})
        fewest = {}  # weight format -> the deployment with the fewest GPUs
        for wd in formats:
            fewest[wd] = next((d for tp in tps if (d := _builds(scenario, gpu, tp, wd,
                                                                base_dir, arch))), None)
        options = [d for d in fewest.values() if d is not None]
        searched = [d for d in options if d.weight_dtype in space.weight_dtypes]
        picks = ([min(options, key=lambda d: d.tp)] if options else []) + searched[:1]
        found += list({(d.tp, d.weight_dtype): d for d in picks}.values())
    return sorted(found, key=lambda d: (d.tp, formats.index(d.weight_dtype)))[:limit]


def _builds(scenario: ServeScenario, gpu: str, tp: int, wd: str, base_dir, arch):
    """The deployment if it can be built and was not searched already (and rejected)."""
    space = scenario.search
    if tp in space.tp and wd in space.weight_dtypes:
        return None
    chip = accelerator(gpu)  # bf16 runs as fp16 where the chip has no bf16, as searched
    dep = Deployment(model=scenario.model, gpu=gpu, tp=tp, weight_dtype=sixteen_bit(wd, chip),
                     kv_dtype=sixteen_bit(space.kv_dtypes[0], chip), engine=space.engine)
    try:
        resolve(dep, base_dir=base_dir, arch=arch)
    except InputError:
        return None
    return dep


def describe_fix(deployments: list[Deployment]) -> str:
    """'search.tp 2 with search.weight_dtypes int4 on l4 (2 GPUs a replica); or ...'"""
    return "; or ".join(f"search.tp {d.tp} with search.weight_dtypes {d.weight_dtype} on "
                        f"{d.gpu} ({d.tp} GPU{'s' if d.tp > 1 else ''} a replica)"
                        for d in deployments)


def nearby_list(deployments: list[Deployment]) -> str:
    """'2 x l4 int4 (tp 2); 8 x l4 bf16 (tp 8)': for a report, in no one's field names."""
    return "; ".join(f"{d.tp} x {d.gpu} {d.weight_dtype} (tp {d.tp})" for d in deployments)
