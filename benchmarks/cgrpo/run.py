"""C-GRPO on the embedded task, one regime and seed per call, in section 12's setting (240 steps, evaluation every 20,
the task's warm start), with its own TRL (`.venv-cgrpo`):

    .venv-cgrpo/bin/python benchmarks/cgrpo/run.py dead 0 benchmarks/results/adaptive/cgrpo_runs [--grpo]

writes `OUT/<regime>_s<seed>/seed_<seed>/demo_results.json.gz`, the layout `benchmarks/adaptive/report.py` reads.
`--grpo` adds plain GRPO under the same TRL (to tell C-GRPO from the TRL version it needs).
"""

from __future__ import annotations

import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks.adaptive.regimes import demo_config, run_and_keep, run_parser  # noqa: E402
from benchmarks.cgrpo.arm import CGRPOArmConfig, calibration_set, cgrpo_arm  # noqa: E402
from lze_examples.demo import MethodSpec  # noqa: E402


ARM = "cgrpo"
SETTING = {"selector": "none", "budget_grid": [2, 4, 8], "recalibrate_every": 50}


def main() -> None:
    parser = run_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--grpo", action="store_true")
    cli = parser.parse_args()
    config = demo_config(cli.regime, seed=cli.seed, steps=cli.steps, eval_steps=20, methods=[], baseline=ARM)
    arm = cgrpo_arm(calibration_set(config))
    config.methods = [MethodSpec(ARM, dict(SETTING), trainer_cls=arm, config_cls=CGRPOArmConfig)]
    if cli.grpo:
        config.methods.append(MethodSpec("grpo@cgrpo-trl", {"selector": "none"}))
    run_and_keep(config, cli.out / f"{cli.regime}_s{cli.seed}" / f"seed_{cli.seed}")


if __name__ == "__main__":
    main()
