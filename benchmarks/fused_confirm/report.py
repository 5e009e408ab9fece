"""The report of the confirmatory test of fused rounds (BENCHMARKS.md section 10), rebuilt from its raw runs:

    python benchmarks/fused_confirm/report.py            # writes benchmarks/results/fused_confirm/report.md
    python benchmarks/fused_confirm/report.py --check    # fails if the committed report.md differs from a rebuild

The declared test (`protocol.md` beside the report): per regime, the corrected fused probe minus the serial probe in
in-domain accuracy (the mean of the last 3 evaluations), paired by seed; one-sided paired t-test of non-inferiority,
H0: mean difference <= -0.015; Holm over the 4 regimes at family-wise 0.05 (`benchmarks.fused.report.decide`). A
regime whose seeds have not all run is reported with the seeds it has, and the verdict says the test is incomplete.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
from tabulate import tabulate


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks.adaptive.report import report_main  # noqa: E402
from benchmarks.frontier.report import load  # noqa: E402
from benchmarks.fused.power import MARGIN  # noqa: E402
from benchmarks.fused.report import decide, interval, number  # noqa: E402
from benchmarks.fused_confirm.power import RESULTS, seeds  # noqa: E402
from benchmarks.stale_rollouts.power import ALPHA, CORRECTED, REGIMES, SERIAL, paired  # noqa: E402


def train_seconds(run: dict) -> float:
    """A run's training seconds (its last evaluation's count: evaluation excluded)."""
    return float(run["curve"][-1]["train_seconds"])


def build(results: Path = RESULTS, figures: bool = False) -> str:
    """The report (Markdown) from `results/runs` (`figures` is unused: the report has none)."""
    return (
        "# The confirmatory test of fused rounds (BENCHMARKS.md section 10), rebuilt by "
        "benchmarks/fused_confirm/report.py\n\n"
        + declared_test(results, seeds(), CORRECTED, SERIAL)
        + timing_section(results)
    )


def declared_test(results: Path, planned: dict[str, list[int]], corrected: str, serial: str) -> str:
    """The declared test and the secondary table of the runs in `results/runs` of the arms `corrected` (fused) and
    `serial`, whose `planned` seeds (per regime) the verdict waits for."""
    runs = {regime: load(sorted(str(p) for p in (results / "runs").glob(f"{regime}_s*"))) for regime in REGIMES}
    decision = decide({regime: paired(arms, corrected, serial) for regime, arms in runs.items()}, ALPHA, MARGIN)
    complete = all(decision[r]["seeds"] >= len(planned[r]) for r in REGIMES)
    rows = [
        [
            REGIMES[r], f"{d['seeds']} of {len(planned[r])}", number(d["mean"], "+.4f"), number(d["sd"], ".4f"),
            number(d["p"], ".4f"), f"{d['step']} ({d['level']:.4f})", number(d["lower"], "+.4f"),
            "non-inferior" if d["passes"] else ("not tested (< 2 seeds)" if math.isnan(d["p"]) else "not shown"),
        ]
        for r, d in decision.items()
    ]  # fmt: skip
    passed = sum(d["passes"] for d in decision.values())
    if not complete:
        verdict = "the test is incomplete (not every declared seed has run): no verdict yet"
    elif passed == len(decision):
        verdict = "fused rounds pass in every regime"
    else:
        verdict = "fused rounds fail: serial rounds stay the default"
    secondary = []
    for regime, arms in runs.items():
        common = sorted(set(arms.get(corrected, {})) & set(arms.get(serial, {})))
        if len(common) < 2:
            continue
        ratio = np.mean(
            [arms[corrected][s]["summary"]["rollouts"] / arms[serial][s]["summary"]["rollouts"] for s in common]
        )
        seconds = np.median([train_seconds(arms[corrected][s]) / train_seconds(arms[serial][s]) for s in common])
        secondary.append([REGIMES[regime], str(len(common)), interval(paired(arms, corrected, serial)),
                          interval(paired(arms, corrected, serial, "ood_accuracy")), f"{ratio:.3f}x",
                          f"{seconds:.2f}x"])  # fmt: skip
    return (
        f"Fused, corrected: `{corrected}`; serial: `{serial}`. Both from one warm start per regime, in one process "
        "per seed, at one commit (`protocol.md`).\n\n## The declared test\n\n"
        f"Fused minus serial, in-domain accuracy (mean of the last 3 evaluations), paired by seed; one-sided paired "
        f"t-test of H0: mean difference <= -{MARGIN}; Holm over the {len(REGIMES)} regimes at {ALPHA}; the lower "
        "bound is the one-sided t bound at the level of the regime's Holm step.\n\n"
        + tabulate(
            rows,
            [
                "regime",
                "seeds run",
                "mean difference",
                "paired SD",
                "p",
                "Holm step (level)",
                "lower bound",
                "verdict",
            ],
            tablefmt="github",
            disable_numparse=True,
        )  # fmt: skip
        + f"\n\nNon-inferior in {passed} of {len(decision)} regimes: {verdict}.\n\n"
        + "## Secondary (no test; 95% t intervals of the paired differences)\n\n"
        + "Training seconds: each seed's fused run over its serial run (the same process, one after the other; two "
        "processes on the machine's two cores), the median over seeds.\n\n"
        + tabulate(
            secondary,
            ["regime", "seeds", "in-domain", "OOD", "fresh rollouts, ratio", "training seconds, median ratio"],
            tablefmt="github",
            disable_numparse=True,
        )  # fmt: skip
        + "\n"
    )


STEADY = slice(1, 3)
"""The steps of a 4-step speed run that time the steady state: the first (a fused run's staircase of calls) and the
last (a fused run draws no batch past the run) left out, for every arm alike."""


def timing_section(results: Path) -> str:
    """Seconds a step of the SmolLM2 probe, serial and fused, on each generation backend (`smollm2/repeat_*/speed/`):
    per arm, the median over the repeats of a run's mean over its steady steps."""
    repeats = sorted((results / "smollm2").glob("repeat_*/speed"))
    if not repeats:
        return ""
    rows = []
    for backend, suffix in (("transformers", ""), ("vLLM colocate, CPU build", "_vllm")):
        medians = {}
        for arm in ("probe", "probe_fused"):
            paths = [speed / f"{arm}{suffix}.json" for speed in repeats if (speed / f"{arm}{suffix}.json").exists()]
            steps = [json.loads(path.read_text())["steps"][STEADY] for path in paths]
            if steps:
                medians[arm] = {k: float(np.median([np.mean([st[k] for st in run]) for run in steps]))
                                for k in ("seconds", "generation", "scoring")}  # fmt: skip
                medians[arm]["runs"] = len(steps)
        if len(medians) < 2:
            continue
        for arm, m in medians.items():
            ratio = m["seconds"] / medians["probe"]["seconds"]
            rows.append([backend, "fused" if arm == "probe_fused" else "serial", str(m["runs"]), f"{m['seconds']:.1f}",
                         f"{m['generation']:.1f}", f"{m['scoring']:.1f}", f"{ratio:.2f}x"])  # fmt: skip
    return (
        "\n## Seconds a step, by generation backend (SmolLM2-135M-Instruct, the probe)\n\n"
        "`python benchmarks/smollm2_study/run.py speed probe|probe_fused --results benchmarks/results/fused_confirm/"
        "smollm2/repeat_K` (transformers, `.venv`) and the same with `--generation vllm --model_dir DIR` "
        "(`.venv-vllm`), one torch thread each, the two backends side by side on the two cores of the otherwise idle "
        "machine, serial then fused in each repeat; per arm the median over the repeats of a run's mean over steps "
        "2-3 of 4 (the first and the last left out). Scoring holds the correction: on transformers a forward of the "
        "fused run's stale rows; on vLLM TRL's importance-sampling forward of every row, serial and fused alike.\n\n"
        + tabulate(
            rows,
            ["backend", "rounds", "runs", "s/step", "generation s", "scoring s", "/ serial"],
            tablefmt="github",
            disable_numparse=True,
        )  # fmt: skip
        + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    return report_main(build, RESULTS, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
