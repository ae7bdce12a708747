"""What a serving plan searches: the grid of candidate replicas, the weight formats (the
checkpoint's own among them) and each accelerator's price, or why it has none."""

from __future__ import annotations

import itertools

from infraplan.catalog import accelerator
from infraplan.errors import InputError
from infraplan.serving.quantization import (CHECKPOINT_FORMAT, checkpoint_weight_dtype,
                                            sixteen_bit)
from infraplan.serving.lengths import SpecModel
from infraplan.serving.scenario import ServeScenario


def with_stored_format(scenario: ServeScenario, arch) -> tuple[ServeScenario, list[str]]:
    """search.weight_dtypes with `checkpoint` resolved to the format the model's checkpoint
    stores; a search that names no weight formats also tries a quantized checkpoint's own
    (what its engine loads by default). Either way a note says what was searched."""
    space, stored = scenario.search, arch.stored
    if CHECKPOINT_FORMAT in space.weight_dtypes:
        own = checkpoint_weight_dtype(arch)
        formats = tuple(dict.fromkeys(own if f == CHECKPOINT_FORMAT else f
                                      for f in space.weight_dtypes))
        how = stored.describe() if stored else f"16-bit ({arch.dtype})"
        note = (f"weight formats searched: {', '.join(formats)}; {CHECKPOINT_FORMAT} is "
                f"{own}, as {arch.name}'s checkpoint stores its weights: {how}")
    elif stored is None or "weight_dtypes" in space.model_fields_set \
            or stored.weight_dtype in space.weight_dtypes:
        return scenario, []
    else:
        formats = (*space.weight_dtypes, stored.weight_dtype)
        note = (f"weight formats searched: {', '.join(formats[:-1])} and {formats[-1]}, the "
                f"last as {arch.name}'s checkpoint stores its weights: {stored.describe()}; "
                "set search.weight_dtypes to choose")
    space = space.model_copy(update={"weight_dtypes": formats})
    return scenario.model_copy(update={"search": space}), [note]


SEARCHED = ("gpus", "tp", "weight_dtypes", "kv_dtypes", "engine", "max_num_seqs",
            "max_replicas")


def ignored_deployment_note(scenario: ServeScenario, arch) -> list[str]:
    """A note naming the deployment: keys plan serve does not use, when there are any: it
    builds each candidate from search: alone (with the engine's defaults elsewhere). A
    key whose value the search covers anyway (the gpu among search.gpus) is not named;
    replicas never are (the plan sizes them)."""
    if not scenario.deployment or scenario.search is None:
        return []
    dep, space = scenario.deployment_spec(arch), scenario.search
    covered = {"replicas": True,
               "gpu": accelerator(dep.gpu).name in space.gpus,
               "tp": dep.tp in space.tp,
               "weight_dtype": dep.weight_dtype in space.weight_dtypes,
               "kv_dtype": dep.kv_dtype in space.kv_dtypes,
               "engine": dep.engine == space.engine,
               "max_num_seqs": dep.max_num_seqs in (space.max_num_seqs or ())}
    ignored = [key if isinstance(getattr(dep, key), SpecModel) else
               f"{key}: {str(getattr(dep, key)).lower()}"  # as YAML writes it: true, fp8
               for key in scenario.deployment if not covered.get(key, False)]
    if not ignored:
        return []
    return [f"deployment: is what simulate serve runs; plan serve searches search: "
            f"({', '.join(SEARCHED)}) with the engine's defaults for the rest, and ignores "
            f"deployment's {', '.join(ignored)}"]


def search_grid(space, seqs) -> tuple[list[tuple], list[str]]:
    """Every (gpu, tp, weight format, KV format, max_num_seqs) searched, with bf16 run as
    fp16 on a chip without bf16 (sixteen_bit; once if both were listed), and those chips."""
    grid, fp16_gpus = {}, []
    for gpu, tp, wd, kv, ms in itertools.product(space.gpus, space.tp, space.weight_dtypes,
                                                 space.kv_dtypes, seqs):
        chip = accelerator(gpu)
        key = (gpu, tp, sixteen_bit(wd, chip), sixteen_bit(kv, chip), ms)
        if key[2:4] != (wd, kv) and gpu not in fp16_gpus:
            fp16_gpus.append(gpu)
        grid.setdefault(key, None)
    return list(grid), fp16_gpus


def searched_prices(scenario: ServeScenario) -> dict[str, float | InputError]:
    """Each searched accelerator's USD per GPU-hour, or why it has none (its candidates are
    rejected with that reason); an InputError naming the pricing when none has a price,
    since the search would then reject everything and end blaming the SLOs."""
    prices: dict[str, float | InputError] = {}
    for gpu in scenario.search.gpus:
        try:
            prices[gpu] = scenario.price_per_gpu_hour(gpu)
        except InputError as exc:
            prices[gpu] = exc
    missing = [p.message for p in prices.values() if isinstance(p, InputError)]
    if len(missing) < len(prices):
        return prices
    raise InputError(f"pricing {scenario.pricing!r} prices none of search.gpus: "
                     + "; ".join(missing),
                     fix=f"set pricing to one the offers list for them, or give prices: "
                         f"{{{scenario.search.gpus[0]}: 2.50}} (USD per GPU-hour)")
