"""The reward wrapper keeps every reward form TRL accepts: sync and async functions, async callable objects, partials
of async functions and async methods (TRL decides sync vs async by `is_async_callable`, which looks at `__call__`)."""

import functools
import inspect

import pytest
from testing_utils import completion_bucket, logged, make_trainer

from lze_trl.guards import checked_reward_func, is_async_callable


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
