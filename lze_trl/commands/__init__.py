"""Subcommands of the `lze-trl` console script; each module exposes `main(argv) -> int`."""


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
