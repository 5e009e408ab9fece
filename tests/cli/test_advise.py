"""`lze-trl advise`: what it reads from a run's trainer_state.json (a stock GRPOTrainer run, a shadow run, an LZE run)
and the arithmetic it prints."""

import re

import numpy as np
import pytest
from testing_utils import make_trainer, prompt_dataset, sided_reward, text_reward, tiny_config
from trl import GRPOConfig, GRPOTrainer

from lze_examples.tiny import char_tokenizer, tiny_qwen2
from lze_trl.commands import advise


pytestmark = pytest.mark.slow


def values(history, key):
    return [e[key] for e in history if key in e]


def number(text, after):
    return float(re.search(re.escape(after) + r"\s*([0-9.]+)", text).group(1))


def lze_step(text):
    """The projected step of LZE's selection, the last number of its arithmetic."""
    return float(re.search(r"= ([0-9.]+) of GRPO's:", text).group(1))


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


def test_a_shadow_run_measures_the_split_the_selection_and_the_pruning(tmp_path, capsys):
    trainer = make_trainer(tmp_path, reward=sided_reward, dataset=prompt_dataset(6), max_steps=9, shadow=True,
                           prune_solved_after=1, save_strategy="steps", save_steps=9)  # fmt: skip
    trainer.train()
    history = trainer.state.log_history
    assert advise.main([str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    g = sum(values(history, "lze/generation_seconds")) / sum(values(history, "lze/step_seconds"))
    u = sum(values(history, "lze/shadow_update_tokens")) / sum(values(history, "lze/grpo_update_tokens"))
    assert number(out, "Generation share: g =") == pytest.approx(g, abs=0.005)
    assert number(out, "keeps u =") == pytest.approx(u, abs=0.005)
    assert lze_step(out) == pytest.approx(g + (1 - g) * u, abs=0.01)
    prunable = sum(values(history, "lze/shadow_prunable_solved")) + sum(
        values(history, "lze/shadow_prunable_unsolved")
    )
    assert number(out, "history predicted") == prunable > 0
    assert number(out, "s =") == pytest.approx(np.mean(values(history, "lze/shadow_prunable_frac")), abs=0.005)


def test_an_lze_run_measures_the_update_share_it_kept(tmp_path, capsys):
    trainer = make_trainer(tmp_path, max_steps=3, save_strategy="steps", save_steps=3)
    trainer.train()
    history = trainer.state.log_history
    assert advise.main([str(tmp_path / "out" / "checkpoint-3" / "trainer_state.json")]) == 0
    out = capsys.readouterr().out
    u = sum(values(history, "lze/update_tokens")) / sum(values(history, "lze/grpo_update_tokens"))
    assert "measured (LZE run)" in out and number(out, "keeps u =") == pytest.approx(u, abs=0.005)


def test_a_folder_without_a_run_state_is_refused_with_the_fix(tmp_path, capsys):
    assert advise.main([str(tmp_path)]) == 2
    assert "no trainer_state.json" in capsys.readouterr().out
    assert advise.main([str(tmp_path), "--generation_share", "1.5"]) == 2
    assert "--generation_share=1.5 is invalid" in capsys.readouterr().out


def test_pruning_is_judged_against_a_random_choice_and_advises_both_sides():
    # the addition task's shape (BENCHMARKS.md section 14): the solved side predicts badly, the unsolved side well
    line = advise.pruning_line({"solved": (100, 62), "unsolved": (300, 48)}, share=0.3, dead_share=0.41)
    assert "precision 0.38" in line and "precision 0.84" in line and "1 - 110/400 = 0.72" in line
    assert "a random choice's 0.41, the dead share" in line
    assert 'worth trying (prune_solved=True, prune_unsolved=True, prune_exploration="adaptive")' in line
    # no better than a random choice, too little skipped, no dead share to compare with: little to gain
    assert "little to gain" in advise.pruning_line({"solved": (100, 62), "unsolved": (300, 48)}, 0.3, dead_share=0.75)
    assert "little to gain" in advise.pruning_line({"solved": (100, 5), "unsolved": (100, 5)}, 0.1, dead_share=0.4)
    line = advise.pruning_line({"solved": (100, 5), "unsolved": (100, 5)}, 0.3, dead_share=None)
    assert "no dead share logged" in line and "little to gain" in line
    line = advise.pruning_line({"solved": (0, 0), "unsolved": (10, 1)}, share=0.25, dead_share=0.4)
    assert "precision n/a" in line and "worth trying" in line
