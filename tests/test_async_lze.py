"""LZE on TRL's async trainer (issue #47, phase 1: no vLLM): the window between the worker's queue and the trainer, the
per-prompt state fed in policy-version order, a few real steps of `AsyncGRPOTrainer` with the in-process stand-in
worker, the state in checkpoints, the refusals, and what this relies on in TRL's source."""

from __future__ import annotations

import inspect
import os
import queue
import re

import numpy as np
import pytest
import torch
import trl
from datasets import Dataset
from packaging.version import Version


if Version(trl.__version__) < Version("1.16.0"):  # lze_trl/async_trainer.py refuses older TRL (its MIN_TRL)
    pytest.skip("LZEAsyncGRPOTrainer is built on TRL 1.16's AsyncGRPOTrainer", allow_module_level=True)

from trl.experimental.async_grpo import AsyncGRPOTrainer, async_grpo_trainer
from trl.experimental.async_grpo.async_rollout_worker import RolloutSample, _AsyncRolloutLoop
from trl.experimental.async_grpo.packing import TREE_ATTENTION, TreeRow, register_tree_attention, tree_attention

from lze_trl import checkpoint as checkpoint_files
from lze_trl.async_cpu import InProcessWeightTransfer, StandInRolloutWorker, cpu_tree_attention, use_cpu_tree_attention
from lze_trl.async_samples import LZERolloutSample, tag_group
from lze_trl.async_trainer import LZEAsyncGRPOConfig, LZEAsyncGRPOTrainer
from lze_trl.async_window import GroupWindow
from lze_trl.checkpoint import LZEStateError
from lze_trl.errors import LZEWarning
from lze_trl.run import LZERun
from lze_trl.tiny import char_tokenizer, tiny_qwen2


G = 4


def config(tmp_path, **overrides):
    values = dict(output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none", max_steps=3, num_generations=G)
    values.update(token_budget=0, logging_steps=1, save_strategy="no", learning_rate=0.05, selection_noise=0.0)
    values.update(overrides)
    return LZEAsyncGRPOConfig(**values)


def group(group_id: int, key: int, version: int, correct: list[int], rows_per_rollout: int = 1) -> list:
    """One scored group's rows as a worker pushes them, tagged for LZE (correctness is the one reward)."""
    rows = [
        RolloutSample(
            prompt=f"p{key}",
            completion=str(j),
            input_ids=np.array([5, 6, 7 + j, 8 + r], dtype=np.int64),
            completion_mask=np.array([0, 0, 1, 1], dtype=np.int64),
            old_log_probs=np.array([0, 0, -1.5, -0.5], dtype=np.float32),
            advantage=float(c) - float(np.mean(correct)),
            model_version=version,
            group_id=group_id,
            metrics={"reward": float(c)},
        )
        for j, c in enumerate(correct)
        for r in range(rows_per_rollout)
    ]
    return tag_group(rows, key, [[float(c)] for c in correct])


def window_of(args, size: int, logged: list | None = None) -> tuple[GroupWindow, queue.Queue]:
    run = LZERun(args, G, None, ["correct"], 0)
    window = GroupWindow(run, size, G, 0, log=(logged.append if logged is not None else None))
    window.source = queue.Queue()
    return window, window.source


def drain(window: GroupWindow) -> list:
    out = []
    while True:
        try:
            out.append(window.get(timeout=0))
        except queue.Empty:
            return out


# ----------------------------------------------------------------------------------------------- the window
def test_the_window_keeps_the_selectors_quota_and_forwards_the_rows_unchanged(tmp_path):
    window, source = window_of(config(tmp_path, selection_ratio=0.5), 6)
    groups = [
        group(0, 10, 1, [0, 0, 0, 0]),  # dead
        group(1, 11, 1, [1, 1, 1, 1]),  # dead
        group(2, 12, 1, [1, 0, 0, 0], rows_per_rollout=2),  # p = 0.25: energy 0.5625 (a group of 8 rows)
        group(3, 13, 1, [1, 1, 0, 0]),  # 0.5: 0.5
        group(4, 14, 1, [1, 1, 1, 0]),  # 0.75: 0.1875
        group(5, 15, 1, [0, 1, 0, 1]),  # 0.5: 0.5
    ]
    for g in groups[:5]:
        for row in g:
            source.put(row)
    assert drain(window) == [] and len(window.held) == 5  # nothing before the window is full
    for row in groups[5]:
        source.put(row)
    forwarded = drain(window)
    # quota = min(max(int(6 x 0.5), 1), 4 live) = 3: the top three by energy, in arrival order, the same objects
    expected = [row for g in (groups[2], groups[3], groups[5]) for row in g]
    assert len(forwarded) == len(expected) and all(a is b for a, b in zip(forwarded, expected))
    assert [d[3] for d in window.decisions] == [0, 0, 1, 1, 0, 1]
    assert window.run.batches_recorded == 1 and window.held == [] and window.pending == []


def test_selector_none_forwards_every_group_in_arrival_order(tmp_path):
    window, source = window_of(config(tmp_path, selector="none"), 3)
    groups = [group(0, 1, 1, [0, 0, 0, 0]), group(1, 2, 1, [1, 0, 1, 0]), group(2, 3, 1, [1, 1, 1, 1])]
    for row in (r for g in groups for r in g):
        source.put(row)
    forwarded = drain(window)
    assert len(forwarded) == 3 * G and all(a is b for a, b in zip(forwarded, (r for g in groups for r in g)))


def test_each_group_updates_its_prompt_once_in_policy_version_order_whatever_the_arrival_order(tmp_path):
    args = config(tmp_path, selection_ratio=1.0)
    in_order = [group(0, 7, 1, [1, 0, 0, 0]), group(1, 7, 2, [1, 1, 1, 0]), group(2, 8, 2, [1, 1, 0, 0])]
    out_of_order = [in_order[1], in_order[2], in_order[0]]  # the version-2 groups arrive before the version-1 one
    tables = []
    for arrival in (in_order, out_of_order):
        window, source = window_of(args, 3)
        for row in (r for g in arrival for r in g):
            source.put(row)
        drain(window)
        tables.append(window.run.prompts.table())
        state = window.run.prompts.get([7, 8])
        assert list(state["num_observations"]) == [2, 1]  # once per group
        # prompt 7: first complete pass rate from version 1 (0.25), EMA 0.25 -> 0.25 -> 0.9 x 0.25 + 0.1 x 0.75
        assert state["initial_pass_rate"][0] == pytest.approx(0.25)
        assert state["ema_pass_rate"][0] == pytest.approx(0.3)
        assert state["last_pass_rate"][0] == pytest.approx(0.75)
        # the version-2 group's energy used the EMA after version 1: momentum min(2 x |0.75 - 0.25|, 1) = 1
        log = window.run.selection_log.to_pandas()
        energies = dict(zip(zip(log["prompt_key"], log["pass_rate"]), log["energy"]))
        assert energies[(7, 0.75)] == pytest.approx(0.75 * 0.75 * 1.3)
    for name in tables[0]:
        np.testing.assert_array_equal(tables[0][name], tables[1][name])
    # scored in arrival order instead, the first pass rate would be the version-2 group's: the test above can fail
    run = LZERun(args, G, None, ["correct"], 0)
    run.score(np.array([7]), np.array([[1.0, 1, 1, 0]]), np.array([[1.0, 1, 1, 0]]))
    assert run.prompts.get([7])["initial_pass_rate"][0] == pytest.approx(0.75)


def test_a_group_older_than_its_prompts_newest_scored_version_is_counted_late(tmp_path):
    logged = []
    window, source = window_of(config(tmp_path), 1, logged)
    for row in group(0, 7, 3, [1, 0, 0, 0]) + group(1, 7, 2, [1, 1, 0, 0]) + group(2, 8, 2, [1, 1, 0, 0]):
        source.put(row)
    drain(window)
    assert [m["lze/late_groups"] for m in logged] == [0.0, 1.0, 0.0]


def test_interleaved_groups_and_untagged_rows_are_refused(tmp_path):
    window, source = window_of(config(tmp_path), 2)
    a, b = group(0, 1, 1, [1, 0, 0, 0]), group(1, 2, 1, [1, 0, 0, 0])
    source.put(a[0])
    source.put(b[0])
    with pytest.raises(RuntimeError, match="interleaved"):
        drain(window)
    window, source = window_of(config(tmp_path), 2)
    source.put(RolloutSample(**{k: getattr(a[0], k) for k in RolloutSample.__dataclass_fields__}))
    with pytest.raises(TypeError, match="lacks LZE's tags"):
        drain(window)


def test_the_window_and_the_run_state_resume_exactly(tmp_path):
    args = config(tmp_path, selection_ratio=0.5, selection_noise=0.05)
    rng = np.random.default_rng(0)
    groups = [group(i, i % 5, i // 3, list(rng.integers(0, 2, G))) for i in range(14)]
    rows = [r for g in groups for r in g]
    cut = 6 * G + 2  # one window closed (rows ready), one group held, two rows of the next pending

    def first_part():
        window, _ = window_of(args, 4)
        for row in rows[:cut]:  # as they arrive: the window takes them in
            window.put(row)
        head = [window.get(timeout=0) for _ in range(3)]
        return window, head

    unbroken, head = first_part()
    broken, _ = first_part()
    assert len(broken.held) == 2 and len(broken.pending) == 2 and len(broken.ready) > 0
    window_arrays, counters = broken.state_dict()
    checkpoint_files.save_state(str(tmp_path), {**broken.run.state_dict(), **window_arrays}, counters)
    saved, saved_counters = checkpoint_files.load_state(str(tmp_path))
    resumed, source = window_of(args, 4)
    resumed.run.load_state_dict({k: v for k, v in saved.items() if not k.startswith("window.")})
    resumed.load_state_dict(saved, saved_counters, LZERolloutSample)
    for window in (unbroken, resumed):
        for row in rows[cut:]:
            window.source.put(row)
    a, b = drain(unbroken), drain(resumed)
    assert len(a) == len(b) > 0
    for x, y in zip(a, b):
        assert (x.group_id, x.model_version, x.advantage, x.prompt_key, x.group_rewards) == (
            y.group_id,
            y.model_version,
            y.advantage,
            y.prompt_key,
            y.group_rewards,
        )
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
    worker = StandInRolloutWorker(policy, tokenizer, dataset, [correct], num_generations=G)
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
    selected = {d[0] for d in trainer.lze_window.decisions if d[3] > 0}
    unselected = {d[0] for d in trainer.lze_window.decisions if d[3] == 0}
    trained = trainer._trained_groups  # every group_id TRL's collator put into a micro-batch of the loss
    assert unselected and trained and trained <= selected and not trained & unselected
    dead = {g for g, _, _, p in trainer.rollout_worker.produced if p in (0.0, 1.0)}
    assert dead and not trained & dead
    assert trainer.weight_transfer.syncs == 4  # the cold sync, then one per step: the stand-in scores with them
    logged = [e for e in trainer.state.log_history if "lze/selected_frac" in e]
    assert logged and all(0 < e["lze/selected_frac"] <= 0.5 for e in logged)


@pytest.mark.slow
def test_the_lze_state_is_saved_with_each_checkpoint_and_resumed(tmp_path, setup):
    trainer = make_trainer(tmp_path, setup, max_steps=2, save_strategy="steps", save_steps=2)
    trainer.train()
    folder = os.path.join(trainer.args.output_dir, "checkpoint-2")
    saved, counters = checkpoint_files.load_state(folder)
    assert counters["model_version"] == 3 and saved["prompts.prompt_key"].size > 0
    resumed = make_trainer(tmp_path, setup, max_steps=3)
    resumed.load_lze_state(folder)
    state, window_state = resumed.lze.state_dict(), resumed.lze_window.state_dict()
    for name, value in {**state, **window_state[0]}.items():
        np.testing.assert_array_equal(value, saved[name])
    assert window_state[1] == {k: counters[k] for k in window_state[1]}
    assert resumed.model_version == 3 and resumed.rollout_worker.model_version == 3
    resumed = make_trainer(tmp_path, setup, max_steps=3)
    resumed.train(resume_from_checkpoint=folder)
    assert resumed.state.global_step == 3 and resumed.lze.batches_recorded > int(saved["run.batches_recorded"])
    os.remove(os.path.join(folder, checkpoint_files.STATE_FILE))
    with pytest.raises(LZEStateError, match="no LZE state file"):
        make_trainer(tmp_path, setup, max_steps=3).train(resume_from_checkpoint=folder)
    fresh = make_trainer(tmp_path, setup, max_steps=3, resume_lze_state="fresh")
    with pytest.warns(LZEWarning, match="fresh LZE state"):
        fresh.train(resume_from_checkpoint=folder)


# ----------------------------------------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    "overrides, match",
    [
        (dict(prune_solved=True), "prune_solved=True is not supported"),
        (dict(generation_rounds=[2, G]), "the probe"),
        (dict(window_groups=0), "window_groups=0 is invalid"),
        (dict(selection_ratio=0.0), "selection_ratio=0.0 is invalid"),
    ],
)
def test_settings_that_cannot_work_yet_are_refused_when_the_config_is_built(tmp_path, overrides, match):
    with pytest.raises(ValueError, match=match):
        config(tmp_path, **overrides)


def test_a_plain_async_config_gets_the_lze_defaults_and_is_not_changed(tmp_path):
    from trl.experimental.async_grpo import AsyncGRPOConfig

    from lze_trl.async_trainer import as_lze_async_config

    plain = AsyncGRPOConfig(str(tmp_path), use_cpu=True, report_to="none", learning_rate=3e-5, num_generations=G)
    converted = as_lze_async_config(plain, "org/model")
    assert type(plain) is AsyncGRPOConfig and not hasattr(plain, "selector")
    assert converted.learning_rate == 3e-5 and converted.selector == "lze" and converted.selection_ratio == 0.4
    assert converted.window_groups is None


def test_rewards_that_do_not_match_the_runs_reward_functions_are_refused(tmp_path):
    window, source = window_of(config(tmp_path), 1)
    rows = group(0, 1, 1, [1, 0, 0, 0])
    for row in tag_group(rows, 1, [[1.0, 0.0]] * G):  # two rewards per rollout, the run has one function
        source.put(row)
    with pytest.raises(ValueError, match="2 rewards per rollout"):
        drain(window)


def test_inputs_that_cannot_work_are_refused_before_the_trainer_is_built(tmp_path, setup):
    path, tokenizer, dataset = setup
    worker = StandInRolloutWorker(tiny_qwen2(tokenizer), tokenizer, dataset, [correct], num_generations=G)
    cases = [
        (dict(rollout_worker=None), "TRL's AsyncRolloutWorker"),
        (dict(train_dataset=dataset.to_iterable_dataset()), "map-style train dataset"),
        (dict(environment_factory=object), "environment_factory"),
        (dict(args=config(tmp_path, max_steps=-1)), "max_steps=-1 is invalid"),
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
    # a worker pushes a group's rows together: one score loop, every row of a scored group in turn
    score_loop = inspect.getsource(_AsyncRolloutLoop._score_loop)
    assert "samples = await self._score_group(group)" in score_loop and "for sample in samples:" in score_loop
    # the CPU shims: the constructor's peak-FLOPs lookup and the tree attention's keyword arguments
    assert "get_peak_flops_per_device(self.accelerator, dtype)" in init and "register_tree_attention()" in init
    trl_kwargs = [p for p in inspect.signature(tree_attention).parameters if p != "kwargs"]
    assert [p for p in inspect.signature(cpu_tree_attention).parameters if p != "kwargs"] == trl_kwargs
    # the tags ride on TRL's sample type
    assert issubclass(LZERolloutSample, RolloutSample)
