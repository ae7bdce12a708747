"""Will it fit? The answer `infraplan memory` prints and the web's memory page shows: the
memory report of one plan, the single changes that would make it fit, and the fewest
accelerators that can hold the model states at all.

Both views name the same knobs (a CLI flag `--num-gpus` is the form field `num_gpus`);
`FLAG_PATHS` says where each goes in a `workloads.MemoryScenario`, so the two cannot build
different scenarios from the same values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

from infraplan.models.arch import ModelArch
from infraplan.training.memory import (MemoryReport, memory_for_scenario, min_gpus_for_states,
                                       suggest_fixes)

# a scenario without a file: one accelerator, the rest as the spec says (4096-token
# sequences: workloads.DEFAULT_SEQ_LEN)
FLAG_DEFAULTS = {"hardware": {"num_gpus": 1}}
FLAG_PATHS = {
    "model": "model", "gpu": "hardware.gpu", "num_gpus": "hardware.num_gpus",
    **{k: f"parallelism.{k}" for k in ("tp", "pp", "dp", "cp", "ep", "etp", "vp", "zero",
                                       "recompute", "recompute_fraction",
                                       "sequence_parallel", "micro_batch")},
    **{k: f"training.{k}" for k in ("global_batch", "seq_len", "precision", "grad_dtype",
                                    "optimizer", "kernels")},
    "finetune": "finetune.method", "lora_rank": "finetune.lora_rank",
    "lora_targets": "finetune.lora_targets",
}


# flags that mean something only in a context: (the flag that sets the context, whether its
# value is that context, what the context is, how to set it up)
CONTEXT_FLAGS = {
    "lora_rank": ("finetune", lambda method: method != "full", "a LoRA or QLoRA fine-tune",
                  "--finetune lora (or qlora)"),
    "lora_targets": ("finetune", lambda method: method != "full", "a LoRA or QLoRA fine-tune",
                     "--finetune lora (or qlora)"),
    "recompute_fraction": ("recompute", lambda recompute: recompute == "full",
                           "full recompute", "--recompute full"),
}


def memory_overrides(values: Mapping[str, Any]) -> dict[str, Any]:
    """Knob values by flag name -> dotted scenario paths (None: not given, left as is). A
    flag that leaves a context (--finetune full) drops the file's settings of that context
    (its lora_rank), which would otherwise be refused as ignored."""
    from infraplan.scenario_files import DROP

    out = {path: values.get(name) for name, path in FLAG_PATHS.items()}
    for name, (setter, applies, _, _) in CONTEXT_FLAGS.items():
        if values.get(setter) is not None and not applies(values[setter]) and \
                values.get(name) is None:
            out[FLAG_PATHS[name]] = DROP
    return out


def in_flag_terms(exc, values: Mapping[str, Any], origin: str):
    """`exc` (an InputError of the scenario built from file `origin` and flag `values`) in
    the terms of the flag that set the field it names: '--gpu unknown accelerator ...', not
    'job.yaml: hardware.gpu unknown accelerator ...' (the file holds another value)."""
    from infraplan.errors import InputError

    for name, path in FLAG_PATHS.items():
        field = f"{origin}: {path}{':' if name == 'model' else ''} "
        if values.get(name) is not None and exc.message.startswith(field):
            flag = "--" + name.replace("_", "-")
            return InputError(f"{flag} {exc.message[len(field):]}", fix=exc.fix)
    return exc


# The library names a knob by its scenario key: 'parallelism.sequence_parallel',
# 'sequence_parallel: false', 'cp=1', 'etp in 1', 'lora_targets: [attention]'. A memory
# check run from flags alone answers in the flags' terms (as web/memory.py's MEMORY_TERMS
# answers in the form's); a scenario file keeps its keys.
@lru_cache(maxsize=1)  # the patterns depend on FLAG_PATHS alone
def _flag_terms() -> list[tuple[str, object]]:
    flag = {**{k: "--" + k.replace("_", "-") for k in FLAG_PATHS},
            **{path: "--" + k.replace("_", "-") for k, path in FLAG_PATHS.items()}}
    keys = "|".join(sorted(map(re.escape, flag), key=len, reverse=True))
    # keys no sentence uses as words (tp, seq_len; not 'model' or 'kernels'), and paths
    bare = "|".join(sorted([k for k in FLAG_PATHS if "_" in k or k.endswith("p")]
                           + [p for p in FLAG_PATHS.values() if "." in p], key=len,
                           reverse=True))
    on = (r"(?<![\w.*=-])", r"(?![\w*=-])")  # a whole key, not 'tp*dp' or 'ep_comm'

    def value(m: re.Match) -> str:
        name, given = flag[m[1]], m[2].strip("[]").replace(", ", ",")
        if given in ("true", "false"):  # a BooleanOptionalAction flag: --no-<name>
            return name if given == "true" else "--no-" + name[2:]
        return f"{name} {given}"

    return [(r"^flags: (model):? |^flags: ([\w.]+) ", lambda m: flag.get(
                m[1] or m[2], m[0]) + " " if (m[1] or m[2]) in flag else m[0]),
            (rf"{on[0]}({keys})(?:: |=| to | (?=\[))(\[[^\]]*\]|[\w.-]+)", value),
            (rf"{on[0]}({keys}) in (\d+)(?![\d,])", lambda m: f"{flag[m[1]]} {m[2]}"),
            (rf"{on[0]}({bare}){on[1]}", lambda m: flag[m[1]]),
            (r"\bset (--)", r"use \1"), (r"; to fix: ", ". To fix: ")]


def in_flags_alone_terms(exc):
    """`exc`, raised by a memory check run from flags alone, in the flags' terms
    (`_flag_terms`)."""
    from infraplan.errors import InputError

    def translate(text: str | None) -> str | None:
        for pattern, new in _flag_terms():
            text = text and re.sub(pattern, new, text)
        return text

    return InputError(translate(exc.message), fix=translate(exc.fix))


# what a memory scenario must hold, as an example of each key
_REQUIRED_EXAMPLES = {
    "model": "model: llama-3.1-8b (a catalog name: 'infraplan catalog models') or model: "
             "path/to/config.json",
    "hardware": "hardware: {gpu: h100, num_gpus: 8}",
    "hardware.gpu": "gpu: h100 under hardware: ('infraplan catalog gpus' lists them)",
}


def with_examples(exc):
    """A scenario file's 'model is required' with an example of each missing key."""
    from infraplan.errors import InputError

    missing = re.findall(r"(?:^[^:]+: |; )([\w.]+) is required", exc.message)
    examples = [_REQUIRED_EXAMPLES[k] for k in missing if k in _REQUIRED_EXAMPLES]
    if exc.fix is not None or not examples:
        return exc
    return InputError(exc.message, fix="add " + "; and ".join(examples))


def refuse_ignored_flags(values: Mapping[str, Any], scenario) -> None:
    """A flag is said on purpose, even at its default value, which the scenario's own
    checks let pass (spec_checks.given: a dumped file writes every default): an InputError
    for one given outside the context it needs, which would be ignored."""
    from infraplan.errors import InputError

    for name, (setter, applies, context, setup) in CONTEXT_FLAGS.items():
        section, field = FLAG_PATHS[setter].split(".")
        if values.get(name) is not None and not applies(getattr(getattr(scenario, section),
                                                                field)):
            flag = "--" + name.replace("_", "-")
            raise InputError(f"{flag} applies only to {context} (it would be ignored)",
                             fix=f"add {setup}, or drop {flag}")


def scenario_from_flags(values: Mapping[str, Any], origin: str = "flags"):
    """The MemoryScenario of knob values alone (no scenario file)."""
    from infraplan.scenario_files import apply_overrides, parse_spec
    from infraplan.workloads import MemoryScenario

    raw = apply_overrides(FLAG_DEFAULTS, memory_overrides(values))
    return parse_spec(raw, MemoryScenario, origin)


@dataclass(frozen=True)
class FitCheck:
    report: MemoryReport
    fixes: list[tuple[str, MemoryReport]]  # (change as CLI flags, the report with it)
    min_gpus_for_model_states: int
    changes_per_fix: int = 1  # 2: no single change fits, each fix changes two knobs

    @property
    def fixes_heading(self) -> str:
        """What the fixes are, or that there are none (a plan that fits has no heading)."""
        if self.report.fits:
            return ""
        if not self.fixes:
            return "No single change or pair of changes makes this plan fit"
        return "Single changes that fit" if self.changes_per_fix == 1 else \
            "No single change fits; pairs of changes that do"

    def to_json(self) -> dict:
        out = self.report.to_json()
        out["fixes"] = [{"change": label, "total_bytes": round(r.total_bytes)}
                        for label, r in self.fixes]
        out["changes_per_fix"] = self.changes_per_fix
        out["min_gpus_for_model_states"] = self.min_gpus_for_model_states
        return out


def fit_check(scenario, arch: ModelArch | None = None) -> FitCheck:
    """A MemoryScenario's answer; `arch` plans a parsed (uploaded) architecture in place of
    the scenario's model name. Fixes are single changes, or pairs when no single one fits."""
    report = memory_for_scenario(scenario, arch=arch)
    if report.fits:
        return FitCheck(report, [], min_gpus_for_states(report))
    fixes, changes = suggest_fixes(report), 1
    if not fixes:
        fixes, changes = suggest_fixes(report, changes=2), 2
    return FitCheck(report, fixes, min_gpus_for_states(report), changes)
