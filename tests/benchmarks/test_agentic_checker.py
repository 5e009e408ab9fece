"""The multi-turn checker environment of BENCHMARKS.md section 4 (`benchmarks/agentic/checker.py`), trained through
TRL's `rollout_func` with LZE: the environment's replies are the only masked tokens, a rollout takes a model turn per
answer until one is right or 3 are spent, the environment's reward is the last answer's check, and the model calls it
counts are the turns its rollouts hold."""

import pytest
from testing_utils import logged, make_trainer, prompt_dataset

from benchmarks.agentic.checker import CheckerRollouts, checker_reward, checker_trainer, is_right


class RecordedCheckerRollouts(CheckerRollouts):
    def __init__(self, max_turns: int = 3) -> None:
        super().__init__(max_turns)
        self.outputs = []

    def __call__(self, prompts, trainer):
        output = super().__call__(prompts, trainer)
        self.outputs.append((list(prompts), output, trainer.processing_class))
        return output


def test_the_calculator_checks_the_first_integer_answered():
    assert is_right("12+34=", "46") and is_right("12+34=", " 46\n9") and not is_right("12+34=", "47")
    assert not is_right("12+34=", "") and not is_right("12+34=", "x46")


@pytest.mark.slow
def test_a_checker_rollout_is_the_model_answering_until_right_or_out_of_turns(tmp_path):
    rollouts = RecordedCheckerRollouts(max_turns=3)
    trainer = make_trainer(
        tmp_path,
        reward=checker_reward,
        dataset=prompt_dataset(8),
        trainer_class=checker_trainer(rollouts),
        per_device_train_batch_size=16,
        max_steps=2,
    )
    trainer.train()
    assert [c["rollouts"] for c in rollouts.calls] == [16, 16]  # a generation batch a step: 4 prompts x 4
    assert sum(c["rollouts"] for c in rollouts.calls) == sum(logged(trainer, "lze/generated_rollouts"))
    turns = 0
    for prompts, output, tok in rollouts.outputs:
        for i, prompt in enumerate(prompts):
            ids, mask = output["completion_ids"][i], output["env_mask"][i]
            assert len(ids) == len(mask) == len(output["logprobs"][i])
            replies = tok.decode([t for t, m in zip(ids, mask) if m == 0])
            n = replies.count("\n") + 1  # one reply (a newline and the question) after every wrong answer but the last
            assert replies == ("\n" + prompt) * (n - 1) and 1 <= n <= 3
            assert tok.eos_token_id not in ids[:-1]  # TRL ends a completion at its first end-of-sequence token
            turns += n
            # every answer before the last was wrong; the reward is the last one's check
            text = tok.decode(ids, skip_special_tokens=True).split("\n" + prompt)
            assert not any(is_right(prompt, a) for a in text[:-1])
            assert output["solved"][i] == float(is_right(prompt, text[-1]))
            assert n == 3 or output["solved"][i] == 1.0
    assert turns == sum(c["model_turns"] for c in rollouts.calls)
