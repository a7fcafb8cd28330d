"""TQC: the quantile Huber loss by hand, which atoms survive truncation, the actor on all atoms, learning."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from agents import tqc
from jaxrl.loop import LoopConfig
from jaxrl.losses import quantile_huber_loss
from tests.helpers import BATCH, KEY, FixedActor, sampled, train


def test_quantile_huber_loss_by_hand():
    # one critic, one sample, M = 2 atoms (tau = 1/4, 3/4) at 0 and 1; targets 0.5 and 3.
    # atom 0: deltas 0.5, 3.0 -> huber 0.125, 2.5 -> weight 1/4 each
    # atom 1: deltas -0.5, 2.0 -> huber 0.125, 1.5 -> weights |3/4 - 1| = 1/4 and 3/4
    loss = quantile_huber_loss(jnp.array([[[0.0, 1.0]]]), jnp.array([[0.5, 3.0]]))
    np.testing.assert_allclose(loss, (0.25 * 0.125 + 0.25 * 2.5 + 0.25 * 0.125 + 0.75 * 1.5) / 4, rtol=1e-6)


def test_quantile_huber_minimiser_is_the_quantile():
    targets = jnp.linspace(0.0, 99.0, 100)[None, :]  # uniform samples; the tau-quantile of 0..99 is ~ 99 tau
    grid = jnp.linspace(-10.0, 110.0, 1201)
    losses = jax.vmap(lambda q: quantile_huber_loss(jnp.full((1, 1, 1), q), targets))(grid)
    np.testing.assert_allclose(grid[jnp.argmin(losses)], 49.5, atol=0.6)  # M = 1: tau = 1/2, the median


class ConstantAtoms(nn.Module):
    """Critic n outputs fixed atoms for every (s, a): [N, B, M]."""

    atoms: tuple

    @nn.compact
    def __call__(self, obs, action):
        atoms = self.param("atoms", lambda k: jnp.array(self.atoms))
        return jnp.broadcast_to(atoms[:, None, :], (atoms.shape[0], obs.shape[0], atoms.shape[1]))


def make_state(atoms=((0.0, 5.0, 10.0), (1.0, 2.0, 20.0))):
    actor, critic = FixedActor(), ConstantAtoms(atoms)
    actor_params, critic_params = actor.init(KEY, BATCH.obs), critic.init(KEY, BATCH.obs, BATCH.action)
    opt = optax.adam(1e-3)
    return tqc.State(actor_params=actor_params, critic_params=critic_params, target_critic_params=critic_params,
                     log_alpha=jnp.log(0.5), target_entropy=jnp.float32(-1.0), actor_opt_state=opt.init(actor_params),
                     critic_opt_state=opt.init(critic_params), alpha_opt_state=opt.init(jnp.float32(0.0)),
                     actor=actor, critic=critic)


CFG = tqc.Config(num_critics=2, num_quantiles=3, drop_per_critic=1, gamma=0.9)


def test_truncation_keeps_the_smallest_pooled_atoms():
    state = make_state()
    target, keep = tqc.truncated_target_atoms(state, BATCH, KEY, CFG)
    _, log_prob = sampled(KEY, 2)
    pooled = np.array([0.0, 1.0, 2.0, 5.0, 10.0, 20.0])  # sorted; the top d N = 2 are dropped
    expected = np.stack([1.0 + 0.9 * (pooled - 0.5 * log_prob[0]), np.full(6, -1.0)])  # row 1 terminated
    np.testing.assert_allclose(target, expected, rtol=1e-5)
    np.testing.assert_array_equal(keep, [1, 1, 1, 1, 0, 0])
    _, none_dropped = tqc.truncated_target_atoms(state, BATCH, KEY, CFG.replace(drop_per_critic=0))
    np.testing.assert_array_equal(none_dropped, np.ones(6))


def test_masked_quantile_loss_equals_the_loss_on_the_kept_targets_only():
    quantiles = jax.random.normal(jax.random.PRNGKey(0), (2, 3, 4))
    targets = jax.random.normal(jax.random.PRNGKey(1), (3, 6))
    mask = jnp.array([1.0, 1.0, 1.0, 1.0, 0.0, 0.0])
    sliced = lambda q, t: quantile_huber_loss(q, t[:, :4])  # noqa: E731
    masked = lambda q, t: quantile_huber_loss(q, t, target_mask=mask)  # noqa: E731
    np.testing.assert_allclose(masked(quantiles, targets), sliced(quantiles, targets), rtol=1e-6)
    np.testing.assert_allclose(jax.grad(masked)(quantiles, targets), jax.grad(sliced)(quantiles, targets), rtol=1e-5)
    # A traced number of dropped atoms (as a sweep passes it) gives the same loss.
    drop = jax.jit(lambda d: quantile_huber_loss(quantiles, targets, target_mask=(jnp.arange(6) < 6 - d) * 1.0))
    np.testing.assert_allclose(drop(2), sliced(quantiles, targets), rtol=1e-6)


def test_actor_loss_uses_the_mean_of_all_atoms():
    state = make_state()
    loss, _ = tqc.actor_loss(state.actor_params, state, BATCH, KEY, CFG)
    _, log_prob = sampled(KEY, 2)
    np.testing.assert_allclose(loss, np.mean(0.5 * log_prob - 38.0 / 6.0), rtol=1e-5)


def test_update_uses_pre_update_critics_for_the_actor():
    state = make_state()
    new, metrics = jax.jit(tqc.update, static_argnums=3)(state, BATCH, KEY, CFG)
    _, actor_key = jax.random.split(KEY)
    np.testing.assert_allclose(metrics["actor_loss"], tqc.actor_loss(state.actor_params, state, BATCH, actor_key,
                                                                      CFG)[0], rtol=1e-6)
    expected = jax.tree.map(lambda c, t: CFG.tau * c + (1 - CFG.tau) * t, new.critic_params, state.target_critic_params)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), new.target_critic_params, expected)


@pytest.mark.slow
def test_tqc_swings_up_the_pendulum():
    loop = LoopConfig(steps=10_000, num_envs=4, num_eval_envs=10, eval_every=2000, learning_starts=1000,
                      buffer_size=10_000)
    cfg = tqc.Config(actor_hidden_sizes=(64, 64), critic_hidden_sizes=(64, 64), num_critics=2)  # SB3's 2 critics
    _, history = train("toy/Pendulum", loop, cfg, agent=tqc.AGENT)
    assert history[0]["eval/return"].max() < -700
    assert np.all(history[-1]["eval/return"] > -300), [h["eval/return"] for h in history]


def test_quantile_huber_hand_written_gradient_matches_autodiff():
    def reference(quantiles, targets, kappa):  # the loss as plain jnp, differentiated by JAX
        tau = (2.0 * jnp.arange(quantiles.shape[-1]) + 1.0) / (2.0 * quantiles.shape[-1])
        delta = targets[None, :, None, :] - quantiles[..., None]
        huber = jnp.where(jnp.abs(delta) <= kappa, 0.5 * delta**2, kappa * (jnp.abs(delta) - 0.5 * kappa))
        return jnp.mean(jnp.abs(tau[:, None] - (delta < 0)) * huber / kappa)

    quantiles = 2.0 * jax.random.normal(jax.random.PRNGKey(0), (3, 4, 5))
    targets = 2.0 * jax.random.normal(jax.random.PRNGKey(1), (4, 7))
    for kappa in (1.0, 0.5):
        expected = jax.grad(reference, argnums=(0, 1))(quantiles, targets, kappa)
        got = jax.grad(quantile_huber_loss, argnums=(0, 1))(quantiles, targets, kappa)
        for e, g in zip(expected, got, strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(quantile_huber_loss(quantiles, targets), reference(quantiles, targets, 1.0), rtol=1e-6)
