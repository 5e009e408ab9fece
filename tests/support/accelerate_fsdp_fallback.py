"""A trainer under `accelerate launch --config_file recipes/accelerate/fsdp.yaml`
(tests/trainer/test_engine_warning.py)."""

import sys
from pathlib import Path

from testing_utils import make_trainer


if __name__ == "__main__":
    trainer = make_trainer(Path(sys.argv[1]), bf16=False)
    accelerator = trainer.accelerator
    print(f"RUNNING {accelerator.process_index} {accelerator.num_processes} {accelerator.distributed_type.value}")
