"""First contact, measured (BENCHMARKS.md section 6): the README's path for a new user, run from a fresh clone in a
fresh virtual environment, each step timed and its terminal output kept.

    python benchmarks/first_contact/walkthrough.py                 # runs it, writes benchmarks/results/first_contact/
    python benchmarks/first_contact/walkthrough.py --check         # only rebuilds walkthrough.md from walkthrough.json

In order, as the README says them: the install lines (the CPU torch first, as the README says for a package index
that serves PyTorch's CPU build, then `pip install -e .`, with pip's cache off), the quick start's Python block as
written, the CPU recipe (`lze-trl grpo --config recipes/cpu/carries.yaml`), its evaluation (the README's `lze-trl
eval` line and its Python block), `lze-trl demo`, `make test`, then `notebooks/quickstart.ipynb` run by papermill
(from the project's `.venv` that `make test` built). Writes each step's whole output (`logs/<step>.log`, progress
bars cut to their last state), `walkthrough.json` (command, seconds, exit code, FutureWarnings and the numbers the
README quotes, read from the output) and `walkthrough.md`, the table made from it. `tests/test_first_contact.py`
checks the README's numbers against `walkthrough.json` and the table against it.
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
NUMBERS = {  # what the README quotes of each step's output
    "quick_start": {
        "accuracy_before": r"greedy accuracy before: ([\d.]+)",
        "accuracy_after": r"greedy accuracy after: ([\d.]+)",
    },
    "cpu_recipe": {"train_runtime": r"'train_runtime': '([\d.]+)'"},
    "eval_python": {"accuracy": r"greedy accuracy: ([\d.]+)"},
    "demo": {"demo_seconds": r"; total (\d+)s on"},
    "make_test": {"passed": r"(\d+) passed", "skipped": r"(\d+) skipped"},
    "notebook": {"cells_executed": r"Executing: 100%\|[^|]*\| (\d+)/\d+"},
}


def readme_block(after: str, language: str = "python") -> str:
    """The first fenced `language` block of the README after the line `after`."""
    text = README.read_text()
    return re.search(rf"```{language}\n(.*?)```", text[text.index(after) :], re.S).group(1)


def steps(venv: Path) -> list[tuple[str, str]]:
    """`(name, shell command)` of each step, run in the clone's root with the fresh environment's `bin` first."""
    python = venv / "bin" / "python"
    return [
        ("venv", f"{sys.executable} -m venv {venv}"),
        ("install_torch", "pip install torch==2.13.0"),
        ("install", "pip install -e ."),
        ("quick_start", f"{python} quickstart.py"),
        ("cpu_recipe", "lze-trl grpo --config recipes/cpu/carries.yaml"),
        ("eval_cli", "lze-trl eval --config recipes/eval/cpu-carries.yaml --model outputs/cpu-carries"),
        ("eval_python", f"{python} eval_cpu_carries.py"),
        ("demo", "lze-trl demo"),
        ("make_test", "make test"),
        ("notebook", ".venv/bin/papermill notebooks/quickstart.ipynb outputs/quickstart.out.ipynb"),
    ]


def last_states(output: str) -> str:
    """The output as a terminal shows it at the end: of each line rewritten with carriage returns, its last state."""
    return "\n".join(line.rsplit("\r", 1)[-1] for line in output.replace("\r\n", "\n").split("\n"))


def run(clone: Path, venv: Path, logs: Path) -> list[dict]:
    (clone / "quickstart.py").write_text(readme_block("## Quick start\n\nThe swap"))
    (clone / "eval_cpu_carries.py").write_text(readme_block("On a CPU, offline (from any folder"))
    env = dict(os.environ, PATH=f"{venv / 'bin'}:{os.environ['PATH']}", PIP_NO_CACHE_DIR="1")
    env.pop("VIRTUAL_ENV", None)
    commands = dict(steps(venv))
    if not (clone / "benchmarks" / "results" / "first_contact" / "walkthrough.json").exists():
        # The first run: the test of these results cannot run before they exist (every later run's `make test` checks
        # the results committed before it). The command says so.
        commands["make_test"] = "PYTEST_ADDOPTS=--ignore=tests/test_first_contact.py make test"
    records = []
    for name, command in commands.items():
        print(f"[{datetime.datetime.now(datetime.timezone.utc):%H:%M:%S}] {name}: {command}", flush=True)
        start = time.perf_counter()
        # bytes, not text: text mode would turn each progress bar's carriage returns into newlines
        done = subprocess.run(command, shell=True, cwd=clone, env=env, capture_output=True)
        seconds = time.perf_counter() - start
        output = last_states((done.stdout + done.stderr).decode(errors="replace"))
        (logs / f"{name}.log").write_text(output)
        numbers = {  # the last match: pytest's summary line, the recipe's final log
            key: float(found[-1])
            for key, pattern in NUMBERS.get(name, {}).items()
            if (found := re.findall(pattern, output))
        }
        records.append(
            {
                "step": name,
                "command": command.replace(str(venv), "$VENV"),
                "seconds": round(seconds, 1),
                "exit_code": done.returncode,
                "future_warnings": output.count("FutureWarning"),
                "numbers": numbers,
            }
        )
        print(f"    {seconds:.1f}s, exit code {done.returncode}, {numbers}", flush=True)
        if done.returncode != 0:
            break
    return records


def table(walk: dict) -> str:
    """`walkthrough.md`: the table of the steps, made from `walkthrough.json`."""
    rows = [
        [r["step"], f"`{r['command']}`", f"{r['seconds']:.1f}", r["exit_code"], r["future_warnings"],
         ", ".join(f"{k} {v:g}" for k, v in r["numbers"].items())]
        for r in walk["steps"]
    ]  # fmt: skip
    headers = ["step", "command", "seconds", "exit code", "FutureWarnings", "numbers read from the output"]
    return (
        f"# First contact from a clone (BENCHMARKS.md section 6), {walk['date']}, commit {walk['commit']}\n\n"
        f"{walk['machine']}; each step's whole output is in `logs/<step>.log`.\n\n"
        + tabulate(rows, headers, tablefmt="github", disable_numparse=True)
        + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="rebuild walkthrough.md only, and fail if it differs")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.check:
        walk = json.loads((args.results / "walkthrough.json").read_text())
        return int(table(walk) != (args.results / "walkthrough.md").read_text())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    with tempfile.TemporaryDirectory() as tmp:
        clone, venv = Path(tmp) / "lze-trl", Path(tmp) / "venv"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        shutil.rmtree(args.results / "logs", ignore_errors=True)
        (args.results / "logs").mkdir(parents=True)
        records = run(clone, venv, args.results / "logs")
    walk = {
        "date": f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        "commit": commit.stdout.strip(),
        "machine": f"{os.cpu_count()} CPU cores, Python {sys.version.split()[0]}, no GPU",
        "steps": records,
    }
    (args.results / "walkthrough.json").write_text(json.dumps(walk, indent=2) + "\n")
    (args.results / "walkthrough.md").write_text(table(walk))
    return int(any(r["exit_code"] for r in records))


if __name__ == "__main__":
    sys.exit(main())
