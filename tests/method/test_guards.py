"""The reward wrapper keeps every reward form TRL accepts: sync and async functions, async callable objects, partials
of async functions and async methods (TRL decides sync vs async by `is_async_callable`, which looks at `__call__`)."""

import functools
import inspect

import pytest
from testing_utils import completion_bucket, logged, make_trainer

from lze_trl.method.guards import checked_reward_func, is_async_callable


try:  # TRL 1.14+; older TRL awaits a reward function only when `inspect.iscoroutinefunction` says so
    from trl.trainer.utils import is_async_callable as trl_is_async_callable
except ImportError:
    trl_is_async_callable = None


class AsyncBelowK:
    """An async callable object: passes the completions in the first `k` of 3 buckets."""

    def __init__(self, k: int = 1) -> None:
        self.k = k
        self.calls = 0

    async def __call__(self, completions, **kwargs):
        self.calls += 1
        return [float(completion_bucket(c, 3) < self.k) for c in completions]

    async def method(self, completions, **kwargs):
        return await self(completions)


async def async_below(completions, k=1, **kwargs):
    return [float(completion_bucket(c, 3) < k) for c in completions]


class SyncBelowK:
    def __call__(self, completions, **kwargs):
        return [float(completion_bucket(c, 3) < 1) for c in completions]


def forms():
    obj = AsyncBelowK()
    return {
        "async callable object": obj,
        "partial of an async function": functools.partial(async_below, k=1),
        "async method": AsyncBelowK().method,
        "async function": async_below,
        "sync callable object": SyncBelowK(),
    }


@pytest.mark.parametrize("form", list(forms()))
def test_the_wrapper_is_async_exactly_when_trl_calls_the_function_async(form):
    func = forms()[form]
    assert is_async_callable(func) == form.startswith(("async", "partial"))
    wrapper = checked_reward_func(func, "r")
    # The wrapper is a coroutine function exactly when calling `func` gives a coroutine, so every TRL awaits it
    assert inspect.iscoroutinefunction(wrapper) == is_async_callable(func)
    if trl_is_async_callable is not None:  # and it decides as the installed TRL does
        assert trl_is_async_callable(func) == is_async_callable(func) == trl_is_async_callable(wrapper)


@pytest.mark.slow
@pytest.mark.parametrize("form", ["async callable object", "partial of an async function", "async method"])
def test_lze_trains_and_selects_with_async_reward_forms(tmp_path, form):
    # Before the wrapper looked at `__call__`, an async callable object crashed LZE in both modes: "returned a
    # coroutine; it must return a list" (the wrapper was sync, TRL called it sync, the coroutine was never awaited).
    reward = forms()[form]
    trainer = make_trainer(tmp_path, reward=reward, max_steps=3)
    trainer.train()
    selected = logged(trainer, "lze/selected_frac")
    assert len(selected) == 3 and all(0 <= s < 1 for s in selected)
    assert trainer.selection_log.to_pandas()["live"].any()  # the rewards were real values: some groups are mixed
    if isinstance(reward, AsyncBelowK):
        assert reward.calls == 3  # awaited once per generation batch


# ----------------------------------------------------------------------------------------------- unscorable rewards
def test_unscorable_guard_names_each_function_once_and_stops_a_run_that_scores_nothing():
    import numpy as np

    from lze_trl.method.guards import UnscorableGuard

    said = []
    guard = UnscorableGuard(["accuracy", "format"], max_unscorable_batches=3, warn=said.append)
    nan = np.nan
    guard.check(np.array([[1.0, nan], [0.0, nan]]))  # "format" scored nothing: named once
    guard.check(np.array([[1.0, nan], [nan, nan]]))
    assert len(said) == 1 and "'format'" in said[0] and guard.unscorable_batches == 0
    guard.check(np.full((4, 2), nan))
    guard.check(np.full((4, 2), nan))
    assert len(said) == 2 and "'accuracy'" in said[1] and guard.unscorable_batches == 2
    restored = UnscorableGuard(["accuracy", "format"], 3, said.append)
    restored.load_state_dict(guard.state_dict())  # the count travels with a checkpoint
    with pytest.raises(
        RuntimeError, match=r"3 generation batches in a row.*'accuracy', 'format'.*max_unscorable_batches=0"
    ):
        restored.check(np.full((4, 2), nan))
    never = UnscorableGuard(["accuracy"], 0, said.append)
    for _ in range(5):
        never.check(np.full((2, 1), nan))  # 0: trains on
    assert never.unscorable_batches == 5


def none_reward(completions, **kwargs):
    return [None] * len(completions)


@pytest.mark.slow
def test_a_reward_that_returns_none_for_every_row_is_named_and_stops_the_run_that_asked(tmp_path):
    from lze_trl import LZEWarning

    # by default, as stock GRPOTrainer (TRL's own test_warning_raised_all_rewards_none): named once, trains on
    trainer = make_trainer(tmp_path / "on", reward=none_reward, max_steps=4)
    with pytest.warns(LZEWarning, match="'none_reward' returned None .* for every rollout") as record:
        trainer.train()
    said = [str(w.message) for w in record if "none_reward" in str(w.message)]
    assert len(said) == 2  # named once while it trains, and at its end as the cause of a run that trained nothing
    assert said[1].startswith("This run trained no token") and "max_unscorable_batches=3" in said[1]
    assert not any("learning zone" in str(w.message) for w in record)  # not blamed on pass_threshold
    assert trainer.state.global_step == 4
    assert logged(trainer, "lze/unscorable_frac") == [1.0] * 4
    # asked to stop: the third generation batch in a row with nothing scored stops it
    trainer = make_trainer(tmp_path, reward=none_reward, max_steps=6, max_unscorable_batches=3)
    with pytest.warns(LZEWarning, match="'none_reward' returned None"):
        with pytest.raises(RuntimeError, match="No rollout could be scored in 3 generation batches in a row"):
            trainer.train()
    assert trainer.state.global_step == 2
    # selector="none" trains exactly as GRPOTrainer: it says so, and trains on (GRPO does not select), whatever
    # max_unscorable_batches says
    trainer = make_trainer(
        tmp_path / "grpo", selector="none", reward=none_reward, max_steps=4, max_unscorable_batches=3
    )
    with pytest.warns(LZEWarning, match="'none_reward' returned None"):
        trainer.train()
    assert trainer.state.global_step == 4


def test_a_quota_of_one_group_a_step_is_said_naming_selection_ratio_and_the_batch(tmp_path):
    from lze_trl.method.errors import LZEWarning
    from lze_trl.method.guards import warn_if_quota_below_two

    # 4 prompts a step at 0.4: int(1.6) = 1 group a step (the README's "your own data" before it warned)
    with pytest.warns(LZEWarning, match=r"selection_ratio=0.4 keeps 1 of the 4 prompt groups .*at least 2"):
        make_trainer(tmp_path, dataset=None, per_device_train_batch_size=16, selection_ratio=0.4)
    assert warn_if_quota_below_two("lze", 0.4, 5) is None  # int(2.0) = 2
    assert warn_if_quota_below_two("none", 0.4, 4) is None  # no quota
    assert warn_if_quota_below_two("lze", 0.4, 1) is None  # one group: nothing else to keep
