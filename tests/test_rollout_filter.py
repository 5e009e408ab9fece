"""The experimental rollout-side planner: calibration, skipping, retry floor, cap, audit, determinism, resume."""

import numpy as np
import pytest

from benchmarks.experimental.dead_prediction import CALIBRATION_BINS, beta_binomial_dead, isotonic_increasing
from benchmarks.experimental.rollout_filter import RolloutFilter
from lze_trl.prompt_state import PromptState


G = 8


class Filter:
    """
    A [`RolloutFilter`] over its own per-prompt table, driven as the trainer drives them: plan, then observe (the
    filter scores its predictions before the table absorbs the groups). Prompts are the rows `0..n-1`; masks in, masks
    out, for short tests.
    """

    def __init__(self, n, num_generations, **kwargs):
        self.num_prompts, self.generation = n, 0
        self.state = PromptState(0.9)
        self.filter = RolloutFilter(np.arange(n), num_generations, self.state, **kwargs)

    def __getattr__(self, name):  # totals, progress, visit, metrics, ...
        return getattr(self.filter, name)

    def plan_epoch(self, epoch, available=None, exempt=None):
        order = np.arange(self.num_prompts) if available is None else np.flatnonzero(available)
        kept = self.filter.plan_epoch(epoch, order, None if exempt is None else np.flatnonzero(exempt))
        keep = np.zeros(self.num_prompts, dtype=bool)
        keep[kept] = True
        return keep

    def plan_batch(self, epoch, batch, order, cursor, size, exempt=None):
        exempt = None if exempt is None else np.flatnonzero(exempt)
        return self.filter.plan_batch(epoch, batch, order, cursor, size, exempt=exempt)

    def observe(self, idx, pass_rates):
        p = np.asarray(pass_rates, dtype=float)
        self.filter.observe(idx, p, (p > 0) & (p < 1))
        self.state.observe(idx, p, self.generation)
        self.generation += 1

    @property
    def epoch_prediction(self):
        return self.filter.planned[0]

    @property
    def epoch_audit(self):
        return self.filter.audit

    def predict_dead(self, raw=False):
        raw_pi, _, pi = self.filter.predict(np.arange(self.num_prompts))
        return raw_pi if raw else pi

    def predict_pass_rate(self):
        row = self.state.get(np.arange(self.num_prompts))
        trend = row["last_pass_rate"] - row["ema_pass_rate"]
        return np.clip(row["ema_pass_rate"] + self.filter.momentum * trend, 0.0, 1.0)

    def calibrate(self, raw):
        return self.filter.calibration(raw)

    def calibration_map(self):
        return self.filter.calibration.anchors()

    def _learn_calibration(self, raw, dead):
        self.filter.calibration.learn(raw, dead)

    @property
    def calibration_count(self):
        calibration = self.filter.calibration
        return calibration.count if calibration is not None else np.zeros(CALIBRATION_BINS)

    @property
    def calibration_dead(self):
        return self.filter.calibration.dead

    @property
    def calibration_pred(self):
        return self.filter.calibration.pred

    def state_dict(self):
        return {
            **{f"state.{k}": v for k, v in self.state.state_dict().items()},
            **{f"filter.{k}": v for k, v in self.filter.state_dict().items()},
            "generation": np.asarray(self.generation),
        }

    def load_state_dict(self, arrays):
        self.filter.load_state_dict({k[7:]: v for k, v in arrays.items() if k.startswith("filter.")})
        self.state.load_state_dict({k[6:]: v for k, v in arrays.items() if k.startswith("state.")})
        self.generation = int(arrays["generation"])


def prior_buckets_from_column(values):
    codes = {v: i for i, v in enumerate(sorted(set(values)))}
    return np.asarray([codes[v] for v in values])


def pool(seed=0, n=1000, dead_share=0.6):
    """True pass rates: `dead_share` of the prompts always fail or always pass, the others in [0.1, 0.9]."""
    rng = np.random.default_rng(seed)
    dead = rng.random(n) < dead_share
    return np.where(dead, (rng.random(n) < 0.5).astype(float), rng.uniform(0.1, 0.9, n)), dead


def simulate(f, true, epochs, seed=0):
    """Runs `epochs` epochs of plan / generate (binomial pass rates) / observe; returns the per-epoch records."""
    rng = np.random.default_rng(seed)
    records = []
    for epoch in range(epochs):
        keep = f.plan_epoch(epoch)
        idx = np.flatnonzero(keep)
        predicted = f.epoch_prediction[idx].copy()
        p = rng.binomial(G, true[idx]) / G
        f.observe(idx, p)
        records.append({"idx": idx, "pred": predicted, "dead": (p == 0) | (p == 1), "metrics": f.metrics()})
    return records


def test_beta_binomial_dead_matches_the_binomial_limit_and_grows_with_the_streak():
    # lots of evidence at q: the binomial's q^G + (1 - q)^G
    q = np.array([0.0, 0.1, 0.5, 1.0])
    np.testing.assert_allclose(beta_binomial_dead(q, np.full(4, 1e7), G), q**G + (1 - q) ** G, rtol=1e-4, atol=1e-6)
    # a dead streak of k observations at q = 0: more evidence, more confidence, about sqrt(k / (k + 1))
    streaks = beta_binomial_dead(np.zeros(4), G * np.arange(1, 5), G)
    assert np.all(np.diff(streaks) > 0) and 0.6 < streaks[0] < 0.8 and streaks[-1] > 0.85


def test_prediction_is_calibrated_on_synthetic_trajectories():
    true, _ = pool()
    # Observe every prompt every epoch (threshold 1 skips nothing) and compare predictions with outcomes.
    f = Filter(len(true), G, threshold=0.999999, audit_fraction=0.0, calibration=False)
    records = simulate(f, true, epochs=6)[1:]  # epoch 0 has no state: its predictions are the 0.5 prior
    pred = np.concatenate([r["pred"] for r in records])
    dead = np.concatenate([r["dead"] for r in records]).astype(float)
    # reliability: in each predicted-probability bin the observed dead frequency is near the prediction, and it
    # rises from bin to bin. The model is underconfident for prompts that are dead for good (predicts ~0.7 after one
    # dead observation where ~0.9 come back dead here), hence the loose tolerance.
    bins = np.digitize(pred, [0.2, 0.4, 0.6, 0.8])
    observed = []
    for b in np.unique(bins):
        sel = bins == b
        if sel.sum() >= 200:
            assert abs(pred[sel].mean() - dead[sel].mean()) < 0.25, (b, pred[sel].mean(), dead[sel].mean())
            observed.append(dead[sel].mean())
    assert len(observed) >= 3 and np.all(np.diff(observed) > 0)
    brier = np.mean((pred - dead) ** 2)
    base_rate = np.mean((dead.mean() - dead) ** 2)  # the best constant prediction
    assert brier < 0.6 * base_rate
    assert records[-1]["metrics"]["rollout_filter/brier"] == pytest.approx(
        np.mean((records[-1]["pred"] - records[-1]["dead"]) ** 2)
    )


def test_skipping_cuts_the_dead_share_and_audits_count_wrong_skips():
    true, always_dead = pool()
    f = Filter(len(true), G, audit_fraction=0.05, min_pool=64, seed=3, calibration=False)
    records = simulate(f, true, epochs=20)
    first = records[0]["dead"].mean()
    later = np.concatenate([r["dead"] for r in records[1:]]).mean()
    assert first > 0.55 and later < 0.3
    # the prompts kept after epoch 0 are mostly the live ones
    kept_later = np.concatenate([r["idx"] for r in records[1:]])
    assert (~always_dead[kept_later]).mean() > 0.7
    m = records[-1]["metrics"]
    assert m["rollout_filter/skipped_total"] > 0 and m["rollout_filter/audited_total"] > 0
    assert 0 <= m["rollout_filter/audited_alive_total"] <= m["rollout_filter/audited_total"]
    assert m["rollout_filter/wrong_skip_rate"] < 0.3


def test_greso_mode_skips_by_saturated_streak_only():
    true, always_dead = pool(n=2000)
    f = Filter(len(true), G, mode="greso", audit_fraction=0.0, seed=1, calibration=False)
    records = simulate(f, true, epochs=4)
    # streak 1 -> skip probability 0.5: about half the always-dead prompts come back in epoch 1
    back = np.isin(np.flatnonzero(always_dead), records[1]["idx"]).mean()
    assert 0.4 < back < 0.6
    # a longer streak is skipped more often
    back3 = np.isin(np.flatnonzero(always_dead), records[3]["idx"]).mean()
    assert back3 < back


@pytest.mark.parametrize("calibration", [False, True])
def test_every_prompt_is_retried_within_the_floor(calibration):
    n, retry = 200, 3
    f = Filter(n, G, retry_epochs=retry, audit_fraction=0.0, min_pool=8, calibration=calibration)
    true = np.zeros(n)  # everything always fails: all skipped after the first observation
    last_seen = np.full(n, 0.0)
    progress = 0.0
    for epoch in range(60):
        keep = f.plan_epoch(epoch)
        last_seen[keep] = progress
        progress += keep.sum() / n
        f.observe(np.flatnonzero(keep), true[keep])
        # no prompt waits more than `retry` passes' worth of generation
        assert np.all(progress - last_seen <= retry + 1e-9 + keep.sum() / n)
    assert 0 < keep.sum() < n  # still skipping, yet nobody starves


def test_cap_keeps_a_full_generation_batch():
    n = 50
    f = Filter(n, G, audit_fraction=0.0, min_pool=16, retry_epochs=1000, calibration=False)
    f.observe(np.arange(n), np.r_[np.zeros(n - 3), np.full(3, 0.5)])  # 47 dead, 3 alive
    keep = f.plan_epoch(1)
    assert keep.sum() == 16 and keep[-3:].all()
    # an `available` mask (forward pruning) is respected, and exempt prompts (replays) are never skipped
    available = np.ones(n, dtype=bool)
    available[:10] = False
    exempt = np.zeros(n, dtype=bool)
    exempt[20] = True
    keep = f.plan_epoch(2, available, exempt=exempt)
    assert not keep[:10].any() and keep[20] and keep.sum() == 16


def test_prior_of_unseen_prompts_comes_from_first_observations_per_bucket():
    buckets = prior_buckets_from_column(["hard", "easy"] * 50)
    f = Filter(100, G, prior_buckets=buckets, audit_fraction=0.0, calibration=False)
    seen = np.arange(40)  # "hard" (even) prompts came back dead, "easy" (odd) ones alive
    f.observe(seen, np.where(seen % 2 == 0, 0.0, 0.5))
    pi = f.predict_dead()
    assert pi[40:][buckets[40:] == buckets[0]].min() > 0.9 > 0.1 > pi[40:][buckets[40:] == buckets[1]].max()
    keep = f.plan_epoch(1)
    assert not keep[40::2].any() and keep[41::2].all()


def test_same_seed_same_decisions_on_every_process_and_after_a_resume():
    true, _ = pool(n=300)
    a = Filter(len(true), G, mode="greso", audit_fraction=0.1, seed=7, calibration=False)
    b = Filter(len(true), G, mode="greso", audit_fraction=0.1, seed=7, calibration=False)
    other = Filter(len(true), G, mode="greso", audit_fraction=0.1, seed=8, calibration=False)
    ra, rb, ro = simulate(a, true, 5), simulate(b, true, 5), simulate(other, true, 5)
    for x, y in zip(ra, rb):
        np.testing.assert_array_equal(x["idx"], y["idx"])
    assert any(len(x["idx"]) != len(z["idx"]) or (x["idx"] != z["idx"]).any() for x, z in zip(ra, ro))

    # state round trip: a restored filter takes the same decisions and reports the same metrics from there on
    restored = Filter(len(true), G, mode="greso", audit_fraction=0.1, seed=7, calibration=False)
    restored.load_state_dict({k: np.array(v) for k, v in a.state_dict().items()})
    for epoch in range(5, 9):
        keep_a, keep_r = a.plan_epoch(epoch), restored.plan_epoch(epoch)
        np.testing.assert_array_equal(keep_a, keep_r)
        idx = np.flatnonzero(keep_a)
        p = np.random.default_rng(epoch).binomial(G, true[idx]) / G
        a.observe(idx, p)
        restored.observe(idx, p)
        assert a.metrics() == restored.metrics()
    with pytest.raises(ValueError, match="same dataset"):
        Filter(10, G, calibration=False).load_state_dict(a.state_dict())


def test_bad_settings_are_rejected():
    with pytest.raises(ValueError, match="mode"):
        Filter(10, G, mode="oracle", calibration=False)
    with pytest.raises(ValueError, match="prior_buckets"):
        Filter(10, G, prior_buckets=np.zeros(3), calibration=False)


@pytest.mark.parametrize(
    "setting, value, match",
    [
        ("rollout_filter", "always", "rollout_filter='always' is invalid"),
        ("rollout_filter_threshold", 1.0, "rollout_filter_threshold=1.0 is invalid"),
        ("rollout_filter_retry_epochs", 0, "rollout_filter_retry_epochs=0 is invalid"),
        ("rollout_filter_audit", 1.5, "rollout_filter_audit=1.5 is invalid"),
        ("rollout_filter_calibration", "yes", "rollout_filter_calibration='yes' is invalid"),
        ("rollout_filter_granularity", "step", "rollout_filter_granularity='step' is invalid"),
        ("rollout_filter_momentum", -0.5, "rollout_filter_momentum=-0.5 is invalid"),
    ],
)
def test_config_names_the_bad_setting(tmp_path, setting, value, match):
    from benchmarks.experimental import ExperimentalConfig

    with pytest.raises(ValueError, match=match):
        ExperimentalConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none", **{setting: value})


# ----------------------------------------------------------------------------------------------- online calibration
def test_online_calibration_lowers_the_brier_score_and_matches_the_dead_share():
    # 80% of the prompts are dead for good: the raw Beta-binomial is underconfident on them (~0.7 after one dead
    # observation, where nearly all come back dead). Every prompt is observed every epoch (threshold ~1 skips
    # nothing), so both filters see the same outcomes and differ only in their predictions.
    true, _ = pool(seed=1, n=1000, dead_share=0.8)
    runs = {}
    for calibration in (False, True):
        # mu = 0.5 (the first default): between the EMA and the last observation, under-confident on the dead
        f = Filter(len(true), G, threshold=0.999999, audit_fraction=0.0, calibration=calibration, momentum=0.5)
        runs[calibration] = (f, simulate(f, true, epochs=8)[2:])  # from epoch 2 on the map has data
    (raw_f, raw), (cal_f, cal) = runs[False], runs[True]
    for r, c in zip(raw, cal):
        np.testing.assert_array_equal(r["idx"], c["idx"])
        np.testing.assert_array_equal(r["dead"], c["dead"])
    dead = np.concatenate([r["dead"] for r in cal]).astype(float)
    pred_raw = np.concatenate([r["pred"] for r in raw])
    pred_cal = np.concatenate([r["pred"] for r in cal])
    brier_raw, brier_cal = np.mean((pred_raw - dead) ** 2), np.mean((pred_cal - dead) ** 2)
    assert brier_cal < 0.9 * brier_raw
    # the run logs both scores: the calibrated run's raw Brier is the uncalibrated run's Brier
    m_raw, m_cal = raw[-1]["metrics"], cal[-1]["metrics"]
    assert m_cal["rollout_filter/brier_raw_total"] == pytest.approx(m_raw["rollout_filter/brier_total"])
    assert m_raw["rollout_filter/brier_raw_total"] == pytest.approx(m_raw["rollout_filter/brier_total"])
    assert m_cal["rollout_filter/brier_total"] < m_cal["rollout_filter/brier_raw_total"]
    # calibration-in-the-large: over the epochs measured, the predicted dead share is the observed one within three
    # binomial standard errors of the observed share plus 0.01 for the map's lag (it is fitted on the past epochs
    # while the always-dead prompts' streaks, hence their raw predictions, keep growing)
    tolerance = 3 * np.sqrt(dead.mean() * (1 - dead.mean()) / len(dead)) + 0.01
    assert abs(pred_cal.mean() - dead.mean()) < tolerance
    assert abs(pred_raw.mean() - dead.mean()) > abs(pred_cal.mean() - dead.mean())
    # the map moved the dead-for-good region up (raw ~0.7 -> near the observed ~1)
    assert cal_f.calibrate(np.array([0.7]))[0] > 0.85
    assert raw_f.calibration_count.sum() == 0  # off: no statistics, decisions as before


def test_calibration_map_is_monotone_and_the_identity_without_data():
    f = Filter(10, G, calibration=True)
    x = np.linspace(0.0, 1.0, 1001)
    np.testing.assert_allclose(f.calibrate(x), x, atol=1e-12)
    # adversarial pairs: the dead rate FALLS with the raw prediction; the map stays non-decreasing
    rng = np.random.default_rng(0)
    raw = rng.random(5000)
    f._learn_calibration(raw, rng.random(5000) < 1.0 - raw)
    xs, ys = f.calibration_map()
    assert np.all(np.diff(xs) > 0) and np.all(np.diff(ys) >= 0)
    assert np.all(np.diff(f.calibrate(x)) >= 0) and f.calibrate(x).min() >= 0 and f.calibrate(x).max() <= 1
    # pool-adjacent-violators: the weighted least-squares non-decreasing fit
    np.testing.assert_allclose(isotonic_increasing(np.array([1.0, 3.0, 2.0, 4.0]), np.ones(4)), [1, 2.5, 2.5, 4])
    np.testing.assert_allclose(isotonic_increasing(np.array([3.0, 1.0]), np.array([1.0, 3.0])), [1.5, 1.5])
    values, weights = rng.random(CALIBRATION_BINS), rng.random(CALIBRATION_BINS) + 0.1
    fit = isotonic_increasing(values, weights)
    assert np.all(np.diff(fit) >= -1e-15)
    assert np.sum(weights * fit) == pytest.approx(np.sum(weights * values))  # PAV keeps the weighted mean
    # a well-calibrated source leaves the map near the identity
    g = Filter(10, G, calibration=True)
    g._learn_calibration(raw, rng.random(5000) < raw)
    np.testing.assert_allclose(g.calibrate(x), x, atol=0.08)


def test_calibrated_skipping_keeps_the_floor_cap_and_audit():
    true, _ = pool(dead_share=0.8)
    f = Filter(len(true), G, audit_fraction=0.05, min_pool=64, retry_epochs=4, seed=3, calibration=True, momentum=0.5)
    records = simulate(f, true, epochs=20)
    later = np.concatenate([r["dead"] for r in records[1:]]).mean()
    assert records[0]["dead"].mean() > 0.7 and later < 0.35
    assert all(len(r["idx"]) >= 64 for r in records)
    # no starvation: no prompt waited more than the floor's 4 passes' worth of generation (+ the last epoch's)
    assert f.progress > 5 and np.max(f.progress - f.visit) <= 4 + len(records[-1]["idx"]) / len(true) + 1e-9
    m = records[-1]["metrics"]
    assert m["rollout_filter/audited_total"] > 0 and m["rollout_filter/wrong_skip_rate"] < 0.3
    # the high-probability region has data (audits, retries), and the map learned that it is dead
    assert f.calibration_count[-3:].sum() > 50 and f.calibrate(np.array([0.8]))[0] > 0.8


def test_calibrated_filter_is_deterministic_and_resumes_exactly():
    true, _ = pool(n=300)
    a = Filter(len(true), G, audit_fraction=0.1, seed=7, min_pool=16, calibration=True)
    b = Filter(len(true), G, audit_fraction=0.1, seed=7, min_pool=16, calibration=True)
    ra, rb = simulate(a, true, 6), simulate(b, true, 6)
    for x, y in zip(ra, rb):
        np.testing.assert_array_equal(x["idx"], y["idx"])
        np.testing.assert_array_equal(x["pred"], y["pred"])
        assert x["metrics"] == y["metrics"]
    assert a.calibration_count.sum() > 0
    np.testing.assert_array_equal(a.calibration_map()[1], b.calibration_map()[1])

    restored = Filter(len(true), G, audit_fraction=0.1, seed=7, min_pool=16, calibration=True)
    restored.load_state_dict({k: np.array(v) for k, v in a.state_dict().items()})
    for epoch in range(6, 10):
        keep_a, keep_r = a.plan_epoch(epoch), restored.plan_epoch(epoch)
        np.testing.assert_array_equal(keep_a, keep_r)
        np.testing.assert_array_equal(a.epoch_prediction, restored.epoch_prediction)
        idx = np.flatnonzero(keep_a)
        p = np.random.default_rng(epoch).binomial(G, true[idx]) / G
        a.observe(idx, p)
        restored.observe(idx, p)
        assert a.metrics() == restored.metrics()
    for name in ("calibration_count", "calibration_dead", "calibration_pred"):
        np.testing.assert_array_equal(getattr(a, name), getattr(restored, name))


# ------------------------------------------------------------------------------------------ per-batch decisions


def simulate_batches(f, true, batches, size=16, seed=0, order_seed=0):
    """Per-batch plan / generate / observe over epochs of a shuffled order; returns the per-batch records."""
    rng = np.random.default_rng(seed)
    records, epoch, batch, cursor = [], 0, 0, 0
    order = np.random.default_rng([order_seed, epoch]).permutation(f.num_prompts)
    while len(records) < batches:
        chosen, cursor = f.plan_batch(epoch, batch, order, cursor, size)
        if chosen is None:  # the epoch ends: the next one starts over a new order
            epoch, batch, cursor = epoch + 1, 0, 0
            order = np.random.default_rng([order_seed, epoch]).permutation(f.num_prompts)
            continue
        idx = np.asarray(chosen)
        predicted, audited = f.epoch_prediction[idx].copy(), f.epoch_audit[idx].copy()
        p = rng.binomial(G, true[idx]) / G
        f.observe(idx, p)
        records.append({"idx": idx, "pred": predicted, "dead": (p == 0) | (p == 1), "epoch": epoch, "audit": audited})
        batch += 1
    return records


def test_per_batch_decisions_skip_in_the_first_epoch_from_the_bucket_prior():
    # Two difficulty buckets: the "hard" one never solved (dead), the other in the learning zone. With per-epoch
    # planning, the whole first epoch is generated blind; per batch, the prior learned from the first observations
    # skips the dead bucket's unseen prompts already in epoch 0.
    n = 2000
    hard = np.arange(n) % 2 == 0
    true = np.where(hard, 0.0, 0.5)
    f = Filter(n, G, audit_fraction=0.0, prior_buckets=hard.astype(int), retry_epochs=1000, calibration=False)
    records = simulate_batches(f, true, batches=40)
    assert all(r["epoch"] == 0 for r in records[:20])
    first_epoch = [r for r in records if r["epoch"] == 0]
    dead_first, dead_later = first_epoch[0]["dead"].mean(), np.mean([r["dead"].mean() for r in first_epoch[3:]])
    assert dead_first > 0.3 and dead_later < 0.15  # GRPO would stay at ~0.5 + 2 * 0.5**8
    # every batch is full, of distinct prompts; the skipped prompts are counted as they are walked past
    assert all(len(set(r["idx"].tolist())) == 16 for r in records)
    assert f.totals["skipped"] > 0.3 * len(first_epoch) * 16


def test_per_batch_audit_generates_a_share_of_the_skips_and_counts_wrong_ones():
    true, dead = pool(n=3000, dead_share=0.7)
    f = Filter(len(true), G, audit_fraction=0.1, retry_epochs=1000, seed=3, calibration=False)
    # observe everything once (dead ones seen dead), then decide batches
    f.observe(np.arange(len(true)), np.random.default_rng(1).binomial(G, true) / G)
    records = simulate_batches(f, true, batches=60, seed=2)
    audited, skipped = f.totals["audited"], f.totals["skipped"]
    # audits are ~10% of the generated groups, however many skipped candidates each batch walks past
    assert 0.07 < audited / (60 * 16) < 0.13 and skipped > 5 * audited
    # they are skipped prompts: mostly dead, and the wrong skips among them are counted
    assert sum(int(r["audit"].sum()) for r in records) == audited
    dead_audits = sum(int(r["dead"][r["audit"]].sum()) for r in records)
    assert dead_audits > 0.6 * audited
    assert 0 < f.totals["audited_alive"] < 0.4 * audited


def test_per_batch_cap_fills_the_first_batch_and_a_later_short_batch_ends_the_epoch():
    n = 40
    f = Filter(n, G, audit_fraction=0.0, retry_epochs=1000, calibration=False)
    f.observe(np.arange(n), np.r_[np.zeros(n - 3), np.full(3, 0.5)])  # 37 dead, 3 alive
    order = np.arange(n)[::-1]
    chosen, cursor = f.plan_batch(1, 0, order, 0, 8)
    assert len(chosen) == 8 and {37, 38, 39} <= set(chosen) and cursor == n  # topped up from the skips
    assert f.plan_batch(1, 1, order, 0, 8) == (None, n)  # not the epoch's first batch: no cap, the epoch ends
    # exempt prompts (pruning's replays) are never skipped
    exempt = np.zeros(n, dtype=bool)
    exempt[[0, 1, 2, 3, 4]] = True
    chosen, _ = f.plan_batch(2, 1, np.arange(n), 0, 8, exempt=exempt)
    assert set(range(5)) <= set(chosen) and {37, 38, 39} <= set(chosen)


def test_per_batch_retry_floor_brings_every_prompt_back():
    n, retry = 300, 2
    f = Filter(n, G, retry_epochs=retry, audit_fraction=0.0, calibration=False)
    records = simulate_batches(f, np.zeros(n), batches=200, size=10)  # all dead: everything skipped once seen
    seen_at = {}
    for b, r in enumerate(records):
        for i in r["idx"].tolist():
            seen_at.setdefault(i, []).append(b)
    assert len(seen_at) == n  # nobody starves
    # a pass is n / 10 = 30 batches: no prompt waits more than `retry` passes (plus an epoch's walk) between visits
    gaps = [np.diff(v).max() for v in seen_at.values() if len(v) > 1]
    assert gaps and max(gaps) <= (retry + 1) * n / 10


def test_per_batch_decisions_agree_across_processes_and_resume_exactly():
    true, _ = pool(n=500)
    make = lambda seed=7: Filter(len(true), G, mode="greso", audit_fraction=0.1, seed=seed, calibration=False)  # noqa: E731
    a, b, other = make(), make(), make(8)
    ra, rb, ro = (simulate_batches(x, true, 80) for x in (a, b, other))  # past epoch 0: streaks, draws
    assert all((x["idx"] == y["idx"]).all() for x, y in zip(ra, rb))
    assert any((x["idx"] != z["idx"]).any() for x, z in zip(ra, ro))
    restored = make()
    restored.load_state_dict({k: np.array(v) for k, v in a.state_dict().items()})
    order = np.random.default_rng(5).permutation(len(true))
    for batch in range(4):
        ca, cursor_a = a.plan_batch(9, batch, order, batch * 40, 16)
        cr, cursor_r = restored.plan_batch(9, batch, order, batch * 40, 16)
        assert ca == cr and cursor_a == cursor_r
        p = np.random.default_rng(batch).binomial(G, true[ca]) / G
        a.observe(ca, p)
        restored.observe(ca, p)
        assert a.metrics() == restored.metrics()


def test_momentum_moves_the_predicted_pass_rate_along_the_trend():
    # a prompt being learned: 0.25, then 0.75. mu < 1 predicts between the EMA and 0.75, mu = 1 predicts 0.75,
    # mu > 1 extrapolates past it, and its predicted dead probability (mostly all-correct) grows with mu
    predictions = {}
    for mu in (0.5, 1.0, 2.0):
        f = Filter(2, G, momentum=mu, calibration=False)
        f.observe([0, 1], [0.25, 0.5])
        f.observe([0, 1], [0.75, 0.5])
        predictions[mu] = (f.predict_pass_rate(), f.predict_dead())
    ema = 0.9 * 0.25 + 0.1 * 0.75
    np.testing.assert_allclose(predictions[0.5][0][0], ema + 0.5 * (0.75 - ema))
    np.testing.assert_allclose(predictions[1.0][0][0], 0.75)
    np.testing.assert_allclose(predictions[2.0][0][0], min(ema + 2.0 * (0.75 - ema), 1.0))  # 1.2, clipped
    assert predictions[0.5][1][0] < predictions[1.0][1][0] < predictions[2.0][1][0]
    # a prompt with a flat history is predicted the same whatever mu
    assert len({float(predictions[mu][0][1]) for mu in predictions}) == 1


@pytest.mark.parametrize("plan", ["epoch", "batch"])
def test_a_pooled_prior_never_skips_an_unseen_prompt(plan):
    # 90% of the first observations were dead: the pooled prior says 0.9 for every unseen prompt, but it is no
    # evidence about any one of them, so they stay in the pool; a bucket's prior (a difficulty column) does skip.
    n = 200
    pooled = Filter(n, G, audit_fraction=0.0, retry_epochs=1000, calibration=False)
    bucketed = Filter(
        n, G, audit_fraction=0.0, retry_epochs=1000, prior_buckets=np.zeros(n, dtype=int), calibration=False
    )
    seen = np.arange(100)
    for f in (pooled, bucketed):
        f.observe(seen, np.where(seen % 10 == 0, 0.5, 0.0))
        assert f.predict_dead()[150] > 0.85
    for f, unseen_kept in ((pooled, 100), (bucketed, 0)):
        if plan == "epoch":
            keep = f.plan_epoch(1)
        else:
            chosen, _ = f.plan_batch(1, 1, np.arange(n), 0, 110)  # 10 seen alive + 100 unseen, if kept
            keep = np.zeros(n, dtype=bool)
            if chosen is not None:
                keep[chosen] = True
        assert keep[100:].sum() == unseen_kept
        assert keep[:100].sum() <= 10 + 1  # the prompts seen dead are skipped either way
