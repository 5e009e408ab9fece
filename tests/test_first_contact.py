"""First contact from a clone (BENCHMARKS.md section 14): the committed walkthrough ran every step the README gives a
new user, none printed a FutureWarning, its table rebuilds from its raw results, and the README quotes what it
measured."""

import json
import shutil
from pathlib import Path

from benchmarks.first_contact.walkthrough import RESULTS, main, steps


ROOT = Path(__file__).resolve().parents[1]
WALK = json.loads((RESULTS / "walkthrough.json").read_text())
STEPS = {record["step"]: record for record in WALK["steps"]}


def test_the_table_rebuilds_from_the_raw_results():
    assert main(["--check"]) == 0


def test_a_number_that_differs_is_caught(tmp_path):
    shutil.copytree(RESULTS, tmp_path / "first_contact")
    walk = json.loads((tmp_path / "first_contact" / "walkthrough.json").read_text())
    walk["steps"][-1]["seconds"] += 1
    (tmp_path / "first_contact" / "walkthrough.json").write_text(json.dumps(walk))
    assert main(["--check", "--results", str(tmp_path / "first_contact")]) == 1


def test_every_step_ran_and_none_printed_a_future_warning():
    assert list(STEPS) == [name for name, _ in steps(Path("venv"))]
    assert all(record["exit_code"] == 0 for record in STEPS.values())
    assert all(record["future_warnings"] == 0 for record in STEPS.values())
    for name in STEPS:  # the whole output of each step is committed beside the table
        assert (RESULTS / "logs" / f"{name}.log").is_file()


def readme_quotes() -> list[str]:
    """What the README says of the walkthrough's steps, made from `walkthrough.json`."""
    seconds = {name: record["seconds"] for name, record in STEPS.items()}
    numbers = {name: record["numbers"] for name, record in STEPS.items()}
    notebook = round(seconds["notebook"])
    after, before = numbers["eval_python"]["accuracy"], numbers["quick_start"]["accuracy_before"]
    return [
        f"`pip install torch==2.13.0` {round(seconds['install_torch'])} s, `pip install -e .` "
        f"{round(seconds['install'])} s",
        f"the quick start {round(seconds['quick_start'])} s, the CPU recipe and its evaluation below "
        f"{round(seconds['cpu_recipe'])} s and {round(seconds['eval_cli'])} s, `lze-trl demo` "
        f"{round(seconds['demo'])} s",
        f"({round(seconds['cpu_recipe'])} s for its 20 steps on 2 cores, {numbers['cpu_recipe']['train_runtime']:.1f} "
        "s of it training",
        f"# {after:.2f} after the recipe, {before:.2f} before",
        f"(about {round(seconds['demo'] / 60)} minutes on 2 CPU cores",
        f"{notebook // 60} min {notebook % 60} s on 2 cores" if notebook >= 60 else f"{notebook} s on 2 cores",
        f"`make test` {round(seconds['make_test'] / 60)} minutes ({numbers['make_test']['passed']:.0f} passed",
    ]


def test_the_readme_quotes_what_the_walkthrough_measured():
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert [quote for quote in readme_quotes() if quote not in readme] == []


def test_the_cpu_recipe_quotes_what_the_walkthrough_measured():
    # the recipe's header gives its time: the walkthrough's measurement, not another one
    seconds = round(STEPS["cpu_recipe"]["seconds"])
    header = (ROOT / "recipes" / "cpu" / "carries.yaml").read_text().split("\n\n")[0]
    assert f"({seconds} s for its 20 steps on 2 cores, BENCHMARKS.md section 6)" in " ".join(header.split())
