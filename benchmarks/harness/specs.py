"""Command-line specs of runs and overrides: `lze`, `grpo`, `lze:selection_ratio=0.2`, `prune_solved=true`, and the
peers' own settings (`softmax:temperature=0.3`, passed to the selector in `selector_kwargs` of a [`PeerConfig`]).

Importing this module registers the peers ([`benchmarks.peers`]), so that their names are run specs like the
package's selectors.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
from typing import Any

from transformers import HfArgumentParser
from transformers.hf_argparser import string_to_bool

from lze_examples.demo import MeteredLZEGRPOTrainer, MethodSpec
from lze_trl.grpo.config import LZEGRPOConfig
from lze_trl.method.selectors import SELECTORS

from .. import peers
from ..peers import reinforce_rej
from ..peers.config import PeerConfig


ALIASES: dict[str, dict[str, Any]] = {
    "grpo": {"selector": "none"},
    "lze+prune": {"selector": "lze", "prune_solved": True},
    reinforce_rej.NAME: reinforce_rej.SETTINGS,
}
"""Run specs that name settings rather than a selector: `reinforce_rej` is Reinforce-Rej built on the package's
settings ([`~benchmarks.peers.reinforce_rej.SETTINGS`]: forward pruning on both sides after one dead group with no
exploration, and DAPO's filter of the live groups)."""


@functools.cache
def _parser(config_class: type) -> HfArgumentParser:
    # transformers' parser of the dataclass, the one `lze-trl grpo` (TRL's `TrlParser`) parses its flags with.
    return HfArgumentParser(config_class, exit_on_error=False)


def parse_value(key: str, text: str, config_class: type = LZEGRPOConfig) -> Any:
    """
    Parses the value of a `key=text` override of a dataclass field (an [`LZEGRPOConfig`] field by default) the way
    `lze-trl grpo --key text` parses it: with transformers' `HfArgumentParser` over the dataclass, so by the field's
    type (`bool` fields take `true`/`false`/`1`/`0`/`yes`/`no`, fields with choices are checked against them).

    Args:
        key (`str`):
            The field's name; a `ValueError` names the fix when it is not a field.
        text (`str`):
            Its value: a scalar (`0.2`, `true`, `lze`), `null` for a field that defaults to `None`, for list fields
            items joined by `+` or `,` (`uncertainty+momentum`) or a JSON list (`["anchor"]`), a JSON object for a
            dict.
        config_class (`type`, *optional*, defaults to [`LZEGRPOConfig`]):
            The dataclass the field belongs to (e.g. [`DemoConfig`] or [`WarmStartConfig`]).

    Returns:
        `Any`: the typed value. A value the field's type rejects raises a `ValueError` naming the key.
    """
    parser = _parser(config_class)
    action = parser._option_string_actions.get(f"--{key}")
    if action is None or action.dest != key:
        if config_class is LZEGRPOConfig:
            raise ValueError(f"{key!r} is not an LZEGRPOConfig field: see `LZEGRPOConfig` (TRL's GRPOConfig + LZE).")
        raise ValueError(f"{key!r} is not a {config_class.__name__} field.")
    text = text.strip()
    if text.lower() in ("null", "none") and action.default is None:
        return None
    value = None
    if text.startswith(("[", "{")):  # a JSON list or object
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            pass
        if isinstance(value, dict) or (isinstance(value, list) and action.nargs not in ("+", "*")):
            return value
    if action.nargs in ("+", "*"):
        # `energy_terms=uncertainty+momentum` (or with commas in `--set`): a list without JSON's quotes.
        items = [str(v) for v in value] if isinstance(value, list) else re.split(r"[+,]", text)
        argv = [f"--{key}", *[item.strip() for item in items if item.strip()]]
    else:
        argv = [f"--{key}={text}"]
    try:
        namespace, _ = parser.parse_known_args(argv)
    except argparse.ArgumentError as error:
        if action.type is string_to_bool:
            raise ValueError(f"{key}={text!r}: use true or false.") from None
        raise ValueError(f"{key}={text!r}: {error.message}") from None
    return getattr(namespace, key)


def parse_overrides(items: list[str] | None) -> dict[str, Any]:
    """`["selection_ratio=0.2", "prune_solved=true"]` -> `{"selection_ratio": 0.2, "prune_solved": True}`."""
    overrides: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"Override {item!r} must look like key=value, e.g. selection_ratio=0.2.")
        key, text = item.split("=", 1)
        overrides[key.strip()] = parse_value(key.strip(), text)
    return overrides


class PeerTrainer(MeteredLZEGRPOTrainer):
    """The demo's metered trainer that first does what a peer selector needs before training
    ([`benchmarks.peers.prepare`]: the prefilter judges every prompt with the initial policy)."""

    def train(self, *args: Any, **kwargs: Any) -> Any:
        peers.prepare(self)
        return super().train(*args, **kwargs)


def peer_setting(selector: str, key: str) -> str | None:
    """
    The `selector_kwargs` key of a peer's setting written `key` in a run spec (its own name, e.g. `temperature`, or
    prefixed with the peer's, `softmax_temperature`, as the config fields it had in the package were), else `None`.
    """
    peer = peers.PEERS.get(selector)
    if peer is None:
        return None
    for name in (key, key.removeprefix(f"{selector}_")):
        if name in peer.defaults:
            return name
    return None


def parse_peer_value(selector: str, key: str, text: str) -> Any:
    """A peer setting's value, typed by its default: `true`/`false` for a flag, a number, `null` or a string."""
    default = peers.PEERS[selector].defaults[key]
    text = text.strip()
    try:
        if isinstance(default, bool):
            return string_to_bool(text)
        if isinstance(default, (int, float)):
            return type(default)(text)
    except (ValueError, argparse.ArgumentTypeError):
        raise ValueError(f"{selector}:{key}={text!r}: expected a {type(default).__name__}.") from None
    return None if text.lower() in ("null", "none") else text


def parse_method(spec: str) -> MethodSpec:
    """
    A run from its command-line spec: a registered selector's name (`lze`, `none`, `uniform`, ..., the peers
    `prefilter` and `softmax`), an alias (`grpo` for `none`, `lze+prune` for LZE with forward pruning,
    `reinforce_rej` for Reinforce-Rej's settings: [`ALIASES`]), optionally followed by `:key=value,key=value`
    overrides of this run only (e.g. `lze:selection_ratio=0.2`, `lze:energy_terms=uncertainty+momentum`). A peer's
    own settings go to `selector_kwargs` (`softmax:temperature=0.3,allocate_rollouts=true`,
    `prefilter:mode=remove_all_wrong`), every other key is an [`LZEGRPOConfig`] field. The spec is the run's label; a
    peer that prepares before training (the prefilter) trains with [`PeerTrainer`].
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
    settings: dict[str, Any] = {}
    items = []
    for item in rest.split(",") if rest else []:
        key, sep, text = item.partition("=")
        setting = peer_setting(name, key.strip()) if sep else None
        if setting is None:
            items.append(item)
        else:
            settings[setting] = parse_peer_value(name, setting, text)
    overrides.update(parse_overrides(items))
    if settings:
        overrides["selector_kwargs"] = {**(overrides.get("selector_kwargs") or {}), **settings}
    trainer_cls = PeerTrainer if peers.needs_preparation(overrides["selector"]) else None
    return MethodSpec(spec, overrides, trainer_cls, PeerConfig if settings else None)
