import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lze_trl import PromptState
from lze_trl.method.prompt_state import COLUMNS


def test_first_observation_then_ema_last_and_counts():
    state = PromptState(ema_decay=0.9)
    state.record_pass_rates([10, 11], [0.5, 0.25], batch_index=0)
    row = state.get([10, 11])
    assert row["initial_pass_rate"] == pytest.approx([0.5, 0.25])
    assert row["ema_pass_rate"] == pytest.approx([0.5, 0.25])  # the first observation sets the EMA
    state.record_pass_rates([10], [0.75], batch_index=3)
    row = state.get([10])
    assert row["ema_pass_rate"][0] == pytest.approx(0.9 * 0.5 + 0.1 * 0.75)
    assert row["initial_pass_rate"][0] == pytest.approx(0.5)  # never updated
    assert row["last_pass_rate"][0] == 0.75 and row["num_observations"][0] == 2 and row["last_batch"][0] == 3


def test_saturated_streak_counts_consecutive_dead_observations_on_one_side():
    state = PromptState()
    for p in (1.0, 1.0, 0.5, 0.0, 0.0, 0.0, 1.0):
        state.record_pass_rates([7], [p], batch_index=0)
    assert state.get([7])["saturated_streak"][0] == 1  # all-correct once, after three all-wrong
    state.record_pass_rates([7], [1.0], batch_index=1)
    assert state.get([7])["saturated_streak"][0] == 2
    state.record_pass_rates([8, 8], [0.0, 1.0], batch_index=2)  # one call, both sides: their mean is alive
    assert state.get([8])["saturated_streak"][0] == 0


def test_nan_pass_rate_leaves_the_prompt_untouched():
    state = PromptState()
    state.record_pass_rates([1], [0.5], batch_index=0)
    state.record_pass_rates([1, 2], [np.nan, np.nan], batch_index=1)
    assert state.get([1])["num_observations"][0] == 1 and state.get([1])["last_batch"][0] == 0
    assert state.get([2])["num_observations"][0] == 0 and np.isnan(state.get([2])["ema_pass_rate"][0])
    assert len(state) == 1


def test_a_prompt_repeated_in_one_call_is_updated_once_with_its_mean():
    state = PromptState(ema_decay=0.5)
    state.record_pass_rates([3, 3], [0.25, 0.75], batch_index=0)
    row = state.get([3])
    assert row["initial_pass_rate"][0] == 0.25  # the first occurrence
    assert row["ema_pass_rate"][0] == pytest.approx(0.5 * 0.25 + 0.5 * 0.5)
    assert row["num_observations"][0] == 2 and row["last_pass_rate"][0] == 0.5


def test_record_counts_selections_and_keeps_energies():
    state = PromptState()
    state.record_pass_rates([1, 2], [0.5, 0.5], batch_index=0)
    state.record([1, 2, 9], np.array([0.3, 0.2, 0.1]), [True, False, True])  # 9 was never observed: ignored
    row = state.get([1, 2])
    assert list(row["num_selected"]) == [1, 0] and row["last_energy"] == pytest.approx([0.3, 0.2])


def test_state_dict_roundtrip_with_large_ids_and_growth_after_loading():
    state = PromptState()
    big = np.array([2**62 + 5, 3, 2**40], dtype=np.int64)
    state.record_pass_rates(big, [0.5, 0.25, 0.75], batch_index=0)
    state.record_pass_rates(big[:2], [1.0, 0.0], batch_index=1)
    restored = PromptState()
    restored.load_state_dict(state.state_dict())
    for name in COLUMNS:
        np.testing.assert_array_equal(restored.get(big)[name], state.get(big)[name], err_msg=name)
    restored.record_pass_rates([99], [0.5], batch_index=2)  # a new prompt starts from scratch, not from stale memory
    assert restored.get([99])["num_observations"][0] == 1 and restored.get([99])["saturated_streak"][0] == 0
    with pytest.raises(ValueError, match="lacks the columns"):
        PromptState().load_state_dict({"prompt_key": np.arange(2)})


def test_prompts_get_dense_slots_in_order_of_first_observation():
    state = PromptState()
    state.record_pass_rates(np.array([50, 7, 50, 2**60]), [0.5, 0.5, 1.0, 0.5], batch_index=0)
    state.record_pass_rates(np.array([8, 7]), [0.5, 0.25], batch_index=1)
    assert state.table()["prompt_key"].tolist() == [50, 7, 2**60, 8]
    assert state.get(np.array([7, 9, 2**60]))["num_observations"].tolist() == [2, 0, 1]
    assert state.get([50])["num_observations"][0] == 2  # twice in one call: one row, counted twice


def test_million_prompt_pool_costs_tens_of_mb():
    state = PromptState()
    ids = np.random.default_rng(0).permutation(10**6)
    for chunk in np.array_split(ids, 10):
        state.record_pass_rates(chunk, np.full(len(chunk), 0.5), batch_index=0)
    assert len(state) == 10**6
    assert sum(getattr(state, name).nbytes for name in COLUMNS) + state.index.nbytes < 100 * 2**20


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])), min_size=1, max_size=30))
def test_ema_stays_within_the_observed_range(observations):
    state = PromptState()
    for pid, p in observations:
        state.record_pass_rates([pid], [p], batch_index=0)
    seen = {}
    for pid, p in observations:
        seen.setdefault(pid, []).append(p)
    for pid, ps in seen.items():
        row = state.get([pid])
        assert min(ps) - 1e-6 <= row["ema_pass_rate"][0] <= max(ps) + 1e-6
        assert row["initial_pass_rate"][0] == pytest.approx(ps[0])
        assert row["num_observations"][0] == len(ps)
