"""Command-line specs of runs and overrides: `lze`, `grpo`, `lze:selection_ratio=0.2`, `prune_solved=true`."""

from __future__ import annotations

import json
import re
from dataclasses import MISSING, fields
from typing import Any

from ..config import LZEGRPOConfig
from ..selectors import SELECTORS
from .config import MethodSpec


ALIASES: dict[str, dict[str, Any]] = {
    "grpo": {"selector": "none"},
    "lze+prune": {"selector": "lze", "prune_solved": True},
    # Rollout-side selection: the rollout stage picks the learning zone, the update keeps every alive group of it.
    "lze+rollout": {"selector": "lze", "rollout_filter": "lze", "selection_ratio": 1.0},
    # GRESO-like baseline: skip probability from consecutive dead observations only, dead groups filtered (DAPO).
    "greso": {"selector": "dapo", "rollout_filter": "greso"},
}


def _field_defaults() -> dict[str, Any]:
    defaults = {}
    for f in fields(LZEGRPOConfig):
        if f.default is not MISSING:
            defaults[f.name] = f.default
        elif f.default_factory is not MISSING:
            defaults[f.name] = f.default_factory()
    return defaults


def parse_value(key: str, text: str) -> Any:
    """
    Parses the value of an [`LZEGRPOConfig`] override `key=text` to the type of the field's default.

    Args:
        key (`str`):
            The field's name; a `ValueError` names the fix when it is not a field.
        text (`str`):
            Its value: JSON (`0.2`, `true`, `["anchor"]`), for list fields items joined by `+` or `,`
            (`uncertainty+momentum`), or, for string fields, plain text.
    """
    defaults = _field_defaults()
    if key not in {f.name for f in fields(LZEGRPOConfig)}:
        raise ValueError(f"{key!r} is not an LZEGRPOConfig field: see `LZEGRPOConfig` (TRL's GRPOConfig + LZE).")
    default = defaults.get(key)
    if isinstance(default, list) and not text.strip().startswith("["):
        # `energy_terms=uncertainty+momentum` (or with commas in `--set`): a list without JSON's quotes.
        return [item.strip() for item in re.split(r"[+,]", text) if item.strip()]
    lowered = text.strip().lower()
    if isinstance(default, bool) or lowered in ("true", "false"):
        if lowered not in ("true", "false", "1", "0"):
            raise ValueError(f"{key}={text!r}: use true or false.")
        return lowered in ("true", "1")
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text
    if isinstance(default, float) and isinstance(value, int):
        return float(value)
    if isinstance(default, str) and not isinstance(value, str):
        return text
    return value


def parse_overrides(items: list[str] | None) -> dict[str, Any]:
    """`["selection_ratio=0.2", "prune_solved=true"]` -> `{"selection_ratio": 0.2, "prune_solved": True}`."""
    overrides: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"Override {item!r} must look like key=value, e.g. selection_ratio=0.2.")
        key, text = item.split("=", 1)
        overrides[key.strip()] = parse_value(key.strip(), text)
    return overrides


def parse_method(spec: str) -> MethodSpec:
    """
    A run from its command-line spec: a registered selector's name (`lze`, `none`, `uniform`, ...), an alias (`grpo`
    for `none`, `lze+prune` for LZE with forward pruning), optionally followed by `:key=value,key=value` overrides
    of this run only (e.g. `lze:selection_ratio=0.2`, `lze:energy_terms=uncertainty+momentum`). The spec is the run's
    label.
    """
    name, _, rest = spec.partition(":")
    if name in ALIASES:
        overrides = dict(ALIASES[name])
    elif name in SELECTORS:
        overrides = {"selector": name}
    else:
        raise ValueError(
            f"Unknown selector {name!r}: use one of {sorted(SELECTORS)} or an alias {sorted(ALIASES)}, optionally "
            "followed by :key=value,... overrides."
        )
    if rest:
        overrides.update(parse_overrides(rest.split(",")))
    return MethodSpec(spec, overrides)
