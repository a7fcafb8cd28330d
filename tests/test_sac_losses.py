"""SAC's losses on a tiny batch against values computed by hand (numpy), with networks simple enough to
evaluate on paper: a state-independent Gaussian actor and linear critics."""
import jax
import jax.numpy as jnp
import numpy as np

from agents import sac
from tests.helpers import BATCH, CFG, KEY, make_state, sampled


def test_critic_loss_by_hand_bootstraps_through_truncation_not_termination():
    state = make_state(target_scale=0.5)  # target critics: w = [0.5, 1], v = [0.25, -0.5]
    loss, info = sac.critic_loss(state.critic_params, state, BATCH, KEY, CFG)
    a2, logp2 = sampled(KEY, 2)
    s2 = np.array([3.0, -1.0])
    next_q = np.stack([0.5 * s2 + 0.25 * a2, 1.0 * s2 - 0.5 * a2])
    next_v = next_q.min(0) - 0.5 * logp2
    # transition 0 is truncated: it bootstraps; transition 1 is terminated: it does not.
    y = np.array([1.0 + 0.9 * next_v[0], -1.0])
    q = np.stack([np.array([1.0, 2.0]) * 1.0 + np.array([0.5, -0.5]) * 0.5,
                  np.array([1.0, 2.0]) * 2.0 + np.array([0.5, -0.5]) * -1.0])
    expected = ((q - y) ** 2).mean(axis=1).sum()
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
    np.testing.assert_allclose(info["target_mean"], y.mean(), rtol=1e-5)


def test_critic_loss_gradient_flows_only_into_online_critics():
    state = make_state(target_scale=0.5)
    grads = jax.grad(lambda p: sac.critic_loss(p, state, BATCH, KEY, CFG)[0])(state.critic_params)
    a2, logp2 = sampled(KEY, 2)
    s2 = np.array([3.0, -1.0])
    next_v = np.stack([0.5 * s2 + 0.25 * a2, s2 - 0.5 * a2]).min(0) - 0.5 * logp2
    y = np.array([1.0 + 0.9 * next_v[0], -1.0])
    s, a = np.array([1.0, 2.0]), np.array([0.5, -0.5])
    q0 = 1.0 * s + 0.5 * a
    # d/dw_0 mean((w_0 s + v_0 a - y)^2) = mean(2 (q_0 - y) s): the target is a constant.
    np.testing.assert_allclose(grads["params"]["w"][0], np.mean(2 * (q0 - y) * s), rtol=1e-5)


def test_actor_loss_by_hand():
    state = make_state()
    loss, info = sac.actor_loss(state.actor_params, state, BATCH, KEY, CFG)
    a, logp = sampled(KEY, 2)
    s = np.array([1.0, 2.0])
    q = np.stack([1.0 * s + 0.5 * a, 2.0 * s - 1.0 * a]).min(0)
    np.testing.assert_allclose(loss, np.mean(0.5 * logp - q), rtol=1e-5)
    np.testing.assert_allclose(info["log_prob"], logp, rtol=1e-5)
    np.testing.assert_allclose(info["entropy"], -logp.mean(), rtol=1e-5)


def test_alpha_loss_value_and_gradient_direction():
    state = make_state()
    log_prob = jnp.array([0.3, -2.3])  # mean -1.0 ; target entropy -1 -> mean(log pi + H) = -2.0
    loss, info = sac.alpha_loss(state.log_alpha, state, log_prob, CFG)
    np.testing.assert_allclose(loss, -0.5 * np.mean(np.array([0.3, -2.3]) - 1.0), rtol=1e-6)
    grad = jax.grad(lambda la: sac.alpha_loss(la, state, log_prob, CFG)[0])(state.log_alpha)
    # entropy (1.0) above the target (-1.0): alpha must shrink, so the gradient on log alpha is positive.
    np.testing.assert_allclose(grad, 0.5 * 2.0, rtol=1e-6)
    assert grad > 0


def test_update_order_and_polyak():
    state = make_state(target_scale=0.5)
    new, metrics = sac.update(state, BATCH, KEY, CFG)
    # Polyak of the *updated* critics: target' = tau * critic' + (1 - tau) * target.
    expected = jax.tree.map(lambda c, t: 0.1 * c + 0.9 * t, new.critic_params, state.target_critic_params)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), new.target_critic_params, expected)
    # The actor loss is evaluated with the updated critics (CleanRL order: critic -> actor -> alpha).
    critic_key, actor_key = jax.random.split(KEY)
    loss_after_critic = sac.actor_loss(state.actor_params, state.replace(critic_params=new.critic_params), BATCH,
                                       actor_key, CFG)[0]
    np.testing.assert_allclose(metrics["actor_loss"], loss_after_critic, rtol=1e-6)
    assert set(metrics) >= {"critic_loss", "actor_loss", "alpha_loss", "alpha", "entropy", "q_mean"}
    assert "log_prob" not in metrics


def test_hyperparameters_can_be_traced_and_vmapped():
    state = make_state()
    lrs = jnp.array([1e-4, 1e-3, 1e-2])

    def run(lr):
        return sac.update(state, BATCH, KEY, CFG.replace(critic_lr=lr, gamma=lr * 0 + 0.9))[0].critic_params

    params = jax.jit(jax.vmap(run))(lrs)
    moved = jnp.abs(params["params"]["w"] - state.critic_params["params"]["w"][None]).max(axis=1)
    # Adam's first step moves each weight by ~lr: the three members differ by their learning rate.
    np.testing.assert_allclose(moved, lrs, rtol=1e-2)


def test_target_update_period_moves_the_targets_on_the_first_and_every_pth_update_after():
    """pytorch_sac's critic_target_update_frequency 2 (``step % 2 == 0`` from its first update at an even step):
    the targets take their Polyak step on updates 1, 3, 5, ... and keep their values in between."""
    from jaxrl.types import EnvSpec

    cfg = sac.Config(hidden_sizes=(8,), batch_size=2, target_update_period=2, tau=0.5)
    state = sac.init(KEY, EnvSpec(obs_size=1, action_size=1, decisions_per_episode=10), cfg)
    update = jax.jit(sac.update)
    moved = []
    for k in range(5):
        new, _ = update(state, BATCH, jax.random.PRNGKey(k), cfg)
        old_target, new_target = (jax.tree.leaves(s.target_critic_params)[0] for s in (state, new))
        moved.append(not np.array_equal(old_target, new_target))
        if moved[-1]:  # the Polyak step from the critics as they are after this update's critic step
            online = jax.tree.leaves(new.critic_params)[0]
            np.testing.assert_allclose(new_target, 0.5 * online + 0.5 * old_target, rtol=1e-6)
        state = new
    assert moved == [True, False, True, False, True]
    assert int(state.num_updates) == 5
