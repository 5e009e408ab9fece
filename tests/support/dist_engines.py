"""
Two-process CPU runs of LZE under DDP, FSDP2 and DeepSpeed ZeRO-3, for tests/distributed/test_engines.py.

`torchrun --nproc_per_node 2 tests/support/dist_engines.py OUT_DIR ENGINE [ENGINE ...]` trains, for each engine (`ddp`,
`fsdp2`, `zero3`), four runs of a tiny Qwen2 in the same two processes and writes each rank's results under
`OUT_DIR/<engine>/<case>/`:

- `lze`: mostly dead groups and `selection_ratio=0.2`, so that the update holds few rows (whole optimizer windows hold
  zero-weight rows only), with forward pruning, a checkpoint at step 6 and a linear learning-rate decay;
- `resume`: the `lze` run resumed from its checkpoint at step 6;
- `none`: `selector="none"` (plain GRPO);
- `skip`: forward pruning on both sides without refilling the steps (`prune_refill=False`).

The CPU workarounds below are test-only: the library never patches accelerate.
"""

from __future__ import annotations

import os


# DeepSpeed picks its accelerator when it is first imported; without a GPU it must be told to use the CPU.
os.environ.setdefault("DS_ACCELERATOR", "cpu")

import contextlib  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import zlib  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from accelerate.state import AcceleratorState, PartialState  # noqa: E402
from accelerate.utils import DistributedType  # noqa: E402
from testing_utils import end_distributed, prompt_dataset, restored_environ, save_rank_results, tiny_config  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

from lze_examples.tiny import char_tokenizer, tiny_qwen2  # noqa: E402
from lze_trl import LZEGRPOConfig, LZEGRPOTrainer  # noqa: E402
from lze_trl.common.engines import warn_if_not_sharded  # noqa: E402


NUM_PROMPTS = 16
MAX_STEPS = 8
SAVE_STEP = 6


def reward(prompts, completions, **kwargs):
    """Prompts `i % 4 == 0` are in the learning zone (about half the completions pass); the others are dead."""
    values = []
    for prompt, completion in zip(prompts, completions):
        i = int(prompt.split("+")[0])
        values.append(float(zlib.crc32(completion.encode()) % 2) if i % 4 == 0 else float(i % 4 == 3))
    return values


@contextlib.contextmanager
def fsdp_on_cpu():
    """
    Lets accelerate run FSDP2 on CPU processes (test-only workaround).

    `AcceleratorState.__init__` (accelerate 1.15) switches to `DistributedType.FSDP` only for GPU-like distributed
    types (MULTI_GPU, MULTI_NPU, ...): with `use_cpu=True` it stays `MULTI_CPU` and drops the FSDP plugin, so the
    model silently gets DDP. FSDP2 itself (`fully_shard` on a CPU device mesh, gloo) works; this restores the plugin.
    """
    original = AcceleratorState.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        plugin = kwargs.get("fsdp_plugin")
        if self.distributed_type == DistributedType.MULTI_CPU and plugin is not None:
            self.distributed_type = DistributedType.FSDP
            self.fsdp_plugin = plugin
            PartialState._shared_state["distributed_type"] = DistributedType.FSDP

    AcceleratorState.__init__ = init
    try:
        yield
    finally:
        AcceleratorState.__init__ = original


def engine_args(engine: str) -> dict:
    if engine == "ddp":
        return {}
    if engine == "fsdp2":
        return {
            "fsdp": "full_shard auto_wrap",
            "fsdp_config": {"version": 2, "transformer_layer_cls_to_wrap": ["Qwen2DecoderLayer"]},
        }
    if engine == "zero3":
        # Parameters under `stage3_param_persistence_threshold` elements stay whole on every rank: 0 partitions
        # all of them, as a large model's would be.
        zero = {"stage": 3, "stage3_param_persistence_threshold": 0}
        return {
            "deepspeed": {
                "zero_optimization": zero,
                "train_micro_batch_size_per_gpu": "auto",
                "train_batch_size": "auto",
                "gradient_accumulation_steps": "auto",
                "gradient_clipping": "auto",
            }
        }
    raise ValueError(engine)


def untied_tiny_qwen2(tokenizer):
    """
    `tiny_qwen2` with separate input and output embeddings.

    With tied embeddings, ZeRO-3 (DeepSpeed 0.19.8, on CPU) computes a gradient that differs from DDP's by ~5e-4
    relative from the first step on; with untied ones it agrees to float32 rounding, which the comparisons need.
    """
    from transformers import Qwen2ForCausalLM

    config = tiny_qwen2(tokenizer).config
    config.tie_word_embeddings = False
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


class WindowRows(TrainerCallback):
    """Counts the rows that went through a forward pass with gradients in each optimizer window."""

    def __init__(self, model):
        self.rows, self.per_window = 0, []

        def hook(module, args, kwargs):
            if torch.is_grad_enabled():
                self.rows += kwargs["input_ids"].shape[0]

        model.register_forward_pre_hook(hook, with_kwargs=True)

    def on_step_end(self, args, state, control, **kwargs):
        self.per_window.append(self.rows)
        self.rows = 0


def full_parameters(trainer) -> np.ndarray:
    """Every parameter, whole, concatenated (gathered from the shards under FSDP2 and ZeRO-3)."""
    params = list(trainer.model.parameters())
    if trainer.is_deepspeed_enabled:
        import deepspeed

        with deepspeed.zero.GatheredParameters(params):
            return torch.cat([p.detach().flatten().clone() for p in params]).numpy()
    return torch.cat(
        [(p.full_tensor() if hasattr(p, "full_tensor") else p).detach().flatten() for p in params]
    ).numpy()


def sharding(trainer) -> dict:
    """How the parameters are held: DTensor placements (FSDP2), ZeRO-3 partitions, or plain tensors."""
    params = list(trainer.model.parameters())
    info = {"distributed_type": str(trainer.accelerator.distributed_type)}
    info["dtensor_placements"] = sorted({str(getattr(p, "placements", None)) for p in params})
    info["zero3_partitioned"] = [
        hasattr(p, "ds_id") and p.ds_tensor.numel() < p.ds_numel and p.data.numel() == 0 for p in params
    ]
    info["local_numel"] = sum((p.to_local() if hasattr(p, "to_local") else p).numel() for p in params)
    if trainer.is_deepspeed_enabled:
        info["local_numel"] = sum(p.ds_tensor.numel() for p in params)
    return info


def optimizer_updates(trainer) -> list[float]:
    """The `step` of every parameter's optimizer state (AdamW counts the updates it made)."""
    optimizer = trainer.optimizer
    while not isinstance(optimizer, torch.optim.Optimizer) or type(optimizer).__module__.startswith("accelerate"):
        optimizer = optimizer.optimizer  # accelerate's and DeepSpeed's wrappers
    return sorted({float(s["step"]) for s in optimizer.state.values() if "step" in s})


def scheduler_steps(trainer) -> int:
    """Steps taken by the learning-rate scheduler (torch's, or DeepSpeed's own when its config has one)."""
    scheduler = trainer.lr_scheduler
    while hasattr(scheduler, "scheduler"):  # accelerate's wrappers
        scheduler = scheduler.scheduler
    if isinstance(scheduler, torch.optim.lr_scheduler.LRScheduler):
        return scheduler.last_epoch
    return scheduler.last_batch_iteration + 1


def engine_counters(trainer) -> dict | None:
    """DeepSpeed's own step counters (`None` for other engines)."""
    if not trainer.is_deepspeed_enabled:
        return None
    engine = trainer.model_wrapped
    scheduler = engine.lr_scheduler
    return {
        "global_steps": engine.global_steps,
        "skipped_steps": engine.skipped_steps,
        "global_samples": engine.global_samples,
        "train_batch_size": engine.train_batch_size(),
        "scheduler_steps": None if scheduler is None else scheduler.last_batch_iteration + 1,
    }


def run(out_dir: Path, engine: str, case: str) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = char_tokenizer()
    model = untied_tiny_qwen2(tokenizer)
    windows = WindowRows(model)
    values = dict(
        output_dir=str(out_dir / "out"),
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        steps_per_generation=4,
        max_steps=MAX_STEPS,
        learning_rate=1e-2,
        weight_decay=0.1,
        bf16=False,  # fp32 everywhere, so that the engines' results can be compared (ZeRO-3 would train in bf16)
        selection_ratio=0.2,
        **engine_args(engine),
    )
    resume = None
    if case in ("lze", "resume", "ds_scheduler"):
        values.update(prune_solved=True, prune_solved_after=1, save_strategy="steps", save_steps=SAVE_STEP)
    if case == "resume":
        values["output_dir"] = str(out_dir.parent / "lze" / "out")
        resume = str(Path(values["output_dir"]) / f"checkpoint-{SAVE_STEP}")
    if case == "none":
        values["selector"] = "none"
    if case == "ds_scheduler":  # the learning-rate schedule owned by DeepSpeed's engine instead of the Trainer
        scheduler = {"type": "WarmupDecayLR", "params": {"warmup_num_steps": "auto", "total_num_steps": "auto"}}
        values["deepspeed"] = {**values["deepspeed"], "scheduler": scheduler}
    if case == "skip":  # forward pruning on both sides, the steps not refilled: fewer rows generated, alike on ranks
        values.update(prune_solved=True, prune_solved_after=1, prune_unsolved=True, prune_refill=False)
    with fsdp_on_cpu() if engine == "fsdp2" else contextlib.nullcontext():
        trainer = LZEGRPOTrainer(
            model=model,
            reward_funcs=reward,
            args=tiny_config(values.pop("output_dir"), **values),
            train_dataset=prompt_dataset(NUM_PROMPTS),
            processing_class=tokenizer,
            callbacks=[windows],
        )
        trainer.train(resume_from_checkpoint=resume)
    selection = trainer.selection_log.to_pandas()
    save_rank_results(
        trainer,
        out_dir,
        full_parameters(trainer),
        log_keys=("loss", "grad_norm", "learning_rate", "step"),
        sharding=sharding(trainer),
        global_step=trainer.state.global_step,
        scheduler_steps=scheduler_steps(trainer),
        optimizer_updates=optimizer_updates(trainer),
        engine=engine_counters(trainer),
        not_sharded_warning=warn_if_not_sharded(trainer),
        window_rows=windows.per_window,
        selection=selection[["batch", "prompt_key", "weight"]].to_dict("list"),
    )
    trainer.accelerator.wait_for_everyone()
    del trainer, model
    gc.collect()  # drops the DeepSpeed config that transformers references weakly (zero.Init for later models)


def fsdp_fallback(out: Path) -> None:
    """Asks for FSDP on CPU without the workaround: accelerate gives DDP; records what the trainer warns."""
    tokenizer = char_tokenizer()
    args = LZEGRPOConfig(
        output_dir=str(out / "fsdp_fallback"),
        per_device_train_batch_size=4,
        num_generations=4,
        report_to="none",
        use_cpu=True,
        bf16=False,
        **engine_args("fsdp2"),
    )
    trainer = LZEGRPOTrainer(
        model=tiny_qwen2(tokenizer),
        reward_funcs=reward,
        args=args,
        train_dataset=prompt_dataset(NUM_PROMPTS),
        processing_class=tokenizer,
    )
    info = {"distributed_type": str(trainer.accelerator.distributed_type), "warning": warn_if_not_sharded(trainer)}
    if trainer.accelerator.is_main_process:
        (out / "fsdp_fallback.json").write_text(json.dumps(info))


if __name__ == "__main__":
    out = Path(sys.argv[1])
    # Each run undoes what it leaves in `os.environ` (several runs share these processes): `Accelerator.__init__`
    # (accelerate 1.15) sets `ACCELERATE_USE_FSDP=true` for good when it is given an FSDP plugin, so every later run
    # in the process would look as if FSDP had been asked for.
    with restored_environ():
        fsdp_fallback(out)
    for engine in sys.argv[2:]:
        for case in ("lze", "resume", "none", "skip") + (("ds_scheduler",) if engine == "zero3" else ()):
            start = time.perf_counter()
            with restored_environ():
                run(out / engine / case, engine, case)
            print(f"[dist_engines] {engine}/{case}: {time.perf_counter() - start:.1f} s", flush=True)
    end_distributed()
