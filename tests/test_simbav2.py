"""SimbaV2: unit-norm kernels after many updates, features on the sphere, the Scaler's decoupling, the C51
projection by hand, the return-statistics reward scaler, float32 statistics against float64, clipped double-Q
selection, and learning."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents import simbav2
from jaxrl.distributional import categorical_projection
from jaxrl.hyperspherical import (
    HyperEmbedder,
    HyperEncoder,
    HyperLERPBlock,
    Scaler,
    hyper_kernel_norms,
    project_hyper_kernels,
)
from jaxrl.loop import LoopConfig, default_loop_config
from jaxrl.normalization import init_return_stats, reward_scale, update_return_stats
from jaxrl.types import Batch, EnvSpec
from tests.helpers import train

SPEC = EnvSpec(obs_size=5, action_size=2, decisions_per_episode=100, can_terminate=False)
SMALL = simbav2.Config(actor_hidden_dim=16, critic_hidden_dim=32, batch_size=32, lr_init=3e-3, lr_final=3e-3)


def random_batch(key, n=32, spec=SPEC):
    k = jax.random.split(key, 4)
    return Batch(obs=jax.random.normal(k[0], (n, spec.obs_size)),
                 action=jax.random.uniform(k[1], (n, spec.action_size), minval=-1, maxval=1),
                 reward=jax.random.normal(k[2], (n,)), next_obs=jax.random.normal(k[3], (n, spec.obs_size)),
                 terminated=jnp.zeros((n,), bool), truncated=jnp.zeros((n,), bool),
                 discount=jnp.full((n,), simbav2.Config().gamma))


def assert_unit_columns(params):
    norms = hyper_kernel_norms(params)
    assert len(norms) > 0
    for norm in norms:
        np.testing.assert_allclose(norm, 1.0, atol=1e-5)


def test_every_kernel_stays_unit_norm_after_many_updates():
    for num_critics in (1, 2):
        cfg = SMALL.replace(num_critics=num_critics)
        state = simbav2.init(jax.random.PRNGKey(0), SPEC, cfg)
        assert_unit_columns(state.actor_params)
        assert_unit_columns(state.critic_params)
        step = jax.jit(simbav2.update, static_argnums=3)
        for i in range(50):
            state, metrics = step(state, random_batch(jax.random.PRNGKey(i)), jax.random.PRNGKey(100 + i), cfg)
        assert np.isfinite(float(metrics["critic_loss"]))
        assert_unit_columns(state.actor_params)  # 16 HyperDense kernels of the actor, 2 x 18 of the critics
        assert_unit_columns(state.critic_params)
        # Without the projection the same updates leave the sphere: the assertion above can fail.
        raw = jax.tree.map(lambda x: x * 1.1, state.critic_params)
        assert not all(np.allclose(n, 1.0, atol=1e-3) for n in hyper_kernel_norms(raw))


def test_projection_normalises_each_output_column_and_keeps_ensemble_axes():
    params = {"hyper_dense": {"kernel": jnp.array([[3.0, 0.0], [4.0, 2.0]])},
              "ens": {"hyper_dense": {"kernel": jnp.ones((2, 4, 3))}}, "bias": jnp.array([5.0, 5.0])}
    out = project_hyper_kernels(params)
    np.testing.assert_allclose(out["hyper_dense"]["kernel"], [[0.6, 0.0], [0.8, 1.0]], rtol=1e-6)
    np.testing.assert_allclose(out["ens"]["hyper_dense"]["kernel"], np.full((2, 4, 3), 0.5), rtol=1e-6)
    np.testing.assert_array_equal(out["bias"], [5.0, 5.0])  # biases and scalers untouched


def test_features_lie_on_the_unit_sphere():
    x = jax.random.normal(jax.random.PRNGKey(1), (8, 5)) * 10.0
    for module in (HyperEmbedder(32), HyperEncoder(32, num_blocks=3)):
        params = module.init(jax.random.PRNGKey(0), x)
        np.testing.assert_allclose(jnp.linalg.norm(module.apply(params, x), axis=-1), 1.0, rtol=1e-5)
    block = HyperLERPBlock(32, num_blocks=2)
    h = x[:, :1] * jnp.ones((8, 32))
    h = h / jnp.linalg.norm(h, axis=-1, keepdims=True)
    np.testing.assert_allclose(jnp.linalg.norm(block.apply(block.init(jax.random.PRNGKey(0), h), h), axis=-1), 1.0,
                               rtol=1e-5)


def test_scaler_starts_at_init_while_its_parameter_lives_at_scale():
    scaler = Scaler(3, init_value=0.2, scale=0.05)
    params = scaler.init(jax.random.PRNGKey(0), jnp.ones(3))
    np.testing.assert_allclose(params["params"]["scaler"], [0.05, 0.05, 0.05])
    np.testing.assert_allclose(scaler.apply(params, jnp.array([1.0, 2.0, -1.0])), [0.2, 0.4, -0.2], rtol=1e-6)


SUPPORT = jnp.linspace(-5.0, 5.0, 101)  # spacing 0.1


def test_projection_between_two_atoms_splits_the_mass():
    # one atom at 0.25: bins 0.2 (index 52) and 0.3 (index 53), each at distance 0.05 -> half each.
    m = categorical_projection(jnp.array([[0.25]]), jnp.array([[1.0]]), SUPPORT)
    np.testing.assert_allclose(m[0, 52], 0.5, atol=1e-5)
    np.testing.assert_allclose(m[0, 53], 0.5, atol=1e-5)
    # 0.27: 0.3 of the mass to 0.2, 0.7 to 0.3.
    m = categorical_projection(jnp.array([[0.27]]), jnp.array([[1.0]]), SUPPORT)
    np.testing.assert_allclose(m[0, 52:54], [0.3, 0.7], atol=1e-5)
    np.testing.assert_allclose(jnp.sum(m), 1.0, atol=1e-6)


def test_projection_on_an_atom_and_at_the_edges():
    atoms = jnp.array([[1.0, -7.0, 9.0, 5.0]])  # on bin 60; below the support; above it; exactly the top edge
    probs = jnp.array([[0.1, 0.2, 0.3, 0.4]])
    m = np.asarray(categorical_projection(atoms, probs, SUPPORT))[0]
    np.testing.assert_allclose(m[60], 0.1, atol=1e-6)
    np.testing.assert_allclose(m[0], 0.2, atol=1e-6)  # clipped to -5: all mass on the first bin
    np.testing.assert_allclose(m[100], 0.7, atol=1e-6)  # 9 clipped to 5, plus the atom at exactly 5
    assert np.count_nonzero(m > 1e-7) == 3


def test_projection_conserves_mass_and_the_mean_inside_the_support():
    key1, key2 = jax.random.split(jax.random.PRNGKey(3))
    atoms = jax.random.uniform(key1, (64, 101), minval=-4.9, maxval=4.9)
    probs = jax.nn.softmax(jax.random.normal(key2, (64, 101)), axis=-1)
    m = categorical_projection(atoms, probs, SUPPORT)
    np.testing.assert_allclose(jnp.sum(m, axis=-1), 1.0, atol=1e-5)
    assert float(jnp.min(m)) >= 0.0
    # Linear interpolation between neighbours preserves the expected value exactly (inside the support).
    np.testing.assert_allclose(m @ SUPPORT, jnp.sum(atoms * probs, axis=-1), atol=1e-4)


def test_return_statistics_by_hand_with_episode_resets():
    returns = init_return_stats(2)
    np.testing.assert_allclose(reward_scale(returns, 5.0), 1.0)  # before any data: unit scale
    steps = [([1.0, 2.0], [False, False]), ([1.0, -4.0], [False, True]), ([0.0, 1.0], [True, False])]
    for reward, done in steps:
        returns = update_return_stats(returns, jnp.array(reward), jnp.array(done), 0.5)
    # G per env: [1, 2] -> [0.5*1 + 1, -4 (done: restarts)] -> [0 (done), 0.5*(-4) + 1]
    np.testing.assert_allclose(returns.discounted_return, [0.0, -1.0])
    seen = np.array([1.0, 2.0, 1.5, -4.0, 0.0, -1.0])
    np.testing.assert_allclose(returns.stats.mean[0], seen.mean(), rtol=1e-6)
    np.testing.assert_allclose(returns.stats.var[0], seen.var(), rtol=1e-6)
    np.testing.assert_allclose(returns.max_abs_return, 4.0)
    np.testing.assert_allclose(reward_scale(returns, 5.0), 1 / math.sqrt(seen.var() + 1e-8), rtol=1e-6)
    np.testing.assert_allclose(reward_scale(returns, 1.0), 1 / 4.0, rtol=1e-6)  # max|G| / G_max dominates


def test_clipped_double_q_picks_the_distribution_with_the_smaller_expected_value():
    cfg = SMALL.replace(num_critics=2)
    state = simbav2.init(jax.random.PRNGKey(0), SPEC, cfg)
    # Make target critic 1 identical to critic 0 but shift its head bias to put all mass on the top bin.
    biased = jax.tree_util.tree_map_with_path(
        lambda path, x: x.at[1, -1].add(50.0) if "bias" in jax.tree_util.keystr(path) and x.shape[-1] == 101
        else x, state.target_critic_params)
    state = state.replace(target_critic_params=biased, log_alpha=jnp.log(jnp.float32(1e-6)))
    batch = random_batch(jax.random.PRNGKey(1)).replace(reward=jnp.zeros(32))
    target = simbav2.target_distribution(state, batch, jax.random.PRNGKey(2), cfg)
    only_first = simbav2.target_distribution(
        state.replace(target_critic_params=jax.tree.map(lambda x: x.at[1].set(x[0]), biased)), batch,
        jax.random.PRNGKey(2), cfg)
    np.testing.assert_allclose(target, only_first, atol=1e-6)  # critic 0 (smaller mean) supplied the target


def test_loop_defaults_turn_on_both_normalisers():
    loop = default_loop_config(simbav2.AGENT)
    assert loop.normalize_obs and loop.scale_rewards


@pytest.mark.slow
def test_simbav2_swings_up_the_pendulum():
    loop = LoopConfig(steps=10_000, num_envs=4, num_eval_envs=10, eval_every=2000, learning_starts=1000,
                      buffer_size=10_000, normalize_obs=True, scale_rewards=True)
    cfg = simbav2.Config(actor_hidden_dim=64, critic_hidden_dim=128, critic_num_blocks=1, lr_init=3e-4,
                         lr_final=3e-4)
    _, history = train("toy/Pendulum", loop, cfg, agent=simbav2.AGENT)
    assert history[0]["eval/return"].max() < -700
    assert np.all(history[-1]["eval/return"] > -300), [h["eval/return"] for h in history]


@pytest.mark.timeout(180)
def test_a_multi_seed_run_initialises_and_each_seed_equals_its_own_init():
    # On XLA:CPU the vmapped init of these critics (orthogonal kernels, 2 blocks) never finished: the engine now
    # initialises seed after seed. Seed k of a 3-seed state must be exactly seed + k's own init.
    import envs
    from jaxrl.loop import make_train

    loop = LoopConfig(steps=400, num_envs=2, num_eval_envs=2, eval_every=200, learning_starts=100, buffer_size=1000)
    trainer = make_train(simbav2.AGENT, envs.make("toy/Pendulum", 2), envs.make("toy/Pendulum", 2), loop, SMALL)
    together = jax.block_until_ready(trainer.init(0, 3).agent)
    alone = trainer.init(1, 1).agent
    for a, b in zip(jax.tree.leaves(together), jax.tree.leaves(alone), strict=True):
        np.testing.assert_array_equal(a[1], b[0])
