"""The pruning audit (issue #82): four readings of the committed pruning runs the studies' own reports leave out.

    python benchmarks/pruning_audit/report.py            # writes benchmarks/results/pruning_audit/report.md
    python benchmarks/pruning_audit/report.py --check    # fails if the committed report.md differs from a rebuild

It runs nothing: it reads the raw runs of the six pruning studies of BENCHMARKS.md section 14
(`benchmarks/results/{addition_pruning,unsolved_pruning,smollm2_pruning,epoch_exploration,smaller_batch,dead_filter}/`),
each loaded as its own report loads it, and rebuilds: where the gain of pruning both sides is (the held-out test
levels against the evaluation of the training prompts, and the levels the pruned arms generate on); the manipulation
check as the addition protocol first declared it, applied to every pruned arm in a test (and to the epoch study's
pilot, after which that study's check was written); the smaller-batch comparison over each arm's last evaluations;
and Holm over every declared pruning test of the six protocols. Each study's check and tests are its own report's
functions; the intervals and tests are scipy's, Holm statsmodels'.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.multitest import multipletests


ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.adaptive.report import report_main  # noqa: E402
from benchmarks.addition_pruning import report as addition  # noqa: E402
from benchmarks.addition_pruning import run as harness  # noqa: E402
from benchmarks.addition_pruning.report import load_runs, paired  # noqa: E402
from benchmarks.dead_filter import report as dead_filter  # noqa: E402
from benchmarks.dead_filter import run as dead_filter_run  # noqa: E402
from benchmarks.epoch_exploration import report as epoch  # noqa: E402
from benchmarks.epoch_exploration import run as epoch_run  # noqa: E402
from benchmarks.epoch_exploration.report import after_all_right, table  # noqa: E402
from benchmarks.fused.report import interval  # noqa: E402
from benchmarks.smaller_batch import report as smaller  # noqa: E402
from benchmarks.smaller_batch import run as smaller_run  # noqa: E402
from benchmarks.smollm2_pruning import report as smollm2  # noqa: E402
from benchmarks.smollm2_pruning.report import ALPHA, log_to_budget  # noqa: E402
from benchmarks.unsolved_pruning import report as unsolved  # noqa: E402
from benchmarks.unsolved_pruning import run as unsolved_run  # noqa: E402
from benchmarks.unsolved_pruning.report import later_shares  # noqa: E402


RESULTS = ROOT / "benchmarks" / "results" / "pruning_audit"
SCRIPT = "benchmarks/pruning_audit/report.py"
FIRST_CHECK_RATIO = addition.DEAD_RATIO_NEEDED
"""The addition protocol's manipulation check: a pruned arm's dead share after first visits at most this share of the
random choice's."""
LEVELS_TESTED = (1, 2)
"""The levels of the 600 held-out test prompts (the dead-mass regime's `test_levels`)."""

STUDIES = ("addition_pruning", "smollm2_pruning", "unsolved_pruning", "epoch_exploration", "smaller_batch",
           "dead_filter")  # fmt: skip
CONTROL = {"addition_pruning": "grpo_small", "smollm2_pruning": "grpo_small", "unsolved_pruning": "grpo",
           "epoch_exploration": "grpo", "smaller_batch": "grpo_small", "dead_filter": "grpo_filter"}  # fmt: skip
"""Each study's random choice of prompts, whose dead share the first check halves."""
VOID_STAYS = {"addition_pruning": False, "smollm2_pruning": False, "unsolved_pruning": False,
              "epoch_exploration": True, "smaller_batch": True, "dead_filter": True}  # fmt: skip
"""Whether the study's protocol keeps a void test in its Holm family with p = 1 (the later three) or leaves it out
(the first three: `benchmarks.smollm2_pruning.report.declared_rows`)."""
DECLARED: tuple[tuple[str, int, str, str, str, float | None], ...] = (
    ("addition_pruning", 1, "grpo_prune_small", "grpo_small", "budget", None),
    ("addition_pruning", 2, "grpo_prune_small", "grpo", "equal_steps", addition.MARGIN),
    ("smollm2_pruning", 1, "grpo_prune_small", "grpo_small", "budget", None),
    ("smollm2_pruning", 2, "grpo_prune_small", "grpo", "equal_steps", smollm2.TESTS[1][4]),
    ("unsolved_pruning", 1, "grpo_prune_unsolved", "grpo", "budget", None),
    ("epoch_exploration", 1, "grpo_prune_unsolved", "grpo", "budget", None),
    ("epoch_exploration", 2, "grpo_prune", "grpo", "budget", None),
    ("epoch_exploration", 3, "grpo_prune", "grpo_prune_unsolved", "budget", None),
    ("smaller_batch", 1, "grpo_prune", "grpo_small", "budget", None),
    ("smaller_batch", 2, "grpo_prune_small", "grpo_small", "budget", None),
    ("dead_filter", 1, "grpo_prune", "grpo_filter", "budget", None),
)
"""Every declared pruning test of the six protocols: (study, its number there, arm, minus arm, the evaluation point,
the non-inferiority margin or `None` for a two-sided test). The SmolLM2 study stopped at its pilot: its tests are
counted with the pilot's p."""


def results(study: str) -> Path:
    return ROOT / "benchmarks" / "results" / study


def load_studies() -> dict[str, dict[str, dict[int, dict[str, Any]]]]:
    """Each study's runs, by arm and seed, as its own report reads them (the epoch study's GRPO the unsolved-side
    study's, which its reruns reproduce; the dead-filter study's pruned arm the smaller-batch study's)."""
    own = load_runs(results("epoch_exploration"), epoch_run.ARMS)
    reruns = own.pop("grpo", {})
    grpo, _ = epoch.grpo_runs(reruns)
    shared = {"grpo_small": None, "grpo_prune": None}
    return {
        "addition_pruning": load_runs(results("addition_pruning")),
        "smollm2_pruning": smollm2.load_runs(results("smollm2_pruning")),
        "unsolved_pruning": load_runs(results("unsolved_pruning"), unsolved_run.ARMS),
        "epoch_exploration": {"grpo": grpo, **own},
        "smaller_batch": load_runs(results("smaller_batch"), smaller_run.ARMS),
        "dead_filter": {
            **load_runs(results("smaller_batch"), shared),
            **load_runs(results("dead_filter"), dead_filter_run.ARMS),
        },  # fmt: skip
    }


def own_checks(runs: dict[str, dict]) -> dict[str, dict[str, bool]]:
    """Each study's manipulation check as its report computes it: per pruned arm, whether it is met (the first three
    studies' one check stands for their pruned arm at B' or the unsolved side)."""
    out = {}
    for study, module, arm in (("addition_pruning", addition, "grpo_prune_small"),
                               ("smollm2_pruning", smollm2, "grpo_prune_small"),
                               ("unsolved_pruning", unsolved, "grpo_prune_unsolved")):  # fmt: skip
        out[study] = {arm: bool(module.manipulation(runs[study])[1])}
    reruns = load_runs(results("epoch_exploration"), {"grpo": None}).get("grpo", {})
    out["epoch_exploration"] = epoch.manipulation(runs["epoch_exploration"], {"grpo": reruns}, True)[1]
    out["smaller_batch"] = smaller.manipulation(runs["smaller_batch"])[1]
    out["dead_filter"] = {"grpo_prune": dead_filter.manipulation(runs["dead_filter"])[1]["grpo_filter"]}
    return out


def dead_share(seeds: dict[int, dict[str, Any]]) -> float:
    """The dead share of the groups generated up to R on visits after a prompt's first, pooled over the seeds (the
    addition protocol's check), from either harness's records."""
    later = pd.concat([smollm2.later_visits(r) for r in seeds.values()])
    return float((~later["live"].astype(bool)).mean())


def first_check(runs: dict[str, dict]) -> dict[str, dict[str, tuple[float, float, bool]]]:
    """Per study and pruned arm of its tests: its dead share after first visits, the study's random choice's, and
    whether the addition protocol's check (at most half) is met."""
    out: dict[str, dict[str, tuple[float, float, bool]]] = {}
    for study, _, arm, other, _, _ in DECLARED:
        control = dead_share(runs[study][CONTROL[study]])
        for a in (arm, other):
            if a != CONTROL[study] and a not in out.get(study, {}) and "prune" in a:
                share = dead_share(runs[study][a])
                out.setdefault(study, {})[a] = (share, control, share <= FIRST_CHECK_RATIO * control)
    return out


def training_levels() -> tuple[np.ndarray, int]:
    """The level of each of the addition studies' 2,048 training prompts, by prompt key (the harness's split), and
    how many of them, the first, each evaluation grades."""
    from lze_examples.tasks import get_task

    cfg = harness.config("grpo", 0)
    splits = get_task(cfg.task).make_splits(cfg.n_train, cfg.n_test, cfg.resolved_n_ood(), seed=cfg.data_seed,
                                            train_levels=cfg.train_levels, test_levels=cfg.test_levels)  # fmt: skip
    return np.asarray(splits["train"]["difficulty"]), cfg.n_train_eval


def gain_section(runs: dict[str, dict]) -> list[str]:
    """Where pruning both sides gains: each comparison on the held-out test (levels 1-2), the training prompts (every
    level) and the OOD sums, and the levels of the groups each arm generated."""
    pairs = [("epoch_exploration", "grpo_prune", "grpo"), ("epoch_exploration", "grpo_prune_unsolved", "grpo"),
             ("smaller_batch", "grpo_prune", "grpo_small"), ("smaller_batch", "grpo_prune_small", "grpo_small"),
             ("dead_filter", "grpo_prune", "grpo_filter")]  # fmt: skip
    rows = [[f"`{arm}` - `{other}`", f"`{study}`", len(paired(runs[study], arm, other, "budget")),
             *(interval(paired(runs[study], arm, other, "budget", split)) for split in ("test", "train", "ood"))]
            for study, arm, other in pairs]  # fmt: skip
    levels, evaluated = training_levels()
    names = sorted(set(levels.tolist()))
    level_rows = []
    for study, arms in (("epoch_exploration", ("grpo", "grpo_prune_unsolved", "grpo_prune")),
                        ("smaller_batch", ("grpo_small", "grpo_prune", "grpo_prune_small")),
                        ("dead_filter", ("grpo_filter",))):  # fmt: skip
        for arm in arms:
            seeds = runs[study][arm]
            keys = np.concatenate([log_to_budget(r)["prompt_key"].to_numpy() for r in seeds.values()])
            drawn = levels[keys]
            level_rows.append([f"`{arm}`", f"`{study}`", len(seeds), f"{len(keys) / len(seeds):.0f}",
                               f"{np.isin(drawn, LEVELS_TESTED).mean():.3f}",
                               *(f"{(drawn == k).mean():.3f}" for k in names)])  # fmt: skip
    counts = {k: int((levels[:evaluated] == k).sum()) for k in names}
    share = np.isin(levels[:evaluated], LEVELS_TESTED).mean()
    return [
        "## Where the gain is: the test levels and the training prompts\n",
        "Every run records, at each evaluation, greedy accuracy on the 600 held-out test prompts (`test_accuracy`, "
        f"levels {LEVELS_TESTED[0]} and {LEVELS_TESTED[1]} only: the studies' primary metric), on the first "
        f"{evaluated} of its {len(levels):,} training prompts (`train_accuracy`, every training level: "
        + ", ".join(f"{n} of level {k}" for k, n in counts.items())
        + f", {share:.3f} on levels 1-2) and on the 180 OOD sums (`ood_accuracy`). Each arm minus its control at R, "
        "paired by seed (mean [95% t interval]):\n",
        table(
            rows,
            [
                "difference",
                "study",
                "seeds",
                "test, levels 1-2 (at R)",
                "training prompts, every level (at R)",
                "OOD (at R)",
            ],
        ),  # fmt: skip
        "The levels of the groups each arm generated up to R (every seed's selection log, each prompt key's level in "
        "the harness's training split):\n",
        table(
            level_rows,
            ["arm", "study", "seeds", "groups to R (a seed)", "on levels 1-2", *(f"level {k}" for k in names)],
        ),  # fmt: skip
    ]


def pilot_rows() -> list[list[Any]]:
    """The epoch study's pilot (seeds 100-101, read for the check alone before its protocol was written): its shares,
    beside the unsolved-side study's GRPO, the control the protocol names."""
    pilot = load_runs(results("epoch_exploration") / "pilot", epoch_run.ARMS)
    grpo = load_runs(results("unsolved_pruning"), {"grpo": None})["grpo"]
    control = later_shares(grpo)[0]
    rows = []
    for arm, seeds in {"grpo": grpo, **pilot}.items():
        dead, wrong, _ = later_shares(seeds)
        rows.append([f"`{arm}`" + ("" if arm == "grpo" else " (pilot)"), ", ".join(map(str, sorted(seeds)))
                     if arm != "grpo" else f"{min(seeds)}-{max(seeds)}", f"{dead:.3f}", f"{wrong:.3f}",
                     f"{after_all_right(seeds):.3f}", f"{dead / control:.2f}"])  # fmt: skip
    return rows


def check_section(runs: dict[str, dict], own: dict[str, dict[str, bool]]) -> list[str]:
    first = first_check(runs)
    rows = [[f"`{arm}`", f"`{study}`", f"`{CONTROL[study]}`", len(runs[study][arm]), f"{share:.3f}",
             f"{control:.3f}", f"{share / control:.2f}", "met" if met else "not met",
             "met" if own[study].get(arm, True) else "not met"]
            for study, arms in first.items() for arm, (share, control, met) in arms.items()]  # fmt: skip
    # the arms pruning both sides whose own study's check was met (the epoch rule's)
    both = [r[6] for r in rows if "unsolved" not in r[0] and r[-1] == "met"]
    return [
        "## The manipulation check as the addition protocol declared it\n",
        "The addition protocol's check (`benchmarks/results/addition_pruning/protocol.md`, the first of the six): "
        "the dead share of the groups generated on visits after a prompt's first, up to R, at most "
        f"{FIRST_CHECK_RATIO} of the random choice's. The later protocols changed it: the unsolved-side study's reads "
        "the all-wrong share alone, and the epoch-exploration study's, written after its pilot had been read for "
        "the manipulation (below), the all-wrong share and the share of later visits that followed an all-right "
        "group, each at most half of GRPO's, not the dead share. Every pruned arm of a declared test under the first "
        "check, beside the check its own study declared:\n",
        table(
            rows,
            [
                "arm",
                "study",
                "random choice",
                "seeds",
                "dead share after first visits",
                "random choice's",
                "ratio",
                f"first check (at most {FIRST_CHECK_RATIO})",
                "its study's check",
            ],
        ),  # fmt: skip
        f"The arms pruning both sides whose own study's check was met are at {min(both)}-{max(both)} of the random "
        "choice's dead share: under the first check each of their tests is void, as is every other test of a pruned "
        "arm at equal rollouts. The epoch study's pilot, read for the manipulation before its protocol was written "
        '(the protocol\'s "Pilot" quotes its all-wrong and after-all-right shares, not its dead share), beside the '
        "GRPO runs the protocol names as the control:\n",
        table(
            pilot_rows(),
            [
                "arm",
                "seeds",
                "dead share after first visits",
                "all wrong",
                "previous group all right",
                "dead share / GRPO's",
            ],
        ),  # fmt: skip
    ]


def last_evaluations(runs: dict[str, dict], count: int = 3) -> list[list[Any]]:
    rows = []
    for arm, seeds in runs.items():
        curves = np.array([[e["test_accuracy"] for e in r["evaluations"][-count:]] for r in seeds.values()])
        rollouts = [e["rollouts"] for e in next(iter(seeds.values()))["evaluations"][-count:]]
        rows.append([f"`{arm}`", len(seeds), *(f"{x:.4f}" for x in curves.mean(axis=0)),
                     ", ".join(f"{x:,}" for x in rollouts)])  # fmt: skip
    return rows


def late(record: dict[str, Any], count: int = 2) -> float:
    """The mean test accuracy of the run's last `count` evaluations."""
    return float(np.mean([e["test_accuracy"] for e in record["evaluations"][-count:]]))


def smaller_section(runs: dict[str, dict]) -> list[str]:
    sb = runs["smaller_batch"]
    rows = []
    for arm in ("grpo_prune", "grpo_prune_small"):
        seeds = sorted(set(sb[arm]) & set(sb[smaller.CONTROL]))
        at_r = paired(sb, arm, smaller.CONTROL, "budget")
        last_two = pd.Series({s: late(sb[arm][s]) - late(sb[smaller.CONTROL][s]) for s in seeds}, dtype=float)
        rows += [[f"`{arm}` - `{smaller.CONTROL}`", "R (the declared test)", len(at_r), interval(at_r)],
                 [f"`{arm}` - `{smaller.CONTROL}`", "the mean of each arm's last two evaluations", len(last_two),
                  interval(last_two)]]  # fmt: skip
    return [
        "## The smaller batch at its last evaluations\n",
        "Each arm's mean test accuracy (levels 1-2) at its last three evaluations, every 30 steps: the arms at B' "
        "make 240 steps, the arm at B 150, so the evaluations before R come at different rollouts.\n",
        table(
            last_evaluations(sb),
            ["arm", "seeds", "third-last", "second-last", "last (at R)", "generated rollouts at them"],
        ),  # fmt: skip
        "Each pruned arm minus the smaller batch, paired by seed, at R and over each arm's last two evaluations:\n",
        table(rows, ["comparison", "at", "seeds", "mean [95% t interval]"]),
    ]


def p_value(d: pd.Series, margin: float | None) -> float:
    """A declared test's p, as its study's report computes it: two-sided paired t, or one-sided non-inferiority."""
    if margin is None:
        return float(stats.ttest_1samp(d, 0.0).pvalue)
    return float(stats.ttest_1samp(d, -margin, alternative="greater").pvalue)


def holm(p_values: list[float]) -> list[bool]:
    return [bool(x) for x in multipletests(p_values, alpha=ALPHA, method="holm")[0]] if p_values else []


def verdict(rejected: bool, margin: float | None) -> str:
    return ("non-inferior" if margin is not None else "differs") if rejected else "not shown"


def holm_section(runs: dict[str, dict], own: dict[str, dict[str, bool]]) -> list[str]:
    first = first_check(runs)
    tests = []
    for study, number, arm, other, point, margin in DECLARED:
        if study == "smollm2_pruning":
            d = smollm2.paired(runs[study], arm, other, point)
        else:
            d = paired(runs[study], arm, other, point)
        pruned = [a for a in (arm, other) if a != CONTROL[study] and "prune" in a]
        void = margin is None and not all(own[study].get(a, True) for a in pruned)
        void_first = margin is None and not all(first[study][a][2] for a in pruned)
        tests.append(dict(study=study, number=number, arm=arm, other=other, point=point, margin=margin, d=d,
                          p=p_value(d, margin), void=void, void_first=void_first))  # fmt: skip
    # each study's own family: a void test with p = 1 or left out, as its protocol declares
    for study in STUDIES:
        family = [t for t in tests if t["study"] == study and (VOID_STAYS[study] or not t["void"])]
        for t, rejected in zip(family, holm([1.0 if t["void"] else t["p"] for t in family])):
            t["own"] = verdict(rejected, t["margin"])
    readings = {"all": tests, "kept": [t for t in tests if not t["void"]], "first": tests}
    for name, family in readings.items():
        void = "void_first" if name == "first" else "void"
        for t, rejected in zip(family, holm([1.0 if t[void] else t["p"] for t in family])):
            t[name] = "void" if t[void] else verdict(rejected, t["margin"])
    rows = []
    for t in tests:
        kind = "two-sided" if t["margin"] is None else f"non-inferiority at -{t['margin']}"
        rows.append([f"`{t['study']}` {t['number']}", f"`{t['arm']}` - `{t['other']}`", t["point"], len(t["d"]),
                     interval(t["d"]), kind, f"{t['p']:.4f}", "void" if t["void"] else t["own"], t["all"],
                     t.get("kept", "void"), t["first"]])  # fmt: skip
    headers = ["study, test", "comparison", "at", "seeds", "mean [95% t interval]", "test", "p", "in its study (Holm)",
               "Holm over the eleven, a void test p = 1", "Holm over those not void",
               "the first check, Holm over the eleven"]  # fmt: skip
    standing = {name: sum(t.get(name) in ("differs", "non-inferior") for t in tests) for name in readings}
    return [
        "## Holm over every declared pruning test\n",
        f"The {len(tests)} tests the six protocols declared, each recomputed from the runs (the SmolLM2 study stopped "
        'at its pilot of 3 seeds; its tests are counted with the pilot\'s p). "In its study" is Holm over its own '
        "protocol's tests (a void test kept with p = 1 by the epoch-exploration, smaller-batch and dead-filter "
        "protocols, left out by the first three); then Holm at family-wise "
        f"{ALPHA} over all {len(tests)}: with a void test counted with p = 1 (the later protocols' rule), with the "
        "void tests left out (the first protocols' rule), and with every test's check the addition protocol's "
        "(the dead share at most half the random choice's).\n",
        table(rows, headers),
        f"Tests standing: {standing['all']} of {len(tests)} with a void test counted with p = 1, {standing['kept']} "
        f"with the void tests left out, {standing['first']} under the first check.\n",
    ]


def build(results_dir: Path = RESULTS, figures: bool = False) -> str:
    """The audit's report (`figures` is unused: it draws none)."""
    runs = load_studies()
    own = own_checks(runs)
    head = [
        "# Pruning audit (issue #82): report\n",
        f"Rebuilt by `python {SCRIPT}` from the committed runs of the six pruning studies (`benchmarks/results/"
        "{" + ",".join(STUDIES) + "}/`); it runs nothing. Paired differences are by seed, with 95% t intervals; "
        "p from paired t-tests (scipy), Holm from statsmodels.\n",
    ]
    return "\n".join([*head, *gain_section(runs), *check_section(runs, own), *smaller_section(runs),
                      *holm_section(runs, own)])  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    return report_main(build, RESULTS, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
