"""Two-process CPU runs of the peers registered outside the package, for tests/benchmarks/test_peers.py.

`torchrun --nproc_per_node 2 tests/support/dist_peers.py OUT_DIR [PEER ...]`: trains the peers named (by default
`prefilter`, its prompts judged on both processes by `benchmarks.peers.prepare` before training, and `softmax` with
rollout allocation; `reinforce_rej` is Reinforce-Rej's settings, with groups straddling the processes: 6 rows per
process, groups of 4) and writes each rank's final state under `OUT_DIR/<peer>/`.
"""

import sys
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `benchmarks.peers` (torchrun runs the script alone)

from testing_utils import (  # noqa: E402
    count_grad_rows,
    end_distributed,
    flat_parameters,
    make_trainer,
    prompt_dataset,
    save_rank_results,
)

from benchmarks.peers import prepare  # noqa: E402
from benchmarks.peers.config import PeerConfig  # noqa: E402
from benchmarks.peers.reinforce_rej import SETTINGS as REINFORCE_REJ  # noqa: E402
from lze_examples.tiny import char_tokenizer, tiny_qwen2  # noqa: E402


def run(out_dir: Path, selector: str = "lze", num_prompts: int = 32, **overrides) -> None:
    tokenizer = char_tokenizer()
    model = tiny_qwen2(tokenizer)
    rows = count_grad_rows(model)
    trainer = make_trainer(
        out_dir,
        selector,
        dataset=prompt_dataset(num_prompts),
        model=model,
        tokenizer=tokenizer,
        **{"output_dir": str(out_dir), "max_steps": 3, "learning_rate": 1e-2, **overrides},
    )
    prepare(trainer)
    trainer.train()
    log = trainer.selection_log.to_pandas()
    selection = log[["batch", "prompt_key", "pass_rate", "weight"]].to_dict("list")
    save_rank_results(trainer, out_dir, flat_parameters(trainer.model), grad_rows=rows["rows"], selection=selection)


PEERS = {
    "prefilter": lambda out: run(
        out / "prefilter",
        "prefilter",
        selector_kwargs={"mode": "remove_both", "cache_dir": str(out / "cache")},
        config_class=PeerConfig,
    ),
    "softmax": lambda out: run(
        out / "softmax",
        "softmax",
        num_prompts=8,
        max_steps=4,
        selector_kwargs={"allocate_rollouts": True},
        config_class=PeerConfig,
    ),
    "reinforce_rej": lambda out: run(
        out / "reinforce_rej", num_prompts=12, per_device_train_batch_size=6, max_steps=6, **REINFORCE_REJ
    ),
}


if __name__ == "__main__":
    out = Path(sys.argv[1])
    for name in sys.argv[2:] or ["prefilter", "softmax"]:
        PEERS[name](out)
    end_distributed()
