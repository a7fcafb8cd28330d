"""ACE (experiments/plugins/ace.py): the causal weights on a linear case with a known answer, the weighted
log-density, the dormancy ratio, the soft reset's blend and schedule by hand; the engine's ``refresh`` hook; ACE
through the compiled loop with a checkpoint restored across a re-estimation and resets."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.plugins import ace
from jaxrl import ConfigError
from jaxrl import progress as progress_lib
from jaxrl.networks import orthogonal_init, tanh_gaussian_log_prob
from jaxrl.testing import check_agent
from jaxrl.types import EnvSpec
from tests.helpers import assert_restored_checkpoint_continues_bitwise
from tests.test_plugins import random_batch

KEY = jax.random.PRNGKey(0)
SPEC = EnvSpec(obs_size=3, action_size=2, decisions_per_episode=10)
TINY = dict(hidden_sizes=(8,), batch_size=8)


def at_update(updates):
    return progress_lib.at(updates=updates, env_steps=updates, planned_updates=1000, planned_env_steps=1000)


# ---------------------------------------------------------------------------------------------- weights


def linear_case(n=3000, noise=0.0, seed=0):
    """r = 3 + 0.5 s_0 + 1.0 a_0 - 0.5 a_1 + 0 a_2 (+ noise): the reward's action coefficients are (1, -0.5, 0)."""
    rng = np.random.default_rng(seed)
    s, a = rng.uniform(-1, 1, (n, 2)), rng.uniform(-1, 1, (n, 3))
    r = 3.0 + 0.5 * s[:, 0] + 1.0 * a[:, 0] - 0.5 * a[:, 1] + noise * rng.laplace(size=n)
    return jnp.asarray(s, jnp.float32), jnp.asarray(a, jnp.float32), jnp.asarray(r, jnp.float32)


def expected_weights(beta):
    e = np.exp(np.asarray(beta) - np.max(beta))
    return len(beta) * e / e.sum()


def test_the_causal_weights_recover_the_rewards_action_coefficients_on_a_linear_case():
    s, a, r = linear_case()
    valid = jnp.ones(len(r), bool)
    w = ace.causal_weights_from(s, a, r, valid, ridge=0.0)
    np.testing.assert_allclose(w, expected_weights([1.0, -0.5, 0.0]), atol=1e-4)
    assert float(jnp.sum(w)) == pytest.approx(3.0, abs=1e-5)
    np.testing.assert_allclose(ace.causal_weights_from(s, a, r, valid, 0.0, use_abs=True),
                               expected_weights([1.0, 0.5, 0.0]), atol=1e-4)
    noisy = ace.causal_weights_from(*linear_case(noise=0.3, seed=1), valid, ridge=1e-6)
    np.testing.assert_allclose(noisy, expected_weights([1.0, -0.5, 0.0]), atol=0.03)


def test_rows_not_yet_written_do_not_enter_the_estimate():
    s, a, r = linear_case()
    valid = jnp.arange(len(r)) >= 1000
    garbage = r.at[:1000].set(1e4)
    np.testing.assert_allclose(ace.causal_weights_from(s, a, garbage, valid, 0.0),
                               ace.causal_weights_from(s[1000:], a[1000:], r[1000:], valid[1000:], 0.0), atol=1e-5)


def test_the_weighted_log_density_by_hand():
    u, mean, log_std = jnp.array([0.3, -1.2]), jnp.array([0.1, -0.5]), jnp.array([-0.2, 0.4])
    np.testing.assert_allclose(ace.causal_log_prob(u, mean, log_std, jnp.ones(2)),
                               tanh_gaussian_log_prob(u, mean, log_std, 1e-6), rtol=1e-6)

    def dimension(i):
        std = math.exp(float(log_std[i]))
        gaussian = -0.5 * ((float(u[i]) - float(mean[i])) / std) ** 2 - math.log(std) - 0.5 * math.log(2 * math.pi)
        return gaussian - math.log(1 - math.tanh(float(u[i])) ** 2 + 1e-6)

    weighted = ace.causal_log_prob(u, mean, log_std, jnp.array([2.0, 0.0]))
    assert float(weighted) == pytest.approx(2 * dimension(0), rel=1e-6)


def test_the_target_moves_by_the_weighted_entropy_term_alone():
    """y(w) - y(0) = -discount (1 - terminated) alpha sum_i w_i l_i, with alpha = 1 and a' from the same key."""
    cfg = ace.Config(**TINY)
    state = ace.init(KEY, SPEC, cfg)
    batch = random_batch(jax.random.PRNGKey(1))
    key = jax.random.PRNGKey(2)
    mean, log_std = state.actor.apply(state.actor_params, batch.next_obs)
    u = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape)
    per_dim = (-0.5 * jnp.square((u - mean) / jnp.exp(log_std)) - log_std - 0.5 * math.log(2 * math.pi)
               - jnp.log(1 - jnp.square(jnp.tanh(u)) + 1e-6))  # [B, |A|]: l_i of each sample
    w = jnp.array([1.5, 0.5])
    y_w = ace.causal_soft_target(state.replace(causal_weights=w), batch, key, cfg)
    y_0 = ace.causal_soft_target(state.replace(causal_weights=jnp.zeros(2)), batch, key, cfg)
    not_done = 1.0 - batch.terminated.astype(jnp.float32)
    np.testing.assert_allclose(y_w - y_0, -batch.discount * not_done * (per_dim @ w), rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------------------------ dormancy and reset


def test_the_dormant_ratio_by_hand():
    # layer 1: column norms 5, 0, 0.01 (mean 1.67, threshold 0.0835): two dormant; layer 2: norms 1, 1: none
    grads = {"params": {"Dense_0": {"kernel": jnp.array([[3.0, 0.0, 0.01], [4.0, 0.0, 0.0]]), "bias": jnp.zeros(3)},
                        "Dense_1": {"kernel": jnp.array([[1.0, 1.0]]), "bias": jnp.zeros(2)}}}
    assert float(ace.dormant_ratio(grads, 0.05)) == pytest.approx(2 / 5)
    assert float(ace.dormant_ratio(grads, 0.001)) == pytest.approx(1 / 5)


@pytest.mark.parametrize("rule, dormant, weights, eta", [
    ("dormancy", 0.3, [1.0, 1.0], 0.7), ("dormancy", 0.0, [1.0, 1.0], 0.9), ("dormancy", 0.95, [1.0, 1.0], 0.2),
    ("causal", 0.3, [1.0, 1.0], 0.5), ("causal", 0.3, [1.9, 0.1], 0.9),
    ("causal", 0.3, [1.025, 0.975], 1.5 - math.exp(-0.4))])
def test_the_reset_strength(rule, dormant, weights, eta):
    cfg = ace.Config(**TINY, reset_rule=rule)
    state = ace.init(KEY, SPEC, cfg).replace(dormant_ratio=jnp.float32(dormant), causal_weights=jnp.array(weights))
    assert float(ace.reset_strength(state, cfg)) == pytest.approx(eta, rel=1e-6)


def test_the_soft_reset_blends_every_network_with_its_own_fresh_one_and_clears_adam():
    cfg = ace.Config(**TINY)
    state = ace.init(KEY, SPEC, cfg)
    state = progress_lib.detach(ace.update(progress_lib.attach(state, at_update(0)), random_batch(KEY), KEY, cfg)[0])
    state = state.replace(dormant_ratio=jnp.float32(0.3))  # eta = 0.7
    reset = ace.soft_reset(state, jax.random.PRNGKey(5), cfg)
    for field in ("actor_params", "critic_params", "target_critic_params"):
        old = jax.tree_util.tree_flatten_with_path(getattr(state, field))[0]
        new = jax.tree.leaves(getattr(reset, field))
        for (path, before), after in zip(old, new, strict=True):
            fresh = (np.asarray(after) - 0.7 * np.asarray(before)) / 0.3
            if path[-1].key == "bias":
                np.testing.assert_allclose(fresh, 0.0, atol=1e-6)  # biases shrink to eta x bias
            else:  # orthogonal: each (critic's) [in, out] kernel has orthonormal columns (rows when out > in)
                for kernel in fresh.reshape((-1,) + fresh.shape[-2:]):
                    gram = kernel.T @ kernel if kernel.shape[0] >= kernel.shape[1] else kernel @ kernel.T
                    np.testing.assert_allclose(gram, np.eye(len(gram)), atol=2e-4)
    critic = jax.tree.leaves(reset.critic_params)[1]
    assert not np.allclose(critic, jax.tree.leaves(reset.target_critic_params)[1])  # own fresh networks
    for opt_state in (reset.actor_opt_state, reset.critic_opt_state):
        assert all(float(jnp.max(jnp.abs(x))) == 0.0 for x in jax.tree.leaves(opt_state))  # moments and count
    assert int(jax.tree.leaves(state.actor_opt_state)[0]) == 1  # there was an Adam state to clear
    jax.tree.map(np.testing.assert_array_equal, reset.alpha_opt_state, state.alpha_opt_state)
    assert float(reset.log_alpha) == float(state.log_alpha)


def test_the_reset_program_holds_no_lapack_call_and_its_kernels_are_haar_orthogonal():
    """A QR (a LAPACK custom call on XLA:CPU) vmapped over a sweep's members inside the program left ACE's
    dmc/FingerSpin sweep waiting at its first reset with every thread idle: the fresh kernels come from
    ``networks.orthogonal_init`` (Gram-Schmidt), orthonormal and with the Haar moments of jax's QR initialiser."""
    cfg = ace.Config(**TINY)
    members = jax.vmap(lambda k: ace.init(k, SPEC, cfg))(jax.random.split(KEY, 3))
    hlo = jax.jit(jax.vmap(lambda s, k: ace.soft_reset(s, k, cfg))).lower(
        members, jax.random.split(KEY, 3)).as_text()
    assert "custom_call" not in hlo
    init = orthogonal_init()
    for shape in [(64, 64), (5, 64), (64, 3), (2, 3, 4)]:
        matrix = np.asarray(jax.jit(lambda k, shape=shape: init(k, shape))(KEY)).reshape(-1, shape[-1])
        gram = matrix.T @ matrix if matrix.shape[0] >= matrix.shape[1] else matrix @ matrix.T
        np.testing.assert_allclose(gram, np.eye(len(gram)), atol=1e-5)
    # Haar on O(6): every entry has mean 0 and variance 1/6, the diagonal too (a Householder QR whose R keeps its
    # negative diagonal entries biases the diagonal); 20k draws: standard error 0.003.
    draws = np.asarray(jax.vmap(lambda k: init(k, (6, 6)))(jax.random.split(KEY, 20_000)))
    np.testing.assert_allclose(draws.mean(0), 0.0, atol=0.015)
    np.testing.assert_allclose(draws.var(0), 1 / 6, atol=0.01)


def test_the_schedule_actor_every_other_update_and_resets_at_multiples_of_the_interval():
    cfg = ace.Config(**TINY, reset_interval=4, reset_after=0)
    update = jax.jit(ace.update)
    state = ace.init(KEY, SPEC, cfg)
    batch = random_batch(KEY)
    seen = {}
    for updates in range(5):
        new, metrics = update(progress_lib.attach(state, at_update(updates)), batch, jax.random.PRNGKey(updates), cfg)
        new = progress_lib.detach(new)
        actor_moved = not np.array_equal(jax.tree.leaves(new.actor_params)[0], jax.tree.leaves(state.actor_params)[0])
        seen[updates] = (actor_moved, float(metrics["reset"]))
        state = new
    # updates 0, 2, 4 step the actor; update index 4 resets (the code checks its index before incrementing it), so
    # the reset reads the dormancy of that update's own actor step; index 0 is not after reset_after = 0
    assert seen == {0: (True, 0.0), 1: (False, 0.0), 2: (True, 0.0), 3: (False, 0.0), 4: (True, 1.0)}
    assert [bool(ace.reset_due(n, ace.Config(reset_interval=100, reset_after=5000))) for n in (100, 5000, 5100)] == \
        [False, False, True]


def test_the_temperature_loss_is_the_codes_log_alpha_form():
    """model/algorithm.py: alpha_loss = -(log_alpha * (log_pi + target_entropy).detach()).mean()."""
    cfg = ace.Config(**TINY, init_alpha=0.5)
    state = ace.init(KEY, SPEC, cfg)
    _, metrics = jax.jit(ace.update)(progress_lib.attach(state, at_update(0)), random_batch(KEY), KEY, cfg)
    mean_log_prob = -float(metrics["entropy"])
    np.testing.assert_allclose(metrics["alpha_loss"], -np.log(0.5) * (mean_log_prob + float(state.target_entropy)),
                               rtol=1e-5)


def test_ace_refuses_bad_values_in_one_line():
    for fields, message in [({"reset_rule": "dormant_reset"}, "reset_rule='dormant_reset': choose"),
                            ({"causal_interval": 0}, "causal_interval must be an integer > 0"),
                            ({"reset_min": 0.95}, "reset_min"), ({"causal_ridge": -1.0}, "causal_ridge must be")]:
        with pytest.raises(ConfigError, match=message):
            ace.check_config(ace.Config(**fields))
    state = ace.init(KEY, SPEC, ace.Config(**TINY))
    with pytest.raises(ConfigError, match="needs state.progress"):
        ace.update(state, random_batch(KEY), KEY, ace.Config(**TINY))


def test_ace_passes_the_harness():
    check_agent(ace.AGENT, ace.Config(**TINY, causal_sample_size=100), eager=False)


# --------------------------------------------------------------------------------------- through the loop


def test_refresh_runs_where_env_steps_cross_each_multiple_of_its_interval_and_sees_progress():
    """A recording refresh on SAC: 2 envs, so env steps grow by 2 a block; interval 151 is crossed at 152, 302,
    454; the record holds progress.env_steps at each call."""
    import flax.struct

    import envs
    from agents import sac
    from jaxrl.loop import LoopConfig, make_train

    @flax.struct.dataclass
    class State(sac.State):
        calls: jax.Array = flax.struct.field(default=None, kw_only=True)
        seen: jax.Array = flax.struct.field(default=None, kw_only=True)

    def init(key, spec, cfg):
        return State(**vars(sac.init(key, spec, cfg)), calls=jnp.zeros((), jnp.int32), seen=jnp.zeros(4, jnp.int32))

    def record(state, buffer, key, cfg):
        return state.replace(calls=state.calls + 1, seen=state.seen.at[state.calls].set(state.progress.env_steps))

    agent = sac.AGENT._replace(init=init, refresh=record, refresh_interval=lambda cfg: 151)
    loop = LoopConfig(steps=500, num_envs=2, num_eval_envs=1, eval_every=500, learning_starts=400, buffer_size=1000)
    trainer = make_train(agent, envs.make("toy/Pendulum", 2), envs.make("toy/Pendulum", 1), loop,
                         sac.Config(**TINY))
    state, _ = trainer.run_chunk(trainer.init(0))
    assert int(state.agent.calls[0]) == 3
    np.testing.assert_array_equal(state.agent.seen[0], [152, 302, 454, 0])


def test_ace_trains_reestimates_resets_and_continues_bitwise_from_a_checkpoint(tmp_path):
    """Two seeds on toy/PointMass (two action dimensions): the weights estimated at 200 env steps are the
    estimator on the buffer's newest 200 transitions; the restored checkpoint continues exactly through the
    re-estimation at 400 and the resets every 40 updates."""
    import envs
    from jaxrl import buffer as buffer_lib
    from jaxrl.loop import LoopConfig, make_train

    loop = LoopConfig(steps=600, num_envs=2, num_eval_envs=2, eval_every=200, learning_starts=100, buffer_size=1000)
    cfg = ace.Config(**TINY, causal_interval=200, causal_sample_size=200, reset_interval=40, reset_after=0)
    trainer = make_train(ace.AGENT, envs.make("toy/PointMass", 2), envs.make("toy/PointMass", 2), loop, cfg)
    state, metrics = trainer.run_chunk(trainer.init(0, 2))
    metrics = jax.device_get(metrics)
    assert all(np.all(v == -1) for v in metrics["nonfinite_step"].values())
    assert np.all(metrics["train/reset"] > 0)
    for k in range(2):
        buffer = jax.tree.map(lambda x, k=k: x[k], state.buffer)
        recent = buffer_lib.recent(buffer, 200)
        expected = ace.causal_weights_from(recent.obs, recent.action, recent.reward, recent.valid, 1e-6)
        np.testing.assert_allclose(state.agent.causal_weights[k], expected, rtol=1e-4)
        assert not np.allclose(expected, 1.0)  # PointMass's reward does depend on its two actions
    assert_restored_checkpoint_continues_bitwise(trainer, state, tmp_path)
