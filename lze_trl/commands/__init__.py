"""Subcommands of the `lze-trl` console script; each module exposes `main(argv) -> int`."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import glob
import os
import re
from collections.abc import Iterable
from pathlib import Path
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
    if isinstance(value, str) and value and not os.path.isabs(value) and not _exists(value):
        candidate = os.path.normpath(os.path.join(folder, value))
        if _exists(candidate):
            return candidate
    return value


def _exists(path: str) -> bool:
    """Whether `path` exists, or (a glob such as `data/*.jsonl`) matches a file."""
    return os.path.exists(path) or bool(glob.glob(path))


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """
    The hint naming the candidate nearest to a mistyped `word` (difflib's `get_close_matches`).

    Args:
        word (`str`):
            What was written.
        candidates (`Iterable[str]`):
            The valid names.

    Returns:
        `str`: the hint to append to a message, " (did you mean ...?)" with the nearest candidate in backquotes, or an
        empty string when no candidate is close.
    """
    close = difflib.get_close_matches(word, sorted(candidates), n=1)
    return f" (did you mean `{close[0]}`?)" if close else ""


def looks_local(value: str) -> bool:
    """
    Whether `value` reads as a local path rather than a Hub id (`owner/name`, `owner/name@revision?split=...`) or a
    URL: an absolute path, a path starting with `.`, a path with more than one `/`, or a name ending in a data file's
    extension (`.jsonl`, `.parquet`, ...; [`~lze_trl.data.sources.FILE_EXTENSIONS`]).
    """
    from lze_trl.data.sources import FILE_EXTENSIONS

    if "://" in value:
        return False
    path = re.split(r"[?@]", value)[0]
    return os.path.isabs(path) or path.startswith(".") or path.count("/") > 1 or path.lower().endswith(FILE_EXTENSIONS)


def check_path(key: str, value: Any, recipe: str | None = None) -> None:
    """
    Raises a [`UsageError`] when `value` (or an item of it, for a list) looks like a local path ([`looks_local`]) that
    does not exist, naming the key, the places looked in (the working directory, and the recipe's folder for a value
    of the recipe), the nearest file there and the fix, instead of the loader's traceback (a Hub error, for a
    dataset).

    Args:
        key (`str`):
            The setting, e.g. `"dataset_name"`.
        value (`Any`):
            Its value, as [`recipe_path`] resolved it; anything else than a string (or a list of them) passes.
        recipe (`str`, *optional*):
            The `--config` file `value` comes from; `None` for a flag.
    """
    if isinstance(value, list):
        for item in value:
            check_path(key, item, recipe)
        return
    if not isinstance(value, str) or not looks_local(value) or _exists(value):
        return
    looked = {os.path.abspath(value): "" if os.path.isabs(value) else " (from the working directory)"}
    if recipe is not None and not os.path.isabs(value):
        looked.setdefault(os.path.abspath(os.path.join(os.path.dirname(recipe), value)), " (next to the recipe)")
    folders = {os.path.dirname(path) for path in looked if os.path.isdir(os.path.dirname(path))}
    nearby = {os.path.join(os.path.dirname(value), name) for folder in folders for name in os.listdir(folder)}
    where = ", ".join(path + place for path, place in looked.items())
    origin = "the working directory" + (" or the recipe's folder" if recipe is not None else "")
    raise UsageError(
        (f"{recipe}: " if recipe is not None else "")
        + f"{key}={value!r} is invalid: no such file or folder: looked for {where}{did_you_mean(value, nearby)}; "
        f"set {key} to an existing path (relative to {origin}) or to a Hub id."
    )


def repository() -> Path | None:
    """
    The repository's root, the folder holding `recipes/` next to the package (an install from a clone, editable),
    where a `--config` path not found from the working directory is looked for; `None` for a package installed
    without its repository.
    """
    root = Path(__file__).resolve().parents[2]
    return root if (root / "recipes").is_dir() else None


def find_config(path: str) -> str:
    """
    The `--config` file to read: `path` from the working directory, else, for a relative path, from the
    [`repository`]'s root or its `recipes/`, so that `--config recipes/cpu/carries.yaml` runs from any folder.

    Raises:
        [`UsageError`]: when the file is found nowhere; the message names the places looked in and the nearest recipe.
    """
    if os.path.exists(path):
        return path
    root = repository()
    folders = [root, root / "recipes"] if root is not None and not os.path.isabs(path) else []
    looked = [os.path.abspath(path)] + [str(folder / path) for folder in folders]
    found = next((candidate for candidate in looked[1:] if os.path.isfile(candidate)), None)
    if found is not None:
        return found
    recipes = [p.relative_to(root).as_posix() for p in (root / "recipes").rglob("*.yaml")] if folders else []
    raise UsageError(
        f"--config {path}: no such file: looked for {', '.join(looked)}{did_you_mean(path, recipes)}; give the "
        "path of a YAML recipe, from the working directory or from the repository's root (`recipes/...`)."
    )


def check_keys(parser: Any, config: dict, config_path: str) -> None:
    """
    Raises a [`UsageError`] naming the keys of a `--config` YAML that are no field of the parser's dataclasses (a
    misspelled key), each with the nearest valid name, instead of TRL's "Unknown arguments from config file".

    Args:
        parser (`trl.TrlParser`):
            The command's parser.
        config (`dict`):
            The YAML's settings.
        config_path (`str`):
            The YAML file.
    """
    valid = {field.name for dtype in parser.dataclass_types for field in dataclasses.fields(dtype) if field.init}
    unknown = [str(key) for key in config if key not in valid and key != "env"]  # `env:`: TrlParser's own key
    if unknown:
        named = ", ".join(f"`{key}`{did_you_mean(key, valid)}" for key in unknown)
        raise UsageError(
            f"{config_path}: unknown key{'s' if len(unknown) > 1 else ''} {named}: rename or remove "
            f"{'them' if len(unknown) > 1 else 'it'} (`{parser.prog} --help` lists the valid keys)."
        )


def parse_args(parser: Any, argv: list[str], path_keys: tuple[str, ...] = ()) -> tuple:
    """
    Parses `argv` with TRL's `parser.parse_args_and_config` (a `TrlParser`: a `--config` YAML, flags winning), as
    `trl <command>` does, with these differences: a `--config` path not found from the working directory is read
    from the repository (see [`find_config`]); the keys `path_keys` of the YAML, when they are relative paths found
    from the YAML's folder but not from the working directory, are read from the YAML's folder (see [`recipe_path`]);
    and a mistake ends in one [`UsageError`] naming the YAML file, the key and the fix, instead of argparse's usage
    text or a traceback: a bad value (with what is expected; the config classes' own `ValueError`s, which name the
    setting and the fix, are kept, with the YAML file named when the setting comes from it), a misspelled key (see
    [`check_keys`]), a local path of `path_keys` found nowhere (see [`check_path`]).

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
        argv = list(argv)
        index = argv.index("--config") + 1
        config_path = argv[index] = find_config(argv[index])
        try:
            with open(config_path) as file:
                config = yaml.safe_load(file)
        except (OSError, yaml.YAMLError) as error:
            raise UsageError(f"--config {config_path}: cannot read it as YAML ({error}).") from error
        if isinstance(config, dict):
            check_keys(parser, config, config_path)
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

    for key in path_keys:
        for dataclass in (d for d in parsed if hasattr(d, key)):
            recipe = config_path if key in from_config and getattr(dataclass, key) == config[key] else None
            if recipe is not None:
                setattr(dataclass, key, recipe_path(config[key], os.path.dirname(recipe)))
            check_path(key, getattr(dataclass, key), recipe)
    return parsed


def _expected(action: argparse.Action) -> str:
    """What `action` takes, in words: its choices or its type (a list of them for a flag taking several values)."""
    if action.choices:
        return f"one of {list(action.choices)}"
    name = getattr(action.type, "__name__", "")
    kind = {"int": "an integer", "float": "a number", "string_to_bool": "true or false"}.get(name, f"a {name} value")
    return f"a list of values, each {kind}" if action.nargs in ("+", "*") else kind
