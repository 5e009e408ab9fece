"""Updates that train nothing are said loudly: once while training, and at the end of a run that trained no token,
with the cause (no rollout scored, every group dead, nothing kept)."""

import pytest
from testing_utils import make_trainer

from lze_trl.method.errors import LZEWarning
from lze_trl.method.guards import EmptyUpdateGuard


def test_empty_updates_are_said_once_and_a_run_that_trained_nothing_names_its_cause():
    said = []
    guard = EmptyUpdateGuard(warn=said.append)
    for tokens in (0, 5, 0, 0, 3, 0, 0, 0, 0):
        guard.observe(True, 1)
        guard.check(tokens, "why")
    assert len(said) == 1 and "last 3 updates trained no token (why)" in said[0]
    state = guard.state_dict()
    restored = EmptyUpdateGuard(warn=said.append)
    restored.load_state_dict(state)
    assert (restored.updates, restored.trained, restored.empty, restored.warned) == (9, 2, 4, True)
    assert (restored.scored_batches, restored.live_groups) == (9, 9)
    assert restored.untrained(["r"], "r", 1.0) is None  # it trained

    def untrained(scored: bool, live: int) -> str:
        nothing = EmptyUpdateGuard(warn=said.append)
        for _ in range(2):
            nothing.observe(scored, live)
            nothing.check(0, "why")
        return nothing.untrained(["acc", "fmt"], "acc", 0.5)

    head = "This run trained no token: all its 2 updates were empty, so the model is where it started. "
    assert untrained(False, 0).startswith(head + "No rollout was scored: the reward functions ('acc', 'fmt')")
    assert "max_unscorable_batches=3" in untrained(False, 0)
    assert untrained(True, 0).startswith(head + "Every group was dead")
    assert "pass_threshold=0.5 on the correctness reward 'acc'" in untrained(True, 0)
    assert untrained(True, 1).startswith(head + "2 live groups were scored, but no update kept one")
    assert "Train more steps" not in untrained(True, 0)  # the old advice, which named the wrong cause


@pytest.mark.slow
def test_a_run_whose_every_group_is_dead_says_it_trained_nothing(tmp_path):
    trainer = make_trainer(tmp_path, reward=lambda completions, **kw: [1.0] * len(completions), max_steps=4)
    with pytest.warns(LZEWarning) as record:
        trainer.train()
    messages = [str(w.message) for w in record]
    assert any("The last 3 updates trained no token" in m for m in messages)
    assert any(m.startswith("This run trained no token") and "Every group was dead" in m for m in messages)
    assert trainer.lze.untrained() is not None


@pytest.mark.slow
def test_a_run_whose_reward_scores_nothing_names_the_reward_at_its_end(tmp_path):
    def unscorable(completions, **kwargs):
        return [None] * len(completions)

    trainer = make_trainer(tmp_path, reward=unscorable, max_steps=2)
    with pytest.warns(LZEWarning) as record:
        trainer.train()
    ended = [str(w.message) for w in record if str(w.message).startswith("This run trained no token")]
    assert len(ended) == 1 and "No rollout was scored: the reward functions ('unscorable')" in ended[0]
