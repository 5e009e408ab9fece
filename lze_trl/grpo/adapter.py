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
- a `rollout_func`'s extra fields are added to the round's `inputs`, as TRL hands them to the reward functions;
- rollouts that will reach the update after an optimizer step (fused rounds' earlier rounds) keep the log-probabilities
  of the policy that sampled them: the backend's (vLLM's), or where it returns none (transformers generation) TRL's own
  forward (`_get_per_token_logps_and_entropies`) right after generating; their update rows are then corrected by TRL's
  importance-sampling ratio (`lze_trl.rounds.off_policy`): by TRL itself on vLLM, here on the other backends.

The private TRL names used are `_generate_and_score_completions`, `_generate`, `_calculate_rewards`,
`_pending_extra_logs` and `_get_per_token_logps_and_entropies`, each listed with its reason in
`lze_trl/common/coupling.py` and pinned by `tests/trainer/test_trl_coupling.py`.
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import torch
from trl.trainer.utils import pad

from ..rounds.batching import take_rows
from ..rounds.off_policy import importance_weights, weight_metrics, weight_statistics
from ..rounds.rollouts import GeneratedRows, Rollouts


FORWARD_KEYS = (
    "pixel_values",
    "image_grid_thw",
    "num_images",
    "pixel_attention_mask",
    "spatial_shapes",
    "num_tiles",
    "image_sizes",
    "token_type_ids",
    "mm_token_type_ids",
    "image_position_ids",
)
"""The update rows' model inputs besides the tokens, passed to TRL's forward as its loss passes them."""


class _RolloutsGenerated(Exception):
    """Ends TRL's `_generate_and_score_completions` right after `_generate` (a generation round: no log-probs)."""


@dataclass
class _TRLCall:
    """One call of TRL's `_generate_and_score_completions`: `_generate` stops it after generating, or serves the
    `served` rollouts ([`GeneratedRows`], every process's rewards); what TRL prepared, generated and rewarded is
    kept."""

    stop_after_generation: bool = False
    served: tuple[GeneratedRows, np.ndarray] | None = None
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
    generation_seconds: float = (
        0.0  # seconds in TRL's `_generate` in training, over the run (`lze/generation_seconds`)
    )

    def generate_rollouts(self, inputs: list[dict], num_rollouts: int, stale: list[bool] | None = None) -> Rollouts:
        """Rollouts of `inputs` (`num_rollouts` consecutive rows per prompt), generated and rewarded once by TRL,
        without the update's log-probabilities (those come only for the rows that reach
        [`~LZEGRPOTrainer.update_rows`]). The rows flagged `stale` (they will be trained after an optimizer step)
        keep the log-probabilities they were sampled with: the backend's, or TRL's forward of the current policy
        where the backend returns none (`None` per token for the others, so that rounds served together agree)."""
        prompt_keys = self.gathered_prompt_keys(inputs)  # before a rollout_func's extra fields join the rows
        call = _TRLCall(stop_after_generation=True)
        with self._calling(call, num_rollouts), contextlib.suppress(_RolloutsGenerated):
            super()._generate_and_score_completions(inputs)
        if call.generated is None:
            raise RuntimeError("TRL's _generate_and_score_completions returned without calling _generate.")
        if stale is not None and call.generated[4] is None:  # fused rounds: every round keeps them alike
            generated = list(call.generated)
            generated[4] = self._sampling_logprobs(generated[0], generated[1], stale)
            call.generated = tuple(generated)
        completions, completion_ids, extra_fields = call.generated[3], call.generated[1], call.generated[5]
        for i, row in enumerate(inputs):  # a rollout_func's extra fields reach the reward functions, as TRL hands them
            row.update({k: v[i] for k, v in extra_fields.items() if isinstance(v, list) and len(v) > i})
            row.update({k: v for k, v in extra_fields.items() if not isinstance(v, list)})
        # What reward functions log for these rows (`log_extra`) is kept with them, for the update rows they reach
        logged, self._pending_extra_logs = self._pending_extra_logs, defaultdict(list)
        try:
            rewards = super()._calculate_rewards(inputs, call.prompts, completions, completion_ids)
            extra_logs = dict(self._pending_extra_logs)
        finally:
            self._pending_extra_logs = logged
        rows = GeneratedRows(inputs, call.prompts, call.generated, extra_logs)
        return Rollouts(rows, prompt_keys, _numpy(rewards))

    def update_rows(
        self,
        inputs: list[dict],
        served: tuple[GeneratedRows, np.ndarray] | None = None,
        stale: np.ndarray | None = None,
    ) -> tuple[dict, Rollouts | None]:
        """TRL's update rows of `inputs` (`_generate_and_score_completions`), made from the `served` rollouts
        ([`GeneratedRows`], every process's rewards) with TRL's advantages over groups of `num_generations` rows, the
        `stale` ones (generated before an optimizer step) corrected by TRL's importance-sampling ratio; without
        `served`, TRL generates and rewards the rollouts, which are returned as [`Rollouts`] too."""
        # the prompt keys before TRL adds a rollout_func's extra fields to the rows
        prompt_keys = self.gathered_prompt_keys(inputs) if served is None else None
        call = _TRLCall(served=served)
        if served is not None:  # the values reward functions logged for these rows, in their order
            self._pending_extra_logs.update(served[0].extra_logs)
        with self._calling(call):
            rows = super()._generate_and_score_completions(inputs)
        if served is not None:
            return (rows if stale is None else self._corrected(rows, stale)), None
        return rows, Rollouts(GeneratedRows(inputs, call.prompts, (), {}), prompt_keys, _numpy(call.rewards))

    def _generate(self, prompts):
        call = self._call
        if call is not None and call.served is not None:
            served = call.served[0]
            if prompts != served.prompts:
                raise RuntimeError(
                    "TRL prepared other prompts for its update rows than those the served rollouts were generated "
                    "for: lze-trl cannot tell which rollout belongs to which row (lze_trl/common/coupling.py, "
                    "`_generate`)."
                )
            return served.generated
        start = time.perf_counter()
        result = super()._generate(prompts)
        if self.model.training:  # the step's split (`StepClock`): evaluation's generation is not the step's
            self.generation_seconds += time.perf_counter() - start
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

    def _sampling_logprobs(self, prompt_ids: list, completion_ids: list, stale: list[bool]) -> list[list]:
        """Each row's completion log-probabilities under the current policy (TRL's forward, no gradient) for the
        `stale` rows, and `None` per token for the others (as vLLM marks a token it could not score)."""
        rows = [i for i, flag in enumerate(stale) if flag]
        out: list[list] = [[None] * len(ids) for ids in completion_ids]
        if not rows:
            return out
        pad_id, device = self.processing_class.pad_token_id, self.accelerator.device
        if pad_id is None:  # a processor: its tokenizer pads
            pad_id = self.processing_class.tokenizer.pad_token_id
        prompts = [torch.as_tensor(prompt_ids[i]) for i in rows]
        completions = [torch.as_tensor(completion_ids[i]) for i in rows]
        ids, mask = pad(prompts, pad_id, "left"), pad([torch.ones_like(p) for p in prompts], 0, "left")
        c_ids, c_mask = pad(completions, pad_id), pad([torch.ones_like(c) for c in completions], 0)
        with torch.no_grad():
            logps = self._get_per_token_logps_and_entropies(
                self.model,
                torch.cat([ids, c_ids], dim=1).to(device),
                torch.cat([mask, c_mask], dim=1).to(device),
                c_ids.size(1),
                batch_size=self.args.per_device_train_batch_size,
            )[0]
        for k, i in enumerate(rows):
            out[i] = logps[k, : len(completion_ids[i])].float().cpu().tolist()
        return out

    def _corrected(self, rows: dict, stale: np.ndarray) -> dict:
        """TRL's update `rows` with the `stale` ones corrected by TRL's importance-sampling ratio of the current policy
        to the one that sampled them ([`~lze_trl.rounds.off_policy.importance_weights`]) where TRL does not correct
        them itself (a backend without sampling log-probabilities), as the advantages' factor (the ratio itself with
        `loss_type="vespo"`, which weighs by it); logs the ratios (`lze/stale_is_ratio_*`)."""
        sampling = rows.get("sampling_per_token_logps")
        if self.use_vllm or not self.args.vllm_importance_sampling_correction:
            return rows  # TRL corrects them (vLLM), or the run asked for no correction
        if sampling is None:
            raise RuntimeError("Stale rows reached the update without the log-probabilities they were sampled with.")
        mask = rows["completion_mask"] * (1 if rows.get("tool_mask") is None else rows["tool_mask"])
        stale = torch.as_tensor(stale, dtype=torch.bool, device=mask.device)
        current = rows.get("old_per_token_logps")  # TRL's forward of the current policy, when it made one
        if current is None:
            index = torch.nonzero(stale).flatten()
            part = take_rows(rows, index)
            with torch.no_grad():
                logps = self._get_per_token_logps_and_entropies(
                    self.model,
                    torch.cat([part["prompt_ids"], part["completion_ids"]], dim=1),
                    torch.cat([part["prompt_mask"], part["completion_mask"]], dim=1),
                    part["completion_ids"].size(1),
                    batch_size=self.args.per_device_train_batch_size,
                    **{key: part[key] for key in FORWARD_KEYS if part.get(key) is not None},
                )[0]
            current = torch.full_like(sampling, float("nan"))
            current[index] = logps.to(current.dtype)
        args = self.args
        bounds = args.vllm_importance_sampling_clip_min, args.vllm_importance_sampling_clip_max
        ratio = importance_weights(current, sampling, mask, args.vllm_importance_sampling_mode, *bounds)
        ratio = torch.where(stale[:, None], ratio, torch.ones_like(ratio))
        statistics = weight_statistics(ratio, stale, mask)  # every process logs the same: gathered
        self.log_lze(weight_metrics(self.accelerator.gather(statistics[None]).reshape(-1, 5).cpu()))
        rows = dict(rows)
        if self.loss_type == "vespo":
            rows["importance_sampling_ratio"] = ratio
        elif ratio.shape[-1] == 1:
            rows["advantages"] = rows["advantages"] * ratio[:, 0]
        else:
            rows["advantages"] = rows["advantages"].reshape(len(ratio), -1) * ratio
        return rows

    @contextlib.contextmanager
    def _calling(self, call: _TRLCall, rollouts_per_prompt: int | None = None):
        """`call` for our overrides of TRL's methods inside, and TRL's group size `num_generations` (which sets vLLM
        server's completions per prompt) `rollouts_per_prompt` (a round's)."""
        saved, self._call = self.num_generations, call
        self.num_generations = rollouts_per_prompt or saved
        try:
            yield
        finally:
            self._call, self.num_generations = None, saved

    def gathered_prompt_keys(self, inputs: list[dict]) -> np.ndarray:
        """The prompt key of every row of `inputs`, every process's in process order (a collective)."""
        keys = torch.as_tensor(self.prompt_keys.of(inputs), device=self.accelerator.device)
        return self.accelerator.gather(keys).cpu().numpy()
