"""The skip-mode study's harness (benchmarks/skip_mode/): common random numbers, and the study's arms."""

import json

import numpy as np
import pytest
import torch
from transformers import GenerationConfig

from benchmarks.skip_mode.crn import GumbelNoise, row_seed, seeded_sampling
from lze_examples.tiny import char_tokenizer, tiny_qwen2


def generate(model, tokenizer, prompts, seeds):
    batch = tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left")
    config = GenerationConfig(max_new_tokens=8, do_sample=True, temperature=0.9, top_p=1.0, top_k=0,
                              pad_token_id=tokenizer.pad_token_id)  # fmt: skip
    with seeded_sampling(model, seeds), torch.no_grad():
        out = model.generate(**batch, generation_config=config)
    rows = out[:, batch["input_ids"].shape[1] :].tolist()
    ends = {tokenizer.pad_token_id, tokenizer.eos_token_id}
    return [row[: next((i + 1 for i, t in enumerate(row) if t in ends), len(row))] for row in rows]  # to its end


def test_a_rollout_is_the_same_whatever_else_its_generation_call_holds():
    tokenizer = char_tokenizer()
    model = tiny_qwen2(tokenizer).eval()
    a, b = row_seed(0, 3, 5, 0), row_seed(0, 3, 6, 0)
    alone = generate(model, tokenizer, ["12+3="], [a])
    together = generate(model, tokenizer, ["7+1=", "12+3=", "7+1="], [b, a, row_seed(0, 3, 6, 1)])
    assert together[1] == alone[0]
    assert together[0] != together[2]  # two rollouts of one prompt draw their own noise
    other_step = generate(model, tokenizer, ["12+3="], [row_seed(0, 4, 5, 0)])
    assert other_step != alone


def test_the_gumbel_scores_sample_the_tempered_softmax():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    temperature = 0.7
    draws = [int(GumbelNoise([s], temperature)(None, logits).argmax()) for s in range(4000)]
    frequencies = np.bincount(draws, minlength=4) / len(draws)
    expected = torch.softmax(logits[0] / temperature, -1).numpy()
    np.testing.assert_allclose(frequencies, expected, atol=0.025)


def test_other_sampling_than_a_temperature_is_refused():
    tokenizer = char_tokenizer()
    model = tiny_qwen2(tokenizer).eval()
    batch = tokenizer(["1+1="], return_tensors="pt")
    config = GenerationConfig(max_new_tokens=2, do_sample=True, top_p=0.9, pad_token_id=tokenizer.pad_token_id)
    with seeded_sampling(model, [1]), pytest.raises(ValueError, match="plain temperature sampling"):
        model.generate(**batch, generation_config=config)


@pytest.mark.slow
def test_two_arms_with_common_random_numbers_draw_the_same_rollouts_of_a_prompt(tmp_path):
    # learning rate 0: the weights never move, so a prompt generated at a step by both arms gets the same rollouts,
    # though the skip mode generates fewer prompts in that call (its global random state would otherwise drift)
    from testing_utils import make_trainer, prompt_dataset, prompt_number, sided_reward

    from benchmarks.skip_mode.crn import with_common_random_numbers

    def run(name, **settings):
        seen = {}

        def reward(prompts, completions, **kwargs):
            for i in range(0, len(prompts), 4):
                seen[(trainer.state.global_step, prompt_number(prompts[i]))] = completions[i : i + 4]
            return sided_reward(prompts, completions)

        dataset = prompt_dataset(8)
        trainer = make_trainer(tmp_path / name, reward=reward, dataset=dataset, max_steps=8, learning_rate=0.0,
                               temperature=1.0, **settings)  # fmt: skip
        with_common_random_numbers(trainer, 0, dataset).train()
        return seen

    grpo = run("grpo", selector="none")
    skip = run("skip", selector="none", prune_solved=True, prune_solved_after=1, prune_unsolved=True,
               prune_explore_fraction=0.0, prune_refill=False)  # fmt: skip
    assert len(skip) < len(grpo) == 16  # the skip mode generated fewer groups
    assert all(skip[k] == grpo[k] for k in skip)
    assert len({tuple(c) for c in grpo.values()}) > 8  # and the rollouts are not all alike


def test_the_committed_replay_is_rebuilt_from_the_revisit_study_runs():
    from benchmarks.skip_mode import replay

    assert replay.main(["--check"]) == 0
    later, skipped, live_later, live_skipped = np.sum([replay.replay(log, None, 2) for log in replay.runs("grpo")], 0)
    # the protocol's rule: the share of later visits skipped, and of their live groups lost
    assert (round(skipped / later, 3), round(live_skipped / live_later, 3)) == (0.226, 0.044)


def test_the_arms_differ_from_their_controls_only_where_the_protocol_says():
    from benchmarks.skip_mode.run import ARMS, SKIP

    assert ARMS["skip_filter"] == {**ARMS["filter"], **SKIP} and ARMS["lze_skip"] == {**ARMS["lze"], **SKIP}
    assert SKIP["prune_refill"] is False and "prune_solved" not in SKIP
    assert ARMS["grpo"]["shadow"] and ARMS["grpo"]["prune_unsolved_after"] == SKIP["prune_unsolved_after"]


def fake_run(arm, seed, accuracy, later_rollouts=64, predicted=3.0, predicted_live=0.0, live_share=0.5):
    """A finished run's record as run.py writes it, with what the report reads."""
    steps = [{"rollouts": 64.0} for _ in range(4)] + [{"rollouts": float(later_rollouts)} for _ in range(12)]
    log = [{"step": k, "lze/shadow_prunable_unsolved": predicted, "lze/shadow_prunable_live_unsolved": predicted_live}
           for k in range(1, 17)]  # fmt: skip
    selection = {"step": [s for s in range(16) for _ in range(8)],
                 "live": [i < 8 * live_share for s in range(16) for i in range(8)]}  # fmt: skip
    rate = [1.0] * int(400 * accuracy) + [0.0] * (400 - int(400 * accuracy))
    return {"arm": arm, "seed": seed, "steps": steps, "log_history": log, "selection_log": selection,
            "evaluations": [{"step": 16, "test": {"rate": rate}}]}  # fmt: skip


def write_runs(folder, runs):
    for record in runs:
        path = folder / "runs" / record["arm"] / f"seed_{record['seed']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record))


def test_the_report_reads_the_check_first_and_stops_where_it_fails(tmp_path):
    from benchmarks.skip_mode import report

    # the pilot incomplete: no verdict, no accuracy
    write_runs(tmp_path, [fake_run("grpo", 0, 0.5)])
    text = report.build(tmp_path)
    assert "The pilot is not complete" in text and "Declared" not in text
    # the pilot complete, the rule predicting well (precision 1 - 0/36 against a random choice's 0.5) and the mode
    # skipping (48 of 64 later rollouts): the declared measurements and the test are read
    runs = [fake_run(arm, s, 0.5 + 0.01 * s, later_rollouts=48 if arm == "skip_filter" else 64)
            for arm in ("grpo", "skip_filter", "filter") for s in (0, 1, 2)]  # fmt: skip
    write_runs(tmp_path, runs)
    text = report.build(tmp_path)
    assert "1.000 (1 - 0/72)" in text  # the pilot's 2 GRPO runs x 12 later steps x 3 predicted groups
    assert "0.750 of GRPO's later rollouts" in text and "Declared measurements" in text
    assert "0.7500 [0.7500, 0.7500] (3 seeds)" in text  # the saving
    assert "0.0000 [0.0000, 0.0000] (3 seeds)" in text and "non-inferior" in text
    # the rule predicting at a random choice's precision: the study stops at its pilot
    write_runs(tmp_path, [fake_run("grpo", s, 0.5, predicted_live=1.5) for s in (0, 1, 2)])
    text = report.build(tmp_path)
    assert "The check is not met: the study stops at its pilot" in text and "Declared" not in text


def test_the_committed_report_rebuilds():
    from benchmarks.skip_mode import report

    assert report.main(["--check"]) == 0
