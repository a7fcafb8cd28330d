"""FastTD3 and FastSAC by hand: the C51 target, each agent's critic and actor losses on critics with fixed
distributions, the delayed-actor schedule, per-env exploration scales and the official initialisations."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from agents import fastsac, fasttd3
from jaxrl.distributional import c51_target
from jaxrl.networks import MLP
from jaxrl.optim import official_delayed_turn
from jaxrl.types import Batch, EnvSpec
from tests.helpers import KEY, FixedActor, sampled

SUPPORT = np.array([-1.0, 0.0, 1.0])  # v_min -1, v_max 1, 3 atoms: spacing 1
# Sample 0 bootstraps with discount 0.5 after reward 0.5; sample 1 terminates with reward 0.
BATCH = Batch(obs=jnp.zeros((2, 1)), action=jnp.zeros((2, 1)), reward=jnp.array([0.5, 0.0]),
              next_obs=jnp.zeros((2, 1)), terminated=jnp.array([False, True]), truncated=jnp.array([False, False]),
              discount=jnp.array([0.5, 0.5]))
TARGET_PROBS = np.array([[0.2, 0.5, 0.3], [0.6, 0.3, 0.1]])  # expected values 0.1 and -0.5
ONLINE_PROBS = np.array([[1 / 3, 1 / 3, 1 / 3], [0.1, 0.2, 0.7]])  # expected values 0 and 0.6


def project_by_hand(atoms, probs):
    """C51's floor/ceil rule over SUPPORT, one atom at a time (an independent reference for the fused one)."""
    out = np.zeros(len(SUPPORT))
    for z, p in zip(np.clip(atoms, -1.0, 1.0), probs, strict=True):
        b = z + 1.0  # fractional bin index
        low, high = int(np.floor(b)), int(np.ceil(b))
        if low == high:
            out[low] += p
        else:
            out[low] += p * (high - b)
            out[high] += p * (b - low)
    return out


def test_c51_target_moves_the_atoms_to_the_td_target_and_projects_them():
    # Sample 0: atoms 0.5 + 0.5 z = (0, 0.5, 1): [0.2 | 0.5 split | 0.3] -> (0, 0.45, 0.55).
    # Sample 1 terminates: every atom at r = 0 -> all mass on the middle bin.
    m = c51_target(BATCH, jnp.asarray(TARGET_PROBS[:1].repeat(2, 0)), jnp.asarray(SUPPORT))
    np.testing.assert_allclose(m, [[0.0, 0.45, 0.55], [0.0, 1.0, 0.0]], atol=1e-6)
    # A soft shift of 0.4 (alpha log pi) on sample 0: atoms 0.5 + 0.5 (z - 0.4) = (-0.2, 0.3, 0.8).
    shifted = c51_target(BATCH, jnp.asarray(TARGET_PROBS[:1].repeat(2, 0)), jnp.asarray(SUPPORT),
                         next_shift=jnp.array([0.4, 0.4]))
    np.testing.assert_allclose(shifted[0], project_by_hand([-0.2, 0.3, 0.8], TARGET_PROBS[0]), atol=1e-6)


class FixedLogits(nn.Module):
    """Two critics whose distributions ignore (s, a): logits [2, M] broadcast to [2, B, M]."""

    @nn.compact
    def __call__(self, obs, action):
        logits = self.param("logits", lambda k: jnp.zeros((2, 3)))
        return jnp.broadcast_to(logits[:, None, :], (2, obs.shape[0], 3))


class ConstantAction(nn.Module):
    @nn.compact
    def __call__(self, obs):
        return jnp.broadcast_to(jnp.tanh(self.param("a", lambda k: jnp.zeros((1,)))), obs.shape[:-1] + (1,))


def fixed_critics(state_cls, actor, **extra):
    critic = FixedLogits()
    online = {"params": {"logits": jnp.log(jnp.asarray(ONLINE_PROBS, jnp.float32))}}
    target = {"params": {"logits": jnp.log(jnp.asarray(TARGET_PROBS, jnp.float32))}}
    actor_params = actor.init(KEY, BATCH.obs)
    opt = optax.adam(1e-3)
    return state_cls(actor_params=actor_params, critic_params=online, target_critic_params=target,
                     actor_opt_state=opt.init(actor_params), critic_opt_state=opt.init(online),
                     num_updates=jnp.zeros((), jnp.int32), last_actor_metrics={}, actor=actor, critic=critic, **extra)


def cross_entropy(target, probs):
    return -np.sum(target * np.log(probs))


@pytest.mark.parametrize("use_cdq", [True, False])
def test_fasttd3_critic_loss_by_hand(use_cdq):
    cfg = fasttd3.Config(v_min=-1.0, v_max=1.0, num_atoms=3, use_cdq=use_cdq)
    state = fixed_critics(fasttd3.State, ConstantAction())
    loss, aux = fasttd3.critic_loss(state.critic_params, state, BATCH, KEY, cfg)
    own = [project_by_hand([0.0, 0.5, 1.0], p) for p in TARGET_PROBS]  # (0, .45, .55) mean .55; (0, .75, .25) .25
    ending = np.array([0.0, 1.0, 0.0])
    # CDQ: both critics learn the projection with the smaller expected value, the second target critic's.
    targets = [own[1], own[1]] if use_cdq else own
    expected = sum(np.mean([cross_entropy(t, ONLINE_PROBS[j]), cross_entropy(ending, ONLINE_PROBS[j])])
                   for j, t in enumerate(targets))
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
    np.testing.assert_allclose(aux["target_mean"], np.mean([t @ SUPPORT for t in targets] + [0.0, 0.0]), atol=1e-6)


@pytest.mark.parametrize("use_cdq, expected", [(True, -0.0), (False, -0.3)])
def test_fasttd3_actor_loss_uses_the_smaller_critic_with_cdq_and_their_mean_without(use_cdq, expected):
    cfg = fasttd3.Config(v_min=-1.0, v_max=1.0, num_atoms=3, use_cdq=use_cdq)
    state = fixed_critics(fasttd3.State, ConstantAction())
    loss, _ = fasttd3.actor_loss(state.actor_params, state, BATCH, KEY, cfg)
    np.testing.assert_allclose(loss, expected, atol=1e-6)  # Q1 = 0, Q2 = 0.6


def fastsac_state(alpha):
    opt = optax.adam(1e-3)
    log_alpha = jnp.log(jnp.float32(alpha))
    return fixed_critics(fastsac.State, FixedActor(), log_alpha=log_alpha, target_entropy=jnp.float32(0.0),
                         alpha_opt_state=opt.init(log_alpha))


def test_fastsac_critic_loss_by_hand_each_critic_with_its_own_soft_target():
    cfg = fastsac.Config(v_min=-1.0, v_max=1.0, num_atoms=3)
    alpha = 0.5
    state = fastsac_state(alpha)
    loss, aux = fastsac.critic_loss(state.critic_params, state, BATCH, KEY, cfg)
    _, log_prob = sampled(KEY, 2, epsilon=1e-6)  # the next actions the loss draws with KEY, and their log pi
    expected = 0.0
    for j in range(2):
        atoms = 0.5 + 0.5 * (SUPPORT - alpha * log_prob[0])  # sample 0 bootstraps; sample 1 ends at r = 0
        targets = [project_by_hand(atoms, TARGET_PROBS[j]), np.array([0.0, 1.0, 0.0])]
        expected += np.mean([cross_entropy(t, ONLINE_PROBS[j]) for t in targets])
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
    np.testing.assert_allclose(aux["next_log_prob"], log_prob, rtol=1e-5)


def test_fastsac_actor_loss_uses_the_mean_of_the_critics_and_alpha_log_pi():
    cfg = fastsac.Config(v_min=-1.0, v_max=1.0, num_atoms=3)
    state = fastsac_state(0.5)
    loss, _ = fastsac.actor_loss(state.actor_params, state, BATCH, KEY, cfg)
    _, log_prob = sampled(KEY, 2, epsilon=1e-6)
    np.testing.assert_allclose(loss, np.mean(0.5 * log_prob - 0.3), rtol=1e-5)  # (Q1 + Q2) / 2 = (0 + 0.6) / 2


def test_fastsac_temperature_steps_with_every_critic_update_and_the_actor_every_fourth():
    spec = EnvSpec(obs_size=3, action_size=2, decisions_per_episode=10)
    cfg = fastsac.Config(actor_hidden_sizes=(8,), critic_hidden_sizes=(8,), batch_size=4, alpha_lr=0.1)
    state = fastsac.init(KEY, spec, cfg)
    batch = Batch(obs=jnp.ones((4, 3)), action=jnp.zeros((4, 2)), reward=jnp.ones(4), next_obs=jnp.ones((4, 3)),
                  terminated=jnp.zeros(4, bool), truncated=jnp.zeros(4, bool), discount=jnp.full(4, 0.97))
    update = jax.jit(lambda s, k: fastsac.update(s, batch, k, cfg))
    alphas, actors = [], []
    for i in range(6):
        before = state.actor_params
        state, _ = update(state, jax.random.PRNGKey(i))
        alphas.append(float(state.log_alpha))
        actors.append(not all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(before),
                                                                     jax.tree.leaves(state.actor_params), strict=True)))
    assert len(set(alphas)) == 6  # a new temperature after every update
    assert actors == [False, True, False, False, False, True]  # updates 2 and 6: the official i % 4 == 1


def test_the_official_delayed_schedule():
    turns = lambda delay: [n for n in range(1, 13) if official_delayed_turn(n, delay)]  # noqa: E731
    assert turns(1) == list(range(1, 13))
    assert turns(2) == [2, 4, 6, 8, 10, 12]
    assert turns(4) == [2, 6, 10]


def test_fasttd3_draws_one_exploration_scale_per_env_and_episode():
    spec = EnvSpec(obs_size=3, action_size=2, decisions_per_episode=10)
    cfg = fasttd3.Config(actor_hidden_sizes=(8,), critic_hidden_sizes=(8,), std_min=0.2, std_max=0.3)
    state = fasttd3.init(KEY, spec, cfg)
    carry = fasttd3.init_carry(5, spec, cfg)
    obs = jnp.zeros((5, 3))
    _, scales = fasttd3.act(state, obs, jax.random.PRNGKey(1), cfg, False, carry)
    assert np.all((scales >= 0.2) & (scales <= 0.3)) and len(set(np.asarray(scales).tolist())) == 5
    _, kept = fasttd3.act(state, obs, jax.random.PRNGKey(2), cfg, False, scales)
    np.testing.assert_array_equal(kept, scales)  # the same episode keeps its scale
    restarted = scales.at[0].set(fasttd3.init_carry(1, spec, cfg)[0])  # what the loop does when env 0 resets
    _, redrawn = fasttd3.act(state, obs, jax.random.PRNGKey(3), cfg, False, restarted)
    assert redrawn[0] != scales[0] and 0.2 <= redrawn[0] <= 0.3
    np.testing.assert_array_equal(redrawn[1:], scales[1:])
    # The noise has each env's scale: over many actions of one env its std matches.
    many = jnp.zeros((4000, 3))
    fixed = jnp.full((4000,), 0.25)
    actions, _ = fasttd3.act(state, many, jax.random.PRNGKey(4), cfg, False, fixed)
    mean_action, _ = fasttd3.act(state, many[:1], KEY, cfg, True, fixed[:1])
    np.testing.assert_allclose(np.std(np.asarray(actions - mean_action)), 0.25, rtol=0.05)


def test_official_initialisations():
    spec = EnvSpec(obs_size=3, action_size=2, decisions_per_episode=10)
    td3_state = fasttd3.init(KEY, spec, fasttd3.Config(actor_hidden_sizes=(512,), critic_hidden_sizes=(8,)))
    head = td3_state.actor_params["params"]["MLP_0"]["Dense_1"]["kernel"]
    np.testing.assert_allclose(np.std(np.asarray(head)), 0.01, rtol=0.1)  # N(0, init_scale^2), 1024 weights
    sac_cfg = fastsac.Config(actor_hidden_sizes=(8,), critic_hidden_sizes=(8,))
    sac_state = fastsac.init(KEY, spec, sac_cfg)
    mean, log_std = sac_state.actor.apply(sac_state.actor_params, jax.random.normal(KEY, (4, 3)))
    np.testing.assert_array_equal(mean, 0.0)  # zero heads: mean 0, log std mid-range of [-5, 0]
    np.testing.assert_allclose(log_std, -2.5)
    np.testing.assert_allclose(float(jnp.exp(sac_state.log_alpha)), 0.001, rtol=1e-6)
    assert float(sac_state.target_entropy) == 0.0


def test_layer_norm_first_puts_the_norm_between_dense_and_activation():
    x = jax.random.normal(KEY, (2, 3))
    mlp = MLP((4,), 1, "silu", layer_norm=True, layer_norm_first=True)
    params = mlp.init(KEY, x)
    p = params["params"]
    h = x @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"]
    h = (h - h.mean(-1, keepdims=True)) / jnp.sqrt(h.var(-1, keepdims=True) + 1e-6)
    h = h * p["LayerNorm_0"]["scale"] + p["LayerNorm_0"]["bias"]
    expected = jax.nn.silu(h) @ p["Dense_1"]["kernel"] + p["Dense_1"]["bias"]
    np.testing.assert_allclose(mlp.apply(params, x), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("agent", [fasttd3, fastsac], ids=["fasttd3", "fastsac"])
def test_seed_k_of_a_vmapped_run_matches_its_single_run(agent):
    """The engine's seed contract for both: seed 1 of a 2-seed program is the seed-1 run alone (FastTD3's per-env
    noise scales included, drawn from the same keys)."""
    from jaxrl.loop import LoopConfig
    from tests.helpers import train

    loop = LoopConfig(steps=400, num_envs=4, num_eval_envs=2, eval_every=200, learning_starts=200, buffer_size=1000,
                      warmup="policy", normalize_obs=True)
    cfg = agent.Config(actor_hidden_sizes=(16,), critic_hidden_sizes=(16,), batch_size=32)
    pair, pair_history = train("toy/Pendulum", loop, cfg, seed=0, seeds=2, agent=agent.AGENT)
    alone, alone_history = train("toy/Pendulum", loop, cfg, seed=1, seeds=1, agent=agent.AGENT)
    for a, b in zip(jax.tree.leaves(pair.agent.actor_params), jax.tree.leaves(alone.agent.actor_params), strict=True):
        np.testing.assert_allclose(a[1], b[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(pair_history[-1]["eval/return"][1], alone_history[-1]["eval/return"][0], rtol=1e-4)
    if agent is fasttd3:
        np.testing.assert_allclose(pair.carry[1], alone.carry[0], rtol=1e-6)
        assert not np.allclose(pair.carry[0], pair.carry[1])  # and the two seeds explore differently


class SaturatedActor(nn.Module):
    """mean 7, log std -6: u is about 7 in every dimension, where tanh saturates."""

    @nn.compact
    def __call__(self, obs):
        mean = self.param("mean", lambda k: jnp.array([7.0, -7.0]))
        log_std = self.param("log_std", lambda k: jnp.array([-6.0, -6.0]))
        return jnp.broadcast_to(mean, obs.shape[:-1] + (2,)), jnp.broadcast_to(log_std, obs.shape[:-1] + (2,))


def test_fastsac_follows_the_official_log_prob_and_layer_norm_epsilons():
    """holosoma: log pi = log N(u) - sum log(1 - tanh(u)^2 + 1e-6), and torch's LayerNorm epsilon 1e-5. At u = 7 the
    official correction sits 0.26 nats per dimension above the exact one; log_prob_epsilon=None restores it."""
    obs = jnp.zeros((3, 1))
    actor = SaturatedActor()
    params = actor.init(KEY, obs)
    state = fastsac_state(0.5).replace(actor=actor, actor_params=params)
    state = state.replace(critic_params=jax.tree.map(jnp.zeros_like, state.critic_params))
    batch = BATCH.replace(obs=jnp.zeros((2, 1)))
    eps = np.asarray(jax.random.normal(KEY, (2, 2)))
    u = np.array([7.0, -7.0]) + np.exp(-6.0) * eps
    gaussian = (-0.5 * eps**2 - (-6.0) - 0.5 * np.log(2 * np.pi)).sum(-1)
    official = gaussian - np.log(1 - np.tanh(u) ** 2 + 1e-6).sum(-1)
    exact = gaussian - np.log(1 - np.tanh(u.astype(np.float64)) ** 2).sum(-1)
    for epsilon, expected in ((1e-6, official), (None, exact)):
        cfg = fastsac.Config(v_min=-1.0, v_max=1.0, num_atoms=3, log_prob_epsilon=epsilon)
        loss, aux = fastsac.actor_loss(state.actor_params, state, batch, KEY, cfg)
        # float32's tanh(7) is within an ulp of 1, so 1 - tanh^2 carries ~2 % error there: 0.1 nats of tolerance,
        # against the 0.5 nats (two dimensions) that separate the two forms.
        np.testing.assert_allclose(aux["entropy"], -expected.mean(), atol=0.1)
    assert np.all(official - exact < -0.5)  # two dimensions, each 0.26 nats higher correction: log pi lower
    spec = EnvSpec(obs_size=3, action_size=2, decisions_per_episode=10)
    agent_state = fastsac.init(KEY, spec, fastsac.Config(actor_hidden_sizes=(4,), critic_hidden_sizes=(4,)))
    x = 1e-3 * jax.random.normal(KEY, (2, 3))  # small inputs: the epsilon matters against their variance
    params = jax.tree.map(lambda a: a, agent_state.actor_params)
    p = params["params"]["MLP_0"]
    p["Dense_1"]["kernel"] = jax.random.normal(KEY, p["Dense_1"]["kernel"].shape)  # the zero head, made non-zero
    h = x @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"]
    h = (h - h.mean(-1, keepdims=True)) / jnp.sqrt(h.var(-1, keepdims=True) + 1e-5)
    h = jax.nn.silu(h * p["LayerNorm_0"]["scale"] + p["LayerNorm_0"]["bias"])
    out = h @ p["Dense_1"]["kernel"] + p["Dense_1"]["bias"]
    mean, _ = agent_state.actor.apply(params, x)
    np.testing.assert_allclose(mean, out[:, :2], rtol=1e-5, atol=1e-6)
