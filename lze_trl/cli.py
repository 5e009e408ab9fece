"""`lze-trl` console script: `lze-trl <command> [options]`, one module per command in `lze_trl.commands`, and the
commands other installed packages add through the `lze_trl.commands` entry-point group (the examples' `demo` and
`eval`, `pip install -e examples`)."""

from __future__ import annotations

import importlib
import sys
import textwrap
from importlib.metadata import entry_points


COMMANDS = {
    "grpo": "Train with LZEGRPOTrainer from a YAML recipe or flags, like `trl grpo`.",
    "env": "Print the environment (versions, accelerators, CPU threads) to paste into a bug report, like `trl env`.",
    "advise": "Read a run's trainer_state.json (stock GRPOTrainer, shadow or LZE) and say what LZE would save there.",
}
"""The library's own commands (modules of `lze_trl.commands`) and their lines in `lze-trl --help`."""

EXAMPLE_COMMANDS = ("demo", "eval")
"""The commands that come with the examples, named in the error when they are not installed."""


def added_commands() -> dict[str, str]:
    """The commands installed packages add (entry points of the `lze_trl.commands` group): name to module."""
    return {entry.name: entry.value for entry in entry_points(group="lze_trl.commands") if entry.name not in COMMANDS}


def usage() -> str:
    """The text of `lze-trl --help`: the commands, the added ones with their module's `SUMMARY`."""
    summaries = dict(COMMANDS)
    for name, module in added_commands().items():
        summaries[name] = importlib.import_module(module).SUMMARY
    lines = ["usage: lze-trl <command> [options]", "", "commands:"]
    for name, text in summaries.items():
        lines += textwrap.wrap(text, width=119, initial_indent=f"  {name:<7} ", subsequent_indent=" " * 10)
    missing = [name for name in EXAMPLE_COMMANDS if name not in summaries]
    if missing:
        lines += ["", f"{' and '.join(missing)} come with lze-trl's examples: `pip install -e examples` in a clone."]
    lines += ["", "`lze-trl <command> --help` lists a command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    command, rest = argv[0], argv[1:]
    added = added_commands()
    if command in COMMANDS:
        module = importlib.import_module(f"lze_trl.commands.{command}")
    elif command in added:
        module = importlib.import_module(added[command])
    elif command in EXAMPLE_COMMANDS:
        print(
            f"lze-trl: {command!r} comes with lze-trl's examples, which are not installed: "
            "`pip install -e examples` in a clone of lze-trl.",
            file=sys.stderr,
        )
        return 2
    else:
        print(f"lze-trl: unknown command {command!r}\n\n{usage()}", file=sys.stderr)
        return 2
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
