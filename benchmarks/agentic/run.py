"""The multi-turn benchmark of BENCHMARKS.md section 4: GRPO and LZE on the checker environment
([`benchmarks.agentic.checker`]), one regime and seed per call:

    python benchmarks/agentic/run.py dead 0 benchmarks/results/agentic/runs

writes `OUT/<regime>_s<seed>/demo_results.json.gz` (the demo's results: accuracy curves, rollouts, tokens) and
`OUT/<regime>_s<seed>/turns.json` (each arm's model turns and generated tokens per `rollout_func` call). The report is
`python benchmarks/agentic/report.py`. The committed runs also hold the probe (`lze+probe`) and the adaptive budget
(`lze+adaptive`), which left the library with BENCHMARKS.md section 15's verdict: they ran from this script at commit
11e6ad3.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks.adaptive.regimes import demo_config, run_and_keep, run_parser  # noqa: E402
from benchmarks.agentic.checker import CheckerRollouts, checker_trainer  # noqa: E402
from lze_examples.demo import MethodSpec  # noqa: E402


ARMS = {
    "grpo": {"selector": "none"},
    "lze": {"selector": "lze"},
}
REGIMES = ("dead", "carries")
MAX_TURNS = 3
STEPS, EVAL_STEPS = 120, 20


def main() -> None:
    parser = run_parser(__doc__.split("\n\n")[0], REGIMES, STEPS)
    parser.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS), help="the arms to run (all)")
    args = parser.parse_args()
    out = args.out / f"{args.regime}_s{args.seed}"
    rollouts = {name: CheckerRollouts(MAX_TURNS) for name in args.arms}
    methods = [MethodSpec(name, dict(ARMS[name]), trainer_cls=checker_trainer(rollouts[name])) for name in args.arms]
    config = demo_config(
        args.regime, seed=args.seed, steps=args.steps, eval_steps=EVAL_STEPS, methods=methods, baseline=args.arms[0]
    )
    run_and_keep(config, out)
    turns = {name: r.calls for name, r in rollouts.items()}
    (out / "turns.json").write_text(json.dumps({"max_turns": MAX_TURNS, "arms": turns}, indent=1))


if __name__ == "__main__":
    main()
