"""TD-MPC2: TD targets from 2 random target heads, the rho-weighted losses, the running Q scale, windows inside
episodes, planning for all envs with warm starts, and learning."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents import tdmpc2
from jaxrl import buffer as B
from jaxrl.loop import LoopConfig, default_loop_config
from jaxrl.regression import bins, two_hot_inverse
from jaxrl.types import EnvSpec
from tests.helpers import train

SPEC = EnvSpec(obs_size=3, action_size=2, decisions_per_episode=50, can_terminate=False)
CFG = tdmpc2.Config(latent_dim=16, hidden_dim=32, encoder_dim=16, batch_size=8, num_samples=32, num_elites=4,
                    num_pi_trajs=4, iterations=2, gamma=0.9)


def filled_buffer(steps=60, num_envs=2, episode=20):
    buf = B.init(B.layout(1000, num_envs, SPEC.replace(decisions_per_episode=episode)))
    key = jax.random.PRNGKey(2)
    for i in range(steps):
        key, k1, k2 = jax.random.split(key, 3)
        step = i % episode
        buf = B.add(buf, jnp.full((num_envs, 3), float(i)), jax.random.uniform(k2, (num_envs, 2), minval=-1),
                    jnp.full((num_envs,), 0.1 * i), jnp.zeros(num_envs, bool),
                    jnp.full((num_envs,), step == episode - 1), jnp.full((num_envs, 3), float(i + 1)),
                    jnp.full((num_envs,), step, jnp.int32))
    return buf


def test_sub_trajectories_are_consecutive_and_inside_one_episode():
    batch = tdmpc2.sample_batch(filled_buffer(), jax.random.PRNGKey(0), CFG.replace(batch_size=256))
    assert batch.obs.shape == (256, 4, 3) and batch.action.shape == (256, 3, 2) and bool(jnp.all(batch.valid))
    obs = np.asarray(batch.obs[..., 0])
    np.testing.assert_array_equal(np.diff(obs, axis=1), 1.0)  # o_t, o_t+1, ... in order
    # Episodes are 20 steps (0-19, 20-39, ...): a window may end on an episode's last step, never span two.
    assert np.all(obs[:, 0] // 20 == (obs[:, -2]) // 20)
    np.testing.assert_allclose(batch.reward, 0.1 * obs[:, :3], rtol=1e-5)


def test_td_targets_use_the_min_of_two_random_target_heads():
    state = tdmpc2.init(jax.random.PRNGKey(0), SPEC, CFG)
    # Give the target heads distinct values: head k's output bias puts its mass near symlog value k - 2.
    grid = bins()
    target_q = jax.tree_util.tree_map_with_path(
        lambda path, x: (x + 30.0 * (jnp.abs(grid[None] - (jnp.arange(5.0)[:, None] - 2.0)) < 0.05))
        if jax.tree_util.keystr(path) == "['Dense_0']['bias']" else x,  # the output layer, not a hidden one
        state.target_q_params)
    state = state.replace(target_q_params=target_q)
    batch = tdmpc2.sample_batch(filled_buffer(), jax.random.PRNGKey(1), CFG)
    key = jax.random.PRNGKey(3)
    y, _ = tdmpc2.td_targets(state, batch, key, CFG)
    members_key, _ = jax.random.split(key)
    members = np.asarray(jax.random.choice(members_key, 5, (2,), replace=False))
    head_values = np.asarray(jnp.sign(jnp.arange(5.0) - 2) * jnp.expm1(jnp.abs(jnp.arange(5.0) - 2)))
    expected = np.asarray(batch.reward) + 0.9 * head_values[members].min()
    np.testing.assert_allclose(y, expected, rtol=2e-2, atol=2e-2)
    assert len(set(members)) == 2


def test_rho_weights_and_horizon_average_of_the_consistency_loss():
    state = tdmpc2.init(jax.random.PRNGKey(0), SPEC, CFG)
    batch = tdmpc2.sample_batch(filled_buffer(), jax.random.PRNGKey(1), CFG)
    key = jax.random.PRNGKey(4)
    _, (info, latents) = tdmpc2.world_model_loss(state.model_params, state, batch, key, CFG)
    next_z = state.model.apply(state.model_params, batch.obs[:, 1:], method="encode")
    per_step = np.mean((np.asarray(latents[:, 1:]) - np.asarray(next_z)) ** 2, axis=(0, 2))
    np.testing.assert_allclose(info["consistency_loss"], np.sum(0.5 ** np.arange(3) * per_step) / 3, rtol=1e-5)
    # Zero-initialised heads predict uniform bins: CE = log 101 per step, weighted (1 + 0.5 + 0.25) / 3.
    np.testing.assert_allclose(info["reward_loss"], np.log(101) * 1.75 / 3, rtol=1e-5)
    np.testing.assert_allclose(info["value_loss"], np.log(101) * 1.75 / 3, rtol=1e-5)


def test_q_scale_moves_one_percent_towards_the_clamped_percentile_range():
    state = tdmpc2.init(jax.random.PRNGKey(0), SPEC, CFG)
    latents = jax.random.normal(jax.random.PRNGKey(1), (8, 4, 16))
    _, info = tdmpc2.policy_loss(state.policy_params, state, latents, jax.random.PRNGKey(2), CFG)
    np.testing.assert_allclose(info["q_scale"], 1.0)  # zero Q-heads: range 0 -> clamped to 1
    _, info = tdmpc2.policy_loss(state.policy_params, state.replace(q_scale=jnp.float32(3.0)), latents,
                                 jax.random.PRNGKey(2), CFG)
    np.testing.assert_allclose(info["q_scale"], 3.0 + 0.01 * (1.0 - 3.0), rtol=1e-6)


def test_planning_acts_for_every_env_and_returns_warm_starts():
    state = tdmpc2.init(jax.random.PRNGKey(0), SPEC, CFG)
    carry = tdmpc2.init_carry(5, SPEC, CFG)
    act = jax.jit(tdmpc2.act, static_argnums=(3, 4))
    obs = jax.random.normal(jax.random.PRNGKey(1), (5, 3))
    actions, carry = act(state, obs, jax.random.PRNGKey(2), CFG, True, carry)
    assert actions.shape == (5, 2) and carry.shape == (5, 3, 2)
    assert np.all(np.abs(np.asarray(actions)) <= 1.0) and np.all(np.abs(np.asarray(carry)) <= 1.0)
    again, _ = act(state, obs, jax.random.PRNGKey(2), CFG, True, tdmpc2.init_carry(5, SPEC, CFG))
    np.testing.assert_array_equal(actions, again)  # a pure function of (state, obs, key, carry)
    noisy, _ = act(state, obs, jax.random.PRNGKey(2), CFG, False, tdmpc2.init_carry(5, SPEC, CFG))
    assert not np.allclose(noisy, actions)


def test_planning_computes_only_the_two_q_heads_it_reads():
    """The planner values each sample with 2 random heads: its arithmetic must not grow with the ensemble (it
    computed all num_q heads until 2026-12-06, 2.9x the FLOPs at 10 heads as at 2), and the two heads' logits are
    the full ensemble's rows for them."""
    def planning_flops(cfg):
        state = jax.jit(lambda key: tdmpc2.init(key, SPEC, cfg))(jax.random.PRNGKey(0))
        lowered = jax.jit(tdmpc2.act, static_argnums=(3, 4)).lower(
            state, jnp.zeros((5, 3)), jax.random.PRNGKey(2), cfg, True, tdmpc2.init_carry(5, SPEC, cfg))
        costs = lowered.cost_analysis() or lowered.compile().cost_analysis()  # PJRT plug-ins (CUDA): compiled only
        return costs["flops"]

    assert planning_flops(CFG.replace(num_q=10)) < 1.01 * planning_flops(CFG.replace(num_q=2))
    state = tdmpc2.init(jax.random.PRNGKey(0), SPEC, CFG)
    params = jax.tree.map(lambda p: p + 0.1 * jax.random.normal(jax.random.PRNGKey(3), p.shape), state.model_params)
    z, a = jax.random.normal(jax.random.PRNGKey(1), (7, 16)), jax.random.uniform(jax.random.PRNGKey(2), (7, 2))
    members = jnp.array([3, 1])
    pair, pair_params = tdmpc2.q_heads(state.model, params, members)
    full = state.model.apply(params, z, a, method="q")
    assert float(jnp.std(full[3] - full[1])) > 0.01  # the heads differ (initialised, the output layers are zero)
    np.testing.assert_allclose(pair.apply(pair_params, z, a, method="q"), full[members], rtol=1e-5, atol=1e-6)


def test_loop_defaults_seed_then_pretrain():
    loop = default_loop_config(tdmpc2.AGENT)
    assert loop.learning_starts == loop.pretrain_updates == 5000 and loop.updates_per_step == 1.0
    np.testing.assert_allclose(two_hot_inverse(jnp.zeros(101), bins()), 0.0, atol=1e-6)


@pytest.mark.slow
def test_tdmpc2_swings_up_the_pendulum():
    # Measured (seed 0, evals every 2k): -653, -422, -124, -133, -128 up to 10k env steps.
    loop = LoopConfig(steps=6000, num_envs=4, num_eval_envs=5, eval_every=3000, learning_starts=1000,
                      buffer_size=10_000, pretrain_updates=500)
    cfg = tdmpc2.Config(latent_dim=64, hidden_dim=128, encoder_dim=64, batch_size=64, num_samples=128,
                        num_elites=16, num_pi_trajs=8, iterations=3)
    _, history = train("toy/Pendulum", loop, cfg, agent=tdmpc2.AGENT)
    assert np.all(history[-1]["eval/return"] > -300), [h["eval/return"] for h in history]


def test_the_states_static_networks_hold_no_traced_hyperparameters():
    # The world model once kept the whole Config as static State metadata. Inside the program its numeric fields are
    # traced, so a state initialised in one trace carried tracers: running a trainer's chunk on a second state
    # (a 2-seed run after a 1-seed one, as sweeps and tests do) failed comparing them ("escaped tracer").
    state = jax.jit(lambda key, cfg: tdmpc2.init(key, SPEC, cfg))(jax.random.PRNGKey(0), CFG)  # as the loop does
    static_cfg = state.model.cfg
    assert isinstance(static_cfg.lr, float) and isinstance(static_cfg.gamma, float)
    assert static_cfg.latent_dim == CFG.latent_dim and static_cfg.dropout == CFG.dropout
