"""Probe envs with analytic answers, for every agent: each agent's own value head is read out and compared with
the value the env fixes.

- ``toy/Bandit``: one step, reward 1 - (a - 0.5)^2, then termination. Q(s, a) = r(a) exactly and the best
  action is 0.5 (deterministic acting must find it).
- ``toy/ConstantTruncated``: reward 1 forever, constant observation, time limit every 10 steps, no termination.
  An agent that bootstraps through the time limit learns Q = 1 / (1 - gamma) = 10 (gamma 0.9). The negative
  control feeds the same agent batches where time limits look like terminations: with a constant observation
  its critic can only learn Q = 1 + gamma (1 - 1/10) Q, i.e. 1 / (1 - 0.81) = 5.26, so the probe tells the two
  apart for every agent.

Settings are the agents' own except for what the probes need: narrow networks, learning rates of 1e-3 where the
defaults are slower, the temperature held near 0 in the truncation probe (an entropy bonus would add to Q), and
for SimbaV2 a categorical support wide enough for Q = 10 (its default [-5, 5] expects scaled rewards, a loop
feature these probes leave off so the readout is in reward units). TD-MPC2 rolls its model over H = 1 step on
the bandit, whose episodes are one step long (a window of H transitions must lie inside one episode).
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents import crossq, dsac_t, fastsac, fasttd3, sac, simbav2, td3, tdmpc2, tqc
from jaxrl.loop import LoopConfig
from jaxrl.types import EnvSpec
from tests.helpers import train

BANDIT_LOOP = LoopConfig(steps=3000, num_envs=8, num_eval_envs=2, eval_every=1000, learning_starts=500,
                         buffer_size=3000)
TRUNCATED_LOOP = LoopConfig(steps=3000, num_envs=8, num_eval_envs=2, eval_every=1000, learning_starts=500,
                            buffer_size=3000)
TRUE_Q, STOPPED_Q = 1 / (1 - 0.9), 1 / (1 - 0.81)


def critic_means(state, obs, action):
    """SAC, TD3: [critics, B]."""
    return state.critic.apply(state.critic_params, obs, action)[..., 0]


def quantile_means(state, obs, action):
    """TQC: each critic's mean over its quantile atoms, [critics, B]."""
    return jnp.mean(state.critic.apply(state.critic_params, obs, action), axis=-1)


def gaussian_means(state, obs, action):
    """DSAC-T: each critic's Gaussian mean mu, [2, B]."""
    return dsac_t.value_distributions(state.critic, state.critic_params, obs, action)[0]


def categorical_expectations(cfg):
    """SimbaV2: each critic's expected value over its support, [critics, B]."""
    return lambda state, obs, action: simbav2.expected_values(
        state.critic.apply(state.critic_params, obs, action), cfg)


def c51_expectations(module):
    """FastTD3, FastSAC: each C51 critic's expected value over its support, [critics, B]."""
    return lambda cfg: lambda state, obs, action: jnp.sum(
        jax.nn.softmax(state.critic.apply(state.critic_params, obs, action), axis=-1) * module.support(cfg), axis=-1)


def latent_q(cfg):
    """TD-MPC2: the mean of all Q-heads' two-hot read-outs at the encoded observation, [B]."""
    def q(state, obs, action):
        z = state.model.apply(state.model_params, obs, method="encode")
        return tdmpc2.q_values(state.model, state.model_params, z, action, jnp.arange(cfg.num_q))[0]

    return q


@dataclasses.dataclass(frozen=True)
class Probe:
    agent: Any
    bandit_cfg: Any
    truncated_cfg: Any
    q: Callable[[Any], Callable]  # cfg -> (state, obs, action) -> Q estimates
    stopped_q: float = STOPPED_Q  # what the negative control learns
    bandit_atol: float = 0.15
    privileged_atol: float = 0.15  # the privileged bandit's Q at actions far from the best one
    truncated_atol: float = 0.7


def truncated_quantile_fixed_point(end_probability, gamma=0.9, num_critics=2, num_quantiles=25, drop_per_critic=2):
    """The mean of TQC's quantiles at the fixed point of its target on the constant-observation probe, where an
    episode ends with ``end_probability`` per step: the pooled atoms 1 + gamma theta, sorted, lose their top
    drop_per_critic * num_critics, and mix with the ending transitions' 1; each theta_i becomes that mixture's
    (2i + 1) / 2M quantile (SamsungLabs/tqc_pytorch `tqc/trainer.py`: sort, keep the lowest, quantile Huber
    loss). The dropped atoms lower the mean only where the return is spread: with no endings the fixed point is
    1 / (1 - gamma) exactly."""
    theta, tau = np.zeros(num_quantiles), (2 * np.arange(num_quantiles) + 1) / (2 * num_quantiles)
    kept = num_critics * (num_quantiles - drop_per_critic)
    for _ in range(1000):
        atoms = np.concatenate([[1.0], 1 + gamma * np.sort(np.repeat(theta, num_critics))[:kept]])
        weights = np.concatenate([[end_probability], np.full(kept, (1 - end_probability) / kept)])
        order = np.argsort(atoms, kind="stable")
        theta = atoms[order][np.searchsorted(np.cumsum(weights[order]), tau)]
    return float(np.mean(theta))


def symlog_fixed_point(end_probability, gamma=0.9):
    """TD-MPC2 regresses Q as a two-hot distribution over a symlog grid and reads out symexp of its mean, so where
    targets are spread the readout is their mean in symlog space: Q = symexp(p symlog(1) + (1 - p) symlog(1 +
    gamma Q)), p the share of ending targets (nicklashansen/tdmpc2 `tdmpc2/common/math.py`, two_hot_inv)."""
    q = 0.0
    for _ in range(1000):
        q = math.expm1(end_probability * math.log1p(1.0) + (1 - end_probability) * math.log1p(1 + gamma * q))
    return q


def window_end_share(horizon=3, rho=0.5, episode_length=10):
    """The share of TD-MPC2's value targets that end on the constant probe: a window of H transitions lies inside
    one episode (episode_length - H + 1 starts, one ending at the time limit), so an ending is only ever the
    window's last step, whose loss weighs rho^(H-1) / sum_t rho^t; the Q-heads see the same latent at every step
    (constant observation, latents consistent with the encoder)."""
    return rho ** (horizon - 1) / sum(rho**t for t in range(horizon)) / (episode_length - horizon + 1)


SMALL_TDMPC2 = dict(latent_dim=16, hidden_dim=32, encoder_dim=32, num_q=2, num_samples=16, num_elites=4,
                    num_pi_trajs=2, iterations=1, lr=1e-3)
SMALL_FAST = dict(actor_hidden_sizes=(32, 32), critic_hidden_sizes=(32, 32), batch_size=64, num_atoms=51)
NO_TEMPERATURE = dict(init_alpha=1e-6, alpha_lr=1e-12)  # 0 is refused; a 1e-12 learning rate holds it there
PROBES = {
    "sac": Probe(sac.AGENT, sac.Config(hidden_sizes=(32, 32), batch_size=64, init_alpha=0.01),
                 sac.Config(hidden_sizes=(32, 32), batch_size=64, gamma=0.9, tau=0.05, critic_lr=1e-3,
                            **NO_TEMPERATURE),
                 lambda cfg: critic_means),
    "td3": Probe(td3.AGENT, td3.Config(hidden_sizes=(32, 32), batch_size=64),
                 td3.Config(hidden_sizes=(32, 32), batch_size=64, gamma=0.9, tau=0.05, critic_lr=1e-3),
                 lambda cfg: critic_means),
    "tqc": Probe(tqc.AGENT, tqc.Config(actor_hidden_sizes=(32, 32), critic_hidden_sizes=(32, 32), num_critics=2,
                                       batch_size=64, init_alpha=0.01),
                 tqc.Config(actor_hidden_sizes=(32, 32), critic_hidden_sizes=(32, 32), num_critics=2, batch_size=64,
                            gamma=0.9, tau=0.05, critic_lr=1e-3, **NO_TEMPERATURE),
                 lambda cfg: quantile_means, stopped_q=truncated_quantile_fixed_point(0.1)),
    "dsac_t": Probe(dsac_t.AGENT, dsac_t.Config(actor_hidden_sizes=(32, 32), critic_hidden_sizes=(32, 32),
                                                batch_size=64, actor_lr=1e-3, critic_lr=1e-3, init_alpha=0.01),
                    dsac_t.Config(actor_hidden_sizes=(32, 32), critic_hidden_sizes=(32, 32), batch_size=64,
                                  actor_lr=1e-3, critic_lr=1e-3, gamma=0.9, tau=0.05, **NO_TEMPERATURE),
                    lambda cfg: gaussian_means),
    # One optimizer serves actor, critic and alpha: alpha starts at 1e-6 and moves by ~lr per update in log space.
    "simbav2": Probe(simbav2.AGENT, simbav2.Config(actor_hidden_dim=32, critic_hidden_dim=32, critic_num_blocks=1,
                                                   batch_size=64, lr_init=1e-3, lr_final=1e-3, max_return=2.0),
                     simbav2.Config(actor_hidden_dim=32, critic_hidden_dim=32, critic_num_blocks=1, batch_size=64,
                                    lr_init=1e-3, lr_final=1e-3, max_return=15.0, gamma=0.9, tau=0.05,
                                    init_alpha=1e-6),
                     categorical_expectations),
    # C51 supports wide enough for each probe's values (the defaults expect returns of robots' tasks).
    "fasttd3": Probe(fasttd3.AGENT, fasttd3.Config(**SMALL_FAST, v_min=-2.0, v_max=2.0),
                     fasttd3.Config(**SMALL_FAST, v_min=-15.0, v_max=15.0, gamma=0.9, tau=0.05, critic_lr=1e-3),
                     c51_expectations(fasttd3)),
    "fastsac": Probe(fastsac.AGENT, fastsac.Config(**SMALL_FAST, v_min=-2.0, v_max=2.0),
                     fastsac.Config(**SMALL_FAST, v_min=-15.0, v_max=15.0, gamma=0.9, tau=0.05, critic_lr=1e-3,
                                    **NO_TEMPERATURE),
                     c51_expectations(fastsac),
                     # Its policy starts narrow (std e^-2.5, entropy target 0): after the uniform warm-up it
                     # rarely tries a = 0.5 when c = -0.5, where its Q is 0.19 low (measured).
                     privileged_atol=0.25),
    # Batch renormalised critics read out in inference mode (running statistics), as CrossQ acts and evaluates.
    # The bandit's actor is a plain MLP: its observation is constant, so every unit of a renormalised actor is
    # constant over the batch (zero batch variance): training passes normalise it to exactly 0, inference divides
    # the running mean's lag by sqrt(eps), and the deterministic action read out (-0.04, measured) is not the one
    # trained. The critics see varied actions and stay renormalised; their running statistics come from batches
    # whose actions gather at the policy's 0.5 as it learns, so Q at the rarely tried -0.5 and 0.9 extrapolates
    # (one critic read 0.21 and 1.15 for 0 and 0.84, measured; the other within 0.09): a wider tolerance there.
    "crossq": Probe(crossq.AGENT, crossq.Config(actor_hidden_sizes=(32, 32), critic_hidden_sizes=(32, 32),
                                                batch_size=64, init_alpha=0.01, actor_batch_renorm=False),
                    crossq.Config(actor_hidden_sizes=(32, 32), critic_hidden_sizes=(32, 32), batch_size=64,
                                  gamma=0.9, **NO_TEMPERATURE),
                    lambda cfg: critic_means, bandit_atol=0.35),
    "tdmpc2": Probe(tdmpc2.AGENT, tdmpc2.Config(**SMALL_TDMPC2, horizon=1, batch_size=64),
                    tdmpc2.Config(**SMALL_TDMPC2, batch_size=64, gamma=0.9, tau=0.05),
                    latent_q, stopped_q=symlog_fixed_point(window_end_share())),
}


def first_seed(state):
    return jax.tree.map(lambda x: x[0], state.agent)


def time_limits_as_terminations(agent):
    """The same agent, updated on batches whose truncations are marked as terminations: the bug the probe
    must catch."""
    def update(state, batch, key, cfg):
        return agent.update(state, batch.replace(terminated=batch.terminated | batch.truncated), key, cfg)

    return agent._replace(update=update)


def test_the_distributional_fixed_points_are_the_plain_value_without_endings_and_below_it_with_them():
    assert truncated_quantile_fixed_point(0.0) == pytest.approx(TRUE_Q, abs=1e-9)
    assert 4.0 < truncated_quantile_fixed_point(0.1) < STOPPED_Q - 0.5
    assert truncated_quantile_fixed_point(0.1, drop_per_critic=0) == pytest.approx(STOPPED_Q, abs=0.1)
    assert symlog_fixed_point(0.0) == pytest.approx(TRUE_Q, abs=1e-9)
    assert window_end_share() == pytest.approx(1 / 56)
    assert 1 / (1 - 0.9 * (1 - 1 / 56)) - 1.5 < symlog_fixed_point(1 / 56) < 1 / (1 - 0.9 * (1 - 1 / 56)) - 0.5


@pytest.mark.parametrize("name", PROBES)
def test_bandit_probe_learns_q_equals_reward_and_the_best_action(name):
    probe = PROBES[name]
    cfg = probe.bandit_cfg
    state, history = train("toy/Bandit", BANDIT_LOOP, cfg, agent=probe.agent)
    agent = first_seed(state)
    carry = probe.agent.init_carry(1, EnvSpec(obs_size=1, action_size=1, decisions_per_episode=1), cfg)
    best, _ = probe.agent.act(agent, jnp.ones((1, 1)), jax.random.PRNGKey(0), cfg, True, carry)
    assert abs(float(best[0, 0]) - 0.5) < 0.1, float(best[0, 0])
    actions = jnp.array([[-0.5], [0.0], [0.5], [0.9]])
    q = probe.q(cfg)(agent, jnp.ones((4, 1)), actions)
    reward = 1 - (np.asarray(actions[:, 0]) - 0.5) ** 2
    np.testing.assert_allclose(q, np.broadcast_to(reward, q.shape), atol=probe.bandit_atol)
    assert history[-1]["eval/return"][0] > 0.98


@pytest.mark.parametrize("name", PROBES)
def test_truncated_probe_bootstraps_through_the_time_limit_and_its_negative_control_does_not(name):
    probe = PROBES[name]
    cfg = probe.truncated_cfg
    obs, actions = jnp.ones((3, 1)), jnp.array([[-0.5], [0.0], [0.5]])
    q = probe.q(cfg)
    state, _ = train("toy/ConstantTruncated", TRUNCATED_LOOP, cfg, agent=probe.agent)
    np.testing.assert_allclose(q(first_seed(state), obs, actions), TRUE_Q, atol=probe.truncated_atol)

    state, _ = train("toy/ConstantTruncated", TRUNCATED_LOOP, cfg, agent=time_limits_as_terminations(probe.agent))
    np.testing.assert_allclose(q(first_seed(state), obs, actions), probe.stopped_q, atol=probe.truncated_atol)


@pytest.mark.parametrize("name", ["sac", "td3", "fasttd3", "fastsac"])
def test_an_asymmetric_critic_learns_from_the_privileged_part_while_the_actor_reads_only_its_own(name):
    """toy/PrivilegedBandit: the actor reads a constant ``state``, the critics read the episode's target c
    (``privileged_state``). Q(c, a) = 1 - (a - c)^2; the actor's best action without c is E[c] = 0."""
    probe = PROBES[name]
    cfg = probe.bandit_cfg
    state, _ = train("toy/PrivilegedBandit", BANDIT_LOOP, cfg, agent=probe.agent)
    agent = first_seed(state)
    best, _ = probe.agent.act(agent, jnp.ones((1, 1)), jax.random.PRNGKey(0), cfg, True, ())  # the actor's part
    assert abs(float(best[0, 0])) < 0.1, float(best[0, 0])
    actions = jnp.array([[-0.5], [0.0], [0.5], [-0.5], [0.0], [0.5]])
    target = jnp.array([[-0.5], [-0.5], [-0.5], [0.5], [0.5], [0.5]])
    obs = {"state": jnp.ones((6, 1)), "privileged_state": target}
    q = probe.q(cfg)(agent, obs, actions)
    np.testing.assert_allclose(q, np.broadcast_to(1 - (actions - target)[:, 0] ** 2, q.shape),
                               atol=probe.privileged_atol)


@pytest.mark.parametrize("name", PROBES)
def test_every_agent_acts_on_the_actor_part_and_values_on_the_critic_part(name):
    """With structured observations the actor (acting, evaluation, export) reads ``state`` only and the critics
    ``privileged_state``; TD-MPC2's encoder, which serves planning, reads the actor's part for everything."""
    probe = PROBES[name]
    cfg = probe.bandit_cfg
    spec = EnvSpec(obs_size=7, action_size=1, decisions_per_episode=10, actor_obs="state",
                   critic_obs="privileged_state", obs_parts=(("state", 3), ("privileged_state", 4)))
    agent = jax.jit(lambda key: probe.agent.init(key, spec, cfg))(jax.random.PRNGKey(0))  # jitted: eager is slow
    keys = jax.random.split(jax.random.PRNGKey(1), 3)
    state_part = jax.random.normal(keys[0], (5, 3))
    one = {"state": state_part, "privileged_state": jax.random.normal(keys[1], (5, 4))}
    other = {"state": state_part, "privileged_state": jax.random.normal(keys[2], (5, 4))}
    carry = probe.agent.init_carry(5, spec, cfg)

    @jax.jit
    def act(obs):
        return probe.agent.act(agent, obs, jax.random.PRNGKey(2), cfg, True, carry)[0]

    np.testing.assert_array_equal(act(one), act(other))
    np.testing.assert_array_equal(act(one), act(state_part))  # an exported policy gets the actor's part alone
    action = jnp.zeros((5, 1))
    q = jax.jit(lambda obs: probe.q(cfg)(agent, obs, action))
    q_one, q_other = q(one), q(other)
    if name == "tdmpc2":  # its Q-heads start at zero, so compare what the encoder makes of each observation
        encode = jax.jit(lambda obs: agent.model.apply(agent.model_params, obs, method="encode"))
        np.testing.assert_array_equal(encode(one), encode(other))
        np.testing.assert_array_equal(encode(one), encode(state_part))
        assert not np.allclose(encode(one), encode({**one, "state": state_part + 1.0}))
    else:
        assert not np.allclose(q_one, q_other)
        changed_state = {"state": state_part + 1.0, "privileged_state": one["privileged_state"]}
        np.testing.assert_array_equal(q_one, q(changed_state))


def test_a_structured_run_resumes_with_a_changed_rate_and_exports_a_policy_and_onnx_graph_on_the_actor_part(cli,
                                                                                                    tmp_path):
    from experiments.export import load_policy

    run_dir = str(tmp_path / "run")
    result = cli("train", "--env", "toy/PrivilegedBandit", "--steps", "400", "--num-envs", "4", "--num-eval-envs", "2",
                 "--eval-every", "200", "--learning-starts", "200", "--buffer-size", "1000", "--normalize-obs",
                 "--sac.hidden-sizes", "16", "16", "--sac.batch-size", "32", "--run-dir", run_dir)
    assert result.returncode == 0, result.stderr
    policy, init_carry = load_policy(run_dir)
    state_part = jnp.ones((3, 1))
    actions, _ = policy(state_part, init_carry(3), jax.random.PRNGKey(0))
    full = {"state": state_part, "privileged_state": jnp.array([[0.5], [-0.5], [0.5]])}
    np.testing.assert_array_equal(actions, policy(full, init_carry(3), jax.random.PRNGKey(0))[0])
    assert actions.shape == (3, 1) and np.all(np.abs(actions) <= 1)
    # The ONNX graph reads the actor's part and folds the normaliser in: ``state`` is always 1 (mean 1, var 0),
    # so 1 normalises to 0 and anything 1e-3 away to the clip at +-10.
    onnx_path = str(tmp_path / "policy.onnx")
    exported = cli("export", run_dir, "--onnx", onnx_path)
    assert exported.returncode == 0 and "obs [B, 1] -> action [B, 1]" in exported.stdout, exported.stderr
    import onnxruntime

    obs = np.array([[1.0], [0.0], [1.001], [5.0], [-3.0]], np.float32)
    onnx_actions = onnxruntime.InferenceSession(onnx_path).run(["action"], {"obs": obs})[0]
    np.testing.assert_allclose(onnx_actions, policy(obs, init_carry(5), jax.random.PRNGKey(0))[0], atol=1e-5)
    # The resume check initialises the agent to test the new value: with the parts the networks read.
    resumed = cli("train", "--resume", run_dir, "--steps", "600", "--sac.critic-lr", "1e-4")
    assert resumed.returncode == 0, resumed.stderr
