"""First contact, measured (BENCHMARKS.md section 6): the README's path for a new user, run from a fresh clone in a
fresh virtual environment, each step timed and its terminal output kept.

    python benchmarks/first_contact/walkthrough.py                 # runs it, writes benchmarks/results/first_contact/
    python benchmarks/first_contact/walkthrough.py --check         # only rebuilds walkthrough.md from walkthrough.json

In order, as the README says them, each command read from the README (never a copy of it): in the clone's root, the
install lines (the CPU torch first, as the README says for a package index that serves PyTorch's CPU build, then
`pip install -e .`, then the install block's SmolLM2 line, with pip's cache off); then, in a fresh folder outside the
clone, as a user who installed and went elsewhere (the fresh environment's `bin` first on `PATH`, `HF_HUB_OFFLINE=1`):
`lze-trl env`, the quick start's Python block, the "Your own data and reward" Python block (SmolLM2 from the installed
package), the CPU recipe (`lze-trl grpo --config recipes/cpu/carries.yaml`), its evaluation (the README's `lze-trl
eval` line and its Python block), `lze-trl demo` and the SmolLM2 section's two commands (its recipe and its
evaluation); then, in the clone's root again (the developer's path), `make test` and `notebooks/quickstart.ipynb` run
by papermill (from the project's `.venv` that `make test` built). `LZE_TRL_CACHE` is a fresh folder, so SmolLM2 is
converted once, in the first step that loads it, as on a new machine.

Writes each step's whole output (`logs/<step>.log`, progress bars cut to their last state), `walkthrough.json` (per
step: command, folder, seconds, the 1-minute load average at its start and end, exit code, FutureWarnings and the
numbers the README quotes, read from the output; once: the CPU count, the torch threads lze-trl runs on as `lze-trl
env` prints them, and the load average before the clone) and `walkthrough.md`, the table made from it.
`tests/benchmarks/test_first_contact.py` checks the README's numbers against `walkthrough.json` and the table against
it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate


ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "first_contact"
README = ROOT / "README.md"
VERSION = 2
"""`walkthrough.json`'s format: 2 from the steps outside the clone and the machine state on (1, unmarked, before)."""
CLONE, OUTSIDE = "clone", "outside"
"""Where a step runs: the clone's root, or a fresh folder outside the clone."""
OUTSIDE_ENV = {"HF_HUB_OFFLINE": "1"}
"""Set for the steps outside the clone: the README's user steps run offline (nothing of them may need the Hub)."""
NUMBERS = {  # what the README quotes of each step's output
    "env": {
        "torch_threads": r"torch threads lze-trl runs on: (\d+)",
        "cpus": r"CPUs \(os\.cpu_count\(\)\): (\d+)",
    },
    "quick_start": {
        "accuracy_before": r"greedy accuracy before: ([\d.]+)",
        "accuracy_after": r"greedy accuracy after: ([\d.]+)",
    },
    "cpu_recipe": {"train_runtime": r"'train_runtime': '([\d.]+)'"},
    "eval_python": {"accuracy": r"greedy accuracy: ([\d.]+)"},
    "demo": {"demo_seconds": r"; total (\d+)s on"},
    "smollm2_recipe": {"train_runtime": r"'train_runtime': '([\d.]+)'"},
    "make_test": {"passed": r"(\d+) passed", "skipped": r"(\d+) skipped"},
    "notebook": {"cells_executed": r"Executing: 100%\|[^|]*\| (\d+)/\d+"},
}
THREADS_LINE = r"torch threads lze-trl runs on: (.+)"
"""`lze-trl env`'s line of the threads lze-trl runs torch on, and why."""


def readme_block(after: str, language: str = "python", readme: Path = README) -> str:
    """The first fenced `language` block of the README (`readme`) after the line `after`."""
    text = readme.read_text()
    return re.search(rf"```{language}\n(.*?)```", text[text.index(after) :], re.S).group(1)


def readme_command(after: str, prefix: str, readme: Path = README) -> str:
    """
    The first command of the README (`readme`) after the text `after` that starts with `prefix`: a line of a fenced
    block, its comment cut off, or an inline code span, its line breaks made spaces.

    Raises:
        `ValueError`: when the README has no such command after `after` (or no `after` at all).
    """
    text = readme.read_text()
    for block, span in re.findall(r"```[^\n]*\n(.*?)```|`([^`]+)`", text[text.index(after) :], re.S):
        commands = [re.sub(r"\s+#.*", "", line) for line in block.splitlines()] if block else [" ".join(span.split())]
        for command in commands:
            if command.startswith(prefix):
                return command
    raise ValueError(f"The README has no command starting with {prefix!r} after {after!r}.")


def steps(venv: Path, readme: Path = README) -> list[tuple[str, str, str]]:
    """
    `(name, shell command, folder)` of each step, in order, the folder [`CLONE`] or [`OUTSIDE`]; the commands are the
    README's (read from it: a README that lost one raises here), run with the fresh environment's `bin` first on
    `PATH`. The Python blocks run as files that [`run`] writes from the README into the outside folder. The walkthrough
    reads the clone's README (`readme`): the commit it measures.
    """
    smollm2_recipe, smollm2_eval = readme_block("### A real chat model on a CPU", "bash", readme).strip().splitlines()
    cpu = "On a CPU, offline: `lze-trl grpo"
    return [
        ("venv", f"{sys.executable} -m venv {venv}", CLONE),
        ("install_torch", readme_command("## Install", "pip install torch==", readme), CLONE),
        ("install", readme_command("## Install", "pip install -e .", readme), CLONE),
        ("install_smollm2", readme_command("## Install", "pip install gguf", readme), CLONE),
        ("env", readme_command("**Threads.**", "lze-trl env", readme), OUTSIDE),
        ("quick_start", "python quickstart.py", OUTSIDE),
        ("own_data", "python own_data.py", OUTSIDE),
        ("cpu_recipe", readme_command(cpu, "lze-trl grpo --config", readme), OUTSIDE),
        ("eval_cli", readme_command(cpu, "lze-trl eval --config", readme), OUTSIDE),
        ("eval_python", "python eval_cpu_carries.py", OUTSIDE),
        ("demo", readme_command("## Command line and recipes", "lze-trl demo", readme), OUTSIDE),
        ("smollm2_recipe", smollm2_recipe, OUTSIDE),
        ("smollm2_eval", smollm2_eval, OUTSIDE),
        ("make_test", "make test", CLONE),
        (
            "notebook",
            "mkdir -p outputs && .venv/bin/papermill notebooks/quickstart.ipynb outputs/quickstart.out.ipynb",
            CLONE,
        ),
    ]


def python_blocks(readme: Path = README) -> dict[str, str]:
    """The README's Python blocks that steps run, by file name (written into the outside folder)."""
    return {
        "quickstart.py": readme_block("## Quick start\n\nThe swap", readme=readme),
        "own_data.py": readme_block("## Your own data and reward", readme=readme),
        "eval_cpu_carries.py": readme_block("On a CPU, offline: `lze-trl grpo", readme=readme),
    }


def last_states(output: str) -> str:
    """The output as a terminal shows it at the end: of each line rewritten with carriage returns, its last state."""
    return "\n".join(line.rsplit("\r", 1)[-1] for line in output.replace("\r\n", "\n").split("\n"))


def eval_scores(output: str) -> dict[str, float]:
    """
    Each model's score in the Markdown table that `lze-trl eval` prints (`| model | benchmark... | Avg |`), by
    `"accuracy <model>"`: the row's last cell, its average over the benchmarks.
    """
    return {
        f"accuracy {label}": float(avg) for label, avg in re.findall(r"(?m)^\| (.+?) +\|.*\| ([\d.]+) +\|$", output)
    }


def load() -> float:
    """The 1-minute load average, rounded to hundredths."""
    return round(os.getloadavg()[0], 2)


def run(clone: Path, venv: Path, outside: Path, logs: Path) -> list[dict]:
    """Runs the [`steps`] and returns their records, stopping at the first that fails."""
    for name, text in python_blocks(clone / "README.md").items():
        (outside / name).write_text(text)
    env = dict(os.environ, PATH=f"{venv / 'bin'}:{os.environ['PATH']}", PIP_NO_CACHE_DIR="1")
    env["LZE_TRL_CACHE"] = str(outside.parent / "lze_trl_cache")  # a fresh machine's: SmolLM2 converted once, here
    env.pop("VIRTUAL_ENV", None)
    folders = {CLONE: (clone, env), OUTSIDE: (outside, dict(env, **OUTSIDE_ENV))}
    commands = steps(venv, clone / "README.md")
    if not (clone / "benchmarks" / "results" / "first_contact" / "walkthrough.json").exists():
        # The first run: the test of these results cannot run before they exist (every later run's `make test` checks
        # the results committed before it). The command says so.
        make_test = "PYTEST_ADDOPTS=--ignore=tests/benchmarks/test_first_contact.py make test"
        commands = [(n, make_test if n == "make_test" else c, f) for n, c, f in commands]
    records = []
    for name, command, folder in commands:
        print(f"[{datetime.datetime.now(datetime.timezone.utc):%H:%M:%S}] {name} ({folder}): {command}", flush=True)
        cwd, step_env = folders[folder]
        load_start, start = load(), time.perf_counter()
        # bytes, not text: text mode would turn each progress bar's carriage returns into newlines; bash, as the
        # README's blocks are (the SmolLM2 evaluation's `$(python -m lze_examples.smollm2)`)
        done = subprocess.run(command, shell=True, executable="/bin/bash", cwd=cwd, env=step_env, capture_output=True)
        seconds, load_end = time.perf_counter() - start, load()
        output = last_states((done.stdout + done.stderr).decode(errors="replace"))
        (logs / f"{name}.log").write_text(output)
        numbers = {  # the last match: pytest's summary line, the recipe's final log
            key: float(found[-1])
            for key, pattern in NUMBERS.get(name, {}).items()
            if (found := re.findall(pattern, output))
        }
        if command.startswith("lze-trl eval"):
            numbers.update(eval_scores(output))
        records.append(
            {
                "step": name,
                "command": command.replace(str(venv), "$VENV"),
                "folder": folder,
                "seconds": round(seconds, 1),
                "load_start": load_start,
                "load_end": load_end,
                "exit_code": done.returncode,
                "future_warnings": output.count("FutureWarning"),
                "numbers": numbers,
            }
        )
        print(
            f"    {seconds:.1f}s, load {load_start} -> {load_end}, exit code {done.returncode}, {numbers}", flush=True
        )
        if done.returncode != 0:
            break
    return records


def table(walk: dict) -> str:
    """`walkthrough.md`: the table of the steps, made from `walkthrough.json` (either format)."""
    header = f"# First contact from a clone (BENCHMARKS.md section 6), {walk['date']}, commit {walk['commit']}\n\n"
    numbers = [", ".join(f"{k} {v:g}" for k, v in r["numbers"].items()) for r in walk["steps"]]
    if walk.get("version", 1) < 2:
        rows = [
            [r["step"], f"`{r['command']}`", f"{r['seconds']:.1f}", r["exit_code"], r["future_warnings"], n]
            for r, n in zip(walk["steps"], numbers)
        ]
        headers = ["step", "command", "seconds", "exit code", "FutureWarnings", "numbers read from the output"]
        machine = f"{walk['machine']}; each step's whole output is in `logs/<step>.log`.\n\n"
    else:
        rows = [
            [r["step"], r["folder"], f"`{r['command']}`", f"{r['seconds']:.1f}",
             f"{r['load_start']:.2f} → {r['load_end']:.2f}", r["exit_code"], r["future_warnings"], n]
            for r, n in zip(walk["steps"], numbers)
        ]  # fmt: skip
        headers = ["step", "folder", "command", "seconds", "load average", "exit code", "FutureWarnings",
                   "numbers read from the output"]  # fmt: skip
        outside = " ".join(f"`{k}={v}`" for k, v in walk["outside_env"].items())
        machine = (
            f"{walk['machine']}; torch threads lze-trl runs on: {walk['torch_threads']}; 1-minute load average "
            f"{walk['load_before']:.2f} before the clone, and at each step's start and end below. Steps in "
            f"`{OUTSIDE}` ran in a fresh folder outside the clone with {outside}, the others in the clone's root; "
            "every step with the fresh environment's `bin` first on `PATH` and a fresh `LZE_TRL_CACHE`. Each step's "
            "whole output is in `logs/<step>.log`.\n\n"
        )
    return header + machine + tabulate(rows, headers, tablefmt="github", disable_numparse=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="rebuild walkthrough.md only, and fail if it differs")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.check:
        walk = json.loads((args.results / "walkthrough.json").read_text())
        return int(table(walk) != (args.results / "walkthrough.md").read_text())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    load_before = load()
    logs = args.results / "logs"
    with tempfile.TemporaryDirectory() as tmp:
        clone, venv, outside = Path(tmp) / "lze-trl", Path(tmp) / "venv", Path(tmp) / "elsewhere"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        outside.mkdir()
        shutil.rmtree(logs, ignore_errors=True)
        logs.mkdir(parents=True)
        records = run(clone, venv, outside, logs)
    threads = re.search(THREADS_LINE, (logs / "env.log").read_text()) if (logs / "env.log").is_file() else None
    walk = {
        "version": VERSION,
        "date": f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        "commit": commit.stdout.strip(),
        "machine": f"{os.cpu_count()} CPU cores, Python {sys.version.split()[0]}, no GPU",
        "cpu_count": os.cpu_count(),
        "torch_threads": threads.group(1).strip() if threads else "not read (`lze-trl env` did not run)",
        "load_before": load_before,
        "outside_env": OUTSIDE_ENV,
        "steps": records,
    }
    (args.results / "walkthrough.json").write_text(json.dumps(walk, indent=2, ensure_ascii=False) + "\n")
    (args.results / "walkthrough.md").write_text(table(walk))
    return int(any(r["exit_code"] for r in records))


if __name__ == "__main__":
    sys.exit(main())
