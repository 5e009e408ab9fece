"""The SmolLM2 revisit study (BENCHMARKS.md section 13): GRPO, the dead-group filter, LZE and its random control
training SmolLM2-135M-Instruct on a pool of 32 word problems that every arm revisits, at equal modelled time.

    python benchmarks/smollm2_revisits/run.py start          # the completion length, and the starting model
    python benchmarks/smollm2_revisits/run.py speed ARM      # seconds a step with its tokens, alone on the machine
    python benchmarks/smollm2_revisits/run.py fit            # the time model from the speed runs (time_model.json)
    python benchmarks/smollm2_revisits/run.py jobs [--seeds N] [--secondary]  # runs not yet in results
    python benchmarks/smollm2_revisits/run.py train ARM SEED # one run, to the time budget, its evaluations included
    python benchmarks/smollm2_revisits/report.py             # report.md from the raw results

The protocol is `benchmarks/results/smollm2_revisits/protocol.md`, committed before the runs; its settings are
`PROTOCOL`, `ARMS` and `SECONDARY` here. A run's clock is modelled, not read: each step's seconds are predicted from
the work it did (generation calls, rollouts generated, tokens the update processed) by `time_model.json`, fitted on
`speed` runs made alone on the idle machine, so that two runs sharing the machine do not bias the time axis. A run
trains at a constant learning rate (every evaluation is that of a valid shorter run) until its clock reaches the
budget `T` and it has made `equal_steps` steps; it is evaluated when its clock first reaches `T / 2` and `T`, and at
step `equal_steps`. Each run writes `runs/<arm>/seed_<k>.json` atomically when it has finished; finished runs are
skipped, so the queue resumes across sessions. One torch thread a run (the package's policy on 2 cores). The runs
can go from a git worktree of a fixed commit (`--results` pointing at this checkout's results), so that the code
they run does not change under them.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np


ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "smollm2_revisits"
if str(ROOT) not in sys.path:  # run as a script
    sys.path.insert(0, str(ROOT))

from benchmarks.smollm2_study import run as study  # noqa: E402  (the first study's model, evaluation and trainer)


PROTOCOL: dict[str, Any] = {
    "train_prompts": 32,  # make_dataset(32, seed=0): levels 0-4, 6-7 prompts each, all distinct
    "test_per_level": 80,  # the first study's 400 held-out questions (levels 0-4)
    "prompts_per_step": 8,  # 4 steps an epoch: a prompt is rolled out once every 4 steps
    "num_generations": 8,
    "length_candidates": [32, 48, 64],  # `start` picks `max_completion_length` among them (LENGTH_RULE)
    "length_cut_max": 0.2,
    "long_completion_length": 96,  # the test graded again with this room (brevity against arithmetic)
    "temperature": 0.7,
    "learning_rate": 1e-5,
    "lr_scheduler_type": "constant",
    "grpo_steps_at_budget": 16,  # T = 16 GRPO steps of modelled time: GRPO rolls each prompt out 4 times
    "equal_steps": 16,  # the secondary axis: test accuracy after 16 steps
    "step_cap": 120,  # a run that has not reached T by then stops (said in its record)
    "pool_samples": 8,  # the pool's pass rates at the start and at T: 8 samples at the temperature
    "speed_steps": 4,  # steps of a `speed` run; the first (one-time costs) is left out of the fit
}
LENGTH_RULE = (
    "max_completion_length is the smallest of length_candidates at which at most length_cut_max of the starting "
    "model's completions on the training pool (pool_samples each, at the temperature) have not ended; the largest "
    "candidate if none"
)
ARMS: dict[str, dict[str, Any]] = {
    "grpo": {"selector": "none"},
    "filter": {"selector": "lze", "selection_ratio": 1.0},
    "lze": {"selector": "lze", "selection_ratio": 0.4},
    "uniform_live": {"selector": "uniform_live", "selection_ratio": 0.4},
}
"""The primary arms: TRL's GRPO; the dead-group filter (every live group, `selection_ratio=1.0`); LZE at its default
quota; LZE's quota drawn at random among the live groups (the control of the ranking)."""
SECONDARY: dict[str, dict[str, Any]] = {
    "lze_uncertainty": {"selector": "lze", "selection_ratio": 0.4, "energy_terms": ["uncertainty"]},
    "grpo_4x8": {"selector": "none", "prompts_per_step": 4},
}
"""The secondary arms: LZE ranked by the outcome uncertainty alone (no history: the ablation of the anchor and the
momentum); GRPO with 4 prompts a step at full groups. The protocol's third, the probe in serial rounds (`probe`), left
the library with BENCHMARKS.md section 15's verdict: its runs and speed run are committed (its settings in their
records) and ran from this script at commit 11e6ad3."""
RUNS = {**ARMS, **SECONDARY}
SPEED_ARMS = ["grpo", "lze", "filter", "grpo_4x8", "probe"]
"""The arms whose `speed` runs the time model is fitted on: every shape of step the study makes (one or two
generation calls, 32 or 64 rollouts, 24 to 64 update rows). The probe's (the only one with two generation calls a
step) is committed: `fit` reads it, `speed` runs it no more."""
FEATURES = ["generation_calls", "rollouts", "update_processed_tokens"]
"""What a step's modelled seconds are linear in (with an intercept): TRL's generation calls, the rollouts they
generated, and the prompt and completion tokens of the rows the update processed."""


def protocol(results: Path = RESULTS) -> dict[str, Any]:
    """`PROTOCOL` with the completion length `start` chose (`results/start.json`), as the runs use it."""
    start = json.loads((results / "start.json").read_text())
    return {**PROTOCOL, "max_completion_length": start["max_completion_length"]}


def operands(question: str, level: int) -> tuple[int, ...]:
    """A question's operands as the sum it asks: ordered for a subtraction, unordered otherwise."""
    numbers = tuple(int(n) for n in re.findall(r"\d+", question))
    return numbers if level in (1, 4) else tuple(sorted(numbers))


def splits() -> dict[str, Any]:
    """The training pool, the test set (the first study's) and which test questions ask no training prompt's sum."""
    from lze_examples.tasks.word_problems import TRAIN_LEVELS, make_dataset

    train = make_dataset(PROTOCOL["train_prompts"], seed=0, split="train")
    test = study._distinct("test", list(TRAIN_LEVELS), PROTOCOL["test_per_level"])
    trained = {(lv, operands(p[0]["content"], lv)) for p, lv in zip(train["prompt"], train["difficulty"])}
    unseen = [(lv, operands(p[0]["content"], lv)) not in trained for p, lv in zip(test["prompt"], test["difficulty"])]
    return {"train": train, "test": test, "unseen": unseen}


def evaluate(model, tokenizer, data: dict[str, Any], length: int, final: bool) -> dict[str, Any]:
    """Test accuracy at `length` tokens; with `final`, the test at the long length and the pool's pass rates too."""
    out = {"test": study.evaluate(model, tokenizer, data["test"], max_new_tokens=length)}
    if final:
        out["test_long"] = study.evaluate(
            model, tokenizer, data["test"], max_new_tokens=PROTOCOL["long_completion_length"]
        )
        out["pool"] = study.evaluate(
            model, tokenizer, data["train"], PROTOCOL["pool_samples"], PROTOCOL["temperature"], max_new_tokens=length
        )
    return out


def start(data: dict[str, Any]) -> dict[str, Any]:
    """The starting model's completion lengths on the pool (which fix `max_completion_length` by `LENGTH_RULE`), then
    its evaluations at that length."""
    model, tokenizer = study.load_model()
    longest = max(PROTOCOL["length_candidates"])
    pool = study.evaluate(
        model,
        tokenizer,
        data["train"],
        PROTOCOL["pool_samples"],
        PROTOCOL["temperature"],
        max_new_tokens=longest,
        lengths=True,
    )
    cut = {
        length: float(np.mean([not ended or n > length for n, ended in zip(pool["lengths"], pool["ended"])]))
        for length in PROTOCOL["length_candidates"]
    }
    fits = [length for length in PROTOCOL["length_candidates"] if cut[length] <= PROTOCOL["length_cut_max"]]
    length = fits[0] if fits else longest
    return {
        "rule": LENGTH_RULE,
        "cut_share": cut,
        "max_completion_length": length,
        "lengths_at_start": pool,
        "environment": study.environment(),
        **evaluate(model, tokenizer, data, length, final=True),
    }


class StepWork:
    """What a step did, read from the metered trainer's counters: the `FEATURES`, truncated rollouts, seconds."""

    def __init__(self, trainer) -> None:
        self.trainer = trainer
        self.before = self.read()

    def read(self) -> dict[str, float]:
        t = self.trainer
        return {
            "generation_calls": t.generation_calls,
            "rollouts": t.meter.rollouts,
            "update_processed_tokens": t.meter.update_processed_tokens,
            "update_rows": t.meter.update_forward_rows,
            "truncated_rollouts": t.truncated_rollouts,
        }

    def step(self) -> dict[str, float]:
        """The counters' change since the last call."""
        now = self.read()
        change = {k: now[k] - self.before[k] for k in now}
        self.before = now
        return change


def make_run(
    arm: str,
    seed: int,
    data: dict[str, Any],
    p: dict[str, Any],
    steps: int,
    settings: dict[str, Any] | None = None,
    **extra: Any,
):
    """The metered trainer of `arm` with the study's settings (another study's `settings` of the arm, and `extra`
    config fields), and the first study's step clock."""
    model, tokenizer = study.load_model()
    trainer, clock = study.make_trainer(
        arm,
        model,
        tokenizer,
        {"train": data["train"]},
        seed,
        steps,
        settings=dict(RUNS[arm] if settings is None else settings),
        protocol={**p, "eval_steps": []},
        lr_scheduler_type=p["lr_scheduler_type"],
        **extra,
    )
    return trainer, clock, tokenizer


def speed(arm: str, data: dict[str, Any], results: Path = RESULTS) -> dict[str, Any]:
    """`speed_steps` steps of `arm` (seed 0, no evaluation), each step's seconds and work; run alone on the machine."""
    from transformers import TrainerCallback

    p = protocol(results)
    trainer, clock, _ = make_run(arm, 0, data, p, p["speed_steps"])
    work: list[dict[str, float]] = []

    class Work(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            work.append(meter.step())

    meter = StepWork(trainer)
    trainer.add_callback(Work())
    trainer.train()
    return {
        "arm": arm,
        "protocol": p,
        "environment": study.environment(),
        "steps": [{**s, **w} for s, w in zip(clock.steps, work)],
    }


def fit(results: Path) -> dict[str, Any]:
    """The time model: ordinary least squares of a step's seconds on `FEATURES` over the speed runs' steps (the first
    of each left out), and the budget `T` (`grpo_steps_at_budget` times GRPO's mean modelled step)."""
    import statsmodels.api as sm

    rows = []
    for arm in SPEED_ARMS:
        record = json.loads((results / "speed" / f"{arm}.json").read_text())
        rows += [{"arm": arm, **s} for s in record["steps"][1:]]
    x = sm.add_constant(np.array([[r[f] for f in FEATURES] for r in rows], dtype=float), has_constant="add")
    y = np.array([r["seconds"] for r in rows])
    model = sm.OLS(y, x).fit()
    coefficients = dict(zip(["intercept", *FEATURES], model.params.tolist()))
    predicted = model.predict(x)
    grpo = [pred for r, pred in zip(rows, predicted) if r["arm"] == "grpo"]
    return {
        "features": FEATURES,
        "coefficients": coefficients,
        "r_squared": float(model.rsquared),
        "residual_sd": float(np.sqrt(model.scale)),
        "steps": [{**r, "predicted": float(pred)} for r, pred in zip(rows, predicted)],
        "grpo_step": float(np.mean(grpo)),
        "budget": float(PROTOCOL["grpo_steps_at_budget"] * np.mean(grpo)),
    }


def modelled_seconds(time_model: dict[str, Any], work: dict[str, float]) -> float:
    """A step's seconds as the time model predicts them from its work."""
    c = time_model["coefficients"]
    return c["intercept"] + sum(c[f] * work[f] for f in time_model["features"])


def train(arm: str, seed: int, data: dict[str, Any], results: Path = RESULTS) -> dict[str, Any]:
    """One run of `arm` to the time budget; its record (see the module's docstring)."""
    from transformers import TrainerCallback

    p = protocol(results)
    time_model = json.loads((results / "time_model.json").read_text())
    budget = time_model["budget"]
    trainer, clock, tokenizer = make_run(arm, seed, data, p, p["step_cap"])
    steps: list[dict[str, Any]] = []
    evaluations: list[dict[str, Any]] = []

    class Budget(TrainerCallback):
        """Adds each step's modelled seconds to the run's clock; evaluates at T / 2, T and `equal_steps`; stops once
        the clock has reached T and the run has made `equal_steps` steps."""

        clock = 0.0

        def on_step_end(self, args, state, control, **kwargs):
            work = meter.step()
            before, self.clock = self.clock, self.clock + modelled_seconds(time_model, work)
            steps.append({**clock.steps[-1], **work, "modelled": self.clock - before, "clock": self.clock})
            points = [name for name, at in (("half", budget / 2), ("budget", budget)) if before < at <= self.clock]
            if state.global_step == p["equal_steps"]:
                points.append("equal_steps")
            if points:
                final = "budget" in points
                result = evaluate(trainer.model, tokenizer, data, p["max_completion_length"], final)
                evaluations.append({"points": points, "step": state.global_step, "clock": self.clock, **result})
            if self.clock >= budget and state.global_step >= p["equal_steps"]:
                control.should_training_stop = True
            return control

    meter = StepWork(trainer)
    trainer.add_callback(Budget())
    trainer.train()
    return {
        "arm": arm,
        "seed": seed,
        "settings": RUNS[arm],
        "protocol": p,
        "time_model": {k: time_model[k] for k in ("coefficients", "budget")},
        **run_record(trainer, data),
        "reached_budget": bool(steps and steps[-1]["clock"] >= budget),
        "steps": steps,
        "evaluations": evaluations,
    }


def run_record(trainer, data: dict[str, Any]) -> dict[str, Any]:
    """What a finished run's record holds beside its arm and evaluations: the environment, the commit, the token
    meter, TRL's logs of the training steps and the selection log (each group with its prompt key and level)."""
    import subprocess

    from lze_examples.demo import count_parameters

    log = trainer.selection_log.columns()
    level_of = dict(zip(trainer.prompt_keys.dataset_keys.tolist(), data["train"]["difficulty"]))
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    return {
        "environment": study.environment(),
        "commit": commit.strip()[:12],
        "meter": trainer.meter.snapshot(count_parameters(trainer.model)),
        "log_history": [e for e in trainer.state.log_history if "lze/generated_rollouts" in e],
        "selection_log": {
            **{name: log[name].tolist() for name in ("step", "batch", "prompt_key", "pass_rate", "energy", "weight")},
            "live": [bool(v) for v in log["live"]],
            "difficulty": [int(level_of[int(k)]) for k in log["prompt_key"]],
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["start", "speed", "fit", "jobs", "train"])
    parser.add_argument("arm", nargs="?", choices=list(RUNS))
    parser.add_argument("seed", nargs="?", type=int)
    parser.add_argument("--seeds", type=int, default=3, help="jobs: seeds 0..N-1")
    parser.add_argument("--secondary", action="store_true", help="jobs: the secondary arms instead of the primary")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.what == "jobs":
        for seed in range(args.seeds):
            for arm in SECONDARY if args.secondary else ARMS:
                if not (args.results / "runs" / arm / f"seed_{seed}.json").exists():
                    print(arm, seed)
        return 0
    if args.what == "fit":
        study.write(args.results / "time_model.json", fit(args.results))
        return 0
    from lze_trl.common.engines import apply_thread_policy

    apply_thread_policy()
    data = splits()
    if args.what == "start":
        path = args.results / "start.json"
        if not path.exists():
            study.write(path, start(data))
    elif args.what == "speed":
        path = args.results / "speed" / f"{args.arm}.json"
        if args.arm is None:
            parser.error("speed needs an ARM")
        if not path.exists():
            study.write(path, speed(args.arm, data, args.results))
    else:
        if args.arm is None or args.seed is None:
            parser.error("train needs an ARM and a SEED")
        path = args.results / "runs" / args.arm / f"seed_{args.seed}.json"
        if not path.exists():
            study.write(path, train(args.arm, args.seed, data, args.results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
