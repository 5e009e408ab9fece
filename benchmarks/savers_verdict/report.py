"""The savers' verdict (issue #84): the probe, the adaptive budget and fused rounds at equal generated rollouts.

    python benchmarks/savers_verdict/report.py            # writes benchmarks/results/savers_verdict/report.md
    python benchmarks/savers_verdict/report.py --check    # fails if the committed report.md differs from a rebuild

It runs nothing: it reads the committed raw runs of the two SmolLM2-135M-Instruct studies, section 11
(`benchmarks/results/smollm2_study/`: 8 steps, evaluations at steps 4 and 8) and section 13
(`benchmarks/results/smollm2_revisits/`: evaluations at T / 2, at T and after step 16), each loaded by its own
report's `load_runs`, and, for fused rounds on the addition tasks, the runs of sections 8 and 10 that set fused rounds
beside serial rounds (`benchmarks/results/fused/runs/`, `benchmarks/results/fused_confirm/runs/`, loaded by
`benchmarks.frontier.report.load`).

Each run is a curve of test accuracy against the rollouts it had generated when it was evaluated (summed step by
step from its own logs), starting at the study's starting model (0 rollouts; `start.json`). A saver and its control
are compared, seed by seed, at the largest rollout count both were evaluated at or past: the smaller of the two runs'
rollouts at their last evaluations. There one run is read at an evaluation and the other interpolated linearly
between the two evaluations around it; no run is extrapolated. The differences are paired by seed, with scipy's 95%
t interval. A saver is "above the control" only where the lower end of that interval is above 0 against GRPO with as
many rollouts (GRPO with half the group in section 11, GRPO on 4 prompts a step in section 13) in every study that
ran it; otherwise "not above: leaves the library" (issue #84).
"""

from __future__ import annotations

import json
import math
import sys
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats


ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.adaptive.report import REGIMES, report_main  # noqa: E402
from benchmarks.epoch_exploration.report import table  # noqa: E402
from benchmarks.frontier.report import load  # noqa: E402
from benchmarks.fused.power import FUSED  # noqa: E402
from benchmarks.fused.report import SERIAL, interval  # noqa: E402
from benchmarks.smollm2_revisits import report as revisits  # noqa: E402
from benchmarks.smollm2_revisits.run import RESULTS as REVISITS  # noqa: E402
from benchmarks.smollm2_study import report as study  # noqa: E402
from benchmarks.smollm2_study.run import RESULTS as STUDY  # noqa: E402
from benchmarks.stale_rollouts.power import CORRECTED  # noqa: E402
from benchmarks.stale_rollouts.power import REGIMES as CONFIRM_REGIMES  # noqa: E402
from benchmarks.stale_rollouts.power import SERIAL as CONFIRM_SERIAL  # noqa: E402


RESULTS = ROOT / "benchmarks" / "results" / "savers_verdict"
SCRIPT = "benchmarks/savers_verdict/report.py"
FUSED_RUNS = ROOT / "benchmarks" / "results" / "fused" / "runs"
CONFIRM_RUNS = ROOT / "benchmarks" / "results" / "fused_confirm" / "runs"
SECTIONS = {"smollm2_study": 11, "smollm2_revisits": 13}
SAVERS = {
    "probe": ("the probe", '`generation_rounds=[2, 8]`, `round_policy="probe"`'),
    "adaptive": ("the adaptive budget", "`generation_rounds=[2, 4, 8]`, the default round policy"),
    "fused": ("fused rounds", "`fuse_rounds=True` (on the probe)"),
}
"""The savers of issue #84: (name, settings)."""
CONTROLS = {"grpo": "GRPO", "grpo_half": "GRPO, half the group", "grpo_4x8": "GRPO, 4 prompts a step",
            "probe": "the probe, serial rounds"}  # fmt: skip
"""The controls' names in the tables."""
AS_MANY = {"smollm2_study": "grpo_half", "smollm2_revisits": "grpo_4x8"}
"""Each study's GRPO with about as many rollouts as the savers: half the group (4 of 8 rollouts a prompt, 8 prompts a
step: 32 rollouts a step) in section 11, 4 prompts a step at the full group (32) in section 13."""
COMPARISONS: tuple[tuple[str, str, str, str], ...] = (
    ("probe", "smollm2_study", "probe", "grpo"),
    ("probe", "smollm2_study", "probe", "grpo_half"),
    ("probe", "smollm2_revisits", "probe", "grpo"),
    ("probe", "smollm2_revisits", "probe", "grpo_4x8"),
    ("adaptive", "smollm2_study", "adaptive", "grpo"),
    ("adaptive", "smollm2_study", "adaptive", "grpo_half"),
    ("fused", "smollm2_study", "probe_fused", "grpo"),
    ("fused", "smollm2_study", "probe_fused", "grpo_half"),
    ("fused", "smollm2_study", "probe_fused", "probe"),
)
"""(saver, study, the saver's arm, the control): every run of a saver on SmolLM2 against GRPO and against GRPO with as
many rollouts; fused rounds against serial rounds too (the same probe, one generation call a step)."""
PRIMARY_POINT = {"smollm2_study": "step 8", "smollm2_revisits": "T"}
"""Each study's own primary point: equal steps (step 8) in section 11, equal modelled time (T) in section 13."""


def label(study_name: str, arm: str, control: str) -> str:
    return f"`{arm}` - `{control}`, section {SECTIONS[study_name]}"


def study_curve(record: dict[str, Any], start: float) -> pd.DataFrame:
    """A section 11 run's test accuracy at the start and at each evaluation (steps 4 and 8), against the rollouts it
    had generated by then (each step's `lze/fresh_rollouts`, which sum to its token meter's rollouts)."""
    generated = np.cumsum([e["lze/fresh_rollouts"] for e in record["log_history"]])
    if len(generated) != len(record["steps"]) or generated[-1] != record["meter"]["rollouts"]:
        raise ValueError(f"{record['arm']} seed {record['seed']}: its steps' rollouts do not sum to its meter's")
    rows = [("start", 0, 0.0, start)]
    rows += [(f"step {e['step']}", e["step"], float(generated[e["step"] - 1]), study.accuracy(record, e["step"]))
             for e in record["evaluations"]]  # fmt: skip
    return pd.DataFrame(rows, columns=["point", "step", "rollouts", "accuracy"])


REVISIT_POINTS = {"half": "T/2", "budget": "T", "equal_steps": "step 16"}


def revisits_curve(record: dict[str, Any], start: float) -> pd.DataFrame:
    """A section 13 run's test accuracy at the start and at each evaluation (T / 2, T and step 16, in the order they
    came), against the rollouts its steps had generated by then (each step's `rollouts`)."""
    generated = np.cumsum([s["rollouts"] for s in record["steps"]])
    if generated[-1] != record["meter"]["rollouts"]:
        raise ValueError(f"{record['arm']} seed {record['seed']}: its steps' rollouts do not sum to its meter's")
    rows = [("start", 0, 0.0, start)]
    for e in record["evaluations"]:
        point = " and ".join(REVISIT_POINTS[p] for p in e["points"])
        rows.append((point, e["step"], float(generated[e["step"] - 1]), revisits.accuracy(record, e["points"][0])))
    return pd.DataFrame(rows, columns=["point", "step", "rollouts", "accuracy"])


FOLDERS = {"smollm2_study": STUDY, "smollm2_revisits": REVISITS}


@cache
def raw_runs(study_name: str) -> dict[str, dict[int, dict[str, Any]]]:
    """A SmolLM2 study's runs, arm -> seed -> record, as its own report loads them."""
    loader = study.load_runs if study_name == "smollm2_study" else revisits.load_runs
    return loader(FOLDERS[study_name])


def load_studies() -> dict[str, dict[str, dict[int, pd.DataFrame]]]:
    """Every SmolLM2 run's curve: study -> arm -> seed -> curve."""
    out: dict[str, dict[str, dict[int, pd.DataFrame]]] = {}
    for name, curve in (("smollm2_study", study_curve), ("smollm2_revisits", revisits_curve)):
        start = float(np.mean(json.loads((FOLDERS[name] / "start.json").read_text())["test"]["rate"]))
        runs = raw_runs(name)
        out[name] = {arm: {seed: curve(r, start) for seed, r in seeds.items()} for arm, seeds in runs.items()}
    return out


def read_at(curve: pd.DataFrame, rollouts: float) -> float:
    """The run's test accuracy at `rollouts` generated: linear between the evaluations around it (never beyond its
    last)."""
    if rollouts > curve["rollouts"].iloc[-1] + 1e-9:
        raise ValueError(f"{rollouts} rollouts: beyond the run's last evaluation")
    return float(np.interp(rollouts, curve["rollouts"], curve["accuracy"]))


def compare(arm: dict[int, pd.DataFrame], control: dict[int, pd.DataFrame]) -> pd.DataFrame:
    """Per seed both ran: the common budget (the smaller of the two runs' rollouts at their last evaluations), each
    run's accuracy there and the difference."""
    rows = []
    for seed in sorted(set(arm) & set(control)):
        a, c = arm[seed], control[seed]
        budget = min(a["rollouts"].iloc[-1], c["rollouts"].iloc[-1])
        rows.append((seed, budget, read_at(a, budget), read_at(c, budget)))
    frame = pd.DataFrame(rows, columns=["seed", "budget", "arm", "control"]).set_index("seed")
    frame["difference"] = frame["arm"] - frame["control"]
    return frame


def bounds(differences: pd.Series) -> tuple[float, float]:
    """The 95% t interval of the mean paired difference (NaN with fewer than 2 seeds)."""
    values = differences.dropna().astype(float)
    if len(values) < 2:
        return math.nan, math.nan
    if values.nunique() < 2:
        return float(values.mean()), float(values.mean())
    ci = stats.ttest_1samp(values, 0.0).confidence_interval(0.95)
    return float(ci.low), float(ci.high)


def budget_text(budgets: pd.Series) -> str:
    low, high = budgets.min(), budgets.max()
    return f"{low:,.0f}" if low == high else f"{low:,.0f}-{high:,.0f}"


def primary_difference(study_name: str, arm: str, control: str) -> pd.Series:
    """The arm minus the control at the study's own primary point, as its report reads it: the last evaluation (step
    8) in section 11, T in section 13."""
    if study_name == "smollm2_study":
        return study.paired(raw_runs(study_name), arm, against=control)
    return revisits.paired(raw_runs(study_name), arm, control, revisits.accuracy)


def evaluated(curves: dict, study_name: str, arm: str, control: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The comparison at equal generated rollouts of one row of `COMPARISONS`: its per-seed frame and its summary."""
    frame = compare(curves[study_name][arm], curves[study_name][control])
    low, high = bounds(frame["difference"])
    sd = float(frame["difference"].std(ddof=1)) if len(frame) > 1 else math.nan
    return frame, {
        "seeds": len(frame),
        "mean": float(frame["difference"].mean()),
        "low": low,
        "high": high,
        "detectable": revisits.detectable(len(frame), sd, family=1),
    }


def last_rollouts(curves: dict[int, pd.DataFrame]) -> str:
    return budget_text(pd.Series([c["rollouts"].iloc[-1] for c in curves.values()]))


def equal_rollouts_section(curves: dict) -> tuple[list[str], dict[tuple[str, str, str], dict[str, Any]]]:
    """The table at equal generated rollouts, and each comparison's summary by (study, arm, control)."""
    rows, summary, per_seed = [], {}, []
    for saver, study_name, arm, control in COMPARISONS:
        frame, s = evaluated(curves, study_name, arm, control)
        summary[(study_name, arm, control)] = s
        primary = primary_difference(study_name, arm, control)
        role = CONTROLS[control] + (" (as many rollouts)" if control == AS_MANY[study_name] else "")
        above = "n/a" if math.isnan(s["low"]) else ("yes" if s["low"] > 0 else "no")
        rows.append([label(study_name, arm, control), SAVERS[saver][0], role, s["seeds"],
                     ", ".join(map(str, frame.index)), f"{last_rollouts(curves[study_name][arm])}",
                     f"{last_rollouts(curves[study_name][control])}", budget_text(frame["budget"]),
                     f"{frame['arm'].mean():.4f}", f"{frame['control'].mean():.4f}", interval(frame["difference"]),
                     f"{s['detectable']:.4f}", above,
                     f"{interval(primary)} ({PRIMARY_POINT[study_name]})"])  # fmt: skip
        for seed, r in frame.iterrows():
            per_seed.append([label(study_name, arm, control), seed, f"{r['budget']:,.0f}", f"{r['arm']:.4f}",
                             f"{r['control']:.4f}", f"{r['difference']:+.4f}"])  # fmt: skip
    headers = ["comparison", "saver", "control", "seeds", "which", "saver's rollouts at its last evaluation",
               "control's", "budget (rollouts)", "saver at the budget", "control at the budget",
               "difference [95% t interval]", "detectable (80% power)", "lower end above 0",
               "the study's own point: difference [95% t interval]"]  # fmt: skip
    return [
        "## At equal generated rollouts\n",
        "Each saver minus its control, test accuracy (greedy, the 400 held-out questions) at the budget: per seed, "
        "the smaller of the two runs' rollouts at their last evaluations, where the run that generated more is read "
        "between its evaluations (linearly) and the other at its last. In section 11 the savers had generated fewer "
        "rollouts by step 8 than either control, but the adaptive budget more than GRPO with half the group: GRPO is "
        "read between the start and its step 4 (256 rollouts) against the probe in either form, between its steps 4 "
        "and 8 against the adaptive budget, GRPO with half the group between its steps 4 and 8 against the probe, "
        "and the adaptive budget between its own steps 4 and 8 at GRPO with half the group's last 256; in section 13 "
        "the probe, at equal modelled time, had generated more than either control at T, so it is the one read, "
        'between its evaluations at T/2 and T. Paired by seed, 95% t interval (scipy); "detectable" is the smallest '
        "difference "
        "these seeds detect with 80% power, two-sided at 0.05, at the differences' SD. The last column is the study's "
        "own comparison (section 11 at step 8, equal steps; section 13 at T, equal modelled time), as its report "
        "computes it:\n",
        table(rows, headers),
        "Per seed:\n",
        table(per_seed, ["comparison", "seed", "budget", "saver", "control", "difference"]),
    ], summary


def at_evaluations_section(curves: dict) -> list[str]:
    """Each saver against each control read at each of the saver's own evaluations that the control's evaluations
    reach (the saver not interpolated, the control between its evaluations): whether the verdict hangs on the
    budget."""
    rows = []
    for _, study_name, arm, control in COMPARISONS:
        mine, other = curves[study_name][arm], curves[study_name][control]
        seeds = sorted(set(mine) & set(other))
        for i in range(1, max(len(mine[s]) for s in seeds)):
            points = {s: mine[s].iloc[i] for s in seeds if i < len(mine[s])}
            names = sorted({p["point"] for p in points.values()})
            reached = {s: p for s, p in points.items() if p["rollouts"] <= other[s]["rollouts"].iloc[-1] + 1e-9}
            budgets = pd.Series({s: p["rollouts"] for s, p in points.items()})
            if len(reached) < len(seeds):
                rows.append([label(study_name, arm, control), " or ".join(names), budget_text(budgets),
                             f"{len(reached)} of {len(seeds)}",
                             "beyond the control's last evaluation"])  # fmt: skip
                continue
            d = pd.Series({s: p["accuracy"] - read_at(other[s], p["rollouts"]) for s, p in reached.items()})
            rows.append([label(study_name, arm, control), " or ".join(names), budget_text(budgets),
                         f"{len(d)} of {len(seeds)}", interval(d)])  # fmt: skip
    return [
        "## At each of the saver's own evaluations\n",
        "The same differences with the saver read at each of its evaluations (its evaluation `i`-th in order: in "
        "section 13 a run's T/2 and step 16 came in either order) and the control between its evaluations; a row "
        "where a seed's control stopped short of that many rollouts says so:\n",
        table(
            rows,
            [
                "comparison",
                "the saver's evaluation",
                "its rollouts",
                "seeds the control reaches",
                "difference [95% t interval]",
            ],
        ),  # fmt: skip
    ]


def addition_section() -> tuple[list[str], dict[str, pd.Series]]:
    """Fused rounds on the addition tasks at equal generated rollouts: the fused probe against GRPO and against the
    serial probe (section 8's runs), and the corrected fused probe against the serial probe (section 10's
    confirmatory runs)."""
    rows, out = [], {}
    sources = (("section 8", FUSED_RUNS, REGIMES, (("fused probe - GRPO", FUSED, "grpo"),
                                                    ("fused probe - serial probe", FUSED, SERIAL))),
               ("section 10 (confirmatory)", CONFIRM_RUNS, CONFIRM_REGIMES,
                (("corrected fused probe - serial probe", CORRECTED, CONFIRM_SERIAL),)))  # fmt: skip
    for section, folder, regimes, pairs in sources:
        for regime, name in regimes.items():
            arms = load(sorted(str(p) for p in folder.glob(f"{regime}_s*")))
            curves = {arm: {seed: pd.DataFrame(m["curve"]).rename(columns={"test_accuracy": "accuracy"})
                            for seed, m in seeds.items()} for arm, seeds in arms.items()}  # fmt: skip
            for what, arm, other in pairs:
                if arm not in curves or other not in curves:
                    continue
                frame = compare(curves[arm], curves[other])
                out[f"{section} | {regime} | {what}"] = frame["difference"]
                rows.append([section, name, what, len(frame), budget_text(frame["budget"]),
                             interval(frame["difference"])])  # fmt: skip
    return [
        "## Fused rounds on the addition tasks\n",
        "The runs that set fused rounds beside serial rounds (the 282k-parameter model, 240 steps, an evaluation "
        "every 20 steps): section 8's fused probe (uncorrected) against GRPO and against the serial probe of the "
        "same seeds, and section 10's confirmatory runs (the corrected fused probe and the serial probe of each seed "
        "in one process). The same reading as above: each pair at the smaller of its two runs' last rollouts, the "
        "other run between its evaluations, one evaluation (not those reports' mean of the last three). No GRPO with "
        "as many rollouts ran beside them:\n",
        table(rows, ["runs", "regime", "comparison", "seeds", "budget (rollouts)", "difference [95% t interval]"]),
    ], out


def verdicts(summary: dict[tuple[str, str, str], dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per saver: its intervals against GRPO with as many rollouts (one a study that ran it) and the verdict."""
    out = {}
    for saver in SAVERS:
        tested = [(st, summary[(st, arm, control)]) for sv, st, arm, control in COMPARISONS
                  if sv == saver and control == AS_MANY[st]]  # fmt: skip
        if not tested or any(s["seeds"] < 2 for _, s in tested):
            verdict = "cannot say (fewer than 2 seeds against the control)"
        elif all(s["low"] > 0 for _, s in tested):
            verdict = "above the control"
        else:
            verdict = "not above: leaves the library"
        out[saver] = {"tested": tested, "verdict": verdict}
    return out


def verdict_section(summary: dict[tuple[str, str, str], dict[str, Any]]) -> list[str]:
    decided = verdicts(summary)
    rows = []
    for saver, (name, settings) in SAVERS.items():
        against = "; ".join(
            f"section {SECTIONS[st]}: {s['mean']:+.4f} [{s['low']:+.4f}, {s['high']:+.4f}], {s['seeds']} seeds"
            for st, s in decided[saver]["tested"]
        )
        grpo = "; ".join(
            f"section {SECTIONS[st]}: {summary[(st, arm, control)]['mean']:+.4f} "
            f"[{summary[(st, arm, control)]['low']:+.4f}, {summary[(st, arm, control)]['high']:+.4f}]"
            for sv, st, arm, control in COMPARISONS
            if sv == saver and control == "grpo"
        )
        rows.append([name, settings, against, grpo, decided[saver]["verdict"]])
    return [
        "## The verdict\n",
        "A saver is above its control where the 95% t interval of its difference from GRPO with as many rollouts, "
        "at equal generated rollouts, lies above 0 in every study that ran it; otherwise it is not above, and leaves "
        "the library (issue #84):\n",
        table(
            rows,
            [
                "saver",
                "settings",
                "minus GRPO with as many rollouts [95% t interval]",
                "minus GRPO [95% t interval]",
                "verdict",
            ],
        ),  # fmt: skip
    ]


def limits_section(curves: dict, summary: dict[tuple[str, str, str], dict[str, Any]]) -> list[str]:
    grpo_seeds = sorted(curves["smollm2_revisits"]["grpo"])
    probe_seeds = sorted(curves["smollm2_revisits"]["probe"])
    detectable = [s["detectable"] for (st, _, control), s in summary.items() if control == AS_MANY[st]]
    return [
        "## What these runs cannot answer\n",
        "- Three seeds a SmolLM2 comparison: every interval against GRPO with as many rollouts spans both signs, "
        f"and these seeds detect (80% power) differences of {min(detectable):.2f} to {max(detectable):.2f} alone. "
        '"Not above" is what the runs show, not that the savers are below their control.\n'
        f"- Section 13 ran the probe on seeds {probe_seeds[0]}-{probe_seeds[-1]} only (GRPO on "
        f"{grpo_seeds[0]}-{grpo_seeds[-1]}: its other seeds have no pair), and neither the adaptive budget nor fused "
        "rounds: their verdicts rest on section 11 alone.\n"
        "- Section 11 evaluated at steps 4 and 8 only: GRPO at the probe's 224 rollouts is read between the start "
        "and its step 4 (256 rollouts): where GRPO's curve rises fastest early, that line lies below it, which "
        "favours the savers. Its learning rate decays over the 8 steps (TRL's linear schedule), so a point read "
        "inside a run is not that of a run trained to that budget; section 13's constant rate makes each evaluation "
        "a valid shorter run.\n"
        "- In section 13 the probe is read between T/2 and T (its rollouts about double between them), against "
        "GRPO with 4 prompts a step at its last evaluation.\n"
        "- Fused rounds change generation calls, not rollouts: against serial rounds they are read at (nearly) the "
        "same rollouts, and on the addition tasks no GRPO with as many rollouts ran beside them.\n",
    ]


def build(results_dir: Path = RESULTS, figures: bool = False) -> str:
    """The verdict's report (`results_dir` and `figures` are unused: it reads the studies' runs and draws none)."""
    curves = load_studies()
    equal, summary = equal_rollouts_section(curves)
    addition, _ = addition_section()
    head = [
        "# The savers' verdict (issue #84): report\n",
        f"Rebuilt by `python {SCRIPT}` from the committed runs of BENCHMARKS.md sections 11 and 13 "
        "(`benchmarks/results/smollm2_study/runs/`, `benchmarks/results/smollm2_revisits/runs/`) and, for fused "
        "rounds on the addition tasks, of sections 8 and 10 (`benchmarks/results/fused/runs/`, "
        "`benchmarks/results/fused_confirm/runs/`); it runs nothing. The savers: "
        + "; ".join(f"{name}, {settings}" for name, settings in SAVERS.values())
        + f" (section 11's arms: {', '.join(f'`{a}`' for a in study.DECLARED)}).\n",
    ]
    return "\n".join([*head, *verdict_section(summary), *equal, *at_evaluations_section(curves), *addition,
                      *limits_section(curves, summary)])  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    return report_main(build, RESULTS, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
