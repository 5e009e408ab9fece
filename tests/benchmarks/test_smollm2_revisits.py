"""The SmolLM2 revisit study (benchmarks/smollm2_revisits): its data split, its clock, its manipulation check, and
its committed report, rebuilt from the raw runs."""

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest


sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.smollm2_revisits import report, run  # noqa: E402


def test_the_pool_is_32_distinct_prompts_and_the_unseen_test_questions_ask_no_pool_sum():
    data = run.splits()
    train, test, unseen = data["train"], data["test"], np.asarray(data["unseen"])
    assert len(set(p[0]["content"] for p in train["prompt"])) == 32
    assert sorted(set(train["difficulty"])) == [0, 1, 2, 3, 4]
    assert len(test) == 400 and unseen.sum() == 377
    sums = {(lv, run.operands(p[0]["content"], lv)) for p, lv in zip(train["prompt"], train["difficulty"])}
    for prompt, level, new in zip(test["prompt"], test["difficulty"], unseen):
        assert ((level, run.operands(prompt[0]["content"], level)) not in sums) == new
    # a sum is the same question whatever the order of its operands, a difference is not
    assert run.operands("Tom has 3 apples and gets 5 more.", 0) == run.operands("Mia has 5 cards and gets 3 more", 0)
    assert run.operands("Tom has 9 apples and gives 5 away.", 1) != run.operands("Ava has 5 cards and gives 9 away", 1)


def speed_record(arm: str, coefficients: dict, rng: np.random.Generator) -> dict:
    steps = []
    for step in range(1, 5):
        work = {
            "generation_calls": 2 if arm == "probe" else 1,
            "rollouts": {"grpo_4x8": 32, "probe": 40}.get(arm, 64),
            "update_processed_tokens": float(rng.integers(1000, 7000)),
        }
        seconds = coefficients["intercept"] + sum(coefficients[k] * v for k, v in work.items())
        steps.append({"step": step, "seconds": seconds + (100.0 if step == 1 else 0.0), **work})
    return {"arm": arm, "steps": steps}


def test_the_time_model_recovers_the_seconds_of_a_step_and_sets_the_budget(tmp_path):
    truth = {"intercept": 2.0, "generation_calls": 3.0, "rollouts": 0.2, "update_processed_tokens": 0.01}
    rng = np.random.default_rng(0)
    for arm in run.SPEED_ARMS:
        path = tmp_path / "speed" / f"{arm}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(speed_record(arm, truth, rng)))
    model = run.fit(tmp_path)
    for key, value in truth.items():  # the first step of each speed run (100 s of one-time costs) is left out
        assert model["coefficients"][key] == pytest.approx(value, rel=1e-6, abs=1e-6)
    assert model["r_squared"] == pytest.approx(1.0) and len(model["steps"]) == 3 * len(run.SPEED_ARMS)
    grpo = [s["predicted"] for s in model["steps"] if s["arm"] == "grpo"]
    assert model["budget"] == pytest.approx(16 * np.mean(grpo))
    work = {"generation_calls": 1, "rollouts": 64, "update_processed_tokens": 5000.0}
    assert run.modelled_seconds(model, work) == pytest.approx(2 + 3 + 0.2 * 64 + 50)


def test_a_selection_against_the_uncertainty_ranking_is_counted_and_ties_are_not():
    # one batch, 5 live groups and a dead one; uncertainty 4p(1-p): 1, 1, 0.75, 0.4375, 0.4375
    batch = pd.DataFrame(
        {
            "batch": [0] * 6,
            "pass_rate": [0.5, 0.5, 0.25, 0.125, 0.875, 1.0],
            "live": [True] * 5 + [False],
            "weight": [1.0, 0.0, 1.0, 0.0, 0.0, 0.0],  # kept 0.5 and 0.25 over the other 0.5: one against
        }
    )
    assert report.history_changes(batch) == (1, 2, 2)
    # uncertainty 1, 0.75, 0.75, 0.4375, 0.4375: keeping the two 0.75 over the 1 is one selection against it (either
    # 0.75 could be a ranking's second, not both); keeping the 1 and either 0.75 is none
    ties = batch.assign(pass_rate=[0.5, 0.25, 0.75, 0.125, 0.875, 1.0])
    assert report.history_changes(ties.assign(weight=[0.0, 1.0, 1.0, 0.0, 0.0, 0.0])) == (1, 2, 2)
    assert report.history_changes(ties.assign(weight=[1.0, 0.0, 1.0, 0.0, 0.0, 0.0])) == (0, 2, 2)
    every = batch.assign(weight=[1.0] * 5 + [0.0])  # every live group kept: no choice to change
    assert report.history_changes(every) == (0, 5, 0)


def test_the_committed_report_rebuilds_from_the_raw_results():
    if not (run.RESULTS / "report.md").exists():
        pytest.skip("no run has finished yet")
    assert report.main(["--check"]) == 0


def test_a_secondary_arm_is_compared_with_the_arm_it_varies_paired_by_seed():
    def record(arm: str, seed: int, budget: float, steps16: float, half: float) -> dict:
        rates = {"budget": budget, "equal_steps": steps16, "half": half}
        evaluations = [{"points": [point], "test": {"rate": [rate] * 4}} for point, rate in rates.items()]
        return {"arm": arm, "seed": seed, "evaluations": evaluations}

    lze = [(0.6, 0.5, 0.5), (0.7, 0.5, 0.6), (0.9, 0.9, 0.9)]
    uncertainty = [(0.5, 0.5, 0.25), (0.5, 0.75, 0.5)]
    runs = {
        "lze": {seed: record("lze", seed, *rates) for seed, rates in enumerate(lze)},
        "lze_uncertainty": {seed: record("lze_uncertainty", seed, *rates) for seed, rates in enumerate(uncertainty)},
    }
    rows = report.on_every_axis(runs, [("lze", "lze_uncertainty", "history")]).splitlines()
    # seed 2 has no partner and leaves the pairing; the differences: at T 0.1 and 0.2, after 16 steps 0 and -0.25
    assert "| `lze` - `lze_uncertainty` (history) |       2 | +0.1500 [" in rows[2]
    assert "| -0.1250 [" in rows[2] and "| +0.1750 [" in rows[2]
    assert rows[2].split("|")[-2].strip() == "0.650 - 0.500"  # seed 2's 0.9 is not in the means of the pair


def test_the_run_noise_draws_reproduce_every_lze_selection_and_history_changed_a_fifth_of_them():
    runs = report.load_runs(run.RESULTS)
    changed, selected, chosen, reproduced = (
        sum(v) for v in zip(*map(report.same_noise_changes, runs["lze"].values()))
    )
    assert (
        reproduced == selected > 0
    )  # the (seed, batch) draws are the run's: LZE's choices come back from its energies
    assert round(changed / selected, 3) == 0.195 and round(changed / chosen, 3) == 0.248
    # the ranking by the uncertainty alone, drawn alike, changes nothing of lze_uncertainty's own choices
    assert sum(report.same_noise_changes(r)[0] for r in runs["lze_uncertainty"].values()) == 0


def test_without_the_probe_the_time_model_cannot_tell_the_intercept_from_a_generation_call():
    model = json.loads((run.RESULTS / "time_model.json").read_text())
    lines = "\n".join(report.identification(model))
    assert lines.count("not identified") == 2
    assert "16.7" in lines and "27.5" in lines
