import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lze_trl import compute_energy


def test_energy_by_hand_abs_mode():
    # p0 = 0.25 -> anchor 0.75; p = 0.5 -> U = 1; ema 0.2 -> M = min(2 * 0.3, 1) = 0.6 -> 1 + 0.3 * 0.6 = 1.18
    e = compute_energy(np.array([0.5]), np.array([0.25]), np.array([0.2]))
    assert e[0] == pytest.approx(0.75 * 1.0 * 1.18)
    # falling pass rate counts in abs mode: p = 0.25, ema = 0.75 -> U = 0.75, M = min(1.0, 1) = 1
    e = compute_energy(np.array([0.25]), np.array([0.5]), np.array([0.75]))
    assert e[0] == pytest.approx(0.5 * 0.75 * 1.3)


def test_energy_improve_mode_ignores_decline():
    falling = compute_energy(np.array([0.25]), np.array([0.5]), np.array([0.75]), momentum_mode="improve")
    assert falling[0] == pytest.approx(0.5 * 0.75 * 1.0)
    rising = compute_energy(np.array([0.75]), np.array([0.5]), np.array([0.5]), momentum_mode="improve")
    assert rising[0] == pytest.approx(0.5 * 0.75 * (1 + 0.3 * 0.5))


def test_difficulty_anchor_floor_and_dead_groups():
    # p0 = 1 -> anchor floored at d_init_min
    assert compute_energy(np.array([0.5]), np.array([1.0]), np.array([0.5]))[0] == pytest.approx(0.05)
    dead = compute_energy(np.array([0.0, 1.0]), np.array([0.0, 0.0]), np.array([0.9, 0.1]))
    assert np.all(dead == 0)


def test_same_pass_rate_ranks_by_initial_difficulty_and_momentum():
    e = compute_energy(np.array([0.5, 0.5]), np.array([0.1, 0.6]), np.array([0.5, 0.5]))
    assert e[0] > e[1]
    e = compute_energy(np.array([0.5, 0.5]), np.array([0.3, 0.3]), np.array([0.2, 0.5]))
    assert e[0] > e[1]


def test_energy_terms_ablation():
    only_u = compute_energy(np.array([0.5]), np.array([0.9]), np.array([0.0]), terms=("uncertainty",))
    assert only_u[0] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="momentum mode"):
        compute_energy(np.array([0.5]), np.array([0.5]), np.array([0.5]), momentum_mode="up")


@settings(max_examples=200, deadline=None)
@given(
    p=st.floats(0, 1),
    p0=st.floats(0, 1),
    ema=st.floats(0, 1),
    mode=st.sampled_from(["abs", "improve"]),
)
def test_energy_bounds(p, p0, ema, mode):
    e = compute_energy(np.array([p]), np.array([p0]), np.array([ema]), momentum_mode=mode)[0]
    assert 0.0 <= e <= 1.3 + 1e-12
    if p in (0.0, 1.0):
        assert e == 0.0
    # the uncertainty term bounds the energy by 1.3 * 4p(1-p)
    assert e <= 1.3 * 4 * p * (1 - p) + 1e-12
