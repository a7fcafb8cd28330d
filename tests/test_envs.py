import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from jaxrl import ConfigError


def run(env, steps, action=None):
    state = env.reset(jax.random.PRNGKey(0))
    step = jax.jit(env.step)
    outs = []
    a = jnp.zeros((env.num_envs, env.spec.action_size)) if action is None else action
    for _ in range(steps):
        state, out = step(state, a)
        outs.append(out)
    return state, jax.tree.map(lambda *x: np.stack(x), *outs)


def test_truncation_is_not_termination_and_episodes_auto_reset():
    env = envs.make("toy/ConstantTruncated", 3)
    state, out = run(env, 25)
    assert not out.terminated.any()
    np.testing.assert_array_equal(out.truncated[:, 0], [(t + 1) % 10 == 0 for t in range(25)])
    np.testing.assert_allclose(out.episode_return[9], 10.0)  # ten rewards of 1
    np.testing.assert_array_equal(out.episode_length[9], 10)
    np.testing.assert_array_equal(state.episode_step, 5)


def test_termination_sets_terminated_only():
    env = envs.make("toy/Bandit", 2)
    _, out = run(env, 3, jnp.full((2, 1), 0.5))
    assert out.terminated.all() and not out.truncated.any()
    np.testing.assert_allclose(out.reward, 1.0)


def test_final_obs_is_the_pre_reset_observation():
    env = envs.make("toy/PointMass", 2)
    state = env.reset(jax.random.PRNGKey(1))
    step = jax.jit(env.step)
    for _ in range(49):
        state, out = step(state, jnp.ones((2, 2)))
    before = state.obs
    state, out = step(state, jnp.ones((2, 2)))
    assert out.truncated.all()
    np.testing.assert_allclose(out.final_obs, jnp.clip(before + 0.1, -2, 2), rtol=1e-6)
    assert not np.allclose(out.obs, out.final_obs)  # the next obs to act on is a fresh episode's
    np.testing.assert_array_equal(state.episode_step, 0)


def test_action_repeat_sums_rewards_and_counts_env_steps():
    env1 = envs.make("toy/ConstantTruncated", 1, episode_length=20)
    env4 = envs.make("toy/ConstantTruncated", 1, action_repeat=4, episode_length=20)
    assert env4.decisions_per_episode == 5
    _, out = run(env4, 5)
    np.testing.assert_allclose(out.reward, 4.0)
    np.testing.assert_array_equal(out.truncated[:, 0], [False] * 4 + [True])
    np.testing.assert_array_equal(out.episode_length[-1], 20)
    _, out1 = run(env1, 20)
    np.testing.assert_allclose(out.episode_return[-1], out1.episode_return[-1])


def test_unknown_names_fail_with_one_line():
    with pytest.raises(ConfigError) as e:
        envs.make("gym/HalfCheetah", 1)
    assert "brax/, dmc/, toy/" in str(e.value) and "jaxrl envs" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="valid: dmc/AcrobotSwingup"):
        envs.make("dmc/CartpoleSwingUp", 1)
    with pytest.raises(ConfigError, match="brax/ant"):
        envs.make("brax/cheetah", 1)
    with pytest.raises(ConfigError, match="num_envs must be a positive"):
        envs.make("toy/Pendulum", 0)


def test_listing_covers_every_prefix():
    names = envs.list_envs()
    assert "dmc/CartpoleSwingup" in names and "brax/halfcheetah" in names and "toy/Pendulum" in names
    assert sum(n.startswith("dmc/") for n in names) == 25


@pytest.mark.slow
def test_dmc_cartpole_steps_batched_with_mjx():
    env = envs.make("dmc/CartpoleSwingup", 2)
    assert env.spec.obs_size == 5 and env.spec.action_size == 1 and env.decisions_per_episode == 1000
    assert not env.spec.can_terminate
    state, out = run(env, 3, jnp.ones((2, 1)))
    assert out.obs.shape == (3, 2, 5) and np.isfinite(out.reward).all()
    assert not out.done.any()


def test_structured_observations_step_reset_and_keep_their_final_parts():
    env = envs.make("toy/PrivilegedBandit", 64)
    assert env.spec.obs_parts == (("state", 1), ("privileged_state", 1))
    state = env.reset(jax.random.PRNGKey(0))
    assert set(state.obs) == {"state", "privileged_state"} and state.obs["privileged_state"].dtype == jnp.float32
    target = state.obs["privileged_state"][:, 0]
    new_state, out = env.step(state, jnp.broadcast_to(target[:, None], (64, 1)))  # the best action everywhere
    np.testing.assert_allclose(out.reward, 1.0)
    assert bool(out.terminated.all())
    np.testing.assert_array_equal(out.final_obs["privileged_state"][:, 0], target)  # the ended episode's c
    drawn = np.asarray(new_state.obs["privileged_state"][:, 0])
    assert set(drawn) == {-0.5, 0.5} and (drawn != np.asarray(target)).any()  # fresh episodes drew new targets
