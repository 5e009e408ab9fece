"""Probe: does GRPO move a candidate OOD split of the `carries` task? (BENCHMARKS.md, section 1, "How the split was
found".)

Each candidate is a region of two-digit sums, held out of RL: the training and in-domain test prompts (levels 0-3)
are drawn as the task draws them and redrawn while they fall in the region; the OOD split is 400 draws (with
replacement) of the region's prompts at the candidate's levels. The demo's configuration (shipped warm start, 2048
prompts, 64 x 8 per step, lr 1e-4) then trains the given runs for `steps` steps, evaluating every 20, and the script
prints each run's in-domain and OOD accuracy curves.

    python benchmarks/probe_ood_split.py a80 0 120 outputs/probe_a80_s0 grpo

Candidates:
- `u10`: the units digits sum to exactly 10 (levels 1-2);
- `l2u10`: two carries whose units digits sum to exactly 10 (level 2);
- `l2t17`: two carries whose tens digits sum to 17 or 18 (level 2);
- `a80`: both operands at least 80 (level 2): the split the task adopted
  (`lze_examples.tasks.carries.OOD_MIN_OPERAND`), whose committed OOD split is the region's 180 prompts once each
  rather than 400 draws.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from benchmarks.harness.specs import parse_method  # noqa: E402
from benchmarks.harness.train import run_train_bench  # noqa: E402
from lze_examples.demo import DemoConfig  # noqa: E402
from lze_examples.tasks import carries  # noqa: E402


REGIONS = {
    "u10": (lambda a, b: a % 10 + b % 10 == 10, (1, 2)),
    "l2u10": (lambda a, b: a % 10 + b % 10 == 10 and a // 10 + b // 10 >= 9, (2,)),
    "l2t17": (lambda a, b: a % 10 + b % 10 >= 10 and a // 10 + b // 10 >= 17, (2,)),
    "a80": (lambda a, b: a >= 80 and b >= 80, (2,)),
}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("region", choices=sorted(REGIONS), help="the candidate OOD region")
    parser.add_argument("seed", type=int)
    parser.add_argument("steps", type=int)
    parser.add_argument("output_dir")
    parser.add_argument("methods", nargs="+", help="run specs, e.g. grpo lze")
    cli = parser.parse_args(argv)
    region, seed, steps, output_dir, methods = cli.region, cli.seed, cli.steps, cli.output_dir, cli.methods
    inside, ood_levels = REGIONS[region]

    def in_region(prompt: str) -> bool:
        a, b = map(int, prompt[:-1].split("+"))
        return len(str(a)) == 2 and inside(a, b)

    def draw(want: bool):
        def problem(rng, level):
            while True:
                p = carries.make_problem(rng, level)
                if in_region(p["prompt"]) == want:
                    return p

        return problem

    def make_splits(n_train, n_test, n_ood, seed=0):
        from datasets import Dataset

        def split(n, name, levels, draw_fn):
            partition = None if name == "ood" else name
            problems = carries._generate(n, seed, levels, stream=name, partition=partition, draw=draw_fn)
            return Dataset.from_dict({k: [p[k] for p in problems] for k in ("prompt", "answer", "difficulty")})

        return {
            "train": split(n_train, "train", carries.TRAIN_LEVELS, draw(False)),
            "test": split(n_test, "test", carries.TRAIN_LEVELS, draw(False)),
            "ood": split(n_ood, "ood", ood_levels, draw(True)),
        }

    carries.make_splits = make_splits
    config = DemoConfig(
        progress=False, steps=int(steps), eval_steps=20, n_ood=400, methods=[parse_method(m) for m in methods]
    )
    run_train_bench(config, [int(seed)], output_dir)
    result = json.loads((Path(output_dir) / f"seed_{seed}" / "demo_results.json").read_text())
    start = result["start"]
    print(f"{region}: start in-domain {start['test_accuracy']:.3f}, OOD {start['ood_accuracy']:.3f}")
    for name, method in result["methods"].items():
        for key in ("test_accuracy", "ood_accuracy"):
            print(f"  {name} {key}: {[round(row[key], 3) for row in method['curve']]}")


if __name__ == "__main__":
    main(sys.argv[1:])
