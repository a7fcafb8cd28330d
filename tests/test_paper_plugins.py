"""The founding papers' ideas as plug-ins (experiments/plugins/): each new term by hand, the schedule at given
progress, the base agent recovered where the idea switches off, and the harness."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents import sac, td3
from experiments.plugins import aql, aro_ddpg
from jaxrl import ConfigError
from jaxrl import progress as progress_lib
from jaxrl.testing import check_agent
from jaxrl.types import EnvSpec
from tests.test_plugins import random_batch

KEY = jax.random.PRNGKey(0)
SPEC = EnvSpec(obs_size=3, action_size=2, decisions_per_episode=10)


def progress_at(env_steps, planned_env_steps=1000):
    return progress_lib.at(updates=env_steps, env_steps=env_steps, planned_updates=planned_env_steps,
                           planned_env_steps=planned_env_steps)


# ------------------------------------------------------------------------------------------------------ AQ-L


def test_expectile_loss_by_hand():
    # residuals y - q = 1 and -1 at level 0.9: weights 0.9 and 0.1, times 2
    np.testing.assert_allclose(aql.expectile_loss(jnp.array([1.0, -1.0]), jnp.zeros(2), 0.9), [1.8, 0.2], rtol=1e-6)
    # residual 3 at level 0.7 -> 2 * 0.7 * 9 = 12.6; residual -2 -> 2 * 0.3 * 4 = 2.4
    np.testing.assert_allclose(aql.expectile_loss(jnp.array([3.0, 0.0]), jnp.array([0.0, 2.0]), 0.7), [12.6, 2.4],
                               rtol=1e-6)


@pytest.mark.parametrize("env_steps, fraction, level", [(0, 1.0, 0.9), (250, 1.0, 0.8), (1000, 1.0, 0.5),
                                                        (250, 0.5, 0.7), (600, 0.5, 0.5), (5000, 0.5, 0.5)])
def test_the_expectile_anneals_linearly_over_the_chosen_share_of_the_run(env_steps, fraction, level):
    cfg = aql.SACConfig(anneal_fraction=fraction)
    assert float(aql.expectile_level(progress_at(env_steps), cfg)) == pytest.approx(level, abs=1e-6)


@pytest.mark.parametrize("agent, base, config", [(aql.AQ_SAC, sac.AGENT, aql.SACConfig),
                                                 (aql.AQ_TD3, td3.AGENT, aql.TD3Config)])
def test_at_level_one_half_the_update_is_the_base_agents_bitwise(agent, base, config):
    cfg = config(hidden_sizes=(8,), expectile_init=0.5)
    state = progress_lib.attach(agent.init(KEY, SPEC, cfg), progress_at(300))
    batch = random_batch(jax.random.PRNGKey(1))
    new, metrics = jax.jit(agent.update)(state, batch, KEY, cfg)
    plain, plain_metrics = jax.jit(base.update)(state, batch, KEY, cfg)
    jax.tree.map(np.testing.assert_array_equal, new.critic_params, plain.critic_params)
    assert float(metrics["critic_loss"]) == float(plain_metrics["critic_loss"])
    assert float(metrics["expectile"]) == 0.5


def test_aq_sac_critic_loss_by_hand():
    """Two critics, a fixed target: sum_j mean_b 2 |tau - 1[y - q < 0]| (y - q)^2 at tau_t = 0.8."""
    cfg = aql.SACConfig(hidden_sizes=(8,))
    state = progress_lib.attach(aql.AQ_SAC.init(KEY, SPEC, cfg), progress_at(250))
    batch = random_batch(jax.random.PRNGKey(2))
    target = jnp.linspace(-1.0, 1.0, 8)
    loss, aux = aql.expectile_critic_loss(state.critic_params, state, batch, KEY, cfg, lambda *_: target)
    q = np.asarray(state.critic.apply(state.critic_params, batch.obs, batch.action)[..., 0], np.float64)
    residual = np.asarray(target, np.float64) - q
    by_hand = np.sum(np.mean(2 * np.where(residual < 0, 0.2, 0.8) * residual**2, axis=-1))
    assert float(loss) == pytest.approx(by_hand, rel=1e-5) and float(aux["expectile"]) == pytest.approx(0.8)


def test_aql_refuses_levels_outside_the_unit_interval_and_a_missing_progress():
    with pytest.raises(ConfigError, match=r"expectile_init must be an expectile level in \(0, 1\).*got 1\.2"):
        aql.AQ_SAC.check_config(aql.SACConfig(expectile_init=1.2))
    with pytest.raises(ConfigError, match=r"anneal_fraction must be a finite number > 0, got 0\.0"):
        aql.AQ_TD3.check_config(aql.TD3Config(anneal_fraction=0.0))
    cfg = aql.SACConfig(hidden_sizes=(8,))
    with pytest.raises(ConfigError, match="needs state.progress"):
        aql.AQ_SAC.update(aql.AQ_SAC.init(KEY, SPEC, cfg), random_batch(KEY), KEY, cfg)


@pytest.mark.parametrize("agent, config", [(aql.AQ_SAC, aql.SACConfig), (aql.AQ_TD3, aql.TD3Config)])
def test_aql_passes_the_harness(agent, config):
    check_agent(agent, config(hidden_sizes=(16, 16), batch_size=32), eager=False)


# -------------------------------------------------------------------------------------------------- ARO-DDPG

ARO = aro_ddpg.Config(hidden_sizes=(8,))


def aro_state():
    return aro_ddpg.init(KEY, SPEC, ARO).replace(rho=jnp.float32(0.25))


def test_the_differential_target_has_no_discount_no_noise_and_bootstraps_through_time_limits():
    state, batch = aro_state(), random_batch(jax.random.PRNGKey(4))
    batch = batch.replace(discount=jnp.ones_like(batch.discount))  # gamma = 1: what the default sampler gives
    next_action = state.actor.apply(state.target_actor_params, batch.next_obs)
    next_q = np.asarray(state.critic.apply(state.target_critic_params, batch.next_obs, next_action)[..., 0]).min(0)
    reward, terminated = np.asarray(batch.reward), np.asarray(batch.terminated)
    truncated = np.asarray(batch.truncated)
    target = aro_ddpg.differential_target(state, batch, jax.random.PRNGKey(9), ARO)
    np.testing.assert_allclose(target, reward + (1 - terminated) * next_q, rtol=1e-6)
    assert np.any(truncated & ~terminated)  # rows that only the official code's rule cuts
    code_rule = aro_ddpg.differential_target(state, batch, KEY, ARO.replace(truncation_terminal=True))
    np.testing.assert_allclose(code_rule, reward + (1 - (terminated | truncated)) * next_q, rtol=1e-6)


def test_rho_and_the_critics_regress_on_one_residual_by_hand():
    """L = 1/2 sum_j E[(Q_j + rho - y)^2]: dL/drho = sum_j E[Q_j + rho - y]; Adam's first step moves rho by
    -lr sign(dL/drho); the update reports the new rho."""
    state, batch = aro_state(), random_batch(jax.random.PRNGKey(4))
    y = np.asarray(aro_ddpg.differential_target(state, batch, KEY, ARO), np.float64)
    q = np.asarray(state.critic.apply(state.critic_params, batch.obs, batch.action)[..., 0], np.float64)
    loss, _ = aro_ddpg.differential_critic_loss(state.critic_params, state, batch, KEY, ARO)
    assert float(loss) == pytest.approx(0.5 * np.sum(np.mean((q + 0.25 - y) ** 2, axis=-1)), rel=1e-5)
    grad = jax.grad(lambda rho: aro_ddpg.rho_loss(rho, state, batch, KEY, ARO)[0])(state.rho)
    by_hand = np.sum(np.mean(q + 0.25 - y, axis=-1))
    assert float(grad) == pytest.approx(by_hand, rel=1e-5)
    new, metrics = jax.jit(aro_ddpg.update)(progress_lib.attach(state, progress_at(10)), batch, KEY, ARO)
    assert float(new.rho) == pytest.approx(0.25 - 3e-4 * np.sign(by_hand), rel=1e-4)
    assert float(metrics["rho"]) == float(new.rho)


def test_the_actor_follows_the_smaller_critic():
    state, batch = aro_state(), random_batch(jax.random.PRNGKey(4))
    loss, _ = aro_ddpg.min_q_actor_loss(state.actor_params, state, batch, KEY, ARO)
    q = state.critic.apply(state.critic_params, batch.obs, state.actor.apply(state.actor_params, batch.obs))[..., 0]
    assert float(loss) == pytest.approx(-float(np.mean(np.min(np.asarray(q), axis=0))), rel=1e-6)


def test_exploration_is_an_ornstein_uhlenbeck_process_per_env():
    state = aro_state()
    obs = jax.random.normal(KEY, (3, 3))
    carry = jnp.array([[0.5, -0.5], [0.0, 0.0], [2.0, 1.0]])
    action, noise = aro_ddpg.act(state, obs, jax.random.PRNGKey(2), ARO, False, carry)
    expected = np.asarray(carry) * (1 - 0.15) + 0.2 * np.asarray(jax.random.normal(jax.random.PRNGKey(2), (3, 2)))
    np.testing.assert_allclose(noise, expected, rtol=1e-6)
    mean = np.asarray(state.actor.apply(state.actor_params, obs))
    np.testing.assert_allclose(action, np.clip(mean + expected, -1, 1), rtol=1e-6)
    assert aro_ddpg.init_carry(4, SPEC, ARO).shape == (4, 2)
    greedy, same = aro_ddpg.act(state, obs, KEY, ARO, True, carry)
    np.testing.assert_array_equal(greedy, mean)
    np.testing.assert_array_equal(same, carry)


def test_aro_ddpg_passes_the_harness():
    check_agent(aro_ddpg.AGENT, aro_ddpg.Config(hidden_sizes=(16, 16), batch_size=32), eager=False)
