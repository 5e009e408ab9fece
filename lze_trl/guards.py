"""Checks that turn a silent failure into a loud one: bad reward values, runs that cannot learn, tiny datasets.

Plain Python / numpy with no TRL import; [`LZEGRPOTrainer`] wires them in.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .selection import in_learning_zone


class LZEWarning(UserWarning):
    """What lze-trl's run-time checks say: a run that degenerates, or a setting that cannot act as asked."""


# ----------------------------------------------------------------------------------------------- reward values
def _is_reward_value(value: Any) -> bool:
    if value is None or isinstance(value, (numbers.Real, np.number, np.bool_)):
        return True
    # 0-d arrays and tensors (`np.float32(1)`, `torch.tensor(1.0)`), which `torch.tensor` accepts as numbers
    return getattr(value, "ndim", None) == 0 and not isinstance(value, (str, bytes))


def check_reward_values(name: str, values: Any, num_completions: int | None = None) -> None:
    """
    Raises a `TypeError` naming the reward function when it did not return one number (or `None`) per completion.

    Args:
        name (`str`):
            The reward function's name, as TRL logs it.
        values:
            What the function returned.
        num_completions (`int`, *optional*):
            How many completions it was given; `None` skips the length check.
    """
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) and not hasattr(values, "__len__"):
        raise TypeError(
            f"Reward function {name!r} returned a {type(values).__name__}; it must return a list with one float (or "
            "None) per completion."
        )
    for value in values:
        if not _is_reward_value(value):
            shown = repr(value)
            raise TypeError(
                f"Reward function {name!r} returned a {type(value).__name__} value ({shown[:60]}) among its rewards; "
                "each reward must be a number (int, float, bool) or None for 'cannot score this completion'. "
                "Return e.g. `float(score)`."
            )
    if num_completions is not None and len(values) != num_completions:
        raise TypeError(
            f"Reward function {name!r} returned {len(values)} rewards for {num_completions} completions; it must "
            "return one per completion."
        )


def is_async_callable(func: Callable) -> bool:
    """
    Whether calling `func` returns a coroutine, decided as TRL decides it (`trl.trainer.utils.is_async_callable`): an
    async function or method, a `functools.partial` of one, or an object whose `__call__` is async.
    """
    while isinstance(func, functools.partial):
        func = func.func
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(type(func).__call__)


def checked_reward_func(func: Callable, name: str) -> Callable:
    """
    Wraps a reward function (a function, a method, a `functools.partial`, a callable object; sync or async) so that its
    return value is checked by [`check_reward_values`]. The wrapper keeps the function's name and signature, and is a
    coroutine function when calling `func` returns a coroutine, so TRL calls it exactly as it would call `func`.
    """

    def num_completions(kwargs: dict) -> int | None:
        completions = kwargs.get("completions")
        return len(completions) if completions is not None else None

    if is_async_callable(func):

        @functools.wraps(func)
        async def async_wrapper(*args, **kwargs):
            values = await func(*args, **kwargs)
            check_reward_values(name, values, num_completions(kwargs))
            return values

        return async_wrapper

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        values = func(*args, **kwargs)
        check_reward_values(name, values, num_completions(kwargs))
        return values

    return wrapper


# ------------------------------------------------------------------------------------------ runs that cannot learn
class LearningZoneGuard:
    """
    Notices when the first `num_batches` generation batches hold no group in the learning zone (pass rate strictly
    between 0 and 1: whether `pass_threshold` separates the rollouts, not whether a group is live), and says why once:
    the threshold most likely does not fit the correctness reward (a length or format reward always above it, a score
    that never reaches it). [`LearningZoneGuard.observe`] then returns a message naming `pass_threshold`,
    `correctness_reward`, the reward function and the range of rewards it returned.

    Args:
        pass_threshold (`float`):
            The run's `pass_threshold`.
        reward_name (`str`):
            Name of the correctness reward function.
        num_batches (`int`, *optional*, defaults to `3`):
            Generation batches to watch.
    """

    def __init__(self, pass_threshold: float, reward_name: str, num_batches: int = 3) -> None:
        self.pass_threshold = pass_threshold
        self.reward_name = reward_name
        self.num_batches = num_batches
        self.seen = 0
        self.live = 0
        self.low, self.high = math.inf, -math.inf
        self.done = False

    def observe(self, pass_rates: np.ndarray, rewards: np.ndarray) -> str | None:
        """Records one generation batch; returns the warning the first time the run is found unable to learn."""
        if self.done:
            return None
        pass_rates = np.asarray(pass_rates, dtype=np.float64)
        rewards = np.asarray(rewards, dtype=np.float64)
        self.seen += 1
        self.live += int(in_learning_zone(pass_rates).sum())
        finite = rewards[np.isfinite(rewards)]
        if finite.size:
            self.low, self.high = min(self.low, float(finite.min())), max(self.high, float(finite.max()))
        if self.live > 0:
            self.done = True
            return None
        if self.seen < self.num_batches:
            return None
        self.done = True
        if self.low > self.high:
            observed = "no finite value (every reward was None or NaN)"
        elif self.low == self.high:
            observed = f"the constant {self.low:g}"
        else:
            observed = f"values in [{self.low:g}, {self.high:g}]"
        side = (
            "always at or above"
            if self.low >= self.pass_threshold
            else "never at or above"
            if self.high < self.pass_threshold
            else "at or above it for all or none of the rollouts of every prompt,"
        )
        return (
            f"In the first {self.seen} generation batches no prompt group was in the learning zone: every group was "
            f"all-correct or all-wrong by pass_threshold={self.pass_threshold:g} on the correctness reward "
            f"{self.reward_name!r} (correctness_reward), which returned {observed}, {side} the threshold. LZE scores "
            "such groups 0 and updates only on groups whose total rewards still differ. If this reward is not a 0/1 "
            "correctness signal, set `correctness_reward` to the reward function that is, or `pass_threshold` to a "
            "value inside its range."
        )


# ----------------------------------------------------------------------------------------------- dataset size
def check_dataset_fits_batch(num_prompts: int, generation_batch_size: int, num_generations: int) -> None:
    """
    Raises a `ValueError` when the train dataset cannot fill one generation batch (the run would train 0 steps).

    Args:
        num_prompts (`int`):
            Rows of the train dataset.
        generation_batch_size (`int`):
            Rollouts per generation batch, all processes together.
        num_generations (`int`):
            Rollouts per prompt.
    """
    needed = generation_batch_size // num_generations
    if num_prompts < needed:
        raise ValueError(
            f"The train dataset has {num_prompts} prompts, but one generation batch needs {needed} distinct prompts "
            f"(generation_batch_size={generation_batch_size} rollouts / num_generations={num_generations}): training "
            "would run 0 steps. Use a larger dataset, or lower per_device_train_batch_size, steps_per_generation or "
            "the number of processes, or raise num_generations."
        )


def check_map_style(args: Any) -> None:
    """Raises a `ValueError` naming the setting that needs a map-style train dataset (it plans which rows an epoch
    rolls out, or draws rows by index), when the train dataset is an `IterableDataset`."""
    from .selectors import get_selector

    selector = get_selector(args.selector)(args)
    needs = [
        (args.prune_solved, "prune_solved=True", "set prune_solved=False"),
        (selector.plans_rollouts, f"selector={args.selector!r}", "use a selector that plans no epoch"),
    ]
    for needed, setting, fix in needs:
        if needed:
            raise ValueError(
                f"{setting} needs a map-style train dataset (it plans which prompts an epoch rolls out, or draws "
                f"extra prompts by index); got an IterableDataset. Pass a `datasets.Dataset`, or {fix}."
            )


def check_probe(args: Any, lze_enabled: bool, unsupported: list[str]) -> None:
    """Raises a `ValueError` naming `probe_generations` and the fix when probe-then-complete cannot run as asked."""
    k, G = args.probe_generations, args.num_generations
    rows = args.per_device_train_batch_size * args.steps_per_generation
    problems = [
        (k >= G, f"it must be below num_generations={G} (the probe is the first rollouts of a group)"),
        (args.selector == "none", "selector='none' keeps every group: there is nothing to leave uncompleted"),
        (not lze_enabled, "it needs a prompt identity (a map-style train dataset, or an iterable one with `prompt`)"),
        (
            rows % G != 0,
            f"every process needs whole groups: per_device_train_batch_size x steps_per_generation = "
            f"{rows} rows is not a multiple of num_generations={G}",
        ),
        (bool(unsupported), f"the probe's rollouts cannot be reused with {', '.join(unsupported)}"),
    ]
    for wrong, why in problems:
        if wrong:
            raise ValueError(f"probe_generations={k} cannot run: {why}. Set probe_generations=0, or change that.")
