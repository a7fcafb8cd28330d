import jax
import numpy as np
import pytest

from jaxrl import ConfigError
from jaxrl import buffer as B
from jaxrl.types import EnvSpec
from tests.helpers import fill


def test_layout_counts_total_transitions_and_stores_final_obs_sparsely():
    layout = B.layout(1000, 4, EnvSpec(10, 2, 100, can_terminate=False))
    assert layout.rows == 250 and layout.final_slots == 5
    assert B.layout(1000, 4, EnvSpec(10, 2, 100, can_terminate=True)).final_slots == layout.rows
    state = B.init(layout)
    assert state.obs.shape == (250, 4, 10) and state.final_obs.shape == (5, 4, 10)
    assert layout.nbytes == sum(x.nbytes for x in jax.tree.leaves(state)) - 8 - 4 * 4  # minus counters


def test_sizes_are_validated_with_one_line_errors():
    with pytest.raises(ConfigError, match="buffer_size must be a positive"):
        B.layout(0, 2, EnvSpec(1, 1, 10, False))
    with pytest.raises(ConfigError, match="at least 2 steps of every env"):
        B.layout(3, 2, EnvSpec(1, 1, 10, False))
    with pytest.raises(ConfigError, match=r"needs .* GiB .* only .* available"):
        B.check_fits(10 * 2**30, copies=2, limit=2**30)


def test_sample_never_reads_the_newest_row_and_wraps_around():
    state = fill(capacity=20, steps=27, episode_length=1000)  # 10 rows, 27 written: rows hold t = 17..26
    batch = B.sample(state, jax.random.PRNGKey(0), 4096)
    t = np.asarray(batch.reward)
    assert t.min() == 17 and t.max() == 25  # the newest row (t = 26) has no s' yet
    env = np.round(np.asarray(batch.obs[:, 0]) - t) / 100
    np.testing.assert_allclose(batch.obs[:, 0], 100 * env + t)
    np.testing.assert_allclose(batch.next_obs[:, 0], 100 * env + t + 1)  # s' is the next row, across the wrap
    np.testing.assert_allclose(batch.action[:, 0], t)
    assert len(np.unique(t)) == 9


def test_truncated_and_terminated_steps_give_the_true_final_observation():
    state = fill(capacity=40, steps=20, episode_length=5, can_terminate=True, terminate_at=(7,))
    batch = B.sample(state, jax.random.PRNGKey(1), 4096)
    t = np.asarray(batch.reward).astype(int)
    obs, nxt = np.asarray(batch.obs[:, 0]), np.asarray(batch.next_obs[:, 0])
    done = np.asarray(batch.terminated | batch.truncated)
    np.testing.assert_allclose(nxt[done], -(obs[done] + 1))  # the stored final obs, not the reset obs
    np.testing.assert_allclose(nxt[~done], obs[~done] + 1)
    assert set(t[np.asarray(batch.terminated)]) == {7}
    # episodes: 0-4 (trunc at 4), 5-7 (term at 7), 8-12, 13-17 truncated
    assert set(t[np.asarray(batch.truncated)]) == {4, 12, 17}


def test_final_obs_ring_survives_wraparound_for_time_limited_tasks():
    state = fill(capacity=2 * 12, steps=53, episode_length=4)  # 12 rows, F = 5 slots
    assert state.final_obs.shape[0] == 5
    batch = B.sample(state, jax.random.PRNGKey(2), 4096)
    done = np.asarray(batch.truncated)
    assert done.any()
    np.testing.assert_allclose(np.asarray(batch.next_obs[:, 0])[done], -(np.asarray(batch.obs[:, 0])[done] + 1))


def test_without_terminal_obs_only_time_limits_take_a_final_slot_and_a_termination_reads_the_next_row():
    # A task that can terminate, 12 rows, episodes of at most 4 steps cut short by terminations, 53 steps: the
    # ring wraps, and only time limits take one of its ceil(12 / 4) + 2 = 5 slots.
    state = fill(capacity=2 * 12, steps=53, episode_length=4, can_terminate=True,
                 terminate_at=(41, 46, 47), terminal_obs=False)  # time limits at 45 and 51 (and every 4th before)
    assert state.final_obs.shape[0] == 5
    batch = B.sample(state, jax.random.PRNGKey(3), 4096)
    obs, nxt = np.asarray(batch.obs[:, 0]), np.asarray(batch.next_obs[:, 0])
    truncated, terminated = np.asarray(batch.truncated), np.asarray(batch.terminated)
    assert truncated.any() and terminated.any()
    np.testing.assert_allclose(nxt[truncated], -(obs[truncated] + 1))  # a time limit bootstraps: the true s'
    np.testing.assert_allclose(nxt[~truncated], obs[~truncated] + 1)  # a termination's s' (x0 in its target) is
    # the next row's observation, as is any other transition's


def test_keeping_terminal_obs_is_the_agents_choice_and_halves_a_robots_replay_without_it():
    from agents import sac, tdmpc2
    from jaxrl.loop import LoopConfig, buffer_layout

    t1 = EnvSpec(265, 23, 1000, can_terminate=True, obs_parts=(("privileged_state", 180), ("state", 85)))
    recipe = LoopConfig(num_envs=1024, buffer_size=1024 * 10240)  # FastTD3's replay at 1024 envs
    lean, full = buffer_layout(sac.AGENT, recipe, t1), buffer_layout(tdmpc2.AGENT, recipe, t1)
    assert (lean.terminal_obs, full.terminal_obs) == (False, True)
    assert (lean.final_slots, full.final_slots) == (13, 10240)
    assert 11.3 < lean.nbytes / 2**30 < 11.5 and 21.7 < full.nbytes / 2**30 < 21.8
    assert B.init(B.layout(40, 4, EnvSpec(3, 1, 5, True), terminal_obs=False)).terminal_obs is False


def test_windows_never_cross_an_episode_end_or_the_write_head():
    state = fill(capacity=2 * 30, steps=45, episode_length=6)  # rows hold t = 15..44
    windows = B.sample_windows(state, jax.random.PRNGKey(3), 2048, length=4)
    ok = windows.valid
    assert bool(ok.all())
    t = np.asarray(windows.reward).astype(int)  # [B, 4]
    np.testing.assert_array_equal(np.diff(t, axis=1), 1)  # contiguous
    assert t.min() >= 15 and t.max() <= 43
    done = np.asarray(windows.truncated)
    assert not done[:, :-1].any()  # an episode end may only be the last transition
    assert done[:, -1].any()
    obs = np.asarray(windows.obs[..., 0])
    np.testing.assert_allclose(obs[:, 1:-1], obs[:, :-2] + 1)
    last = np.where(done[:, -1], -(obs[:, -2] + 1), obs[:, -2] + 1)
    np.testing.assert_allclose(obs[:, -1], last)  # final obs of a truncated window is the true one
    # episodes span t = 6k .. 6k + 5: windows of 4 start at episode steps 0, 1 or 2, and each is reachable
    np.testing.assert_array_equal(np.unique(t[:, 0] % 6), [0, 1, 2])


def test_window_mask_when_no_window_fits():
    state = fill(capacity=40, steps=12, episode_length=3)
    ok = B.sample_windows(state, jax.random.PRNGKey(4), 64, length=5).valid
    assert not bool(ok.any())


def test_structured_observations_store_each_part_once_and_count_in_the_memory_estimate():
    spec = EnvSpec(30, 2, 100, can_terminate=False, obs_parts=(("state", 10), ("privileged_state", 20)))
    layout = B.layout(1000, 4, spec)
    state = B.init(layout)
    assert state.obs["state"].shape == (250, 4, 10) and state.obs["privileged_state"].shape == (250, 4, 20)
    assert state.final_obs["privileged_state"].shape == (5, 4, 20)
    assert layout.nbytes == sum(x.nbytes for x in jax.tree.leaves(state)) - 8 - 4 * 4  # minus counters
    flat = B.layout(1000, 4, EnvSpec(30, 2, 100, can_terminate=False))
    assert layout.nbytes == flat.nbytes  # the same floats, split into parts


def test_structured_windows_keep_their_parts_aligned_and_end_on_the_true_final_obs():
    state = fill(capacity=2 * 30, steps=45, episode_length=6, structured=True)
    windows = B.sample_windows(state, jax.random.PRNGKey(3), 512, length=4)
    x = np.asarray(windows.obs["state"][..., 0])  # [B, 5]
    privileged = np.asarray(windows.obs["privileged_state"])
    np.testing.assert_allclose(privileged[:, :-1], np.stack([x[:, :-1], 2 * x[:, :-1]], axis=-1))
    done = np.asarray(windows.truncated[:, -1])
    assert done.any() and not done.all()
    before = x[:, -2]  # each part's final obs is -(part + 1)
    np.testing.assert_allclose(x[:, -1], np.where(done, -(before + 1), before + 1))
    np.testing.assert_allclose(privileged[:, -1, 1], np.where(done, -(2 * before + 1), 2 * (before + 1)))


def test_recent_reads_the_newest_transitions_in_the_order_they_were_written_across_the_wrap():
    state = fill(capacity=20, steps=27, episode_length=1000)  # 10 rows of 2 envs: rows hold t = 17..26
    recent = B.recent(state, 5)  # the 5 newest: t = 24 (env 1), 25 (envs 0, 1), 26 (envs 0, 1)
    np.testing.assert_array_equal(recent.reward, [24, 25, 25, 26, 26])
    np.testing.assert_array_equal(recent.obs[:, 0], [124, 25, 125, 26, 126])
    np.testing.assert_array_equal(recent.action[:, 0], recent.reward)
    assert recent.valid.all()
    everything = B.recent(state, 20)
    np.testing.assert_array_equal(everything.reward, np.repeat(np.arange(17, 27), 2))


def test_recent_marks_what_is_not_written_yet_and_refuses_impossible_counts():
    state = fill(capacity=20, steps=3, episode_length=1000)
    recent = B.recent(state, 8)  # 4 rows asked, 3 written
    np.testing.assert_array_equal(recent.valid, [False, False, True, True, True, True, True, True])
    np.testing.assert_array_equal(recent.reward[2:], [0, 0, 1, 1, 2, 2])
    for count in (0, 21):
        with pytest.raises(ValueError, match="needs 1 <= count <= the buffer's 20 transitions"):
            B.recent(state, count)
