"""TD3's losses on a tiny batch against hand-computed values, the smoothing clip and the update delay."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from agents import td3
from jaxrl.loop import LoopConfig
from tests.helpers import BATCH, KEY, LinearCritics, train


class LinearActor(nn.Module):
    """pi(s) = tanh(k s)."""

    @nn.compact
    def __call__(self, obs):
        return jnp.tanh(self.param("k", lambda key: jnp.array(0.3)) * obs)


CFG = td3.Config(gamma=0.9, tau=0.1, policy_noise=0.2, noise_clip=0.5)


def make_state(target_scale=1.0):
    actor, critic = LinearActor(), LinearCritics()
    actor_params, critic_params = actor.init(KEY, BATCH.obs), critic.init(KEY, BATCH.obs, BATCH.action)
    opt = optax.adam(1e-3)
    return td3.State(actor_params=actor_params, target_actor_params=jax.tree.map(lambda x: 2 * x, actor_params),
                     critic_params=critic_params,
                     target_critic_params=jax.tree.map(lambda x: target_scale * x, critic_params),
                     actor_opt_state=opt.init(actor_params), critic_opt_state=opt.init(critic_params),
                     num_updates=jnp.zeros((), jnp.int32), actor=actor, critic=critic,
                     last_actor_metrics=dict.fromkeys(td3.DELAYED_METRICS, jnp.zeros(())))


def test_smoothing_noise_is_clipped_then_the_action():
    state = make_state()
    next_obs = jnp.array([[3.0], [-1.0]])
    key = jax.random.PRNGKey(11)
    eps = np.asarray(0.2 * jax.random.normal(key, (2, 1)))
    expected = np.clip(np.tanh(0.6 * np.asarray(next_obs)) + np.clip(eps, -0.5, 0.5), -1, 1)
    np.testing.assert_allclose(td3.smoothed_target_action(state, next_obs, key, CFG), expected, rtol=1e-6)
    big = td3.smoothed_target_action(state, next_obs, key, CFG.replace(policy_noise=100.0))
    np.testing.assert_allclose(np.abs(big - np.tanh(0.6 * np.asarray(next_obs))).max(), 0.5, atol=1e-6)


def test_critic_loss_by_hand():
    state = make_state(target_scale=0.5)
    loss, info = td3.critic_loss(state.critic_params, state, BATCH, KEY, CFG)
    s2 = np.array([3.0, -1.0])
    a2 = np.asarray(td3.smoothed_target_action(state, BATCH.next_obs, KEY, CFG))[:, 0]
    next_q = np.stack([0.5 * s2 + 0.25 * a2, 1.0 * s2 - 0.5 * a2]).min(0)
    y = np.array([1.0 + 0.9 * next_q[0], -1.0])  # truncated bootstraps, terminated does not
    s, a = np.array([1.0, 2.0]), np.array([0.5, -0.5])
    q = np.stack([1.0 * s + 0.5 * a, 2.0 * s - 1.0 * a])
    np.testing.assert_allclose(loss, ((q - y) ** 2).mean(1).sum(), rtol=1e-5)


def test_actor_loss_uses_the_first_critic_only():
    state = make_state()
    loss, _ = td3.actor_loss(state.actor_params, state, BATCH, KEY, CFG)
    s = np.array([1.0, 2.0])
    np.testing.assert_allclose(loss, -np.mean(1.0 * s + 0.5 * np.tanh(0.3 * s)), rtol=1e-6)


def test_actor_and_targets_move_every_second_update():
    state = make_state(target_scale=0.5)
    update = jax.jit(td3.update, static_argnums=3)
    first, m1 = update(state, BATCH, KEY, CFG)
    assert int(first.num_updates) == 1
    jax.tree.map(np.testing.assert_array_equal, first.actor_params, state.actor_params)
    jax.tree.map(np.testing.assert_array_equal, first.target_critic_params, state.target_critic_params)
    assert float(m1["actor_loss"]) == 0.0  # nothing to report before the first actor update
    second, m2 = update(first, BATCH, KEY, CFG)
    assert not np.allclose(second.actor_params["params"]["k"], state.actor_params["params"]["k"])
    expected = jax.tree.map(lambda c, t: 0.1 * c + 0.9 * t, second.critic_params, first.target_critic_params)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), second.target_critic_params, expected)
    loss_at_first = td3.actor_loss(first.actor_params, second, BATCH, KEY, CFG)[0]
    np.testing.assert_allclose(m2["actor_loss"], loss_at_first, rtol=1e-6)


def test_exploration_noise_and_deterministic_action():
    state = make_state()
    obs = jnp.ones((5000, 1))
    noisy, _ = td3.act(state, obs, jax.random.PRNGKey(0), CFG, deterministic=False)
    np.testing.assert_allclose(td3.act(state, obs, None, CFG, deterministic=True)[0], np.tanh(0.3), rtol=1e-6)
    np.testing.assert_allclose(np.std(np.asarray(noisy)), 0.1, rtol=0.05)


@pytest.mark.slow
def test_td3_swings_up_the_pendulum():
    loop = LoopConfig(steps=10_000, num_envs=4, num_eval_envs=10, eval_every=2000, learning_starts=1000,
                      buffer_size=10_000)
    _, history = train("toy/Pendulum", loop, td3.Config(hidden_sizes=(64, 64)), agent=td3.AGENT)
    assert history[0]["eval/return"].max() < -700
    assert np.all(history[-1]["eval/return"] > -300), [h["eval/return"] for h in history]
