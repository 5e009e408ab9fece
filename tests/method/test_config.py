import inspect

import pytest
from trl import GRPOConfig

from lze_trl import LZEGRPOConfig
from lze_trl.grpo.config import as_lze_config


BASE = dict(output_dir="/tmp/lze-config-test", report_to="none", use_cpu=True)


@pytest.mark.parametrize(
    "setting, value",
    [
        ("selection_ratio", 0.0),
        ("selection_ratio", 1.5),
        ("selection_ratio", float("nan")),
        ("selection_noise", -0.1),
        ("selection_noise", float("nan")),
        ("energy_ema_decay", 1.0),
        ("energy_ema_decay", float("nan")),
        ("energy_momentum_weight", -1.0),
        ("energy_momentum_mode", "up"),
        ("energy_d_init_min", 2.0),
        ("prune_solved_after", 0),
        ("prune_explore_fraction", 1.5),
        ("prune_explore_fraction", float("nan")),
        ("prune_unsolved_after", 0),
        ("prune_exploration", "greso"),
        ("prune_target_dead_frac", 1.5),
        ("selector", "best"),
        ("pass_threshold", float("inf")),
        ("energy_terms", ["anchor", "entropy"]),
        ("energy_terms", []),
        ("selection_ratio", "0.4"),  # not a number: a ValueError naming the setting, not a comparison's TypeError
        ("selection_noise", "abc"),
    ],
)
def test_bad_setting_names_setting_and_fix(setting, value):
    with pytest.raises(ValueError, match=setting) as info:
        LZEGRPOConfig(**BASE, **{setting: value})
    assert "use " in str(info.value)  # the message says what to set instead


def test_num_generations_below_two_rejected():
    with pytest.raises(ValueError, match="num_generations|generations per prompt"):
        LZEGRPOConfig(**BASE, num_generations=1, per_device_train_batch_size=2)


def test_skip_mode_needs_whole_groups_on_every_process():
    # TRL checks the global generation batch; with 2 processes each holds 4 rows of the 8-row batch, half a group of 8:
    # a skipped group would straddle two processes
    from lze_trl.method.validation import validate_lze_args

    args = LZEGRPOConfig(**{**BASE, "num_generations": 8}, per_device_train_batch_size=8, prune_solved=True)
    args.prune_refill, args.per_device_train_batch_size, args.steps_per_generation = False, 2, 2
    with pytest.raises(
        ValueError, match=r"prune_refill=False cannot run: .* 4 rows is not a multiple of num_generations=8"
    ):
        validate_lze_args(args)
    args.prune_refill = True  # refilling plans whole epochs: nothing straddles
    validate_lze_args(args)


def test_defaults_match_the_release():
    args = LZEGRPOConfig(**BASE)
    assert (args.selector, args.selection_ratio, args.selection_noise) == ("lze", 0.4, 0.05)
    assert (args.energy_ema_decay, args.energy_momentum_weight, args.energy_momentum_mode) == (0.9, 0.3, "abs")
    assert (args.energy_d_init_min, args.pass_threshold, args.prune_solved) == (0.05, 0.5, False)


def test_positional_settings_are_grpo_configs():
    # GRPOConfig("out") names the output folder, and GRPOTrainer(args=None) builds its config that way; the LZE
    # settings come after TRL's, so LZEGRPOConfig("out") and as_lze_config(None, model) do the same
    def positional(cls):
        kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        return [p.name for p in inspect.signature(cls).parameters.values() if p.kind in kinds]

    grpo = positional(GRPOConfig)
    assert positional(LZEGRPOConfig)[: len(grpo)] == grpo
    args = LZEGRPOConfig("out", use_cpu=True)
    assert args.output_dir == "out" and args.selector == "lze"


def test_the_config_holds_only_what_the_core_uses_and_help_lists_lze_after_grpo():
    from dataclasses import fields

    ours = [f.name for f in fields(LZEGRPOConfig) if f.name not in {g.name for g in fields(GRPOConfig)}]
    assert not any(n.startswith(("fresh_fraction", "replay_", "rollout_filter", "dapo_")) for n in ours)
    assert [f.name for f in fields(LZEGRPOConfig)][-len(ours) :] == ours  # GRPO's first, as `--help` shows them


def test_each_lze_flag_s_help_is_its_entry_of_the_config_docstring():
    from transformers import HfArgumentParser

    from lze_trl.grpo.config import LZE_FIELDS

    helps = {a.dest: a.help for a in HfArgumentParser(LZEGRPOConfig)._actions}
    doc = " ".join(LZEGRPOConfig.__doc__.split())
    for name in LZE_FIELDS:
        assert helps[name] and helps[name] in doc, name
    assert helps["pass_threshold"].startswith("A rollout is correct when the correctness reward is `>=")
    assert helps["selection_ratio"] == "Fraction of the generation batch's groups kept for the update, in (0, 1]."


def test_the_trainer_works_on_a_copy_of_the_callers_config(tmp_path, tiny):
    from datasets import Dataset

    from lze_trl import LZEGRPOTrainer

    model, tokenizer = tiny
    args = LZEGRPOConfig(
        **{**BASE, "output_dir": str(tmp_path)}, prune_solved=True, per_device_train_batch_size=4, num_generations=4
    )
    before = dict(vars(args))
    data = Dataset.from_dict({"prompt": [f"{i}+1=" for i in range(8)]})
    trainer = LZEGRPOTrainer(
        model,
        lambda completions, **kw: [1.0] * len(completions),
        args=args,
        train_dataset=data,
        processing_class=tokenizer,
    )
    # a planned run resumes its data position itself: its own config skips no data, the caller's is untouched
    assert trainer.args is not args and trainer.args.ignore_data_skip and not args.ignore_data_skip
    assert vars(args) == before


def test_plain_grpo_config_gets_lze_defaults_and_keeps_its_values():
    plain = GRPOConfig(**BASE, learning_rate=3e-6, num_generations=4, per_device_train_batch_size=4)
    args = as_lze_config(plain, model="x")
    assert isinstance(args, LZEGRPOConfig)
    assert args.learning_rate == 3e-6 and args.num_generations == 4
    assert args.steps_per_generation == plain.steps_per_generation
    assert args.selector == "lze" and args.selection_ratio == 0.4


@pytest.mark.parametrize(
    "removed",
    [
        "prune_after_epochs",
        "softmax_ema_alpha",
        "softmax_ema_decay",
        "dapo_std_epsilon",
        "generation_rounds",
        "round_policy",
        "history_prior_strength",
        "learning_zone_threshold",
        "fuse_rounds",
    ],
)
def test_removed_settings_are_refused(removed):
    # renamed or merged before any release: the old names are not accepted (the per-prompt table's EMA decay is
    # `energy_ema_decay`; liveness has one rule, `lze_trl.method.selection.live_groups`); the probe, the adaptive
    # budget and fused rounds left the library with their settings (BENCHMARKS.md section 15)
    with pytest.raises(TypeError, match=removed):
        LZEGRPOConfig(**BASE, **{removed: 1})


def test_both_configs_provide_the_settings_the_method_reads_with_their_types():
    # lze_trl/method/settings.py: what LZERun, the selectors and the pruner read of a config, typed
    from typing import get_type_hints

    from lze_trl.method.settings import LZESettings

    configs = [LZEGRPOConfig]
    try:  # the async config needs TRL's experimental async trainer (lze_trl/async_grpo/upstream.py, ASYNC_TRL)
        from lze_trl.async_grpo.trainer import LZEAsyncGRPOConfig

        configs.append(LZEAsyncGRPOConfig)
    except ImportError:
        pass
    wanted = get_type_hints(LZESettings)
    for config in configs:
        provided = get_type_hints(config)
        assert {key: provided.get(key) for key in wanted} == wanted, config.__name__


def test_list_settings_given_as_text_are_parsed_once_and_validation_changes_nothing():
    import copy

    from lze_trl.grpo.config import LZE_FIELDS
    from lze_trl.method.validation import validate_lze_args

    args = LZEGRPOConfig("out", use_cpu=True, energy_terms="anchor, uncertainty")
    assert args.energy_terms == ["anchor", "uncertainty"]
    args.energy_terms = ("anchor",)  # a tuple stays a tuple: validation reads, it does not rewrite
    before = {name: copy.deepcopy(getattr(args, name)) for name in LZE_FIELDS}
    validate_lze_args(args)
    assert {name: getattr(args, name) for name in LZE_FIELDS} == before and args.energy_terms == ("anchor",)


@pytest.mark.parametrize("config_class", ["LZEGRPOConfig", "LZEAsyncGRPOConfig"])
def test_a_misspelled_keyword_is_answered_with_the_nearest_setting(tmp_path, config_class):
    import lze_trl

    cls = lze_trl.LZEGRPOConfig
    if config_class == "LZEAsyncGRPOConfig":
        try:
            from lze_trl.async_grpo.trainer import LZEAsyncGRPOConfig as cls
        except ImportError as error:  # the async trainer needs TRL 1.16 (make test-trl-min runs TRL 1.12)
            pytest.skip(str(error))
    with pytest.raises(TypeError, match=r"argument 'selction_ratio' \(did you mean `selection_ratio`"):
        cls(output_dir=str(tmp_path), selction_ratio=0.4)
    with pytest.raises(TypeError, match=r"'learnin_rate' \(did you mean `learning_rate`"):  # TRL's fields too
        cls(output_dir=str(tmp_path), learnin_rate=1e-5)
