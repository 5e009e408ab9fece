"""Every private name of TRL's `GRPOTrainer` / `GRPOConfig` (and transformers' `Trainer` / `TrainingArguments`) that
lze-trl uses or overrides, and of TRL's experimental async GRPO that the async trainer (`lze_trl/async_grpo`) uses; the
versions of TRL and transformers they were tested on, and the check that meets any other with one line.

Private names carry no promise across releases; this list is the whole of lze-trl's exposure to them, and
`tests/trainer/test_trl_coupling.py` fails when the installed TRL lacks one of them, changes how it is called, or when
the package starts using one that is not listed here (as a method, an attribute, a class attribute or an import). The
supported ranges are the tested ones: CI runs the suite at both ends (`make test` resolves the newest release each cap
admits, `make test-trl-min` pins the oldest), and `pyproject.toml` asks for the same ranges (checked by a test).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import re
import warnings
from collections.abc import Iterable, Iterator

from packaging.specifiers import SpecifierSet
from packaging.version import Version


SUPPORTED: dict[str, str] = {
    "trl": ">=1.12,!=1.15.0,<1.17",
    "transformers": ">=5.17,<5.25",
}
"""Distribution -> the versions lze-trl is tested on: every package whose private names it uses (TRL: `GRPOTrainer`'s,
`PRIVATE_NAMES`; transformers: `Trainer._load_rng_state`, and `Trainer.set_initial_training_values`, whose signature
changed in 5.3). The upper bound is the first minor release CI has not run; transformers' lower bound is the newest
release vLLM's CPU build 0.31 accepts (`make test-vllm` runs on it), TRL's the oldest `make test-trl-min` runs;
TRL 1.15.0 cannot train GRPO without Triton, which the CPU build of torch lacks."""

ASYNC_TRL = ">=1.16,<1.17"
"""The TRL versions whose experimental `AsyncGRPOTrainer` `LZEAsyncGRPOTrainer` is built on and tested with (TRL 1.18
moved it out of `trl.experimental`: `docs/upstream/trl-1.18-port.md`)."""

PRIVATE_NAMES: dict[str, str] = {
    "_generate_and_score_completions": "overridden to run a generation batch (`grpo/step.py`), which calls TRL's "
    "once (`LZEGRPOTrainer.generate_and_score`); timed by the demo",
    "_generate": "overridden to time generation in training (`lze/generation_seconds`); the demo counts the rollouts "
    "it generates",
    "_calculate_rewards": "overridden to keep the rewards TRL computes in the step's call (every process's), which "
    "the run scores",
    "_get_train_sampler": "overridden to return LZERepeatSampler",
    "_metrics": "the per-step metric lists that TRL's `log` averages: the `lze/` metrics are appended to them",
    "_step": "TRL's micro-step counter that paces generation: saved with the LZE state and restored on resume",
    "_load_rng_state": "transformers' RNG restore, redone after a resumed sampler's first draw (exact resume)",
    "_tag_names": "class attribute: the model card's tags, as TRL's trainers set them",
    "_name": "class attribute: the trainer's name on the model card, as TRL's trainers set it",
    "_paper": "class attribute: the paper cited on the model card, as TRL's trainers set it",
}
"""Private name -> what lze-trl does with it."""

ASYNC_PRIVATE_NAMES: dict[str, str] = {
    "_AsyncRolloutLoop": "TRL's async rollout loop, subclassed by LZE's worker loop "
    "(`async_grpo.worker.LZERolloutLoop`)",
    "_generate_loop": "overridden: LZE's loop generates the groups the trainer orders instead of drawing prompts from "
    "an endless iterator; a copy of TRL's loop (the differences are listed in `async_grpo/worker.py`), pinned by a "
    "hash of TRL's source in `tests/async/test_async_lze.py`",
    "_generate_one": "TRL's one-rollout coroutine (generation and tool calls), called by the overridden loop",
    "_score_group": "overridden: calls TRL's, then tags the rows with their group's rewards (`tag_group`)",
    "_push_metrics": "TRL's metric queue to the trainer: the loop's backpressure time, as TRL's loop pushes it",
    "_groups_to_score": "TRL's queue from the generate loop to the score loop: the overridden loop fills it",
    "_heartbeat_value": "TRL's liveness stamp of the child process: set by the overridden loop, as TRL's loop sets it",
    "_inflight": "TRL's gauge of the rollouts in flight (logged by TRL's score loop): set by the overridden loop",
    "_total_completion_tokens": "TRL's token counter (its throughput metric): counted by the overridden loop",
    "_generation_start_time": "TRL's start of the throughput clock: set by the overridden loop",
    "_standalone_tools": "the tools TRL's loop gives each rollout: read by the overridden loop",
    "_loop_cls": "class attribute of TRL's `AsyncRolloutWorker`: the loop class its child runs (`LZERolloutLoop`)",
    "_loop_kwargs": "TRL's worker's arguments of its loop: the orders queue added (`_LoopKwargs`)",
    "_mp_ctx": "TRL's worker's multiprocessing context: the orders queue is made from it",
}
"""Private name of TRL's experimental async GRPO -> what lze-trl's async trainer does with it (checked by
`tests/trainer/test_trl_coupling.py` where TRL has the async trainer, `ASYNC_TRL`)."""


def installed(package: str) -> str:
    """The version of the imported `package` (`trl.__version__`: what the code runs, whatever pip's metadata says)."""
    return importlib.import_module(package).__version__


def unsupported(package: str, supported: str, found: str, *, what: str = "lze-trl") -> str | None:
    """
    The one line that meets version `found` of `package` outside `supported` (a specifier set: `">=1.12,<1.17"`), or
    `None` when `found` lies in it. A pre-release or a local build of a supported version counts as supported.
    """
    if SpecifierSet(supported).contains(Version(found).public, prereleases=True):
        return None
    return f"{what} is tested with {package}{supported}, found {package} {found}: pip install '{package}{supported}'"


def missing_names(classes: tuple[type, ...], names: Iterable[str]) -> list[str]:
    """
    The `names` none of `classes` has: neither an attribute of a class (a method, a class attribute) nor one that the
    source of a class or its bases sets on `self` (an instance attribute, such as `_metrics`).
    """
    assigned = set()
    for klass in {k for cls in classes for k in cls.__mro__ if k is not object}:
        try:
            assigned |= set(re.findall(r"self\.(_[A-Za-z][A-Za-z0-9_]*)\s*(?::[^=\n]*)?=", inspect.getsource(klass)))
        except (OSError, TypeError):  # a class without Python source
            continue
    return [n for n in names if n not in assigned and not any(hasattr(cls, n) for cls in classes)]


def check_trl(classes: tuple[type, ...], names: Iterable[str], *, what: str, supported: str | None = None) -> None:
    """
    Meets an untested TRL or transformers with one line, when `what` (a trainer) is imported: an `ImportError` when
    TRL's `classes` lack one of `names` (the trainer cannot work), else an [`LZEWarning`] for each package outside
    its tested range ([`SUPPORTED`]; `supported` for TRL where `what` needs a narrower one): it may work, but never
    ran here.
    """
    from ..method.errors import LZEWarning

    ranges = {**SUPPORTED, "trl": supported or SUPPORTED["trl"]}
    missing = missing_names(classes, names)
    if missing:
        raise ImportError(
            f"{what} is tested with trl{ranges['trl']}, found trl {installed('trl')}, which lacks "
            f"{', '.join(missing)}: pip install 'trl{ranges['trl']}'"
        )
    for package, tested in ranges.items():
        line = unsupported(package, tested, installed(package), what=what)
        if line:
            warnings.warn(line, LZEWarning, stacklevel=3)


CHECKPOINTING_RENAMED = r"`(is_)?gradient_checkpointing\w*` is deprecated"
"""transformers 5.2x renamed gradient checkpointing to activation checkpointing: TRL's `GRPOConfig` default
(`gradient_checkpointing=True`) and TRL's toggling around its log-probability forwards
(`trl.models.utils.disable_gradient_checkpointing`) reach the deprecated names, a FutureWarning per call that no
setting of the user's avoids."""


@contextlib.contextmanager
def checkpointing_renames_quiet() -> Iterator[None]:
    """Silences [`CHECKPOINTING_RENAMED`]'s FutureWarnings inside the block (TRL's calls), and nothing else: the
    filter is gone when the block ends."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=CHECKPOINTING_RENAMED, category=FutureWarning)
        yield
