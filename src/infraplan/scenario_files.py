"""Scenario files: reading a scenario YAML (each mapping's keys unique) into its spec.

The specs themselves are in workloads.py (memory and training) and serving/scenario.py;
this module reads the text, applies dotted overrides (CLI flags, web fields), refuses a
scenario of one kind handed to a command of another, and names the file in every error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from infraplan.errors import InputError
from infraplan.files import on_disk, read_user_file, too_big_to_read
from infraplan.spec_checks import describe_errors
from infraplan.workloads import MemoryScenario


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice in one mapping is an error (PyYAML
    keeps the last one silently, so a pasted second `hardware:` would win unnoticed)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *defaults`: merged by SafeLoader, and overridable by design
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (list, dict)):  # `? [a, b]` or `{a: 1}: x`: unhashable
                raise InputError(f"the key at line {key_node.start_mark.line + 1} is a "
                                 f"{'list' if isinstance(key, list) else 'mapping'}, "
                                 "not a name", fix="write each key as a plain name (key: value)")
            if isinstance(key, str) and key in seen:
                raise InputError(f"the key {key!r} is given twice at line "
                                 f"{key_node.start_mark.line + 1}",
                                 fix="keep one of the two (YAML would keep the last silently)")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def parse_yaml(text: str, origin: str) -> Any:
    """The YAML document in `text`, each mapping's keys unique; what cannot be read is an
    InputError naming `origin` and, where PyYAML locates it, the line."""
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except InputError as exc:  # a key given twice, or a key that is not a name
        raise InputError(f"{origin}: {exc.message}", fix=exc.fix) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise InputError(f"{origin}: not valid YAML{where} "
                         f"({getattr(exc, 'problem', exc)})",
                         fix="check the indentation and brackets there; quote a value that "
                             "holds ': ' or ' #'") from None
    except (RecursionError, ValueError) as exc:
        raise too_big_to_read(origin, exc, fix="write the scenario as a few levels of keys "
                              "and each number with its real size (see examples/)") from None


def load_scenario(path: str | Path, model: type[BaseModel] = MemoryScenario,
                  overrides: dict[str, Any] | None = None) -> BaseModel:
    """Read a scenario YAML; `overrides` ({"parallelism.tp": 8}) win over the file."""
    path = Path(path)
    text = read_user_file(path, "scenario file",
                          fix="give the path of a scenario YAML (see examples/)")
    return scenario_from(parse_yaml(text, path.name), path, model, overrides)


def scenario_from(raw: Any, path: Path, model: type[BaseModel] = MemoryScenario,
                  overrides: dict[str, Any] | None = None) -> BaseModel:
    """The scenario of `path`'s parsed YAML `raw`: a model named relative to the file is
    found beside it."""
    if not isinstance(raw, dict):
        keys = ", ".join([k for k in model.model_fields if k not in ("name", "description")][:3])
        what = "is empty" if raw is None else f"holds a {type(raw).__name__}, not keys"
        raise InputError(f"{path.name} {what}", fix=f"write a mapping of keys ({keys}, ...); "
                         "see examples/")
    raw = apply_overrides(raw, overrides or {})
    if isinstance(raw.get("model"), str):
        local = path.parent / raw["model"]
        if on_disk(local):
            raw["model"] = str(local)
    spec = parse_spec(raw, model, path.name)
    _check_names(spec, path)
    return spec


def _check_names(spec: BaseModel, path: Path) -> None:
    """The names a scenario's own validators do not look up: its model, and a memory
    scenario's accelerator and LoRA targets. Looked up when the file is read, so that a
    miss names the file and the field as every other key's does, a plan scenario's GPUs
    among them (they surfaced when planning, as a bare 'unknown model', 'unknown
    accelerator', 'unknown LoRA target'). The flag form, with no file, keeps the bare
    message: the flag it names is the user's own."""
    from infraplan.catalog import accelerator
    from infraplan.models import load_model  # the catalog's models: loaded on first use
    from infraplan.physics.memory.states import lora_targets

    lookups = [("model:", lambda: load_model(spec.model, base_dir=path.parent))]
    if isinstance(spec, MemoryScenario):
        lookups += [("hardware.gpu", lambda: accelerator(spec.hardware.gpu)),
                    ("finetune.lora_targets", lambda: lora_targets(spec.finetune.lora_targets))]
    for field, lookup in lookups:
        try:
            lookup()
        except InputError as exc:
            raise InputError(f"{path.name}: {field} {exc.message}", fix=exc.fix) from None


DROP = object()  # an override that removes the file's key (see fit_check.memory_overrides)


def apply_overrides(raw: dict, overrides: dict[str, Any]) -> dict:
    """`raw` with each dotted path set to its value; None leaves the path as it is."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in raw.items()}
    for dotted, value in overrides.items():
        if value is None:
            continue
        node = out
        *parents, leaf = dotted.split(".")
        for part in parents:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        if value is DROP:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    return out


def _hardware_has(raw: dict, key: str) -> bool:
    return isinstance(raw.get("hardware"), dict) and key in raw["hardware"]


# hardware fields of one kind only: a memory scenario's one GPU and its count, a plan's
# list of GPUs and the counts to search
MEMORY_HARDWARE = ("gpu", "num_gpus")
PLAN_HARDWARE = ("gpus", "counts", "min_count", "max_count", "count_step")


def _hardware_is(raw: dict, kind: tuple[str, ...], other: tuple[str, ...]) -> bool:
    """The hardware has fields of `kind` only: with fields of both (a misspelt `gpu:
    [h100]` beside `counts:`), it is a typo for validation to name, not another kind."""
    return any(_hardware_has(raw, k) for k in kind) and \
        not any(_hardware_has(raw, k) for k in other) and \
        not (kind is MEMORY_HARDWARE and isinstance(raw["hardware"].get("gpu"), list))


# A scenario of one kind handed to another command: (expected model, what marks the other
# kind, what the file is, the commands that take it).
KIND_MIXUPS = (
    ("TrainScenario", lambda raw: "traffic" in raw, "a serving scenario (it has traffic:)",
     "infraplan plan serve / simulate serve"),
    ("ServeScenario", lambda raw: "training" in raw,
     "a training or memory scenario (it has training:)",
     "infraplan plan train / simulate train / memory"),
    ("MemoryScenario", lambda raw: "traffic" in raw, "a serving scenario (it has traffic:)",
     "infraplan plan serve / simulate serve"),
    ("MemoryScenario", lambda raw: _hardware_is(raw, PLAN_HARDWARE, MEMORY_HARDWARE),
     "a plan scenario (its hardware lists gpus: to compare)",
     "infraplan plan train / simulate train"),
    ("TrainScenario", lambda raw: _hardware_is(raw, MEMORY_HARDWARE, PLAN_HARDWARE),
     "a memory scenario (its hardware names one gpu:)", "infraplan memory"),
)


def parse_spec(raw: dict, model: type[BaseModel], origin: str) -> BaseModel:
    for expected, marked, what, commands in KIND_MIXUPS:
        if model.__name__ == expected and marked(raw):
            raise InputError(f"{origin}: {what}, not what this command reads",
                             fix=f"run it with {commands}")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise InputError(f"{origin}: {describe_errors(exc, model)}") from None
    except InputError as exc:  # a SpecModel's own message (serving scenarios): name the file
        raise InputError(f"{origin}: {exc.message}", fix=exc.fix) from None
