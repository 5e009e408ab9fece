"""The pruning study's mechanism at power on the addition task (issue #71): the SmolLM2 study's arms and tests
(`benchmarks/smollm2_pruning/`) in the dead-mass regime of BENCHMARKS.md sections 1-3, where seeds are cheap.

    python benchmarks/addition_pruning/run.py jobs [--seeds N]   # runs not yet in results: `ARM SEED`
    python benchmarks/addition_pruning/run.py train ARM SEED     # one run, its evaluations included
    python benchmarks/addition_pruning/report.py                 # report.md from the raw results

The protocol is `benchmarks/results/addition_pruning/protocol.md`, committed before the runs; its settings are
`PROTOCOL` and `ARMS` here, the pruning the SmolLM2 study's `PRUNING`. Every run starts from the shipped `carries`
warm start, trains on the dead-mass regime's 2,048 prompts (levels 0, 0, 1, 2, 6, 6) and is evaluated (greedy, the
600 test prompts of levels 1 and 2, the 180 OOD prompts) every `eval_steps` steps. An arm at B trains `equal_steps`
steps, one at B' until it has generated as many rollouts, `rollout_budget`. Each run writes
`runs/<arm>/seed_<k>.json.gz` atomically when it has finished; finished runs are skipped, so the queue resumes.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any


ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "addition_pruning"
if str(ROOT) not in sys.path:  # run as a script
    sys.path.insert(0, str(ROOT))

from benchmarks.smollm2_pruning.run import PRUNING  # noqa: E402


PROTOCOL: dict[str, Any] = {
    "regime": "dead",
    "prompts_per_step": 64,  # B: sections 1-3's
    "small_prompts_per_step": 40,  # B' = 5/8 of B, about B x (1 - GRPO's dead share 0.407 over 150 steps)
    "num_generations": 8,
    "equal_steps": 150,
    "rollout_budget": 76_800,  # R: GRPO's rollouts in 150 steps at B (150 x 64 x 8); 240 steps at B'
    "eval_steps": 30,
}
ARMS: dict[str, dict[str, Any]] = {
    "grpo": {"selector": "none"},
    "grpo_small": {"selector": "none", "prompts_per_step": 40},
    "grpo_prune_small": {"selector": "none", "prompts_per_step": 40, **PRUNING},
    "grpo_prune": {"selector": "none", **PRUNING},
}
"""GRPO at B; GRPO at B' (the control: as many prompts, chosen at random by the epoch order); GRPO with the pruning at
B' (about GRPO's live groups for B'/B of its rollouts); GRPO with the pruning at B (refilled)."""
SELECTION_LOG = ("step", "batch", "prompt_key", "pass_rate", "live")
"""The selection log's columns a record keeps: every generated group, with its prompt key."""


def steps(arm: str, arms: dict[str, dict[str, Any]] = ARMS) -> int:
    """The arm's optimizer steps: `equal_steps` at B, as many as reach `rollout_budget` at B'."""
    prompts = arms[arm].get("prompts_per_step", PROTOCOL["prompts_per_step"])
    return max(PROTOCOL["equal_steps"], -(-PROTOCOL["rollout_budget"] // (prompts * PROTOCOL["num_generations"])))


def config(arm: str, seed: int, arms: dict[str, dict[str, Any]] = ARMS, **overrides: Any):
    """The arm's [`DemoConfig`] (`arms`: the study's arms): the regime's, the protocol's batch, the arm's settings as
    its one method."""
    from benchmarks.adaptive.regimes import demo_config
    from lze_examples.demo import MethodSpec

    settings = dict(arms[arm])
    prompts = settings.pop("prompts_per_step", PROTOCOL["prompts_per_step"])
    values: dict[str, Any] = dict(
        seed=seed,
        steps=steps(arm, arms),
        prompts_per_step=prompts,
        num_generations=PROTOCOL["num_generations"],
        eval_steps=PROTOCOL["eval_steps"],
        methods=[MethodSpec(arm, settings)],
        baseline=arm,
    )
    values.update(overrides)
    return demo_config(PROTOCOL["regime"], **values)


def evaluations(curve: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The run's evaluations, each marked with the protocol's points it stands for: `"budget"` (the first whose
    generated rollouts reach R) and `"equal_steps"` (after step `equal_steps`)."""
    out, budget_seen = [], False
    for record in curve:
        points = []
        if not budget_seen and record["rollouts"] >= PROTOCOL["rollout_budget"]:
            points.append("budget")
            budget_seen = True
        if record["step"] == PROTOCOL["equal_steps"]:
            points.append("equal_steps")
        out.append({**record, "points": points})
    return out


def train(arm: str, seed: int, arms: dict[str, dict[str, Any]] = ARMS, **overrides: Any) -> dict[str, Any]:
    """One run of `arm` of `arms` (`overrides`: [`DemoConfig`] fields, for smoke runs); its record."""
    from lze_examples.demo import run_method
    from lze_examples.demo.comparison import to_jsonable
    from lze_examples.demo.training import prepare

    cfg = config(arm, seed, arms, **overrides)
    model, tokenizer, splits, _ = prepare(cfg)
    with tempfile.TemporaryDirectory() as out:
        run = run_method(cfg, cfg.methods[0], model, tokenizer, splits, out)
    log = run["selection_log"]
    return to_jsonable({
        "arm": arm,
        "seed": seed,
        "settings": arms[arm],
        "protocol": PROTOCOL,
        "evaluations": evaluations(run["curve"]),
        "steps": run["steps"],
        "totals": run["totals"],
        "warnings": run["warnings"],
        "selection_log": {c: log[c].tolist() for c in SELECTION_LOG},
    })  # fmt: skip


def path(results: Path, arm: str, seed: int) -> Path:
    return results / "runs" / arm / f"seed_{seed}.json.gz"


def write(target: Path, record: dict[str, Any]) -> None:
    """Writes `record` as gzipped JSON to `target` atomically (a run is in results only once it has finished)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    with gzip.open(tmp, "wt") as f:
        json.dump(record, f)
    os.replace(tmp, target)
    print(f"wrote {target}")


def jobs(seeds: int, arms: list[str], results: Path, first_seed: int = 0) -> list[tuple[str, int]]:
    """The runs of `arms`, `seeds` seeds from `first_seed`, seed by seed, not yet in `results`."""
    chosen = range(first_seed, first_seed + seeds)
    return [(arm, s) for s in chosen for arm in arms if not path(results, arm, s).exists()]


def main(
    argv: list[str] | None = None,
    arms: dict[str, dict[str, Any]] = ARMS,
    results: Path = RESULTS,
    seeds: int = 8,
    description: str = __doc__.split("\n\n")[0],
    first_seed: int = 0,
) -> int:
    """The command line of a study of this harness: its `arms`, its `results` folder, its protocol's `seeds` (from
    `first_seed`)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("what", choices=["jobs", "train"])
    parser.add_argument("arm", nargs="?", choices=list(arms))
    parser.add_argument("seed", nargs="?", type=int)
    parser.add_argument("--seeds", type=int, default=seeds, help="jobs: N seeds from --first_seed")
    parser.add_argument("--first_seed", type=int, default=first_seed, help="jobs: the first seed")
    parser.add_argument("--arms", default=",".join(arms), help="jobs: the arms, comma-separated")
    parser.add_argument("--results", type=Path, default=results)
    args = parser.parse_args(argv)
    if args.what == "jobs":
        for arm, seed in jobs(args.seeds, args.arms.split(","), args.results, args.first_seed):
            print(arm, seed)
        return 0
    if args.arm is None or args.seed is None:
        parser.error("train needs an ARM and a SEED")
    target = path(args.results, args.arm, args.seed)
    if not target.exists():
        write(target, train(args.arm, args.seed, arms))
    return 0


if __name__ == "__main__":
    sys.exit(main())
