"""Checks that turn a silent failure into a loud one: bad reward values, runs that cannot learn, tiny datasets.

Plain Python / numpy with no TRL import; [`LZEGRPOTrainer`] wires them in.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .errors import LZEWarning
from .prompt_keys import has_prompt_column
from .selection import in_learning_zone
from .selectors import get_selector
from .settings import prunes


# ----------------------------------------------------------------------------------------------- reward values
def _is_reward_value(value: Any) -> bool:
    if value is None or isinstance(value, (numbers.Real, np.number, np.bool_)):
        return True
    # 0-d arrays and tensors (`np.float32(1)`, `torch.tensor(1.0)`), which `torch.tensor` accepts as numbers
    return getattr(value, "ndim", None) == 0 and not isinstance(value, (str, bytes))


def check_reward_values(name: str, values: Any, num_completions: int | None = None) -> None:
    """Raises a `TypeError` naming the reward function `name` when its `values` are not one number (or `None`) per
    completion (of `num_completions`, when given)."""
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
    `func` (any callable, sync or async) with its return value checked by [`check_reward_values`]: same name and
    signature, and a coroutine function when `func` returns a coroutine, so TRL calls it exactly as it calls `func`.
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
    Notices when the first `num_batches` generation batches hold no group in the learning zone, most likely because
    `pass_threshold` does not fit the correctness reward `reward_name`: [`LearningZoneGuard.check`] then returns,
    once, a message naming the settings, the function and the range of its rewards.
    """

    def __init__(self, pass_threshold: float, reward_name: str, num_batches: int = 3) -> None:
        self.pass_threshold, self.reward_name, self.num_batches = pass_threshold, reward_name, num_batches
        self.seen, self.done = 0, False
        self.low, self.high = math.inf, -math.inf

    def check(self, pass_rates: np.ndarray, rewards: np.ndarray) -> str | None:
        """Records one generation batch; returns the warning the first time the run is found unable to learn."""
        finite = np.asarray(rewards, dtype=np.float64)
        finite = finite[np.isfinite(finite)]
        if self.done or not finite.size:  # nothing scored: [`UnscorableGuard`] says so, naming the reward function
            return None
        self.seen += 1
        self.low, self.high = min(self.low, float(finite.min())), max(self.high, float(finite.max()))
        live = bool(in_learning_zone(pass_rates).any())
        self.done = live or self.seen >= self.num_batches
        if live or not self.done:
            return None
        observed = (
            f"the constant {self.low:g}" if self.low == self.high else f"values in [{self.low:g}, {self.high:g}]"
        )
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


# ----------------------------------------------------------------------------------------------- unscorable rewards
class UnscorableGuard:
    """
    Says once (through `warn`) when a reward function of `reward_names` returns `None` (or NaN) for every rollout of a
    generation batch, and raises a `RuntimeError` after `max_unscorable_batches` (0: never) generation batches in a row
    in which no function scored any rollout: TRL gives them zero advantages, so the run would train on nothing, as
    stock `GRPOTrainer` does. Its count is saved with the run: a resumed run stops where the uninterrupted one would.
    """

    def __init__(self, reward_names: list[str], max_unscorable_batches: int, warn: Callable[[str], None]) -> None:
        self.reward_names, self.limit, self.warn = list(reward_names), max_unscorable_batches, warn
        self.warned: set[str] = set()
        self.unscorable_batches = 0  # generation batches in a row with no scorable rollout

    def check(self, rewards: np.ndarray) -> None:
        """Records the rewards of one generation batch's rollouts (all processes'), shape `(rollouts, reward
        functions)`, NaN where a function returned `None`."""
        generated = np.asarray(rewards, dtype=np.float64).reshape(-1, len(self.reward_names))
        for name, column in zip(self.reward_names, generated.T):
            if np.isnan(column).all() and name not in self.warned:
                self.warned.add(name)
                self.warn(
                    f"Reward function {name!r} returned None (or NaN) for every rollout of a generation batch: it "
                    "scored nothing. Check that it can read the completions and the dataset columns it needs."
                )
        self.unscorable_batches = self.unscorable_batches + 1 if np.isnan(generated).all() else 0
        if self.limit and self.unscorable_batches >= self.limit:
            raise RuntimeError(
                f"No rollout could be scored in {self.unscorable_batches} generation batches in a row: every reward "
                f"function ({', '.join(repr(n) for n in self.reward_names)}) returned None (or NaN) for every "
                "rollout, so every advantage is 0 and the run learns nothing. Fix the reward functions, or set "
                "max_unscorable_batches=0 to train on anyway."
            )

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"unscorable_batches": np.asarray(self.unscorable_batches)}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.unscorable_batches = int(state["unscorable_batches"])


# ----------------------------------------------------------------------------------------------- empty updates
class EmptyUpdateGuard:
    """
    Says once (through `warn`) when `num_batches` updates in a row trained no token: the optimizer then steps on zero
    gradients, and a run that goes on so learns nothing. At the end of a run that trained no token at all,
    [`EmptyUpdateGuard.untrained`] names the cause it saw: no rollout scored, every group dead, or a selector that kept
    none. Its counts are saved with the run: a resumed run warns where the uninterrupted one would.
    """

    def __init__(self, warn: Callable[[str], None], num_batches: int = 3) -> None:
        self.warn, self.num_batches = warn, num_batches
        self.updates = 0  # updates observed
        self.trained = 0  # updates that trained a token
        self.empty = 0  # empty updates in a row
        self.warned = False
        self.scored_batches = 0  # generation batches with at least one scorable rollout
        self.live_groups = 0  # live groups scored over the run

    def observe(self, scored: bool, live_groups: int) -> None:
        """Records one generation batch: whether any rollout of it was scored, and how many of its groups were live."""
        self.scored_batches += int(scored)
        self.live_groups += int(live_groups)

    def check(self, update_tokens: float, why: str) -> None:
        """Records one update of `update_tokens` loss tokens (all processes'); `why` says what left it empty."""
        self.updates += 1
        self.trained += int(update_tokens > 0)
        self.empty = self.empty + 1 if update_tokens <= 0 else 0
        if self.empty >= self.num_batches and not self.warned:
            self.warned = True
            self.warn(
                f"The last {self.empty} updates trained no token ({why}): the optimizer steps on zero gradients and "
                "the run learns nothing while this lasts (lze/update_tokens is 0)."
            )

    def untrained(self, reward_names: list[str], correctness: str, pass_threshold: float) -> str | None:
        """Why the run trained no token, in one message naming the cause and the fix; `None` when an update trained
        some (or none ran). `reward_names`, `correctness` and `pass_threshold` are the run's, for the message."""
        if not self.updates or self.trained:
            return None
        head = f"This run trained no token: all its {self.updates} updates were empty, so the model is where it "
        head += "started"
        if not self.scored_batches:
            names = ", ".join(repr(n) for n in reward_names)
            return (
                f"{head}. No rollout was scored: the reward functions ({names}) returned None (or NaN) for every one. "
                "Fix them (they may not read the completions' format or the dataset columns they need); "
                "max_unscorable_batches=3 stops such a run after 3 generation batches."
            )
        if not self.live_groups:
            return (
                f"{head}. Every group was dead: all its rollouts right, or all wrong, by pass_threshold="
                f"{pass_threshold:g} on the correctness reward {correctness!r} (lze/dead_frac 1.0), so no group had "
                "an advantage to learn from. Train on prompts the model sometimes solves, or check that reward and "
                "pass_threshold."
            )
        return (
            f"{head}. {self.live_groups} live groups were scored, but no update kept one (lze/selected_frac): train "
            "more steps, or keep more groups (selection_ratio)."
        )

    def state_dict(self) -> dict[str, np.ndarray]:
        counts = {"updates": self.updates, "trained": self.trained, "empty": self.empty, "warned": self.warned}
        counts.update(scored_batches=self.scored_batches, live_groups=self.live_groups)
        return {key: np.asarray(value) for key, value in counts.items()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.updates, self.trained, self.empty = int(state["updates"]), int(state["trained"]), int(state["empty"])
        self.warned = bool(state["warned"])
        self.scored_batches, self.live_groups = int(state["scored_batches"]), int(state["live_groups"])


# ----------------------------------------------------------------------------------------------- dataset size
def check_dataset_fits_batch(num_prompts: int, generation_batch_size: int, num_generations: int) -> None:
    """Raises a `ValueError` when a train dataset of `num_prompts` rows cannot fill one generation batch (of
    `generation_batch_size` rollouts, all processes, `num_generations` per prompt): the run would train 0 steps."""
    needed = generation_batch_size // num_generations
    if num_prompts < needed:
        raise ValueError(
            f"The train dataset has {num_prompts} prompts, but one generation batch needs {needed} distinct prompts "
            f"(generation_batch_size={generation_batch_size} rollouts / num_generations={num_generations}): training "
            "would run 0 steps. Use a larger dataset, or lower per_device_train_batch_size, steps_per_generation or "
            "the number of processes, or raise num_generations."
        )


def check_trainer_inputs(args: Any, train_dataset: Any, trainer_kwargs: dict[str, Any]) -> bool:
    """
    Checks what [`LZEGRPOTrainer`] is given beyond its config (which checks itself) and returns whether LZE can run:
    whether every row has a prompt identity (a map-style train dataset, or an iterable one with a `prompt` column).
    Raises a `ValueError` naming the setting and the fix, or warns ([`LZEWarning`]) that the run trains as GRPO.
    """
    from datasets import IterableDataset  # the method layer imports neither datasets nor TRL at module level

    environments = trainer_kwargs.get("environment_factory") is not None
    if train_dataset is not None and not environments and not has_prompt_column(train_dataset):
        raise ValueError(
            "The train dataset has no `prompt` column: GRPO needs one (a string or a list of chat messages) unless an "
            "`environment_factory` provides the prompts. Rename your question column to `prompt`, e.g. "
            "`dataset.rename_column('question', 'prompt')`."
        )
    iterable = isinstance(train_dataset, IterableDataset)
    enabled = train_dataset is not None and (not iterable or has_prompt_column(train_dataset))
    if not enabled and (args.selector != "none" or prunes(args)):
        warnings.warn(
            f"selector={args.selector!r} needs a stable identity for each prompt: a map-style train dataset or an "
            "iterable one with a `prompt` column; got "
            + ("no train dataset" if train_dataset is None else "an IterableDataset without `prompt`")
            + ". This run trains as plain GRPO (no selection, no pruning). Pass a `datasets.Dataset` to use LZE.",
            LZEWarning,
            stacklevel=3,
        )
    if enabled and iterable and (prunes(args) or get_selector(args.selector)(args).plans_rollouts):
        side = "prune_solved" if args.prune_solved else "prune_unsolved"
        setting, fix = (
            (f"{side}=True", "set prune_solved=False and prune_unsolved=False")
            if prunes(args)
            else (f"selector={args.selector!r}", "use a selector that plans no epoch")
        )
        raise ValueError(
            f"{setting} needs a map-style train dataset (it plans which prompts an epoch rolls out, or draws "
            f"extra prompts by index); got an IterableDataset. Pass a `datasets.Dataset`, or {fix}."
        )
    return enabled


def resolve_correctness_reward(spec: str | int | None, names: list[str]) -> int:
    """The index of the correctness reward function named (or indexed) by `correctness_reward`; a `ValueError` names
    the valid ones."""
    index = 0 if spec is None else names.index(spec) if spec in names else int(spec) if str(spec).isdigit() else -1
    if not 0 <= index < len(names):
        raise ValueError(
            f"correctness_reward={spec!r} is not among the reward functions {names}: set it to one of these names or "
            f"to an index in [0, {len(names) - 1}]."
        )
    return index


TOKEN_NORMALISED_LOSSES = ("dapo", "cispo", "vespo")
"""Loss types that normalise by a token count spanning the generation batch (`num_items_in_batch`): zero-weight
padding rows change nothing in them. The others average over the rows of each micro-batch, padding included."""


def warn_if_quota_below_two(selector: str, selection_ratio: float, num_groups: int) -> str | None:
    """Warns ([`LZEWarning`]) when the selector's quota keeps fewer than two of a generation batch's `num_groups`
    groups (`int(num_groups x selection_ratio)`, at least 1); returns the message, or `None`."""
    from .selection import num_to_select

    quota = num_to_select(num_groups, num_groups, selection_ratio)
    if selector != "lze" or num_groups < 2 or quota >= 2:
        return None
    message = (
        f"selection_ratio={selection_ratio} keeps {quota} of the {num_groups} prompt groups of each generation batch "
        f"(int({num_groups} x {selection_ratio}), at least 1): every update trains on one group. Raise "
        "selection_ratio, or the prompts per generation batch (per_device_train_batch_size x "
        "gradient_accumulation_steps x processes / num_generations), so that it keeps at least 2."
    )
    warnings.warn(message, LZEWarning, stacklevel=3)
    return message


def warn_if_diluted(selector: str, loss_type: str) -> None:
    """Says (through transformers' logger) that a loss averaging over micro-batch rows is diluted by padding rows."""
    if selector != "none" and loss_type not in TOKEN_NORMALISED_LOSSES:
        from transformers.utils import logging

        logging.get_logger("lze_trl.grpo.trainer").warning(
            f"loss_type={loss_type!r} averages over the rows of each micro-batch: the zero-weight rows that even out "
            "processes and micro-batches after selection dilute it slightly. loss_type='dapo' (TRL's default) is "
            "exact."
        )
