"""LZE on TRL's async trainer (issue #47, phase 1: no vLLM): the window between the worker's queue and the trainer, the
per-prompt state fed in policy-version order, a few real steps of `AsyncGRPOTrainer` with the in-process stand-in
worker, the state in checkpoints, the refusals, and what this relies on in TRL's source."""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import os
import queue
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import trl
from datasets import Dataset
from packaging.specifiers import SpecifierSet

from lze_trl.common.coupling import ASYNC_TRL


if not SpecifierSet(ASYNC_TRL).contains(trl.__version__):  # lze_trl/async_grpo/upstream.py refuses it
    pytest.skip("LZEAsyncGRPOTrainer is built on TRL 1.16's AsyncGRPOTrainer", allow_module_level=True)

from testing_utils import SUPPORT, decided
from trl.experimental.async_grpo import AsyncGRPOTrainer, async_grpo_trainer
from trl.experimental.async_grpo.async_rollout_worker import RolloutGroup, RolloutSample, _AsyncRolloutLoop
from trl.experimental.async_grpo.packing import TREE_ATTENTION, TreeRow, register_tree_attention, tree_attention
from trl.trainer.utils import RepeatSampler

from lze_examples.tiny import char_tokenizer, tiny_qwen2
from lze_trl.async_grpo.cpu import cpu_tree_attention, use_cpu_tree_attention
from lze_trl.async_grpo.samples import LZERolloutSample, Order, group_advantages, tag_group
from lze_trl.async_grpo.trainer import LZEAsyncGRPOConfig, LZEAsyncGRPOTrainer
from lze_trl.async_grpo.window import GroupWindow
from lze_trl.common.epochs import EpochOrders
from lze_trl.common.in_flight_files import IN_FLIGHT_FILE, load_in_flight, save_in_flight
from lze_trl.method import checkpoint as checkpoint_files
from lze_trl.method.errors import LZEStateError, LZEWarning
from lze_trl.method.run import LZERun
from lze_trl.testing.async_stand_ins import InProcessWeightTransfer, StandInRolloutWorker


G = 4


def config(tmp_path, **overrides):
    values = dict(output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none", max_steps=3, num_generations=G)
    values.update(token_budget=0, logging_steps=1, save_strategy="no", learning_rate=0.05, selection_noise=0.0)
    values.update(overrides)
    return LZEAsyncGRPOConfig(**values)


def answer(order: Order, correct: list[int], version: int = 0, rows_per_rollout: int = 1) -> list:
    """One scored group's rows as a worker pushes them for `order`, tagged for LZE (correctness is the one reward)."""
    rows, rollouts = [], []
    for j, c in enumerate(correct):
        for r in range(rows_per_rollout):
            rows.append(
                RolloutSample(
                    prompt=f"p{order.prompt_key}",
                    completion=str(c),
                    input_ids=np.array([5, 6, 7 + j, 8 + r], dtype=np.int64),
                    completion_mask=np.array([0, 0, 1, 1], dtype=np.int64),
                    old_log_probs=np.array([0, 0, -1.5, -0.5], dtype=np.float32),
                    advantage=99.0,  # the worker's own; the window recomputes the group's, weighted
                    model_version=version,
                    group_id=order.group_id,
                    metrics={"reward": float(c)},
                )
            )
            rollouts.append(j)
    return tag_group(rows, order, [[float(c)] for c in correct], rollouts)


class Orders(list):
    """The orders a window sent, in order."""

    def send(self, orders):
        self.extend(orders)


def window_of(args, size, keys=(10, 11, 12, 13, 14, 15), in_flight=1, logged=None):
    run = LZERun(args, G, np.array(keys, dtype=np.int64), ["correct"], 0)
    window = GroupWindow(run, size, G, in_flight, log=(logged.append if logged is not None else None))
    window.source, orders = queue.Queue(), Orders()
    window.send = orders.send
    window.advance()
    return window, window.source, orders


def drain(window: GroupWindow) -> list:
    out = []
    while True:
        try:
            out.append(window.get(timeout=0))
        except queue.Empty:
            return out


def feed(source, *groups):
    for rows in groups:
        for row in rows:
            source.put(row)


# ----------------------------------------------------------------------------------------------- the window
def test_the_window_draws_the_seeded_permutation_and_keeps_the_selectors_quota(tmp_path):
    args = config(tmp_path, selection_ratio=0.5)
    window, source, sent = window_of(args, 6)
    orders = list(sent)  # the first batch's
    order = EpochOrders(6, args.seed)(0)  # epoch 0's draw: the synchronous sampler's, TRL's RepeatSampler order
    assert order == list(RepeatSampler(range(6), mini_repeat_count=1, seed=args.seed))
    assert [o.index for o in orders] == list(order) and [o.group_id for o in orders] == list(range(6))
    assert [o.prompt_key for o in orders] == [10 + i for i in order]
    correct = {0: [0, 0, 0, 0], 1: [1, 1, 1, 1], 2: [1, 0, 0, 0], 3: [1, 1, 0, 0], 4: [1, 1, 1, 0], 5: [0, 1, 0, 1]}
    # energies: dead, dead, p=0.25 0.5625 (two rows per rollout), 0.5 0.5, 0.75 0.1875, 0.5 0.5
    groups = [answer(o, correct[o.index], rows_per_rollout=2 if o.index == 2 else 1) for o in orders]
    feed(source, *groups[:5])
    assert drain(window) == []  # nothing before every group of the batch has arrived
    feed(source, groups[5])
    forwarded = drain(window)
    # quota = min(max(int(6 x 0.5), 1), 4 live) = 3: the top three by energy, in draw order, all their rows
    chosen = [o for o in orders if o.index in (2, 3, 5)]
    assert [r.group_id for r in forwarded] == [o.group_id for o in chosen for _ in range(8 if o.index == 2 else 4)]
    for row in forwarded:  # the group's advantages, as TRL's `_score_group` computes them
        expected = group_advantages(np.array(correct[orders[row.group_id].index], dtype=float))
        assert row.advantage == expected[row.rollout]
    assert [d[3] for d in window.decisions] == [float(order[g] in (2, 3, 5)) for g in range(6)]
    assert window.run.batches_recorded == 1 and len(window.batches) == 1  # the next batch is open


def test_selector_none_forwards_every_group_in_draw_order(tmp_path):
    window, source, orders = window_of(config(tmp_path, selector="none"), 3, keys=(1, 2, 3))
    feed(source, *[answer(o, [1, 0, 1, 0][:G]) for o in orders[::-1]])  # arriving in reverse
    assert [r.group_id for r in drain(window)] == [g for g in range(3) for _ in range(G)]


def test_each_group_updates_its_prompt_once_in_policy_version_order_whatever_the_arrival_order(tmp_path):
    args = config(tmp_path, selection_ratio=1.0)
    tables = []
    for reverse in (False, True):
        window, source, orders = window_of(args, 3, keys=(7, 8))  # a batch of 3 over 2 prompts: one is drawn twice
        twice = [o for o in orders if o.prompt_key == orders[2].prompt_key]
        assert len(twice) == 2
        # the prompt drawn twice: its first draw rolled out by version 2 (3 of 4 right), its second by version 1 (1)
        versions = {twice[0].group_id: 2, twice[1].group_id: 1}
        correct = {twice[0].group_id: [1, 1, 1, 0], twice[1].group_id: [1, 0, 0, 0]}
        groups = [answer(o, correct.get(o.group_id, [1, 1, 0, 0]), versions.get(o.group_id, 2)) for o in orders]
        feed(source, *(groups[::-1] if reverse else groups))
        drain(window)
        tables.append(window.run.prompts.table())
        state = window.run.prompts.get([twice[0].prompt_key])
        assert list(state["num_observations"]) == [2]  # once per group
        # its first pass rate is version 1's (0.25), then its EMA 0.25 -> 0.9 x 0.25 + 0.1 x 0.75
        assert state["initial_pass_rate"][0] == pytest.approx(0.25)
        assert state["ema_pass_rate"][0] == pytest.approx(0.3)
        assert state["last_pass_rate"][0] == pytest.approx(0.75)
    for name in tables[0]:
        np.testing.assert_array_equal(tables[0][name], tables[1][name])


def test_a_group_older_than_its_prompts_newest_scored_version_is_counted_late(tmp_path):
    logged = []
    window, source, orders = window_of(config(tmp_path), 1, keys=(7,), in_flight=3, logged=logged)
    assert len(orders) == 3  # three batches of one group open at once
    feed(source, answer(orders[0], [1, 0, 0, 0], 3), answer(orders[1], [1, 1, 0, 0], 2))
    feed(source, answer(orders[2], [1, 1, 0, 0], 3))
    drain(window)
    assert [m["lze/late_groups"] for m in logged] == [0.0, 1.0, 0.0]


def test_a_batch_with_every_group_dead_hands_its_rows_on_at_zero_advantage(tmp_path):
    # the synchronous trainer steps on zero-weight rows when it selects nothing; the async one must not wait for ever
    logged = []
    window, source, orders = window_of(config(tmp_path), 3, keys=(1, 2, 3), logged=logged)
    feed(source, *[answer(o, [1, 1, 1, 1] if i % 2 else [0, 0, 0, 0]) for i, o in enumerate(orders[:3])])
    forwarded = drain(window)
    assert len(forwarded) == 3 * G and all(r.advantage == 0.0 for r in forwarded)
    assert logged[0]["lze/update_rows"] == 0.0 and logged[0]["lze/selected_frac"] == 0.0
    feed(source, *[answer(o, [1, 0, 0, 0]) for o in orders[3:6]])  # a live batch: only its selected rows
    live = drain(window)
    assert {r.advantage != 0 for r in live} == {True}
    assert logged[1]["lze/update_rows"] == len(live)  # the rows the update trains with a weight, as the sync trainer


def test_updates_that_train_no_token_are_said_as_the_synchronous_trainer_says_them(tmp_path):
    window, source, orders = window_of(config(tmp_path), 3, keys=(1, 2, 3), in_flight=3)
    with pytest.warns(LZEWarning, match=r"The last 3 updates trained no token \(no group was selected\)"):
        for batch in range(3):  # three batches whose groups all came back dead
            feed(source, *[answer(o, [0, 0, 0, 0]) for o in orders[3 * batch : 3 * batch + 3]])
            drain(window)
    assert window.run.empty_update_guard.empty == 3


def test_selected_rows_too_stale_to_train_are_counted_and_warned_about_once(tmp_path):
    warned, logged = [], []
    args = config(tmp_path, selector="none")
    run = LZERun(args, G, np.array([1, 2], dtype=np.int64), ["correct"], 0, warn=warned.append)
    window = GroupWindow(run, 2, G, 1, log=logged.append, oldest_trained=lambda: 5)  # the trainer is at 5 + staleness
    window.source, orders = queue.Queue(), Orders()
    window.send = orders.send
    window.advance()
    feed(window.source, answer(orders[0], [1, 0, 1, 0], version=4), answer(orders[1], [1, 1, 0, 0], version=5))
    drain(window)
    assert logged[0]["lze/stale_rows"] == G  # the version-4 group's rows: the trainer would drop them
    assert len(warned) == 1 and "too stale to train" in warned[0]
    feed(window.source, *[answer(o, [1, 0, 1, 0], version=4) for o in orders[2:]])
    drain(window)
    assert logged[1]["lze/stale_rows"] == 2 * G and len(warned) == 1  # counted again, said once


def test_rows_the_window_cannot_place_are_refused(tmp_path):
    _, _, orders = window_of(config(tmp_path), 2)
    rows = answer(orders[1], [1, 0, 0, 0])
    cases = [
        ([RolloutSample(**{k: getattr(rows[0], k) for k in RolloutSample.__dataclass_fields__})], TypeError,
         "lacks LZE's tags"),
        (answer(Order(99, 0, 10), [1, 0, 0, 0]), RuntimeError, "group 99, which is in no open generation batch"),
        (tag_group(rows, orders[1], [[1.0, 0.0]] * G, [0, 1, 2, 3]), ValueError, "one column per reward function"),
        (answer(orders[1], [1, 0]), ValueError, r"shape \(2, 1\): LZE needs one row per rollout \(4, num_gen"),
        (tag_group(rows, orders[1], [[1.0]] * G, [0, 1, 2, G]), ValueError, r"rows of rollouts \[4\]"),
        (rows + rows, RuntimeError, f"sent group {orders[1].group_id} again after it had arrived whole"),
    ]  # fmt: skip
    for rows, error, match in cases:
        window, source, _ = window_of(config(tmp_path), 2)
        feed(source, rows)
        with pytest.raises(error, match=match):
            drain(window)


def test_a_group_without_rows_counts_in_the_pass_rate_and_trains_nothing(tmp_path):
    window, source, orders = window_of(config(tmp_path, selector="none"), 2, keys=(1, 2))
    feed(source, tag_group([], orders[0], [[1.0], [0.0], [1.0], [0.0]], []), answer(orders[1], [1, 1, 0, 0]))
    forwarded = drain(window)
    assert {r.group_id for r in forwarded} == {orders[1].group_id}  # the placeholder is never handed on
    assert window.run.prompts.get([orders[0].prompt_key])["last_pass_rate"][0] == 0.5


def test_forward_pruning_plans_what_the_window_draws(tmp_path):
    args = config(tmp_path, prune_solved=True, prune_solved_after=1, prune_explore_fraction=0.0, selector="none")
    window, source, orders = window_of(args, 3, keys=(1, 2, 3))
    solved = orders[0].index
    feed(source, *[answer(o, [1, 1, 1, 1] if o.index == solved else [1, 0, 0, 0]) for o in orders])
    drain(window)
    feed(source, *[answer(o, [1, 0, 0, 0]) for o in orders[3:]])
    drain(window)
    epoch_1 = [o.index for o in orders[3:6]]  # the second epoch, planned after the first was recorded
    assert solved not in epoch_1 and window.run.position.epoch >= 1


def test_the_window_and_the_run_state_resume_exactly(tmp_path):
    args = config(tmp_path, selection_ratio=0.5, selection_noise=0.05)
    rng = np.random.default_rng(0)
    correct = {g: list(rng.integers(0, 2, G)) for g in range(400)}

    def reply(o):
        return answer(o, correct[o.group_id], version=o.group_id // 5)

    def play(window, orders, start, rows, take=True):
        """Answers the orders from `start` on, in the order sent, until `rows` rows were handed on (or, with
        `take=False`, are ready); returns them and the next order to answer."""
        out, i = [], start
        while i < len(orders) and len(out) + (0 if take else len(window.ready)) < rows:
            feed(window.source, reply(orders[i]))
            i += 1
            out += drain(window) if take else []
            if not take:
                window.advance()
                while window.source.qsize():
                    window.put(window.source.get())
        return out, i

    windows = [window_of(args, 4, in_flight=2) for _ in range(2)]
    for window, _, orders in windows:
        head, i = play(window, orders, 0, 30)
        _, i = play(window, orders, i, 1, take=False)  # a selected row ready, not handed on yet
        assert window.ready and len(window.batches) == 2
    (unbroken, _, orders), (broken, _, _) = windows
    broken.put(reply(orders[i])[0])  # a group partly arrived: ordered again on resume
    checkpoint_files.save_state(str(tmp_path), broken.run.state_dict(), {})
    save_in_flight(str(tmp_path), 0, 1, broken.state_dict())
    resumed, _, sent = window_of(args, 4, in_flight=2)
    resumed.run.load_state_dict(checkpoint_files.load_state(str(tmp_path))[0])
    resumed.load_state_dict(*load_in_flight(str(tmp_path), 0, 1, "this test"), LZERolloutSample)
    sent.clear()
    resumed.advance()
    assert sorted(sent, key=lambda o: o.group_id) == sorted(orders[i:], key=lambda o: o.group_id)
    a, _ = play(unbroken, orders, i, 40)
    b, _ = play(resumed, sent, 0, 40)
    assert len(a) >= 40 and len(b) >= 40
    for x, y in zip(a[:40], b[:40]):
        assert (x.group_id, x.model_version, x.advantage, x.prompt_key, x.rollout, x.group_rewards) == (
            y.group_id, y.model_version, y.advantage, y.prompt_key, y.rollout, y.group_rewards,
        )  # fmt: skip
        np.testing.assert_array_equal(x.input_ids, y.input_ids)
        np.testing.assert_array_equal(x.old_log_probs, y.old_log_probs)
        assert x.old_log_probs.dtype == y.old_log_probs.dtype and x.prompt == y.prompt and x.metrics == y.metrics
    for name, value in unbroken.run.prompts.table().items():
        np.testing.assert_array_equal(value, resumed.run.prompts.table()[name])
    assert list(unbroken.decisions)[-4:] == list(resumed.decisions)[-4:]


# ----------------------------------------------------------------------------------------------- the trainer
def correct(completions, **kwargs):
    return [float(c == "1") for c in completions]


@pytest.fixture
def setup(tmp_path):
    tokenizer = char_tokenizer()
    path = str(tmp_path / "tiny")
    tiny_qwen2(tokenizer).save_pretrained(path)
    tokenizer.save_pretrained(path)
    rates = [0.0, 0.5, 1.0, 0.25, 0.75, 0.5, 0.0, 0.5]
    dataset = Dataset.from_dict({"prompt": [f"q{i}=" for i in range(8)], "pass_rate": rates})
    return path, tokenizer, dataset


def make_trainer(tmp_path, setup, **overrides):
    path, tokenizer, dataset = setup
    policy = tiny_qwen2(tokenizer)
    worker = StandInRolloutWorker(policy, tokenizer, dataset, [correct])
    args = config(tmp_path, per_device_train_batch_size=8, selection_ratio=0.5, window_groups=4, **overrides)
    return LZEAsyncGRPOTrainer(
        path,
        [correct],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        rollout_worker=worker,
        weight_transfer=InProcessWeightTransfer(policy),
    )


@pytest.mark.slow
def test_the_async_trainer_updates_on_the_selected_groups_only(tmp_path, setup):
    torch.manual_seed(0)
    trainer = make_trainer(tmp_path, setup)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    assert trainer.state.global_step == 3
    assert any(not torch.equal(before[n], p) for n, p in trainer.model.named_parameters())
    selected, idle = decided(trainer.lze_window.decisions, 4)
    unselected = {d[0] for d in trainer.lze_window.decisions if d[3] == 0} - idle
    trained = trainer._trained_groups  # every group_id TRL's collator put into a micro-batch of the loss
    assert unselected and trained and trained <= selected | idle and not trained & unselected
    _, _, dataset = setup
    rate = dict(zip(trainer.prompt_keys.dataset_keys.tolist(), dataset["pass_rate"]))
    dead = {g for g, _, key, _ in trainer.lze_window.decisions if rate[key] in (0.0, 1.0)} - idle
    assert dead and not trained & dead
    assert trainer.weight_transfer.syncs == 4  # the cold sync, then one per step: the stand-in scores with them
    logged = [e for e in trainer.state.log_history if "lze/selected_frac" in e]
    assert logged and all(0 <= e["lze/selected_frac"] <= 0.5 for e in logged)  # 0: a batch that selected none
    assert any(e["lze/selected_frac"] > 0 for e in logged)
    # every group drawn is rolled out whole, once, in one go: GRPO's 4 groups x 4 rollouts a generation batch
    produced = [g for g, _, _ in trainer.rollout_worker.produced]
    assert len(produced) == len(set(produced)) and {d[0] for d in trainer.lze_window.decisions} <= set(produced)
    assert all(e["lze/generated_rollouts"] == 4 * G for e in logged)
    assert all(e["lze/update_rows"] <= e["lze/grpo_update_rows"] for e in logged)
    # every lze/ metric it logs is documented, and the async page's own are all logged
    docs = Path(__file__).resolve().parents[2] / "docs" / "source"
    own = set(re.findall(r"^\| `(lze/[a-z_/]+)` \|", (docs / "async.md").read_text(), re.M))
    documented = own | set(re.findall(r"^\| `(lze/[a-z_/]+)` \|", (docs / "metrics.md").read_text(), re.M))
    keys = {k for e in trainer.state.log_history for k in e if k.startswith("lze/")}
    assert own and own <= keys and keys <= documented, (own - keys, keys - documented)
    # each step's split: the seconds waiting for the worker's rollouts and the rest
    steps = [e for e in trainer.state.log_history if "lze/step_seconds" in e]
    assert len(steps) == 3 and all(0 <= e["lze/rollout_wait_seconds"] <= e["lze/step_seconds"] for e in steps)
    assert trainer.rollout_wait_seconds == trainer.lze_window.waited_seconds > 0
    assert not any("lze/generation_seconds" in e for e in trainer.state.log_history)  # one name, one meaning


def test_the_async_trainer_in_shadow_mode_trains_every_group_and_logs_what_lze_would_keep(tmp_path, setup):
    trainer = make_trainer(tmp_path, setup, shadow=True)
    trainer.train()
    assert all(weight == 1.0 for _, _, _, weight in trainer.lze_window.decisions)  # every group, as GRPO
    logs = [e for e in trainer.state.log_history if "lze/shadow_selected_frac" in e]
    assert logs and all(e["lze/shadow_selected_frac"] <= 0.5 for e in logs)  # selection_ratio=0.5 of 4 groups
    assert all(e["lze/shadow_update_tokens"] <= e["lze/grpo_update_tokens"] == e["lze/update_tokens"] for e in logs)
    assert any(e["lze/shadow_update_tokens"] < e["lze/grpo_update_tokens"] for e in logs)


@pytest.mark.slow
def test_the_async_trainer_prunes_solved_prompts_from_what_it_draws(tmp_path, setup):
    trainer = make_trainer(tmp_path, setup, max_steps=6, prune_solved=True, prune_solved_after=1,
                           prune_explore_fraction=0.0, selector="none")  # fmt: skip
    _, _, dataset = setup
    solved = [i for i, r in enumerate(dataset["pass_rate"]) if r == 1.0]
    solved_keys = trainer.prompt_keys.dataset_keys[solved]
    plans, plan_epoch = [], trainer.lze.plan_epoch

    def recording_plan_epoch(epoch, order):
        # an epoch is planned when the window draws past the last one: with batches in flight, possibly before every
        # group of the last epoch is recorded
        recorded = trainer.lze.prompts.get(solved_keys)["last_pass_rate"] == 1.0
        plan = plan_epoch(epoch, order)
        plans.append((epoch, set(np.asarray(solved)[recorded].tolist()), set(plan.tolist())))
        return plan

    trainer.lze.plan_epoch = recording_plan_epoch
    trainer.train()
    pruned = [e["lze/pruned_prompts"] for e in trainer.state.log_history if "lze/pruned_prompts" in e]
    assert pruned and max(pruned) >= 1 and trainer.lze.position.epoch >= 2
    assert set(solved) <= plans[0][2]  # the always-solved prompt is drawn in epoch 0...
    # ... and left out of every epoch planned once its group was recorded (solved once: pruned), which some were
    assert all(not (known & plan) for _, known, plan in plans) and any(known for _, known, _ in plans)
    drawn = [key for _, _, key, _ in trainer.lze_window.decisions]
    assert sum(key in set(solved_keys.tolist()) for key in drawn) < len(plans)


@pytest.mark.slow
def test_the_async_trainer_prunes_both_sides_and_counts_its_explored_groups(tmp_path, setup):
    # prompts 0 and 6 never pass, 2 always: both sides pruned once recorded, each explored again with adaptive p
    trainer = make_trainer(tmp_path, setup, max_steps=8, prune_solved=True, prune_solved_after=1, prune_unsolved=True,
                           prune_exploration="adaptive", selector="none")  # fmt: skip
    _, _, dataset = setup
    dead = [i for i, r in enumerate(dataset["pass_rate"]) if r in (0.0, 1.0)]
    trainer.train()
    pruner = trainer.lze.pruner
    assert set(np.flatnonzero(pruner.pruned(trainer.prompt_keys.dataset_keys, trainer.lze.prompts))) >= set(dead)
    assert trainer.lze.position.groups_skipped(8) > 0  # some dead prompts were not drawn
    skipped = [
        e["lze/skipped_prompts_unsolved"] for e in trainer.state.log_history if "lze/skipped_prompts_unsolved" in e
    ]
    assert skipped and max(skipped) > 0
    # explored groups were scored (a prompt that passes 0.25 of the time can be dead by chance and come back to life)
    assert pruner.explored_scored[1] > 0 and pruner.explored_live[1] <= pruner.explored_scored[1]
    precision = [e["lze/prune_precision"] for e in trainer.state.log_history if "lze/prune_precision" in e]
    assert precision[-1] == pytest.approx(1 - pruner.explored_live.sum() / pruner.explored_scored.sum())
    # both sides' p adapted, and only when an epoch was planned: at most one value an epoch planned
    assert (pruner.keep_probability != 0.5).all()
    for side in ("solved", "unsolved"):
        values = [e[f"lze/keep_probability_{side}"] for e in trainer.state.log_history if "lze/pruned_prompts" in e]
        assert 1 < len(set(values)) <= trainer.lze.position.epoch + 1


@pytest.mark.slow
def test_the_async_trainer_skips_predicted_dead_prompts_without_refilling(tmp_path, setup):
    # prompts 0 and 6 never pass, 2 always: pruned on both sides once recorded (from epoch 2 on: epoch 1 is planned
    # before epoch 0's second batch is recorded); in skip mode each batch of 4 drawn prompts generates only those not
    # skipped, and is not refilled
    _, _, dataset = setup
    dead = {i for i, r in enumerate(dataset["pass_rate"]) if r in (0.0, 1.0)}
    trainer = make_trainer(tmp_path, setup, max_steps=12, prune_solved=True, prune_solved_after=1, prune_unsolved=True,
                           prune_explore_fraction=0.0, selector="none", prune_refill=False)  # fmt: skip
    ordered, drawn = [], []  # (group id, dataset row) of every order; each batch's draw and its skips
    send, draw = trainer.rollout_worker.send_orders, trainer.lze_window._draw
    trainer.lze_window.send = lambda orders: (ordered.extend((o.group_id, o.index) for o in orders), send(orders))
    trainer.lze_window._draw = lambda n: drawn.append(draw(n)) or drawn[-1]
    trainer.train()
    window, position = trainer.lze_window, trainer.lze.position
    assert position.epoch >= 3 and position.skipped_groups > 0
    # every batch drew 4 prompts: those generated (one group id each) and those skipped add up
    assert window.next_group + position.skipped_groups == 4 * (trainer.lze.batches_recorded + len(window.batches))
    rows = [index for _, index in sorted(dict(ordered).items())]
    assert len(rows) == window.next_group
    opened = 0
    for indices, skipping in drawn:  # a batch generates exactly its drawn prompts that their epoch does not skip
        generated = indices[~skipping].tolist() or indices[-1:].tolist()  # at least one: the last of those skipped
        assert rows[opened : opened + len(generated)] == generated
        opened += len(generated)
    assert opened == window.next_group and any(s.all() for _, s in drawn)  # one batch kept one prompt
    assert dead & {int(i) for indices, skipping in drawn for i in indices[skipping]}  # the dead ones were skipped
    for e in trainer.state.log_history:  # each step's mean over its batches: generated and skipped make 4 a batch
        if "lze/groups_generated" in e:
            total = e["lze/groups_generated"] + e["lze/groups_skipped_solved"] + e["lze/groups_skipped_unsolved"]
            assert total == pytest.approx(4)
            assert e["lze/generated_share"] == pytest.approx(e["lze/groups_generated"] / 4)


def test_an_epoch_left_empty_by_pruning_ends_the_async_run_with_a_warning(tmp_path, setup):
    # every prompt always solved: once recorded, forward pruning leaves the next epoch planned empty (epoch 2: epoch 1
    # was planned before epoch 0's second batch was recorded); the run ends at the end of that step, as the
    # synchronous trainer's does at an epoch without a generation batch
    path, tokenizer, dataset = setup
    solved = dataset.map(lambda row: {"pass_rate": 1.0})
    trainer = make_trainer(tmp_path, (path, tokenizer, solved), max_steps=50, prune_solved=True,
                           prune_solved_after=1, prune_explore_fraction=0.0, selector="none", save_strategy="steps",
                           save_steps=100)  # fmt: skip
    with pytest.warns(LZEWarning) as caught:
        trainer.train()
    messages = [str(w.message) for w in caught]
    assert any(re.search(r"Epoch 2 has no prompt to roll out.*training stops at this step", m) for m in messages)
    step = trainer.state.global_step
    assert trainer.lze_window.exhausted and 0 < step < 50
    assert trainer.lze.position.epoch == 2
    # the Trainer saves its last checkpoint at max_steps only: the run saves it where it ends, and says so once
    assert [m for m in messages if m.startswith("Training ended")] == [
        f"Training ended at step {step} of the 50 planned: forward pruning left epoch 2 without prompts to roll out "
        f"(see the warning above); its last state is saved in checkpoint-{step}."
    ]
    folder = os.path.join(trainer.args.output_dir, f"checkpoint-{step}")
    assert json.load(open(os.path.join(folder, "trainer_state.json")))["global_step"] == step
    assert checkpoint_files.load_state(folder)[0]["prompts.prompt_key"].size == 8
    assert os.path.isfile(os.path.join(trainer.args.output_dir, "lze_prompts.parquet"))  # the tables, as a sync run


@pytest.mark.slow
def test_the_lze_state_is_saved_with_each_checkpoint_and_resumed(tmp_path, setup):
    trainer = make_trainer(tmp_path, setup, max_steps=2, save_strategy="steps", save_steps=2)
    trainer.train()
    folder = os.path.join(trainer.args.output_dir, "checkpoint-2")
    saved, counters = checkpoint_files.load_state(folder)
    assert counters["model_version"] == 3 and saved["prompts.prompt_key"].size > 0
    window_arrays, window_counters = load_in_flight(folder, 0, 1, "this test")  # the window: its batches in flight
    assert json.loads(window_counters["window_batches"]) and not any(k.startswith("window.") for k in saved)
    resumed = make_trainer(tmp_path, setup, max_steps=3)
    resumed.load_lze_state(folder)
    state, window_state = resumed.lze.state_dict(), resumed.lze_window.state_dict()
    for name, value in {**state, **window_state[0]}.items():
        np.testing.assert_array_equal(value, {**saved, **window_arrays}[name])
    assert window_state[1] == window_counters
    assert resumed.model_version == 3 and resumed.rollout_worker.model_version == 3
    resumed = make_trainer(tmp_path, setup, max_steps=3)
    resumed.train(resume_from_checkpoint=True)  # the last checkpoint of output_dir: `folder`
    assert resumed.state.global_step == 3 and resumed.lze.batches_recorded > int(saved["run.batches_recorded"])
    os.rename(os.path.join(folder, IN_FLIGHT_FILE.format(process=0)), os.path.join(folder, "away.pt"))
    with pytest.raises(LZEStateError, match=r"lze_in_flight_0\.pt' is missing.*LZEAsyncGRPOTrainer's window"):
        make_trainer(tmp_path, setup, max_steps=3).train(resume_from_checkpoint=folder)
    save_in_flight(folder, 0, 1, ({}, {"pipeline": 2}))  # batches in flight of another kind, not a window's
    with pytest.raises(LZEStateError, match="does not fit this run"):
        make_trainer(tmp_path, setup, max_steps=3).train(resume_from_checkpoint=folder)
    os.replace(os.path.join(folder, "away.pt"), os.path.join(folder, IN_FLIGHT_FILE.format(process=0)))
    os.remove(os.path.join(folder, checkpoint_files.STATE_FILE))
    with pytest.raises(LZEStateError, match="no LZE state file"):
        make_trainer(tmp_path, setup, max_steps=3).train(resume_from_checkpoint=folder)
    fresh = make_trainer(tmp_path, setup, max_steps=3, resume_lze_state="fresh")
    with pytest.warns(LZEWarning, match="fresh LZE state"):
        fresh.train(resume_from_checkpoint=folder)
    # the synchronous trainer's rule (checkpoint.load_or_start_fresh): a state that plans the epochs (pruning)
    # decides what is trained even without a selector, and is refused; GRPO's alone only warns
    with pytest.raises(LZEStateError, match="resume_lze_state='fresh'"):
        make_trainer(tmp_path, setup, max_steps=3, selector="none", prune_solved=True).train(
            resume_from_checkpoint=folder
        )
    with pytest.warns(LZEWarning, match="fresh LZE state"):
        make_trainer(tmp_path, setup, max_steps=3, selector="none").train(resume_from_checkpoint=folder)


def test_resuming_from_the_last_checkpoint_needs_one(tmp_path, setup):
    # the synchronous trainer's entry (LZEStateOwner.resume_lze): True is output_dir's last checkpoint
    trainer = make_trainer(tmp_path, setup, max_steps=2)
    with pytest.raises(ValueError, match="No checkpoint found in output_dir="):
        trainer.train(resume_from_checkpoint=True)


# ----------------------------------------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    "overrides, match",
    [
        (dict(window_groups=0), "window_groups=0 is invalid"),
        (dict(batches_in_flight=0), "batches_in_flight=0 is invalid"),
        (dict(selection_ratio=0.0), "selection_ratio=0.0 is invalid"),
    ],
)
def test_settings_that_cannot_work_are_refused_when_the_config_is_built(tmp_path, overrides, match):
    with pytest.raises(ValueError, match=match):
        config(tmp_path, **overrides)


def test_a_plain_async_config_gets_the_lze_defaults_and_is_not_changed(tmp_path):
    from trl.experimental.async_grpo import AsyncGRPOConfig

    from lze_trl.async_grpo.trainer import as_lze_async_config

    plain = AsyncGRPOConfig(str(tmp_path), use_cpu=True, report_to="none", learning_rate=3e-5, num_generations=G)
    converted = as_lze_async_config(plain, "org/model")
    assert type(plain) is AsyncGRPOConfig and not hasattr(plain, "selector")
    assert converted.learning_rate == 3e-5 and converted.selector == "lze" and converted.selection_ratio == 0.4
    assert converted.window_groups is None and converted.batches_in_flight == 2


def test_inputs_that_cannot_work_are_refused_before_the_trainer_is_built(tmp_path, setup):
    path, tokenizer, dataset = setup
    worker = StandInRolloutWorker(tiny_qwen2(tokenizer), tokenizer, dataset, [correct])
    cases = [
        (dict(rollout_worker=queue.Queue()), "rollout_worker=Queue cannot run LZE"),
        (dict(train_dataset=dataset.to_iterable_dataset()), "map-style train dataset"),
        (dict(environment_factory=object), "environment_factory"),
        (dict(args=config(tmp_path, max_steps=-1)), "max_steps=-1 is invalid"),
        (
            dict(rollout_worker=StandInRolloutWorker(tiny_qwen2(tokenizer), tokenizer, dataset, [correct], G + 1)),
            "rollout_worker rolls out 5 rollouts per group, not num_generations=4",
        ),
    ]
    for overrides, match in cases:
        kwargs = {"args": config(tmp_path), "train_dataset": dataset, "rollout_worker": worker, **overrides}
        with pytest.raises(ValueError, match=match):
            LZEAsyncGRPOTrainer(path, [correct], processing_class=tokenizer, **kwargs)


# ----------------------------------------------------------------------------------------------- CPU shims and TRL
def test_cpu_tree_attention_attends_as_a_plain_forward_of_each_sample(tmp_path):
    tokenizer = char_tokenizer()
    plain = tiny_qwen2(tokenizer).eval()
    samples = [[5, 6, 7, 8, 9], [5, 6, 7, 10, 11, 12], [13, 14]]  # two share a prefix: a trie with a branch
    row = TreeRow()
    for i, ids in enumerate(samples):
        n = len(ids)
        mask = np.r_[0, np.ones(n - 1, dtype=np.int64)]
        row.add(
            dict(input_ids=np.array(ids), completion_mask=mask, old_log_probs=np.zeros(n), advantage=1.0, group_id=i)
        )
    packed = row.pack()
    assert len(packed["tree_cu_seqlens_q"]) > 3  # several segments, one path longer than its segment
    register_tree_attention()
    use_cpu_tree_attention()
    tree = tiny_qwen2(tokenizer)
    tree.set_attn_implementation(TREE_ATTENTION)
    tree.eval()
    tree_kwargs = {k: packed[k] for k in ("tree_kv_index", "tree_cu_seqlens_q", "tree_cu_seqlens_k")}
    seqlen_q, seqlen_k = packed["tree_max_seqlens"].tolist()
    with torch.no_grad():
        logits = tree(
            input_ids=packed["input_ids"][None],
            position_ids=packed["position_ids"][None],
            tree_max_seqlen_q=seqlen_q,
            tree_max_seqlen_k=seqlen_k,
            **tree_kwargs,
        ).logits[0]
        for ids, nodes in zip(samples, row.sample_nodes):
            expected = plain(input_ids=torch.tensor([ids])).logits[0]
            positions = [_packed_position(row, node) for node in nodes]
            torch.testing.assert_close(logits[positions], expected, rtol=1e-4, atol=1e-5)


def _packed_position(row: TreeRow, node: int) -> int:
    """The packed position of a trie node, as `TreeRow.pack` lays the trie out (DFS pre-order)."""
    order, stack = [], list(reversed(row.roots.values()))
    while stack:
        current = stack.pop()
        order.append(current)
        stack.extend(reversed(row.children[current].values()))
    return order.index(node)


def test_what_lze_relies_on_in_trls_async_trainer():
    # the window replaces `rollout_queue` after TRL's constructor, which is what the train dataloader reads
    init, loader = (
        inspect.getsource(AsyncGRPOTrainer.__init__),
        inspect.getsource(AsyncGRPOTrainer.get_train_dataloader),
    )
    assert "self.rollout_queue = self.rollout_worker.rollout_buffer" in init
    assert "rollout_queue=self.rollout_queue" in loader
    # ... and reads it through `get(timeout=...)` and `qsize()` only
    dataset = inspect.getsource(async_grpo_trainer.RolloutQueueDataset.__iter__)
    assert "self.queue.get(timeout=self.poll_interval_s)" in dataset and "self.queue.qsize()" in dataset
    assert set(re.findall(r"self\.queue\.(\w+)", dataset)) == {"get", "qsize"}
    # TRL builds its worker by the module's name `AsyncRolloutWorker` (LZE's is built in its place, same arguments)
    assert "self.rollout_worker = AsyncRolloutWorker(" in init
    # LZE's worker loop follows TRL's `_generate_loop` (see lze_trl/async_grpo/worker.py): a change there is to be read
    # and carried over, then this hash updated
    source = inspect.getsource(_AsyncRolloutLoop._generate_loop)
    assert hashlib.sha256(source.encode()).hexdigest()[:16] == "ba2da28437369bdd"
    # what LZE's loop and score override call and build of TRL's
    assert [f.name for f in dataclasses.fields(RolloutGroup)] == [
        "prompts", "reward_kwargs", "completions", "completions_ids", "completions_sequences", "tool_call_counts",
        "tool_failure_counts", "model_version", "group_id", "env_rewards", "rollout_rewards", "queued_at",
    ]  # fmt: skip
    score = inspect.getsource(_AsyncRolloutLoop._score_group)
    assert "for reward_func in self.reward_funcs" in score and "for seq in sequences:" in score
    # group_advantages copies TRL's advantage formula (NaN rewards get 0, the rest are standardized)
    assert "advantages[scored_mask] = (scored - scored.mean()) / (scored.std() + 1e-8)" in score
    assert list(inspect.signature(_AsyncRolloutLoop._generate_one).parameters) == [
        "self", "prompt", "tool_dict", "tools", "group_id",
    ]  # fmt: skip
    # the CPU shims: the constructor's peak-FLOPs lookup and the tree attention's keyword arguments
    assert "get_peak_flops_per_device(self.accelerator, dtype)" in init and "register_tree_attention()" in init
    trl_kwargs = [p for p in inspect.signature(tree_attention).parameters if p != "kwargs"]
    assert [p for p in inspect.signature(cpu_tree_attention).parameters if p != "kwargs"] == trl_kwargs
    # the tags ride on TRL's sample type
    assert issubclass(LZERolloutSample, RolloutSample)


@pytest.mark.slow
@pytest.mark.distributed
def test_two_processes_train_on_what_the_main_process_decided(tmp_path):
    import json

    from testing_utils import run_torchrun

    result = run_torchrun(SUPPORT / "dist_async.py", tmp_path, timeout=240)
    assert result.returncode == 0, result.stderr[-4000:]
    main, other = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2))
    assert main["world"] == other["world"] == 2 and main["step"] == other["step"] == 3
    # one decision, on the main process: the other holds no LZE state and decides nothing
    assert main["decisions"] and main["batches_recorded"] > 0
    assert other["decisions"] == [] and other["batches_recorded"] == 0
    selected, idle = decided(main["decisions"], 4)
    assert main["trained_groups"] and set(main["trained_groups"]) <= selected | idle
    # both processes trained on what it dispatched: the same weights (DDP)
    np.testing.assert_array_equal(np.load(tmp_path / "weights0.npy"), np.load(tmp_path / "weights1.npy"))
