"""The rollout-side predictor: calibration, skipping, retry floor, cap, audit, determinism, resume."""

import numpy as np
import pytest

from lze_trl.rollout_filter import RolloutFilter, beta_binomial_dead, prior_buckets_from_column


G = 8


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
    f = RolloutFilter(len(true), G, threshold=0.999999, audit_fraction=0.0)
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
    f = RolloutFilter(len(true), G, audit_fraction=0.05, min_pool=64, seed=3)
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


def test_greso_mode_skips_by_dead_streak_only():
    true, always_dead = pool(n=2000)
    f = RolloutFilter(len(true), G, mode="greso", audit_fraction=0.0, seed=1)
    records = simulate(f, true, epochs=4)
    # streak 1 -> skip probability 0.5: about half the always-dead prompts come back in epoch 1
    back = np.isin(np.flatnonzero(always_dead), records[1]["idx"]).mean()
    assert 0.4 < back < 0.6
    # a longer streak is skipped more often
    back3 = np.isin(np.flatnonzero(always_dead), records[3]["idx"]).mean()
    assert back3 < back


def test_every_prompt_is_retried_within_the_floor():
    n, retry = 200, 3
    f = RolloutFilter(n, G, retry_epochs=retry, audit_fraction=0.0, min_pool=8)
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
    f = RolloutFilter(n, G, audit_fraction=0.0, min_pool=16, retry_epochs=1000)
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
    f = RolloutFilter(100, G, prior_buckets=buckets, audit_fraction=0.0)
    seen = np.arange(40)  # "hard" (even) prompts came back dead, "easy" (odd) ones alive
    f.observe(seen, np.where(seen % 2 == 0, 0.0, 0.5))
    pi = f.predict_dead()
    assert pi[40:][buckets[40:] == buckets[0]].min() > 0.9 > 0.1 > pi[40:][buckets[40:] == buckets[1]].max()
    keep = f.plan_epoch(1)
    assert not keep[40::2].any() and keep[41::2].all()


def test_same_seed_same_decisions_on_every_process_and_after_a_resume():
    true, _ = pool(n=300)
    a = RolloutFilter(len(true), G, mode="greso", audit_fraction=0.1, seed=7)
    b = RolloutFilter(len(true), G, mode="greso", audit_fraction=0.1, seed=7)
    other = RolloutFilter(len(true), G, mode="greso", audit_fraction=0.1, seed=8)
    ra, rb, ro = simulate(a, true, 5), simulate(b, true, 5), simulate(other, true, 5)
    for x, y in zip(ra, rb):
        np.testing.assert_array_equal(x["idx"], y["idx"])
    assert any(len(x["idx"]) != len(z["idx"]) or (x["idx"] != z["idx"]).any() for x, z in zip(ra, ro))

    # state round trip: a restored filter takes the same decisions and reports the same metrics from there on
    restored = RolloutFilter(len(true), G, mode="greso", audit_fraction=0.1, seed=7)
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
        RolloutFilter(10, G).load_state_dict(a.state_dict())


def test_bad_settings_are_rejected():
    with pytest.raises(ValueError, match="mode"):
        RolloutFilter(10, G, mode="oracle")
    with pytest.raises(ValueError, match="prior_buckets"):
        RolloutFilter(10, G, prior_buckets=np.zeros(3))


@pytest.mark.parametrize(
    "setting, value, match",
    [
        ("rollout_filter", "always", "rollout_filter='always' is invalid"),
        ("rollout_filter_threshold", 1.0, "rollout_filter_threshold=1.0 is invalid"),
        ("rollout_filter_retry_epochs", 0, "rollout_filter_retry_epochs=0 is invalid"),
        ("rollout_filter_audit", 1.5, "rollout_filter_audit=1.5 is invalid"),
    ],
)
def test_config_names_the_bad_setting(tmp_path, setting, value, match):
    from lze_trl import LZEGRPOConfig

    with pytest.raises(ValueError, match=match):
        LZEGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none", **{setting: value})
