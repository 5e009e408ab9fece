"""Step times of GRPO, GRPO with half the group and LZE with the real [`LZEGRPOTrainer`] on one GPU, with
transformers generation and with TRL's continuous batching (`use_transformers_continuous_batching`), on a random
model of Qwen2.5-1.5B's shape (`benchmarks/gpu/workload.py`):

    python benchmarks/gpu/run.py --output OUT.json               # the H100/H200 size, about 6 minutes
    python benchmarks/gpu/run.py --tiny --output OUT.json        # the same on a CPU in seconds (the tests)

Each arm (`benchmarks/gpu/arms.py`) trains a fresh model with `trainer.train()` for its steps; its first steps are not
counted (`benchmarks/gpu/timing.py` says what a step records). The arms run GRPO first (the baseline of every ratio),
each with both backends. No arm starts that is predicted (from the steps measured so far) to end after `--budget_s`
seconds of the run: it is recorded as skipped, and a cheaper one after it may still run; an arm still running at
`--deadline_s` stops after its current step. The JSON is rewritten after every arm, so a run that is killed still
leaves the arms it finished. `benchmarks/gpu/report.py` makes the table; `benchmarks/gpu/README.md` gives the one-call
command for a lent GPU machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks.gpu.arms import ARMS, BACKENDS, ORDER, Arm, plan  # noqa: E402
from benchmarks.gpu.workload import SIZES, Size  # noqa: E402


VERSIONED = ("torch", "transformers", "trl", "accelerate", "datasets", "tokenizers", "huggingface_hub", "pyarrow")


def version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def environment(size: Size) -> dict[str, Any]:
    """Where and when the run ran: the device, the package versions, the date, the commit, the command."""
    import torch

    cuda = size.device == "cuda"
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    versions = {"python": platform.python_version()}
    versions.update({name: version(name) for name in VERSIONED})
    versions["cuda"] = torch.version.cuda if cuda else None
    return {
        "device_name": torch.cuda.get_device_name() if cuda else f"CPU ({os.cpu_count()} cores)",
        "versions": versions,
        "torch_threads": torch.get_num_threads(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": commit or os.environ.get("LZE_COMMIT"),
        "command": sys.argv,
        "env": {k: os.environ.get(k) for k in ("PYTORCH_CUDA_ALLOC_CONF", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES")},
    }


class Budget:
    """
    Predicts an arm's seconds from the steps measured so far with its backend (else with any): its steps times (the
    median seconds of a generation call, one a step, plus the median seconds of a step outside generation), plus the
    median setup. `fits` says whether it would end within `budget_s` seconds of `start`.
    """

    def __init__(self, start: float, budget_s: float) -> None:
        self.start, self.budget_s = start, budget_s
        self.seen: dict[str, dict[str, list[float]]] = {}

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def add(self, record: dict[str, Any]) -> None:
        seen = self.seen.setdefault(record["backend"], {"call": [], "other": [], "setup": []})
        for step in record.get("steps", []):
            if step["generation_calls"]:
                seen["call"].append(step["generation_seconds"] / step["generation_calls"])
            seen["other"].append(step["seconds"] - step["generation_seconds"])
        if "setup_seconds" in record:
            seen["setup"].append(record["setup_seconds"])

    def predict(self, arm: Arm, size: Size) -> float | None:
        seen = self.seen.get(arm.backend) or next((s for s in self.seen.values() if s["call"]), None)
        if not seen or not seen["call"] or not seen["other"]:
            return None
        call = float(np.median(seen["call"]))
        step = call + float(np.median(seen["other"]))
        return float(np.median(seen["setup"] or [0.0])) + arm.steps(size) * step

    def fits(self, predicted: float | None) -> bool:
        return predicted is None or self.elapsed() + predicted <= self.budget_s


def write(path: Path, result: dict[str, Any]) -> None:
    """Writes `result` as JSON (through a temporary file: a run killed mid-write leaves the previous one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    tmp.replace(path)


def line(record: dict[str, Any]) -> str:
    name = f"{record['arm']}/{record['backend']}"
    if "s_per_step" not in record:
        return f"{name}: {record['status']} {record.get('reason') or record.get('error', '').splitlines()[-1:]}"
    r = record
    return (
        f"{name}: {r['status']}, {r['s_per_step']:.3f} s/step, generation {r['generation_s_per_step']:.3f} s/step in "
        f"{r['generation_calls_per_step']:.2f} calls, {r['generated_rollouts_per_step']:.0f} rollouts, "
        f"{r['update_rows_per_step']:.0f} update rows, {r['wall_seconds']:.1f} s"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=sorted(SIZES), default="h100", help="the model and run sizes (workload.py)")
    parser.add_argument("--tiny", action="store_const", const="tiny", dest="size", help="same as --size tiny")
    parser.add_argument("--output", type=Path, required=True, help="the JSON, rewritten after every arm")
    parser.add_argument("--arms", nargs="+", default=list(ORDER), choices=list(ARMS), help="arms to run")
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=list(BACKENDS))
    for name in ("budget_s", "deadline_s"):
        parser.add_argument(f"--{name}", type=float, default=None, help="default: the size's")
    for name in ("warmup_steps", "timed_steps", "prompts_per_step"):
        parser.add_argument(f"--{name}", type=int, default=None, help="default: the size's")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    start = time.perf_counter()
    args = parse_args(argv)
    overrides = {k: getattr(args, k) for k in ("budget_s", "deadline_s", "warmup_steps", "timed_steps")}
    overrides["prompts_per_step"] = args.prompts_per_step
    size = dataclasses.replace(SIZES[args.size], **{k: v for k, v in overrides.items() if v is not None})
    if size.device == "cuda":  # one allocator setting for every arm: fewer fragmented blocks across the trainers
        os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from benchmarks.gpu.timing import time_arm
    from benchmarks.gpu.workload import full_vocab_tokenizer

    arms = plan(args.arms, args.backends)
    result: dict[str, Any] = {
        "environment": environment(size),
        "size": size.as_dict(),
        "plan": [f"{a.name}/{a.backend}" for a in arms],
        "arms": [],
        "complete": False,
    }
    print(f"{result['environment']['device_name']}; {result['environment']['versions']}", flush=True)
    write(args.output, result)
    tokenizer = full_vocab_tokenizer(size.vocab_size)
    budget, deadline = Budget(start, size.budget_s), start + size.deadline_s
    for arm in arms:
        predicted = budget.predict(arm, size)
        if not budget.fits(predicted):
            record = {"arm": arm.name, "backend": arm.backend, "settings": arm.settings, "status": "skipped"}
            at = budget.elapsed()
            record["reason"] = f"predicted {predicted:.0f} s at {at:.0f} s > budget {size.budget_s:.0f} s"
        else:
            record = time_arm(arm, size, tokenizer, deadline)
            record["predicted_seconds"] = predicted
            budget.add(record)
            result.setdefault("parameters", record.get("parameters"))
        result["arms"].append(record)
        result["seconds"] = budget.elapsed()
        result["complete"] = len(result["arms"]) == len(arms)
        write(args.output, result)
        print(f"[{budget.elapsed():6.1f} s] {line(record)}", flush=True)
    from benchmarks.gpu.report import report

    print("\n" + report(result), flush=True)
    return 0 if all(r["status"] in ("ok", "skipped", "cut") for r in result["arms"]) else 1


if __name__ == "__main__":
    sys.exit(main())
