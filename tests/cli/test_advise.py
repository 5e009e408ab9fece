"""`lze-trl advise`: what it reads from a run's trainer_state.json (a stock GRPOTrainer run, a shadow run, an LZE run,
a pruning run) and the arithmetic it prints."""

import json
import re

import numpy as np
import pytest
from testing_utils import make_trainer, prompt_dataset, sided_reward, text_reward, tiny_config
from trl import GRPOConfig, GRPOTrainer

from lze_examples.tiny import char_tokenizer, tiny_qwen2
from lze_trl.commands import advise


def values(history, key):
    return [e[key] for e in history if key in e]


def number(text, after):
    return float(re.search(re.escape(after) + r"\s*([0-9.]+)", text).group(1))


def lze_step(text):
    """The projected step of LZE's selection, the last number of its arithmetic."""
    return float(re.search(r"= ([0-9.]+) of GRPO's:", text).group(1))


def generation_share(text):
    """The printed generation share: the result of `g = a s / b s = g`."""
    return float(re.search(r"Generation share: g = [^=]*= ([0-9.]+)", text).group(1))


def check_arithmetic(text):
    """Every printed `terms = result` whose terms are numbers reproduces its result by hand, to the result's printed
    digits; returns how many were checked."""
    text = re.sub(r"(?<=\d) s\b", "", text)  # seconds' unit
    checked = 0
    for match in re.finditer(r"=\s*([0-9]+(?:\.([0-9]+))?)", text):
        start = match.start()
        while start > 0 and text[start - 1] in "0123456789. +-x/()":
            start -= 1
        terms = text[start : match.start()].strip().lstrip(")").strip()
        if not re.search(r"[0-9]", terms) or not re.search(r"[-+x/]", terms):
            continue
        result, decimals = float(match.group(1)), len(match.group(2) or "")
        by_hand = eval(terms.replace("x", "*"))  # numbers and + - * / ( ) only
        assert abs(by_hand - result) <= 0.5 * 10**-decimals + 1e-9, f"{terms} = {by_hand}, printed {result}"
        checked += 1
    return checked


def write_state(folder, history):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    return str(folder)


def clocked(history, per_rollout=0.002, per_token=0.001):
    """`history` with each step's seconds set by a clock whose generation costs `per_rollout` seconds a generated
    rollout (`lze/grpo_update_rows`) and whose update costs `per_token` seconds a trained loss token
    (`lze/update_tokens`): the model `advise` projects with, on a run of a tiny model whose seconds do not scale."""
    out = []
    for entry in history:
        entry = dict(entry)
        if "lze/step_seconds" in entry:
            generation = per_rollout * entry["lze/grpo_update_rows"]
            update = per_token * entry["lze/update_tokens"]
            entry.update({"lze/generation_seconds": generation, "lze/update_seconds": update,
                          "lze/step_seconds": generation + update})  # fmt: skip
        out.append(entry)
    return out


def shadow_history(generation, step, shadow_tokens, grpo_tokens, entries=1):
    """A shadow run's log of `entries` steps, each with these seconds and tokens."""
    entry = {"loss": 0.0, "lze/dead_frac": 0.5, "lze/selected_frac": 1.0, "lze/generation_seconds": generation,
             "lze/step_seconds": step, "lze/update_seconds": step - generation, "lze/update_tokens": grpo_tokens,
             "lze/grpo_update_tokens": grpo_tokens, "lze/shadow_update_tokens": shadow_tokens}  # fmt: skip
    return [{**entry, "step": k + 1} for k in range(entries)]


@pytest.mark.slow
def test_a_stock_grpo_run_gives_the_dead_share_and_says_the_timing_is_missing(tmp_path, capsys):
    tokenizer = char_tokenizer()
    args = tiny_config(tmp_path / "grpo", config_class=GRPOConfig, max_steps=3, save_strategy="steps", save_steps=3)
    trainer = GRPOTrainer(model=tiny_qwen2(tokenizer), reward_funcs=text_reward, args=args,
                          train_dataset=prompt_dataset(8), processing_class=tokenizer)  # fmt: skip
    trainer.train()
    assert advise.main([str(tmp_path / "grpo")]) == 0
    out = capsys.readouterr().out
    dead = np.mean(values(trainer.state.log_history, "frac_reward_zero_std"))
    assert number(out, "Dead share:") == pytest.approx(dead, abs=0.005) and "frac_reward_zero_std" in out
    assert "Generation share: missing" in out and "shadow=True" in out and "LZE selection" not in out
    assert "Forward pruning: not measured" in out and "Not projected: accuracy" in out
    # with an assumed share: the step of LZE's selection, from the dead share and the 0.4 quota
    assert advise.main([str(tmp_path / "grpo"), "--generation_share", "0.8"]) == 0
    out = capsys.readouterr().out
    u = min(0.4, 1 - dead)
    assert "assumed (--generation_share)" in out and "estimated" in out
    assert number(out, "keeps u =") == pytest.approx(u, abs=0.005)
    assert lze_step(out) == pytest.approx(0.8 + 0.2 * u, abs=0.01)
    assert check_arithmetic(out) == 1


@pytest.mark.slow
def test_a_shadow_run_measures_the_split_the_selection_and_the_pruning(tmp_path, capsys):
    trainer = make_trainer(tmp_path, reward=sided_reward, dataset=prompt_dataset(6), max_steps=9, shadow=True,
                           prune_solved_after=1, save_strategy="steps", save_steps=9)  # fmt: skip
    trainer.train()
    history = trainer.state.log_history
    assert advise.main([str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    g = np.mean(values(history, "lze/generation_seconds")) / np.mean(values(history, "lze/step_seconds"))
    u = sum(values(history, "lze/shadow_update_tokens")) / sum(values(history, "lze/grpo_update_tokens"))
    assert generation_share(out) == pytest.approx(g, abs=0.01) and "of the step (measured" in out
    assert number(out, "keeps u =") == pytest.approx(u, abs=0.005)
    assert lze_step(out) == pytest.approx(g + (1 - g) * u, abs=0.015)
    prunable = sum(values(history, "lze/shadow_prunable_solved")) + sum(
        values(history, "lze/shadow_prunable_unsolved")
    )
    assert number(out, "history predicted") == prunable > 0
    assert number(out, "): s =") == pytest.approx(np.mean(values(history, "lze/shadow_prunable_frac")), abs=0.005)
    assert check_arithmetic(out) >= 3


@pytest.mark.slow
def test_an_lze_run_rebuilds_grpos_step_from_its_own_seconds_and_tokens(tmp_path, capsys):
    trainer = make_trainer(tmp_path, max_steps=3, save_strategy="steps", save_steps=3)
    trainer.train()
    history = trainer.state.log_history
    assert advise.main([str(tmp_path / "out" / "checkpoint-3" / "trainer_state.json")]) == 0
    out = capsys.readouterr().out
    kept, grpo = sum(values(history, "lze/update_tokens")), sum(values(history, "lze/grpo_update_tokens"))
    u = kept / grpo
    assert "measured (LZE run)" in out and number(out, "keeps u =") == pytest.approx(u, abs=0.005)
    # GRPO's step: the generation seconds and the update's, scaled up to every group's tokens
    generation, update = (np.mean(values(history, f"lze/{k}_seconds")) for k in ("generation", "update"))
    rebuilt = generation + update * grpo / kept
    assert "of GRPO's step, rebuilt from this LZE run" in out
    assert generation_share(out) == pytest.approx(generation / rebuilt, abs=0.01)
    # the projection is the run's own step over the rebuilt one
    assert lze_step(out) == pytest.approx((generation + update) / rebuilt, abs=0.015)
    assert check_arithmetic(out) >= 3


@pytest.mark.slow
def test_lze_and_shadow_runs_of_one_setup_project_the_same_step(tmp_path, capsys):
    # shadow, LZE, pruned and stock runs of one setup; a tiny model's seconds do not scale with its tokens, so each
    # LZE-trainer run's seconds are set by one clock (generation by the rollouts, the update by the trained tokens)
    setup = dict(reward=sided_reward, dataset=prompt_dataset(12), max_steps=12, per_device_train_batch_size=16)
    runs = {"shadow": dict(shadow=True), "lze": {}, "pruned": dict(prune_solved=True, prune_unsolved=True)}
    out, histories = {}, {}
    for name, settings in runs.items():
        trainer = make_trainer(tmp_path / name, **setup, **settings)
        trainer.train()
        histories[name] = clocked(trainer.state.log_history)
        assert advise.main([write_state(tmp_path / name / "clocked", histories[name])]) == 0
        out[name] = capsys.readouterr().out
        assert check_arithmetic(out[name]) >= 3
    assert "of the step (measured" in out["shadow"] and "rebuilt from this LZE run" in out["lze"]
    assert lze_step(out["lze"]) == pytest.approx(lze_step(out["shadow"]), abs=0.05)
    # the shadow's generation share is GRPO's, and the LZE run rebuilds it
    assert generation_share(out["lze"]) == pytest.approx(generation_share(out["shadow"]), abs=0.05)
    assert "rebuilt from this LZE run" in out["pruned"] and "Forward pruning, on in this run" in out["pruned"]
    assert generation_share(out["pruned"]) == pytest.approx(generation_share(out["shadow"]), abs=0.05)
    # a stock run of the setup: no timing; with the shadow run's generation share, its estimate
    tokenizer = char_tokenizer()
    args = tiny_config(tmp_path / "grpo", config_class=GRPOConfig, max_steps=12, per_device_train_batch_size=16)
    stock = GRPOTrainer(model=tiny_qwen2(tokenizer), reward_funcs=sided_reward, args=args,
                        train_dataset=prompt_dataset(12), processing_class=tokenizer)  # fmt: skip
    stock.train()
    folder = write_state(tmp_path / "grpo" / "state", stock.state.log_history)
    assert advise.main([folder, "--generation_share", str(generation_share(out["shadow"]))]) == 0
    stock_out = capsys.readouterr().out
    assert "Generation share: g =" in stock_out and "estimated" in stock_out and check_arithmetic(stock_out) == 1


@pytest.mark.slow
def test_a_pruning_run_reads_what_it_skipped_and_what_its_explored_prompts_turned_out(tmp_path, capsys):
    trainer = make_trainer(tmp_path, reward=sided_reward, dataset=prompt_dataset(12), max_steps=12,
                           per_device_train_batch_size=16, prune_solved=True, prune_unsolved=True)  # fmt: skip
    trainer.train()
    history = [e for e in trainer.state.log_history if "loss" in e]
    assert advise.main([write_state(tmp_path / "state", trainer.state.log_history)]) == 0
    out = capsys.readouterr().out
    assert "Forward pruning: not measured" not in out and "Forward pruning, on in this run: by step 12" in out
    skipped = round(history[-1]["lze/rollouts_skipped"])
    generated = round(sum(e["lze/grpo_update_rows"] for e in history))  # one entry a step
    assert skipped > 0 and f"left out {skipped} rollouts and it generated {generated}:" in out
    assert number(out, f"({skipped} + {generated}) =") == pytest.approx(skipped / (skipped + generated), abs=0.005)
    scored = {side: round(history[-1][f"lze/explored_scored_{side}"]) for side in ("solved", "unsolved")}
    live = {side: round(history[-1][f"lze/explored_live_{side}"]) for side in ("solved", "unsolved")}
    assert sum(scored.values()) > 0
    for side in ("solved", "unsolved"):
        assert f"{side} {scored[side]} ({live[side]} live)" in out
    precision = 1 - sum(live.values()) / sum(scored.values())
    assert number(out, f"precision 1 - {sum(live.values())}/{sum(scored.values())} =") == pytest.approx(
        precision, abs=0.005
    )
    assert "GRPO's dead share rebuilt" in out and check_arithmetic(out) >= 5


@pytest.mark.slow
def test_a_20_step_run_logged_every_10_steps_says_its_figures_are_rough(tmp_path, capsys):
    trainer = make_trainer(tmp_path, shadow=True, max_steps=20, logging_steps=10)
    trainer.train()
    assert advise.main([write_state(tmp_path / "state", trainer.state.log_history)]) == 0
    out = capsys.readouterr().out
    assert "Read 2 log entries, to step 20: one every 10 steps, each their mean." in out
    assert "Rough: fewer than 10 log entries" in out and "logging_steps=1" in out
    # each entry is the mean of its 10 steps: the counts are summed over the steps
    history = trainer.state.log_history
    prunable = sum(values(history, "lze/shadow_prunable_solved") + values(history, "lze/shadow_prunable_unsolved"))
    assert number(out, "history predicted") == round(10 * prunable) > 0


def test_the_rough_note_goes_from_ten_entries():
    lines = advise.advice(advise.Signals.of(shadow_history(0.3, 1.0, 400, 1000, entries=advise.ROUGH_BELOW)))
    assert lines[0] == f"Read {advise.ROUGH_BELOW} log entries, to step {advise.ROUGH_BELOW}: one every step."
    assert not any("Rough" in line for line in lines)
    lines = advise.advice(advise.Signals.of(shadow_history(0.3, 1.0, 400, 1000, entries=advise.ROUGH_BELOW - 1)))
    assert lines[1].startswith("Rough: fewer than 10 log entries")


def test_the_printed_terms_reproduce_the_printed_step():
    # g = 0.236 and u = 0.386 project 0.531, but print as 0.24 and 0.39: 0.24 + 0.76 x 0.39 = 0.5364
    out = "\n".join(advise.advice(advise.Signals.of(shadow_history(0.236, 1.0, 386, 1000))))
    assert "g + (1 - g) x u = 0.24 + 0.76 x 0.39 = 0.54 of GRPO's" in out
    assert check_arithmetic(out) == 2


def test_an_lze_run_and_a_shadow_run_under_one_clock_project_alike():
    # one clock: generation 0.25 of GRPO's step, the update by its tokens; LZE keeps 0.4 of GRPO's tokens
    shadow = shadow_history(0.25, 1.0, 400, 1000, entries=12)
    lze = [{**e, "lze/update_tokens": 400, "lze/selected_frac": 0.4, "lze/update_seconds": 0.3,
            "lze/step_seconds": 0.55} for e in shadow]  # fmt: skip
    for e in lze:
        del e["lze/shadow_update_tokens"]
    shadow_out, lze_out = ("\n".join(advise.advice(advise.Signals.of(h))) for h in (shadow, lze))
    assert lze_step(shadow_out) == lze_step(lze_out) == 0.55  # 0.25 + 0.75 x 0.4; the run's own 0.55 s of 1 s
    assert "= 0.250 + 0.300 x 2.50 = 1.00 s" in lze_out
    assert check_arithmetic(lze_out) == 3


def test_a_folder_without_a_run_state_is_refused_with_the_fix(tmp_path, capsys):
    assert advise.main([str(tmp_path)]) == 2
    assert "no trainer_state.json" in capsys.readouterr().out
    assert advise.main([str(tmp_path), "--generation_share", "1.5"]) == 2
    assert "--generation_share=1.5 is invalid" in capsys.readouterr().out


def test_pruning_is_judged_against_a_random_choice_and_advises_the_tested_configuration():
    # the addition task's shape (BENCHMARKS.md section 14): the solved side predicts badly, the unsolved side well
    line = advise.pruning_line({"solved": (100, 62), "unsolved": (300, 48)}, share=0.3, dead_share=0.41)
    assert "precision 0.38" in line and "precision 0.84" in line and "1 - 110/400 = 0.72" in line
    assert "a random choice's 0.41, the dead share" in line
    # the settings the study ran, where they differ from LZEGRPOConfig's defaults (benchmarks/smollm2_pruning/run.py)
    tested = ('prune_solved=True, prune_solved_after=1, prune_unsolved=True, prune_exploration="adaptive", '
              "prune_target_dead_frac=0.1")  # fmt: skip
    assert f"worth trying ({tested})" in line
    # no better than a random choice, too little skipped, no dead share to compare with: little to gain
    assert "little to gain" in advise.pruning_line({"solved": (100, 62), "unsolved": (300, 48)}, 0.3, dead_share=0.75)
    assert "little to gain" in advise.pruning_line({"solved": (100, 5), "unsolved": (100, 5)}, 0.1, dead_share=0.4)
    line = advise.pruning_line({"solved": (100, 5), "unsolved": (100, 5)}, 0.3, dead_share=None)
    assert "no dead share logged" in line and "little to gain" in line
    line = advise.pruning_line({"solved": (0, 0), "unsolved": (10, 1)}, share=0.25, dead_share=0.4)
    assert "precision n/a" in line and "worth trying" in line
    # 1 - s from s as printed
    assert "s = 0.24 of the groups" in (line := advise.pruning_line({"unsolved": (10, 1)}, 0.2449, 0.4))
    assert "1 - s = 0.76" in line


def test_a_shadow_run_projects_the_skip_mode_from_its_exact_precision():
    history = shadow_history(0.7, 1.0, 400, 1000, entries=12)
    for entry in history:  # 40 groups a step, 10 predicted dead (2 of them live), half of all groups dead
        entry.update({"lze/shadow_prunable_frac": 0.25, "lze/shadow_prunable_unsolved": 10.0,
                      "lze/shadow_prunable_live_unsolved": 2.0})  # fmt: skip
    lines = advise.advice(advise.Signals.of(history))
    skip = next(line for line in lines if line.startswith("Skip mode"))
    assert "1 - s = 0.75 of GRPO's rollouts" in skip
    assert "losing 24/240 = 0.10 of its live groups" in skip  # 12 steps x 2 live of 12 x 40 x (1 - 0.5) live groups
    assert "its step is 0.70 x 0.75 + 0.30 x 0.40 = 0.6" in skip  # 0.645, to the printed digits
    assert check_arithmetic(skip) == 2


def test_an_async_run_reads_its_wait_for_rollouts_as_the_generation_share():
    history = shadow_history(0.3, 1.0, 400, 1000, entries=12)
    for entry in history:
        entry["lze/rollout_wait_seconds"] = entry.pop("lze/generation_seconds")
    line = next(x for x in advise.advice(advise.Signals.of(history)) if x.startswith("Generation share"))
    assert "g = 0.300 s / 1.00 s = 0.30 of the step" in line and "lze/rollout_wait_seconds" in line
    assert "did not overlap" in line
