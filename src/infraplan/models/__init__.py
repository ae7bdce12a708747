"""Architecture math from an HF-style config: parameters, FLOPs per token, KV bytes per token.

`load_model("llama-3.1-70b")` reads a shipped architecture; `load_model("path/config.json")`
(or a folder holding one) reads any config on disk of a supported family.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from infraplan.errors import InputError, UnknownNameError
from infraplan.files import on_disk, read_user_file, too_big_to_read
from infraplan.models.arch import AttentionSpec, MlpSpec, ModelArch, MoeSpec
from infraplan.models.families import FAMILIES, arch_from_config
from infraplan.models.flops import (forward_flops_per_sequence, forward_flops_per_token, gemms,
                                    matmul_flops_per_token, training_flops_per_sequence)
from infraplan.models.kv_cache import kv_cache_bytes, kv_cache_bytes_per_token
from infraplan.models.params import ParamCounts, param_counts, uncounted_notes

__all__ = [
    "AttentionSpec", "MlpSpec", "ModelArch", "MoeSpec", "ParamCounts", "FAMILIES",
    "load_model", "read_config", "param_counts", "gemms", "matmul_flops_per_token",
    "forward_flops_per_sequence", "forward_flops_per_token", "training_flops_per_sequence",
    "kv_cache_bytes", "kv_cache_bytes_per_token", "uncounted_notes",
]


class _RepeatedKey(Exception):
    """A key given twice in one JSON object (not a ValueError: those mean too big to read)."""


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    seen = set()
    for key, _ in pairs:
        if key in seen:
            raise _RepeatedKey(key)
        seen.add(key)
    return dict(pairs)


def read_config(path: Path) -> dict:
    """Parse a config.json; a folder means the config.json inside it."""
    if path.is_dir():
        path = path / "config.json"
    text = read_user_file(path, "model file",
                          fix="give a catalog model name or the path of a config.json")
    # a byte-order mark (Windows editors save one) is not part of the JSON: utf-8-sig
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise InputError(f"{path.name} is empty", fix="save the model's config.json into it "
                         "(a JSON object with its model_type, hidden_size, ...), or give a "
                         "catalog model name")
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except _RepeatedKey as exc:
        raise InputError(f"{path.name}: the key {exc.args[0]!r} is given twice in one object",
                         fix="keep one of the two (JSON readers keep the last silently)") \
            from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path.name}: not valid JSON at line {exc.lineno} column "
                         f"{exc.colno} ({exc.msg})") from None
    except (RecursionError, ValueError) as exc:
        raise too_big_to_read(path.name, exc, fix="give the model's real config.json") \
            from None


@lru_cache(maxsize=256)
def _load_path(path: str) -> ModelArch:
    p = Path(path)
    # a folder or its config.json is named after the folder, any other file after itself
    stem = p.name if p.is_dir() else p.parent.name if p.name == "config.json" else p.stem
    return arch_from_config(read_config(p), name=stem, origin=p.name)


@lru_cache(maxsize=256)
def _load_catalog_model(name: str) -> ModelArch:
    from infraplan.catalog import MODELS_DIR, load_catalog

    entry = load_catalog().models.get(name)
    raw = read_config(MODELS_DIR / entry.config_file)
    return arch_from_config(raw, name=entry.name, origin=entry.config_file)


def load_model(name_or_path: str, *, base_dir: Path | None = None) -> ModelArch:
    """A catalog name ('llama-3.1-70b', 'mixtral-8x7b') or a config.json path.

    `base_dir` resolves relative paths (validation CSVs name configs relative to
    themselves). A name that is neither gets "did you mean" against the catalog.
    """
    text = str(name_or_path).strip()
    if not text:
        raise InputError("model: empty name", fix="give a catalog model or a config.json path")
    candidates = [Path(text)] + ([base_dir / text] if base_dir is not None else [])
    for candidate in candidates:
        if on_disk(candidate):  # else a catalog name, with its "did you mean"
            return _load_path(str(candidate.resolve()))
    if text.endswith(".json") or "/" in text and not _in_catalog(text):
        beside = None if Path(text).is_absolute() or base_dir is None else base_dir.resolve()
        looked = "" if beside is None or beside == Path.cwd() else \
            f" (looked for it in the current folder and in {str(beside)!r}, beside the " \
            "file that names it)"
        raise InputError(f"model file {text!r} does not exist{looked}",
                         fix="check the path, or give a catalog model name "
                             "('infraplan catalog models')")
    try:
        return _load_catalog_model(text)
    except UnknownNameError as exc:
        raise UnknownNameError("model", text, exc.choices,
                               fix="give a catalog model ('infraplan catalog models') or "
                                   "the path of a config.json",
                               canonical=exc.canonical) from None


def _in_catalog(name: str) -> bool:
    from infraplan.catalog import load_catalog

    return name in load_catalog().models
