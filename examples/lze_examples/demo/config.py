"""What a comparison depends on: its settings ([`DemoConfig`]), its runs ([`MethodSpec`]) and each run's trainer
config ([`lze_config`])."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from lze_trl.grpo.config import LZEGRPOConfig

from ..tasks import get_task
from .warmstart import CARRIES_WARM_START, WarmStartConfig


@dataclass
class MethodSpec:
    r"""
    One training run of the comparison.

    Parameters:
        name (`str`):
            Label in tables and figures, e.g. `"grpo"`.
        overrides (`dict[str, Any]`):
            [`LZEGRPOConfig`] fields set for this run only, e.g. `{"selector": "none"}`.
        trainer_cls (`type`, *optional*):
            A subclass of [`MeteredLZEGRPOTrainer`] to train this run with (experiments); defaults to that class.
        config_cls (`type`, *optional*):
            A subclass of [`LZEGRPOConfig`] that `trainer_cls` takes (experiments); defaults to that class.
    """

    name: str
    overrides: dict[str, Any] = field(default_factory=dict)
    trainer_cls: type | None = None
    config_cls: type | None = None


def default_methods() -> list[MethodSpec]:
    """Plain GRPO (`selector="none"`), LZE and LZE with forward pruning."""
    return [
        MethodSpec("grpo", {"selector": "none"}),
        MethodSpec("lze", {"selector": "lze"}),
        MethodSpec("lze+prune", {"selector": "lze", "prune_solved": True}),
    ]


def default_warm_start(task: str = "carries") -> WarmStartConfig:
    """
    The demo's warm start for an embedded task.

    - `"carries"`: the shipped warm start (see [`~lze_examples.demo.warmstart.SHIPPED_DIR`]), each carry forgotten
      with probability `CARRIES_SLIP_PROB` in its supervision.
    - `"arithmetic"`: the first demo's, `WarmStartConfig(hidden_size=128, num_layers=2, carry_drop_prob=0.6)`.
    """
    get_task(task)
    if task == "arithmetic":
        return WarmStartConfig(hidden_size=128, num_layers=2, carry_drop_prob=0.6)
    return WarmStartConfig(**CARRIES_WARM_START)


@dataclass
class DemoConfig:
    r"""
    Everything a demo or benchmark comparison depends on.

    Parameters:
        task (`str`, *optional*, defaults to `"carries"`):
            Embedded task (see [`~lze_examples.tasks.get_task`]): `"carries"` (column addition graded by the number of
            carries, the default) or `"arithmetic"` (the first demo task, kept to reproduce older measurements).
            Set the matching warm start with [`default_warm_start`] (the command line does).
        warm_start ([`WarmStartConfig`], *optional*):
            The supervised warm start every method starts from; defaults to [`default_warm_start`]`("carries")`,
            whose supervision forgets each carry with probability `carry_drop_prob`, so the starting policy has
            learned the right procedure and a common slip side by side and solves a prompt less often the more carries
            it has: RL has something general to learn, which carries over to held-out and OOD prompts.
        train_levels (`list[int]`, *optional*):
            Levels of the training prompts (a level repeated is drawn as often again); `None` takes the task's
            `TRAIN_LEVELS`. `carries` only: `[0, 0, 1, 2, 6, 6]` with `test_levels=[1, 2]` is its dead-mass regime
            (`lze_examples.tasks.carries.DEAD_MASS_LEVELS`; BENCHMARKS.md sections 1-3).
        test_levels (`list[int]`, *optional*):
            Levels of the in-domain test prompts; `None` takes the task's `TRAIN_LEVELS`. `carries` only.
        n_train (`int`, *optional*, defaults to `2048`):
            Training prompts (the task's training levels).
        n_test (`int`, *optional*, defaults to `600`):
            In-domain held-out prompts (the training levels, disjoint from training prompts).
        n_ood (`int`, *optional*):
            Out-of-distribution prompts (the task's OOD split); `None` takes the task's `DEFAULT_N_OOD`: all 180
            prompts of the `carries` task's OOD range, 200 for `arithmetic` (see [`DemoConfig.resolved_n_ood`]).
        n_train_eval (`int`, *optional*, defaults to `256`):
            Training prompts evaluated by greedy decoding (the first ones of the training set).
        data_seed (`int`, *optional*, defaults to `0`):
            Seed of the three splits.
        seed (`int`, *optional*, defaults to `0`):
            Training seed (sampling, data order, selection noise).
        steps (`int`, *optional*, defaults to `120`):
            Optimizer steps per method; one generation batch per step.
        prompts_per_step (`int`, *optional*, defaults to `64`):
            Prompt groups per generation batch (the pool LZE selects from).
        num_generations (`int`, *optional*, defaults to `8`):
            Rollouts per prompt.
        learning_rate (`float`, *optional*, defaults to `1e-4`):
            AdamW learning rate (constant after `warmup_steps`).
        warmup_steps (`int`, *optional*, defaults to `5`):
            Linear warm-up steps of the RL learning rate.
        max_completion_length (`int`, *optional*, defaults to `8`):
            Longest completion (answers have at most 8 characters with the end-of-sequence token).
        temperature (`float`, *optional*, defaults to `1.0`):
            Sampling temperature of the rollouts.
        eval_steps (`int`, *optional*, defaults to `10`):
            Evaluate every this many optimizer steps (and before the first, after the last).
        target_window (`int`, *optional*, defaults to `3`):
            Smoothing of the time-to-target figures: the target is the baseline's mean accuracy over its last
            `target_window` evaluations, and a run reaches it at the first evaluation where its own mean over the
            last `target_window` evaluations (fewer at the start) is at or above it. One evaluation alone moves by
            a few prompts from one evaluation to the next.
        torch_threads (`int`, *optional*, defaults to `1`):
            Intra-op threads. The tiny model's products are too small to gain from more, and one thread per process
            is far less sensitive to other processes on a shared machine.
        methods (`list[MethodSpec]`, *optional*):
            Runs to compare; defaults to [`default_methods`]`()`.
        baseline (`str`, *optional*, defaults to `"grpo"`):
            Name of the run that sets the target accuracy and the denominators of the ratios.
        overrides (`dict[str, Any]`, *optional*):
            [`LZEGRPOConfig`] fields set for every run (before each method's own overrides).
        cache_dir (`str`, *optional*):
            Root of the warm-start cache (see [`load_warm_start`]).
        progress (`bool`, *optional*, defaults to `True`):
            Show tqdm progress bars.
    """

    task: str = "carries"
    warm_start: WarmStartConfig = field(default_factory=lambda: default_warm_start("carries"))
    train_levels: list[int] | None = None
    test_levels: list[int] | None = None
    n_train: int = 2048
    n_test: int = 600
    n_ood: int | None = None
    n_train_eval: int = 256
    data_seed: int = 0
    seed: int = 0
    steps: int = 120
    prompts_per_step: int = 64
    num_generations: int = 8
    learning_rate: float = 1e-4
    warmup_steps: int = 5
    max_completion_length: int = 8
    temperature: float = 1.0
    eval_steps: int = 10
    target_window: int = 3
    torch_threads: int = 1
    methods: list[MethodSpec] | None = None
    baseline: str = "grpo"
    overrides: dict[str, Any] = field(default_factory=dict)
    cache_dir: str | None = None
    progress: bool = True

    def __post_init__(self):
        if self.methods is None:
            self.methods = default_methods()

    @classmethod
    def tiny(cls, **kwargs: Any) -> DemoConfig:
        """A seconds-long configuration for tests and smoke runs (a few steps of a very small model)."""
        task = kwargs.get("task", "carries")
        values: dict[str, Any] = dict(
            warm_start=WarmStartConfig(
                hidden_size=16,
                num_layers=1,
                num_heads=2,
                num_examples=256,
                steps=20,
                carry_drop_prob=0.6,
                levels=list(get_task(task).WARM_START_LEVELS),
                task=task,
            ),
            n_train=32,
            n_test=16,
            n_ood=8,
            n_train_eval=16,
            steps=3,
            prompts_per_step=4,
            num_generations=4,
            eval_steps=1,
            progress=False,
        )
        values.update(kwargs)
        return cls(**values)

    def resolved_n_ood(self) -> int:
        """`n_ood`, or the task's `DEFAULT_N_OOD` when it is `None`."""
        return get_task(self.task).DEFAULT_N_OOD if self.n_ood is None else self.n_ood

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def lze_config(config: DemoConfig, method: MethodSpec, output_dir: str) -> LZEGRPOConfig:
    """
    The [`LZEGRPOConfig`] of one method: the demo's shared settings, `config.overrides`, then the method's.
    """
    values: dict[str, Any] = dict(
        output_dir=output_dir,
        per_device_train_batch_size=config.prompts_per_step * config.num_generations,
        gradient_accumulation_steps=1,
        num_generations=config.num_generations,
        max_completion_length=config.max_completion_length,
        temperature=config.temperature,
        max_steps=config.steps,
        learning_rate=config.learning_rate,
        lr_scheduler_type="constant_with_warmup",
        warmup_steps=config.warmup_steps,
        beta=0.0,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        seed=config.seed,
        data_seed=config.seed,
        disable_tqdm=True,
    )
    values.update(config.overrides)
    values.update(method.overrides)
    return (method.config_cls or LZEGRPOConfig)(**values)
