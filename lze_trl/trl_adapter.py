"""How lze-trl intercepts TRL's `_generate_and_score_completions`: the one module that reaches into it.

TRL's `_generate_and_score_completions` prepares the prompts, generates (`_generate`), rewards
(`_calculate_rewards`), computes log-probabilities and advantages, and returns the update rows, with no hook between
these steps (`docs/upstream/score-generated-rollouts.md` is the TRL change that would replace this module). To
generate a round without log-probabilities, and to make update rows of rollouts generated before, [`TRLAdapter`]
overrides `_generate` and `_calculate_rewards` and steers them through one [`_TRLCall`] per call of TRL's method:

- a generation round: `_generate` keeps TRL's prompts and result, and ends TRL's method by raising
  `_RolloutsGenerated` (caught here); the rollouts are then rewarded once with TRL's `_calculate_rewards`;
- update rows of served rollouts: `_generate` returns the served result (after checking that TRL prepared the same
  prompts) and `_calculate_rewards` the served rewards;
- TRL's `num_generations` (its group size, which also sets vLLM server's completions per prompt) is set to the
  round's rollouts per group for the call, and restored after;
- a `rollout_func`'s extra fields are added to the round's `inputs`, as TRL hands them to the reward functions.

The private TRL names used are `_generate_and_score_completions`, `_generate`, `_calculate_rewards` and
`_pending_extra_logs`, each listed with its reason in `trl_coupling.py` and pinned by `tests/test_trl_coupling.py`.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import torch

from .rollouts import Rollouts, Rows


class _RolloutsGenerated(Exception):
    """Ends TRL's `_generate_and_score_completions` right after `_generate` (a generation round: no log-probs)."""


@dataclass
class _TRLCall:
    """One call of TRL's `_generate_and_score_completions`: `_generate` stops it after generating, or serves the
    `served` rollouts ([`Rows`], every process's rewards); what TRL prepared, generated and rewarded is kept."""

    stop_after_generation: bool = False
    served: tuple[Rows, np.ndarray] | None = None
    prompts: list | None = None
    generated: tuple | None = None
    rewards: torch.Tensor | None = None


def _numpy(rewards: torch.Tensor) -> np.ndarray:
    return rewards.detach().float().cpu().numpy().astype(np.float64)


class TRLAdapter:
    """
    The mixin of [`LZEGRPOTrainer`] (before `GRPOTrainer` in its bases) that generates rounds and makes update rows
    through TRL's `_generate_and_score_completions`. It reads the trainer's `prompt_keys`, `accelerator` and
    `num_generations`.
    """

    _call: _TRLCall | None = None  # a class default: a trainer built without `__init__` generates as GRPOTrainer

    def generate_rollouts(self, inputs: list[dict], num_rollouts: int) -> Rollouts:
        """Rollouts of `inputs` (`num_rollouts` consecutive rows per prompt), generated and rewarded once by TRL,
        without log-probabilities (those come only for the rows that reach [`~LZEGRPOTrainer.update_rows`])."""
        prompt_keys = self._gathered_prompt_keys(inputs)  # before a rollout_func's extra fields join the rows
        call = _TRLCall(stop_after_generation=True)
        with self._calling(call, num_rollouts), contextlib.suppress(_RolloutsGenerated):
            super()._generate_and_score_completions(inputs)
        if call.generated is None:
            raise RuntimeError("TRL's _generate_and_score_completions returned without calling _generate.")
        completions, completion_ids, extra_fields = call.generated[3], call.generated[1], call.generated[5]
        for i, row in enumerate(inputs):  # a rollout_func's extra fields reach the reward functions, as TRL hands them
            row.update({k: v[i] for k, v in extra_fields.items() if isinstance(v, list) and len(v) > i})
            row.update({k: v for k, v in extra_fields.items() if not isinstance(v, list)})
        logged, self._pending_extra_logs = self._pending_extra_logs, defaultdict(list)
        rewards = super()._calculate_rewards(inputs, call.prompts, completions, completion_ids)
        # What reward functions log for these rows (`log_extra`) is kept with them, for the update rows they reach
        extra_logs, self._pending_extra_logs = dict(self._pending_extra_logs), logged
        rows = Rows(inputs, call.prompts, call.generated, extra_logs)
        return Rollouts(rows, prompt_keys, _numpy(rewards))

    def update_rows(
        self, inputs: list[dict], served: tuple[Rows, np.ndarray] | None = None, group_size: int | None = None
    ) -> tuple[dict, Rollouts | None]:
        """TRL's update rows of `inputs` (`_generate_and_score_completions`), made from the `served` rollouts
        ([`Rows`], every process's rewards) with TRL's advantages over groups of `group_size` rows (by default
        `num_generations`); without `served`, TRL generates and rewards the rollouts, which are returned as
        [`Rollouts`] too."""
        # the prompt keys before TRL adds a rollout_func's extra fields to the rows
        prompt_keys = self._gathered_prompt_keys(inputs) if served is None else None
        call = _TRLCall(served=served)
        if served is not None:  # the values reward functions logged for these rows, in their order
            self._pending_extra_logs.update(served[0].extra_logs)
        with self._calling(call, group_size):
            rows = super()._generate_and_score_completions(inputs)
        if served is not None:
            return rows, None
        return rows, Rollouts(Rows(inputs, call.prompts, (), {}), prompt_keys, _numpy(call.rewards))

    def _generate(self, prompts):
        call = self._call
        if call is not None and call.served is not None:
            served = call.served[0]
            if prompts != served.prompts:
                raise RuntimeError(
                    "TRL prepared other prompts for its update rows than those the served rollouts were generated "
                    "for: lze-trl cannot tell which rollout belongs to which row (trl_coupling.py, `_generate`)."
                )
            return served.generated
        result = super()._generate(prompts)
        if call is not None:
            call.prompts, call.generated = prompts, result
            if call.stop_after_generation:
                raise _RolloutsGenerated
        return result

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        call = self._call
        if call is not None and call.served is not None:
            return torch.as_tensor(call.served[1], dtype=torch.float32, device=self.accelerator.device)
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        if call is not None:
            call.rewards = rewards
        return rewards

    @contextlib.contextmanager
    def _calling(self, call: _TRLCall, group_size: int | None = None):
        """`call` for our overrides of TRL's methods inside, and TRL's group size `num_generations` (which sets vLLM
        server's completions per prompt) `group_size`."""
        saved, self._call = self.num_generations, call
        self.num_generations = group_size or saved
        try:
            yield
        finally:
            self._call, self.num_generations = None, saved

    def _gathered_prompt_keys(self, inputs: list[dict]) -> np.ndarray:
        keys = torch.as_tensor(self.prompt_keys.of(inputs), device=self.accelerator.device)
        return self.accelerator.gather(keys).cpu().numpy()
