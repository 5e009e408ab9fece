"""`lze-trl` console script: `lze-trl <command> [options]`, one module per command in `lze_trl.commands`."""

from __future__ import annotations

import importlib
import sys
import textwrap


COMMANDS = {
    "demo": "Train plain GRPO and LZE (and its variants) on the embedded CPU task and compare them.",
    "grpo": "Train with LZEGRPOTrainer from a YAML recipe or flags, like `trl grpo`.",
    "eval": "Pass@1 / avg@k of a model, checkpoint or LoRA adapter on {benchmarks}.",
    "env": "Print the environment (versions, accelerators, CPU threads) to paste into a bug report, like `trl env`.",
    "advise": "Read a run's trainer_state.json (stock GRPOTrainer, shadow or LZE) and say what LZE would save there.",
}


def usage() -> str:
    """The text of `lze-trl --help`: the commands, `eval`'s with the benchmarks it accepts (from the registries)."""
    from lze_trl.evaluation.arguments import BENCHMARKS_HELP

    lines = ["usage: lze-trl <command> [options]", "", "commands:"]
    for name, text in COMMANDS.items():
        lines += textwrap.wrap(
            text.format(benchmarks=BENCHMARKS_HELP),
            width=119,
            initial_indent=f"  {name:<7} ",
            subsequent_indent=" " * 10,
        )
    lines += ["", "`lze-trl <command> --help` lists a command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"lze-trl: unknown command {command!r}\n\n{usage()}", file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(f"lze_trl.commands.{command}")
    except ModuleNotFoundError as error:
        if error.name == f"lze_trl.commands.{command}":
            print(f"lze-trl: the {command!r} command is not available in this version.", file=sys.stderr)
            return 2
        raise
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
