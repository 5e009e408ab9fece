"""Subcommands of the `lze-trl` console script; each module exposes `main(argv) -> int`."""

from __future__ import annotations

import argparse
import os
import re
from typing import Any


def option(name: str) -> list[str]:
    """
    The option strings of a multi-word flag: every `lze-trl` command takes `--output_dir` and `--output-dir` (TRL's
    parsers, behind `lze-trl grpo` and `lze-trl eval`, take both), the underscore spelling first: TRL's, the one the
    documentation uses.

    Args:
        name (`str`):
            The flag's name without dashes, in either spelling, e.g. `"output_dir"`.

    Returns:
        `list[str]`: `["--output_dir", "--output-dir"]` (one string for a one-word flag).
    """
    underscore, dash = "--" + name.replace("-", "_"), "--" + name.replace("_", "-")
    return [underscore] if underscore == dash else [underscore, dash]


class UsageError(ValueError):
    """A setting or the data does not fit: a command's `main` prints the message and exits with status 2."""


def recipe_path(value: Any, folder: str) -> Any:
    """
    A path of a recipe, read relative to the recipe's own folder when it is relative, does not exist from the working
    directory and exists in `folder`; otherwise `value` as it is (a Hub id, a path that exists from the working
    directory, a missing path). Lists are resolved item by item.

    Args:
        value (`Any`):
            The recipe's value: a path, a Hub id, a list of them, or anything else (returned as it is).
        folder (`str`):
            The folder of the recipe file.

    Returns:
        `Any`: The path to read.
    """
    if isinstance(value, list):
        return [recipe_path(item, folder) for item in value]
    if isinstance(value, str) and value and not os.path.isabs(value) and not os.path.exists(value):
        candidate = os.path.normpath(os.path.join(folder, value))
        if os.path.exists(candidate):
            return candidate
    return value


def parse_args(parser: Any, argv: list[str], path_keys: tuple[str, ...] = ()) -> tuple:
    """
    Parses `argv` with TRL's `parser.parse_args_and_config` (a `TrlParser`: a `--config` YAML, flags winning), as
    `trl <command>` does, with two differences: the keys `path_keys` of the YAML, when they are relative paths found
    from the YAML's folder but not from the working directory, are read from the YAML's folder (see [`recipe_path`]);
    and a bad value ends in one [`UsageError`] naming the YAML file, the key, the value and what is expected,
    instead of argparse's usage text or a traceback (the config classes' own `ValueError`s, which name the setting
    and the fix, are kept, with the YAML file named when the setting comes from it).

    Args:
        parser (`trl.TrlParser`):
            The command's parser.
        argv (`list[str]`):
            The command line, without the command's name.
        path_keys (`tuple[str, ...]`, *optional*, defaults to `()`):
            Keys whose values are input paths (e.g. `model_name_or_path`, `dataset_name`).

    Returns:
        `tuple`: The parsed dataclasses, as `parse_args_and_config` returns them.
    """
    import yaml

    config, config_path = {}, None
    if "--config" in argv[:-1]:
        config_path = argv[argv.index("--config") + 1]
        try:
            with open(config_path) as file:
                config = yaml.safe_load(file)
        except (OSError, yaml.YAMLError) as error:
            raise UsageError(f"--config {config_path}: cannot read it as YAML ({error}).") from error
    flags = {token.split("=", 1)[0] for token in argv if token.startswith("-")}
    given = {action.dest for action in parser._actions if flags & set(action.option_strings)}
    from_config = (config.keys() - given) if isinstance(config, dict) else set()

    parser.exit_on_error = False  # a bad value raises `argparse.ArgumentError` instead of printing the usage text
    try:
        parsed = parser.parse_args_and_config(argv)
    except argparse.ArgumentError as error:
        action = next((a for a in parser._actions if "/".join(a.option_strings) == error.argument_name), None)
        if action is None or action.dest not in from_config:
            raise UsageError(f"{error} (`--help` lists the options).") from error
        key, value = action.dest, config[action.dest]
        raise UsageError(
            f"{config_path}: `{key}: {value}` is invalid: expected {_expected(action)}. {key}: {action.help}"
        ) from error
    except ValueError as error:
        named = re.match(r"(\w+)=", str(error))
        if named and named.group(1) in from_config:
            raise UsageError(f"{config_path}: {error}") from error
        raise UsageError(f"{error}" + (f" (settings: {config_path} and the flags)" if config_path else "")) from error

    folder = os.path.dirname(config_path) if config_path else ""
    for key in set(path_keys) & from_config:
        for dataclass in parsed:
            if getattr(dataclass, key, None) == config[key]:
                setattr(dataclass, key, recipe_path(config[key], folder))
    return parsed


def _expected(action: argparse.Action) -> str:
    """What `action` takes, in words: its choices or its type (a list of them for a flag taking several values)."""
    if action.choices:
        return f"one of {list(action.choices)}"
    name = getattr(action.type, "__name__", "")
    kind = {"int": "an integer", "float": "a number", "string_to_bool": "true or false"}.get(name, f"a {name} value")
    return f"a list of values, each {kind}" if action.nargs in ("+", "*") else kind
