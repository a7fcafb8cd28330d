"""The founding papers' ideas as plug-ins (experiments/plugins/): each new term by hand, the schedule at given
progress, the base agent recovered where the idea switches off, and the harness."""
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents import dsac_t, sac, td3
from experiments.plugins import aql, aro_ddpg, bl_sac, dr_sac
from jaxrl import ConfigError
from jaxrl import progress as progress_lib
from jaxrl.testing import check_agent
from jaxrl.types import EnvSpec
from tests.helpers import assert_restored_checkpoint_continues_bitwise
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


# ---------------------------------------------------------------------------------------------------- BL-SAC

BL = bl_sac.Config(hidden_sizes=(8,), bl_sigma=0.2, bl_samples=3)


def test_the_band_limited_target_averages_the_smaller_target_critic_over_clipped_gaussian_actions_by_hand():
    state = bl_sac.AGENT.init(KEY, SPEC, BL)
    batch = random_batch(jax.random.PRNGKey(5))
    key = jax.random.PRNGKey(11)
    policy_key, action_key, _ = jax.random.split(key, 3)
    mean, log_std = state.actor.apply(state.actor_params, batch.next_obs)
    from jaxrl.networks import sample_tanh_gaussian

    action, log_prob = sample_tanh_gaussian(policy_key, mean, log_std)
    eps = 0.2 * np.asarray(jax.random.normal(action_key, (3, 8, 2)))
    smoothed = np.mean([np.min(np.asarray(state.critic.apply(state.target_critic_params, batch.next_obs, jnp.asarray(
        np.clip(np.asarray(action) + eps[k], -1, 1))))[..., 0], axis=0) for k in range(3)], axis=0)
    alpha = np.exp(float(state.log_alpha))
    not_done = 1 - np.asarray(batch.terminated, np.float64)
    by_hand = np.asarray(batch.reward) + np.asarray(batch.discount) * not_done * (smoothed - alpha * np.asarray(
        log_prob))
    np.testing.assert_allclose(bl_sac.band_limited_target(state, batch, key, BL), by_hand, rtol=1e-5, atol=1e-6)


def test_with_no_filter_width_the_band_limited_target_is_sacs():
    state, batch, key = bl_sac.AGENT.init(KEY, SPEC, BL), random_batch(jax.random.PRNGKey(5)), jax.random.PRNGKey(3)
    plain = sac.soft_td_target(state, batch, jax.random.split(key, 3)[0], BL)
    for cfg in (BL.replace(bl_sigma=0.0), BL.replace(bl_sigma=0.0, bl_on_state=True)):
        np.testing.assert_allclose(bl_sac.band_limited_target(state, batch, key, cfg), plain, rtol=1e-6, atol=1e-6)


def test_the_filters_draws_are_clipped_when_asked():
    draws = bl_sac.filter_draws(KEY, (1000, 2), BL.replace(bl_sigma=1.0, bl_noise_clip=0.3))
    assert draws.shape == (3, 1000, 2) and float(jnp.max(jnp.abs(draws))) == pytest.approx(0.3)
    with pytest.raises(ConfigError, match=r"bl_noise_clip must be a finite number > 0, got -0\.1"):
        bl_sac.AGENT.check_config(BL.replace(bl_noise_clip=-0.1))


def test_bl_sac_passes_the_harness():
    check_agent(bl_sac.AGENT, bl_sac.Config(hidden_sizes=(16, 16), batch_size=32, bl_on_state=True), eager=False)


# ---------------------------------------------------------------------------------------------------- DR-SAC

DR = dr_sac.Config(hidden_sizes=(8,), model_samples=6, delta=0.2)


def test_the_robust_value_by_hand_and_its_limits_in_beta():
    v = jnp.array([[1.0, 3.0]])
    # -1 * (log(e^-1 + e^-3) - log 2) - 0.1 = 1 - log(1 + e^-2) + log 2 - 0.1
    by_hand = 1.0 - np.log1p(np.exp(-2.0)) + np.log(2.0) - 0.1
    assert float(dr_sac.robust_value(v, jnp.array([1.0]), 0.1)[0]) == pytest.approx(by_hand, rel=1e-6)
    assert float(dr_sac.robust_value(v, jnp.array([1e4]), 0.0)[0]) == pytest.approx(2.0, abs=1e-3)  # the mean
    assert float(dr_sac.robust_value(v, jnp.array([1e-3]), 0.0)[0]) == pytest.approx(1.0, abs=1e-2)  # the minimum


@pytest.mark.parametrize("delta", [0.02, 0.1, 0.3])
def test_the_dual_maximum_is_the_worst_mean_over_the_kl_ball(delta):
    """Strong duality on a two-point nominal model (values 1 and 3, probability 1/2 each): the largest Vrob over
    beta equals min_p p + 3 (1 - p) subject to KL((p, 1 - p) || (1/2, 1/2)) <= delta, solved by bisection."""
    low, high = 0.5, 1.0 - 1e-12
    kl = lambda p: p * np.log(2 * p) + (1 - p) * np.log(2 * (1 - p))  # noqa: E731
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if kl(mid) < delta else (low, mid)
    primal = low * 1.0 + (1 - low) * 3.0
    betas = jnp.exp(jnp.linspace(-6.0, 6.0, 20001))
    dual = jnp.max(dr_sac.robust_value(jnp.tile(jnp.array([1.0, 3.0]), (betas.size, 1)), betas, delta))
    assert float(dual) == pytest.approx(primal, abs=1e-4)


def dr_state():
    return progress_lib.attach(dr_sac.AGENT.init(KEY, SPEC, DR), progress_at(10))


def test_the_value_and_model_losses_by_hand():
    state, batch, key = dr_state(), random_batch(jax.random.PRNGKey(6)), jax.random.PRNGKey(8)
    action, log_prob = sampled_action(state, batch.obs, key)
    q = np.min(np.asarray(state.critic.apply(state.target_critic_params, batch.obs, action)[..., 0]), axis=0)
    v = np.asarray(state.value.apply(state.value_params, batch.obs))
    target = q - np.exp(float(state.log_alpha)) * np.asarray(log_prob)
    loss, _ = dr_sac.value_loss(state.value_params, state, batch, key, DR)
    assert float(loss) == pytest.approx(np.mean((v - target) ** 2), rel=1e-5)

    reconstruction, mu, logvar = (np.asarray(x, np.float64) for x in state.model.apply(
        state.model_params, batch.obs, batch.action, batch.next_obs, key))
    kl = -0.5 * np.mean(1 + logvar - mu**2 - np.exp(logvar))
    loss, aux = dr_sac.model_loss(state.model_params, state, batch, key, DR)
    assert float(loss) == pytest.approx(np.mean((reconstruction - np.asarray(batch.next_obs)) ** 2) + kl, rel=1e-5)
    assert float(aux["model_kl"]) == pytest.approx(kl, rel=1e-5) and kl > 0


def sampled_action(state, obs, key):
    from jaxrl.networks import sample_tanh_gaussian

    return sample_tanh_gaussian(key, *state.actor.apply(state.actor_params, obs))


def test_one_update_moves_the_dual_five_times_and_the_critics_regress_on_the_robust_target():
    state, batch, key = dr_state(), random_batch(jax.random.PRNGKey(6)), jax.random.PRNGKey(9)
    new, metrics = jax.jit(dr_sac.update)(state, batch, key, DR)
    robust_key, sac_key = jax.random.split(key)
    moved, target, _ = dr_sac.robust_step(state, batch, robust_key, DR)
    # Adam's step count: dual_steps per update; the model and V one each.
    assert int(new.dual_opt_state[0].count) == 5 and int(new.model_opt_state[0].count) == 1
    assert int(new.value_opt_state[0].count) == 1
    next_values = dr_sac.nominal_next_values(moved, batch, jax.random.split(robust_key, 3)[2], DR)
    assert next_values.shape == (8, 6)
    beta = moved.dual.apply(moved.dual_params, batch.obs, batch.action)
    vrob = np.asarray(dr_sac.robust_value(next_values, beta, 0.2))
    not_done = 1 - np.asarray(batch.terminated, np.float64)
    np.testing.assert_allclose(target, np.asarray(batch.reward) + np.asarray(batch.discount) * not_done * vrob,
                               rtol=1e-5, atol=1e-6)
    assert np.all(vrob <= np.asarray(next_values).mean(-1) + 1e-6)  # robust: never above the nominal mean
    q = np.asarray(state.critic.apply(state.critic_params, batch.obs, batch.action)[..., 0], np.float64)
    assert float(metrics["critic_loss"]) == pytest.approx(np.sum(np.mean((q - np.asarray(target)) ** 2, -1)), rel=1e-5)
    # the value network's target moves by Polyak after its step
    expected = jax.tree.map(lambda p, t: 0.005 * p + 0.995 * t, new.value_params, state.target_value_params)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), new.target_value_params, expected)


def test_dr_sac_temperature_steps_on_the_codes_log_alpha_loss():
    """The code's ``sac.py`` (041e839): alpha_loss = -(log_alpha * (log_pi_a + target_entropy).detach()).mean().
    At alpha = 0.25 its value and its gradient -mean(log pi + H) differ from SAC's alpha form (-alpha * ...) by the
    factor alpha; log pi is the actor step's own sample (its key), recomputed here, the reference in float64."""
    cfg = DR.replace(init_alpha=0.25)
    assert cfg.log_alpha_loss  # the default
    state = progress_lib.attach(dr_sac.AGENT.init(KEY, SPEC, cfg), progress_at(10))
    batch, key = random_batch(jax.random.PRNGKey(6)), jax.random.PRNGKey(9)
    new, metrics = jax.jit(dr_sac.update)(state, batch, key, cfg)
    actor_key = jax.random.split(jax.random.split(key)[1])[1]  # update: (robust, sac); SAC's update: (critic, actor)
    _, log_prob = sampled_action(state, batch.obs, actor_key)
    log_alpha, target_entropy = np.log(0.25), -2.0  # -|A|
    surplus = np.mean(np.asarray(log_prob, np.float64) + target_entropy)  # mean(log pi + H), a constant
    assert float(state.log_alpha) == pytest.approx(log_alpha, rel=1e-6)
    assert float(metrics["alpha_loss"]) == pytest.approx(-log_alpha * surplus, rel=1e-4)
    assert float(metrics["grad_norm/alpha"]) == pytest.approx(abs(surplus), rel=1e-4)  # d/d log alpha, no alpha
    assert float(metrics["alpha"]) == pytest.approx(0.25, rel=1e-6)  # the alpha the step started from
    # Adam's first step: lr against the gradient's sign (log alpha rises when the entropy is below the target)
    assert float(new.log_alpha) - log_alpha == pytest.approx(-3e-4 * np.sign(-surplus), rel=1e-3)
    # log_alpha_loss=False (runs saved before it existed): SAC's alpha form, alpha times the value and gradient
    _, before = jax.jit(dr_sac.update)(state, batch, key, cfg.replace(log_alpha_loss=False))
    assert float(before["alpha_loss"]) == pytest.approx(-0.25 * surplus, rel=1e-4)
    assert float(before["grad_norm/alpha"]) == pytest.approx(0.25 * abs(surplus), rel=1e-4)


def test_dr_sac_encoder_has_no_activation_after_its_last_hidden_layer():
    """The code's MLPTransitionVAE (041e839): encoder = build_net([2S + A] + hidden, nn.ReLU, nn.Identity), then
    e_mu and e_logvar (Linear). Hand-set weights, x = (s, a, s') = (1, 2, 3), hidden (2, 2), latent 1:
    layer 0: (1 + 3, 2 - 3) = (4, -1) -> ReLU (4, 0); layer 1: (4 + 0.5, -4) and no ReLU (a ReLU would give (4.5, 0));
    mu = 4.5 - 4 = 0.5, logvar = -4 + 0.1 = -3.9 (with the ReLU: 4.5 and 0.1)."""
    model = dr_sac.TransitionVAE((2, 2), obs_size=1, latent_size=1)
    s, a, s_next = jnp.array([[1.0]]), jnp.array([[2.0]]), jnp.array([[3.0]])
    params = model.init(KEY, s, a, s_next, KEY)
    encoder = params["params"]["encoder"]
    assert sorted(encoder) == ["Dense_0", "Dense_1", "Dense_2"]  # two hidden layers, then (mu, logvar)
    hand = {"Dense_0": ([[1.0, 0.0], [0.0, 1.0], [1.0, -1.0]], [0.0, 0.0]),
            "Dense_1": ([[1.0, -1.0], [0.0, 0.0]], [0.5, 0.0]),
            "Dense_2": ([[1.0, 0.0], [1.0, 1.0]], [0.0, 0.1])}
    encoder = {name: {"kernel": jnp.array(w), "bias": jnp.array(b)} for name, (w, b) in hand.items()}
    params = {"params": {**params["params"], "encoder": encoder}}
    _, mu, logvar = model.apply(params, s, a, s_next, KEY)
    assert float(mu[0, 0]) == pytest.approx(0.5, rel=1e-6)
    assert float(logvar[0, 0]) == pytest.approx(-3.9, rel=1e-6)
    # the agent builds it so by default; encoder_last_relu=True (runs saved before it existed) keeps the ReLU
    assert not DR.encoder_last_relu and not dr_state().model.encoder_last_relu
    relu = dr_sac.TransitionVAE((2, 2), obs_size=1, latent_size=1, encoder_last_relu=True)
    _, mu, logvar = relu.apply(params, s, a, s_next, KEY)
    assert (float(mu[0, 0]), float(logvar[0, 0])) == pytest.approx((4.5, 0.1), rel=1e-6)


def test_dr_sac_refuses_a_negative_radius_and_n_step_targets():
    with pytest.raises(ConfigError, match=r"delta must be a finite number >= 0, got -0\.1"):
        dr_sac.AGENT.check_config(DR.replace(delta=-0.1))
    with pytest.raises(ConfigError, match="n_step must be 1"):
        dr_sac.AGENT.check_config(DR.replace(n_step=3))


def test_dr_sac_passes_the_harness():
    check_agent(dr_sac.AGENT, dr_sac.Config(hidden_sizes=(16, 16), batch_size=32, model_samples=4), eager=False)


# ------------------------------------------------------------------------------- every plug-in: train, resume

TINY = {"hidden_sizes": (16,), "batch_size": 16}
PAPER_PLUGINS = {"aq_sac": (aql.AQ_SAC, TINY), "aq_td3": (aql.AQ_TD3, TINY), "aro_ddpg": (aro_ddpg.AGENT, TINY),
                 "dr_sac": (dr_sac.AGENT, {**TINY, "model_samples": 4}), "bl_sac": (bl_sac.AGENT, TINY),
                 "dsac_v1": (dsac_t.AGENT, {**dict.fromkeys(dsac_t.REFINEMENTS, False), "batch_size": 16,
                                            "actor_hidden_sizes": (16,), "critic_hidden_sizes": (16,)})}


@pytest.mark.parametrize("name", sorted(PAPER_PLUGINS))
def test_each_paper_plugin_trains_and_its_restored_checkpoint_continues_bitwise(name, tmp_path):
    """Two seeds through the compiled loop on toy/Pendulum: finite losses, and a checkpoint written after the first
    chunk and restored continues exactly as the state that was never saved (every leaf of every seed, the plug-ins'
    own state included: AQ-L's progress-driven level, rho, the OU noise carry, the VAE, the dual, V)."""
    import envs
    from jaxrl.loop import LoopConfig, make_train

    agent, fields = PAPER_PLUGINS[name]
    loop = LoopConfig(steps=400, num_envs=2, num_eval_envs=2, eval_every=200, learning_starts=100, buffer_size=1000)
    cfg = agent.Config(**fields)
    trainer = make_train(agent, envs.make("toy/Pendulum", 2), envs.make("toy/Pendulum", 2), loop, cfg)
    state, metrics = trainer.run_chunk(trainer.init(0, 2))
    metrics = jax.device_get(metrics)  # the engine's own check: the first non-finite update per metric, -1 if none
    assert metrics["updates"] > 0 and all(np.all(v == -1) for v in metrics["nonfinite_step"].values())
    assert_restored_checkpoint_continues_bitwise(trainer, state, tmp_path)


def test_bl_sacs_inferred_fields_say_so_in_help(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    shown = cli("train", "--agent", "experiments.plugins.bl_sac:AGENT", "--help").stdout
    lines = [line for line in shown.splitlines() if "(inferred)" in line]
    assert len(lines) == 4 and "bl-sigma" in lines[0] and "bl-samples" in lines[1], shown


def test_the_comparison_sweep_files_plan_as_committed(cli, tmp_path, monkeypatch):
    """Every sweep file behind the comparison table (docs/plugins/papers.md), as a user types it from the repository
    root (relative path, ``module:ATTR`` agents, DSAC-v1's switches in [agent_config], DR-SAC's [grid] over delta),
    plans its programs without an error: 3 members each, 6 for DR-SAC's two radii."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    monkeypatch.chdir(repo)
    names = sorted(n for n in os.listdir("bench/results") if n.endswith(".toml")
                   and n.startswith(("issue33_", "issue34_", "aql_swingup_")))
    planned = {}
    for name in names:
        result = cli("sweep", f"bench/results/{name}", "--out", str(tmp_path / name), "--dry-run")
        assert result.returncode == 0, f"{name}: {result.stderr}"
        planned[name] = int(result.stdout.split(" member(s)")[0].split()[-1])
    assert len(planned) == 15 and planned["issue33_pendulum_dr_sac.toml"] == 6
    assert all(n == 3 for name, n in planned.items() if name != "issue33_pendulum_dr_sac.toml")


def test_the_docs_comparison_table_is_what_the_committed_results_print(repo_root):
    """``python bench/plugin_table.py --markdown``, as docs/plugins/papers.md says to type it, prints that page's
    table from the committed results (NAME.json, or a bare NAME.csv): a re-measured file or an edited row cannot drift
    apart from the other."""
    import subprocess
    import sys

    printed = subprocess.run([sys.executable, "bench/plugin_table.py", "--markdown"], cwd=repo_root,
                             capture_output=True, text=True, check=True).stdout
    assert "not measured" not in printed and printed.count("\n") == 20, printed
    with open(os.path.join(repo_root, "docs", "plugins", "papers.md")) as f:
        assert printed in f.read()
