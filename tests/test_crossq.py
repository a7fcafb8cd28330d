"""CrossQ and what it stands on: Batch Renormalization by hand, the training / inference passes of
``jaxrl.networks.forward``, statistics written back by ``jaxrl.optim.gradient_step``, CrossQ's joint-pass losses
against a re-derivation, its bookkeeping (no target network, the delayed actor) and a learning test."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents import crossq
from jaxrl.networks import BatchRenorm, CriticEnsemble, forward
from jaxrl.optim import NETWORK_STATE, gradient_step
from jaxrl.types import Batch, EnvSpec

X = jnp.array([[0.0], [2.0]])  # one feature over a batch of two: mu_B = 1, biased var_B = 1


def renorm(warmup_steps=100_000, mean=0.0, var=1.0, steps=0):
    module = BatchRenorm(warmup_steps=warmup_steps)
    variables = module.init(jax.random.key(0), X)
    variables["batch_stats"] = {"mean": jnp.array([mean]), "var": jnp.array([var]),
                                "steps": jnp.asarray(steps, jnp.int32)}
    return module, variables


def test_batch_renorm_during_warm_up_is_batch_norm_and_moves_the_running_statistics():
    module, variables = renorm(mean=-10.0, var=0.009)  # running statistics far off: ignored during warm-up
    y, new = forward(module, variables, X, train=True)
    np.testing.assert_allclose(y[:, 0], [-1 / math.sqrt(1.001), 1 / math.sqrt(1.001)], rtol=1e-6)
    stats = new["batch_stats"]
    np.testing.assert_allclose(stats["mean"], [0.99 * -10.0 + 0.01 * 1.0], rtol=1e-6)
    np.testing.assert_allclose(stats["var"], [0.99 * 0.009 + 0.01 * 1.0], rtol=1e-6)
    assert int(stats["steps"]) == 1


def test_batch_renorm_after_warm_up_clips_r_and_d():
    # r = sqrt(1 + 1e-3) / sqrt(0.009 + 1e-3) = 10.005 -> 3; d = (1 - (-10)) / 0.1 = 110 -> 5
    # mean' = 1 - 5 * 1 / 3, var' = 1 / 3^2: y = (x - mean') / sqrt(1/9 + 1e-3)
    module, variables = renorm(warmup_steps=4, mean=-10.0, var=0.009, steps=4)
    y, new = forward(module, variables, X, train=True)
    expected = [(0.0 - (1 - 5 / 3)) / math.sqrt(1 / 9 + 1e-3), (2.0 - (1 - 5 / 3)) / math.sqrt(1 / 9 + 1e-3)]
    np.testing.assert_allclose(y[:, 0], expected, rtol=1e-5)  # 1.99105, 7.96421
    assert int(new["batch_stats"]["steps"]) == 5


def test_batch_renorm_within_the_clips_is_the_batch_normalised_value_times_r_plus_d():
    # running mean 0.5, running var 0.249 (sqrt(var + eps) = 0.5): r = sqrt(1.001) / 0.5 = 2.001, d = 1
    module, variables = renorm(warmup_steps=0, mean=0.5, var=0.249)
    y, _ = forward(module, variables, X, train=True)
    r, d = math.sqrt(1.001) / 0.5, 1.0
    expected = [(x - (1 - d / r)) / math.sqrt(1 / r**2 + 1e-3) for x in (0.0, 2.0)]
    np.testing.assert_allclose(y[:, 0], expected, rtol=1e-5)
    # without eps this is exactly (x - mu_B) / sigma_B * r + d = -r + d, r + d
    np.testing.assert_allclose(y[:, 0], [-r + d, r + d], rtol=2e-3)


def test_batch_renorm_inference_uses_the_running_statistics_and_changes_nothing():
    module, variables = renorm(mean=0.5, var=3.999)
    y, new = forward(module, variables, X)
    np.testing.assert_allclose(y[:, 0], [-0.25, 0.75], rtol=1e-6)  # (x - 0.5) / sqrt(3.999 + 0.001)
    assert new == {}


def test_r_and_d_carry_no_gradient_to_the_running_statistics():
    module, variables = renorm(warmup_steps=0, mean=0.5, var=0.249)

    def out(stats):
        return jnp.sum(forward(module, {**variables, "batch_stats": {**variables["batch_stats"], **stats}}, X,
                                       train=True)[0] * jnp.array([[1.0], [3.0]]))

    grads = jax.grad(out)({"mean": variables["batch_stats"]["mean"], "var": variables["batch_stats"]["var"]})
    assert float(jnp.abs(grads["mean"]).sum()) == 0.0 and float(jnp.abs(grads["var"]).sum()) == 0.0


def test_a_unit_dead_over_the_batch_has_finite_gradients_after_warm_up():
    module, variables = renorm(warmup_steps=0, mean=0.3, var=0.5)
    dead = jnp.zeros((4, 1))
    grads = jax.grad(lambda x: jnp.sum(forward(module, variables, x, train=True)[0] ** 2))(dead)
    assert bool(jnp.all(jnp.isfinite(grads)))


def test_each_critic_keeps_its_own_statistics_and_a_gradient_step_writes_them_back():
    critic = CriticEnsemble((8,), num_critics=2, batch_renorm_momentum=0.9)
    obs, action = jnp.arange(6.0).reshape(3, 2), jnp.ones((3, 1))
    variables = critic.init(jax.random.key(0), obs, action)
    assert variables["batch_stats"]["VmapQNetwork_0"]["MLP_0"]["BatchRenorm_0"]["mean"].shape == (2, 3)

    def loss(params, batch_obs):
        q, stats = forward(critic, params, batch_obs, action, train=True)
        return jnp.mean(q ** 2), {"q": jnp.mean(q), NETWORK_STATE: stats}

    import optax

    from jaxrl.optim import trainable
    optimizer = optax.adam(1e-3)
    step = gradient_step(loss, variables, optimizer.init(trainable(variables)), optimizer, obs)
    first = step.params["batch_stats"]["VmapQNetwork_0"]["MLP_0"]["BatchRenorm_0"]
    inputs = jnp.concatenate([obs, action], axis=-1)  # the first BRN normalises (s, a): moved by 0.1 of its mean
    np.testing.assert_allclose(first["mean"], 0.1 * np.broadcast_to(inputs.mean(0), (2, 3)), rtol=1e-6)
    assert first["steps"].tolist() == [1, 1] and set(step.aux) == {"q"}  # the statistics never reach the metrics
    moved = jax.tree.map(lambda a, b: bool(jnp.any(a != b)), step.params["params"], variables["params"])
    assert all(jax.tree.leaves(moved))  # every trained parameter stepped; the collections are not trained
    assert set(step.opt_state[0].mu) == {"params"}


# ---------------------------------------------------------------------------------------- CrossQ's losses

SPEC = EnvSpec(obs_size=3, action_size=2, decisions_per_episode=100)
SMALL = crossq.Config(actor_hidden_sizes=(8, 8), critic_hidden_sizes=(16, 16), batch_size=4,
                      batch_renorm_warmup=0)


def small_batch(key, terminated=(0.0, 1.0, 0.0, 0.0)):
    k = jax.random.split(key, 4)
    return Batch(obs=jax.random.normal(k[0], (4, 3)), action=jnp.tanh(jax.random.normal(k[1], (4, 2))),
                 reward=jax.random.normal(k[2], (4,)), next_obs=jax.random.normal(k[3], (4, 3)),
                 terminated=jnp.asarray(terminated), truncated=jnp.zeros(4), discount=jnp.full((4,), 0.99))


def trained_state(updates=3):
    """A state whose statistics have moved off their initial values, so inference and training passes differ."""
    state = crossq.init(jax.random.key(1), SPEC, SMALL)
    for i in range(updates):
        state, _ = crossq.update(state, small_batch(jax.random.key(10 + i)), jax.random.key(20 + i), SMALL)
    return state


def test_the_critic_loss_is_one_joint_training_pass_with_a_stop_gradient_target():
    from jaxrl.networks import sample_tanh_gaussian

    state, batch, key = trained_state(), small_batch(jax.random.key(2)), jax.random.key(3)
    loss, aux = crossq.critic_loss(state.critic_params, state, batch, key, SMALL)
    # re-derived: the actor in inference mode, then the critics over the 8 rows [s; s'] in training mode
    mean, log_std = state.actor.apply(state.actor_params, batch.next_obs)
    next_action, next_log_prob = sample_tanh_gaussian(key, mean, log_std)
    q_all, stats = state.critic.apply(state.critic_params, jnp.concatenate([batch.obs, batch.next_obs]),
                                      jnp.concatenate([batch.action, next_action]), True, mutable=["batch_stats"])
    q, next_q = np.asarray(q_all[:, :4, 0]), np.asarray(q_all[:, 4:, 0])
    alpha = float(jnp.exp(state.log_alpha))
    target = (np.asarray(batch.reward) + 0.99 * (1 - np.asarray(batch.terminated))
              * (next_q.min(axis=0) - alpha * np.asarray(next_log_prob)))
    expected = 0.5 * sum(np.mean((q[j] - target) ** 2) for j in range(2))
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), aux[NETWORK_STATE], dict(stats))
    # the target is a constant to the gradient: the (s', a') half reaches the parameters only through the
    # statistics it shares with the (s, a) half
    frozen_target = jnp.asarray(target, jnp.float32)
    joint = (jnp.concatenate([batch.obs, batch.next_obs]), jnp.concatenate([batch.action, next_action]))

    def reference(params):
        q_both = state.critic.apply({**state.critic_params, "params": params}, *joint, True,
                                    mutable=["batch_stats"])[0]
        return 0.5 * jnp.sum(jnp.mean(jnp.square(q_both[:, :4, 0] - frozen_target), axis=-1))

    def ours(params):
        return crossq.critic_loss({**state.critic_params, "params": params}, state, batch, key, SMALL)[0]

    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6),
                 jax.grad(ours)(state.critic_params["params"]), jax.grad(reference)(state.critic_params["params"]))


def test_the_actor_step_moves_the_actors_statistics_and_leaves_the_critics():
    state = trained_state()
    before_actor = state.actor_params["batch_stats"]
    batch = small_batch(jax.random.key(4))
    _, aux = crossq.actor_loss(state.actor_params, state, batch, jax.random.key(5), SMALL)
    moved = jax.tree.map(lambda a, b: bool(jnp.any(a != b)), aux[NETWORK_STATE]["batch_stats"], before_actor)
    assert any(jax.tree.leaves(moved))
    # the critics' passes inside the actor loss are inference passes: forward returns nothing to write
    assert set(aux) == {"actor_loss", "entropy", "log_prob", NETWORK_STATE}


def test_crossq_keeps_no_target_network_and_steps_the_actor_every_third_update():
    state = crossq.init(jax.random.key(1), SPEC, SMALL)
    assert [name for name in vars(state) if name.endswith("params")] == ["actor_params", "critic_params"]
    actor_steps = []
    for i in range(6):
        before = state.actor_params["batch_stats"]
        state, metrics = crossq.update(state, small_batch(jax.random.key(i)), jax.random.key(i + 100), SMALL)
        actor_steps.append(any(jax.tree.leaves(jax.tree.map(lambda a, b: bool(jnp.any(a != b)),
                                                            state.actor_params["batch_stats"], before))))
        assert set(metrics) >= {"critic_loss", "actor_loss", "alpha", "grad_norm/critic"}
        assert NETWORK_STATE not in metrics
    assert actor_steps == [False, False, True, False, False, True]  # the official (n_updates + 1) % 3 == 0
    critic_stats = state.critic_params["batch_stats"]["VmapQNetwork_0"]
    assert critic_stats["MLP_0"]["BatchRenorm_0"]["steps"].tolist() == [6, 6]  # one training pass per update


def test_acting_uses_the_running_statistics():
    state = trained_state()
    obs = jax.random.normal(jax.random.key(6), (5, 3))
    action, _ = crossq.act(state, obs, None, SMALL, deterministic=True)
    mean, _ = state.actor.apply(state.actor_params, obs)  # inference pass
    np.testing.assert_allclose(action, jnp.tanh(mean), rtol=1e-6)
    one, _ = crossq.act(state, obs[:1], None, SMALL, deterministic=True)  # no batch statistics: same per row
    np.testing.assert_allclose(one, action[:1], rtol=1e-5)


def test_crossqs_defaults_are_the_official_codes():
    cfg = crossq.Config()
    assert (cfg.critic_hidden_sizes, cfg.actor_hidden_sizes, cfg.num_critics, cfg.policy_delay) == \
        ((2048, 2048), (256, 256), 2, 3)
    assert (cfg.actor_lr, cfg.critic_lr, cfg.alpha_lr, cfg.adam_b1, cfg.adam_b2) == (1e-3, 1e-3, 1e-3, 0.5, 0.999)
    assert (cfg.batch_renorm_momentum, cfg.batch_renorm_warmup, cfg.actor_batch_renorm) == (0.99, 100_000, True)
    assert (cfg.batch_size, cfg.gamma, cfg.init_alpha, cfg.log_std_min, cfg.log_std_max) == \
        (256, 0.99, 1.0, -20.0, 2.0)


@pytest.mark.slow
def test_crossq_swings_up_the_pendulum():
    """CrossQ at reduced widths on toy/Pendulum, as SAC's learning test (test_learning.py)."""
    from jaxrl.loop import LoopConfig
    from tests.helpers import train

    loop = LoopConfig(steps=10_000, num_envs=4, num_eval_envs=10, eval_every=2000, learning_starts=1000,
                      buffer_size=10_000)
    cfg = crossq.Config(actor_hidden_sizes=(64, 64), critic_hidden_sizes=(128, 128))
    _, history = train("toy/Pendulum", loop, cfg, seed=0, seeds=2, agent=crossq.AGENT)
    final = history[-1]["eval/return"]
    assert history[0]["eval/return"].max() < -700
    assert np.all(final > -300), [h["eval/return"] for h in history]
