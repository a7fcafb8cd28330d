"""TD-MPC2: a latent world model trained by TD learning, acting by MPPI planning (Hansen et al., ICLR 2024).

Reads top to bottom: Config -> networks -> State -> losses -> planning (act) -> init / update -> AGENT.

Follows the official code (nicklashansen/tdmpc2 `tdmpc2/tdmpc2.py`, `tdmpc2/common/world_model.py`,
`tdmpc2/config.yaml`) at model size 5 (~5M parameters): encoder (obs -> 256 -> 512, SimNorm groups of 8), latent
dynamics, reward head and an ensemble of 5 Q-heads (dropout 0.01 after the first layer) regressing two-hot targets
on 101 symlog bins, and a tanh-Gaussian policy prior (log std in [-10, 2]); every hidden layer is Linear ->
LayerNorm -> Mish, weights N(0, 0.02^2) (the official trunc_normal_(std=0.02) cuts only at +-2), reward and Q output
layers zero; 6 MPPI iterations per decision, 8 when |A| >= 20. One update: 256 sub-trajectories of H + 1 = 4
observations that never cross an episode end (the engine's window sampling); world-model loss 20 consistency + 0.1
reward + 0.1 value with rho = 0.5 temporal weights, TD targets from the min of 2 random target Q-heads at the
policy's action, global grad-norm clip 20, encoder lr x 0.3; then the policy prior on the detached rollout latents
with Q scaled by the running 5-95 percentile range S; target Q Polyak tau 0.01.

Acting is MPPI (``jaxrl/planning.py``) for all envs at once inside the compiled loop: the per-env warm-start
means are the agent's ``carry`` (zeroed by the loop at episode starts). Loop defaults: 5,000 random seed steps
followed by 5,000 updates in one go, then 1 update per agent step. For the DMC protocol (action repeat 2,
2,500 seed agent steps) use ``--config tdmpc2_dmc``.

Deviations: the pair of Q-heads used for a planning decision is drawn once per decision (official: per MPPI
iteration); batched envs (default 16, official 1); terminations are bootstrapped with (1 - terminated) but
there is no termination head (the official ``episodic=false`` default; prefer non-terminating DMC tasks).
The world model's passes take no mutable collections: a BatchNorm inside it has nowhere to write its statistics
(its Q-heads' dropout does flow, as above).
"""
from __future__ import annotations

import dataclasses
import math
from types import MappingProxyType
from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp
import optax

from jaxrl import ConfigError, checks
from jaxrl import buffer as buffer_lib
from jaxrl.agent import Agent, added_field, extra_field
from jaxrl.losses import polyak_update, target_or_online
from jaxrl.networks import select_part, simnorm, tanh_log_det_jacobian
from jaxrl.optim import OptimizerConfig, adam, grad_norm_metrics, gradient_step
from jaxrl.planning import PlannerConfig, plan, shift_mean
from jaxrl.progress import Progress, progress_field
from jaxrl.regression import bins, soft_cross_entropy, two_hot, two_hot_inverse
from jaxrl.types import EnvSpec, WindowBatch, zeros_obs

static = lambda default: flax.struct.field(pytree_node=False, default=default)  # noqa: E731


@flax.struct.dataclass
class Config(OptimizerConfig):  # Adam's betas, eps (the world model's), weight decay, lr schedule
    latent_dim: int = static(512)
    """size of the latent state z (SimNorm groups of simnorm_dim)"""
    hidden_dim: int = static(512)
    """width of the dynamics, reward, Q and policy MLPs"""
    encoder_dim: int = static(256)
    """hidden width of the encoder"""
    num_q: int = static(5)
    """Q-heads in the ensemble"""
    simnorm_dim: int = static(8)
    """SimNorm group size"""
    num_bins: int = static(101)
    """two-hot bins on [-10, 10] in symlog space"""
    horizon: int = static(3)
    """H: model rollout length in training and planning"""
    batch_size: int = static(256)
    """sub-trajectories per update"""
    num_samples: int = static(512)
    """MPPI action sequences per iteration (policy-prior ones included)"""
    num_elites: int = static(64)
    """MPPI elites"""
    num_pi_trajs: int = static(24)
    """policy-prior sequences among the samples"""
    iterations: int = static(6)
    """MPPI iterations per decision; 2 more are run when |A| >= 20, as the official code does"""
    dropout: float = static(0.01)
    """dropout after the first layer of each Q-head"""
    lr: float = 3e-4
    """Adam learning rate of the world model and the policy prior"""
    encoder_lr_scale: float = 0.3
    """the encoder learns at lr * this"""
    grad_clip_norm: float = 20.0
    """global gradient-norm clip of both optimizers (the official name; OptimizerConfig's max_grad_norm is refused
    here, so one setting clips)"""
    consistency_coef: float = 20.0
    """weight of the latent consistency loss in the world-model loss"""
    reward_coef: float = 0.1
    """weight of the reward cross-entropy in the world-model loss"""
    value_coef: float = 0.1
    """weight of the Q-heads' cross-entropy in the world-model loss"""
    entropy_coef: float = 1e-4
    """beta of the policy prior's entropy bonus"""
    rho: float = 0.5
    """temporal weight rho^t of step t in every loss"""
    gamma: float = 0.99
    """discount (the official heuristic gives 0.99 on DMC)"""
    tau: float = 0.01
    """Polyak rate of the target Q-heads"""
    target_networks: bool = added_field(True)
    """target Q-heads moved by Polyak averaging (tau); False: the TD targets read the online Q-heads under
    stop_gradient, with no copy kept and no Polyak step"""
    temperature: float = 0.5
    """MPPI: weights exp(temperature (G - max G))"""
    min_std: float = 0.05
    """MPPI: lower clip of the sampling std"""
    max_std: float = 2.0
    """MPPI: the sampling std at the first iteration, and its upper clip"""


# -------------------------------------------------------------------------------------------- networks

# The official nn.init.trunc_normal_(w, std=0.02) keeps its default cut-offs at +-2 (absolute, 100 std): in effect an
# untruncated N(0, 0.02^2). Flax's truncated_normal(0.02) would cut at 2 std (effective std ~0.0176).
WEIGHT_INIT = nn.initializers.normal(0.02)


class NormedLinear(nn.Module):
    """Linear -> (Dropout) -> LayerNorm (eps 1e-5, as PyTorch) -> Mish, or SimNorm instead of Mish."""

    features: int
    dropout: float = 0.0
    simnorm_dim: int | None = None

    @nn.compact
    def __call__(self, x, train: bool = False):
        x = nn.Dense(self.features, kernel_init=WEIGHT_INIT)(x)
        if self.dropout:
            x = nn.Dropout(self.dropout, deterministic=not train)(x)
        x = nn.LayerNorm(epsilon=1e-5)(x)
        return simnorm(x, self.simnorm_dim) if self.simnorm_dim else jax.nn.mish(x)


class Head(nn.Module):
    """NormedLinear hidden layers, then a plain linear output (zero-initialised for reward and Q)."""

    hidden: tuple[int, ...]
    out: int
    zero_out: bool = False
    dropout: float = 0.0

    @nn.compact
    def __call__(self, x, train: bool = False):
        for i, width in enumerate(self.hidden):
            x = NormedLinear(width, self.dropout if i == 0 else 0.0)(x, train)
        init = nn.initializers.zeros if self.zero_out else WEIGHT_INIT
        return nn.Dense(self.out, kernel_init=init)(x)


def static_config(cfg: Config) -> Config:
    """``cfg``'s static (shape-fixing) fields, every numeric field at its default: plain Python values only."""
    return Config(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)
                     if not f.metadata.get("pytree_node", True)})


class WorldModel(nn.Module):
    """Encoder h, dynamics d, reward R and Q-ensemble; methods are applied with ``method=``.

    ``cfg`` is a ``static_config``: the module lives in the State as static metadata, so it must not hold the
    numeric hyperparameters, which are traced arrays inside the program (a sweep's members differ in them)."""

    cfg: Config
    obs_size: int
    action_size: int
    obs_part: str | None = None  # the part of a structured observation the encoder reads (EnvSpec.actor_obs)

    def setup(self):
        c = self.cfg
        self.encoder = [NormedLinear(c.encoder_dim), NormedLinear(c.latent_dim, simnorm_dim=c.simnorm_dim)]
        self.dynamics_net = [NormedLinear(c.hidden_dim), NormedLinear(c.hidden_dim),
                             NormedLinear(c.latent_dim, simnorm_dim=c.simnorm_dim)]
        self.reward_net = Head((c.hidden_dim, c.hidden_dim), c.num_bins, zero_out=True)
        self.q_nets = nn.vmap(Head, variable_axes={"params": 0}, split_rngs={"params": True, "dropout": True},
                              in_axes=None, out_axes=0, axis_size=c.num_q)(
            (c.hidden_dim, c.hidden_dim), c.num_bins, zero_out=True, dropout=c.dropout)

    def encode(self, obs):
        obs = select_part(obs, self.obs_part)
        for layer in self.encoder:
            obs = layer(obs)
        return obs

    def dynamics(self, z, a):
        x = jnp.concatenate([z, a], axis=-1)
        for layer in self.dynamics_net:
            x = layer(x)
        return x

    def reward(self, z, a):
        return self.reward_net(jnp.concatenate([z, a], axis=-1))

    def q(self, z, a, train: bool = False):
        """Logits [num_q, ..., num_bins]."""
        return self.q_nets(jnp.concatenate([z, a], axis=-1), train)

    def __call__(self, obs, a):
        z = self.encode(obs)
        return self.dynamics(z, a), self.reward(z, a), self.q(z, a)


class PolicyPrior(nn.Module):
    """(mean, log_std) of a tanh-Gaussian over actions from z; log_std = -10 + 6 (tanh(x) + 1)."""

    hidden_dim: int
    action_size: int

    @nn.compact
    def __call__(self, z):
        out = Head((self.hidden_dim, self.hidden_dim), 2 * self.action_size)(z)
        mean, raw = jnp.split(out, 2, axis=-1)
        return mean, -10.0 + 6.0 * (jnp.tanh(raw) + 1.0)


@flax.struct.dataclass
class State:
    model_params: Any
    target_q_params: Any  # a Polyak copy of model_params["params"]["q_nets"] (None without target networks)
    policy_params: Any
    model_opt_state: Any
    policy_opt_state: Any
    q_scale: jax.Array  # S: running 5-95 percentile range of Q, starts at 1
    model: nn.Module = flax.struct.field(pytree_node=False)
    policy: nn.Module = flax.struct.field(pytree_node=False)
    progress: Progress | None = progress_field()  # where the run is, set by the loop for act/update
    extra: Any = extra_field()  # a plug-in's own learned state; the engine never touches it


# ---------------------------------------------------------------------------------------------- losses


def sample_policy(policy, params, z, key):
    """(action, scaled log-prob) with the paper-era scaled entropy (nicklashansen/tdmpc2 b67b21c
    `tdmpc2/common/world_model.py` ``pi``; the current code forms it differently since 804f9b3):
    log pi_scaled = |A| sum_i log N(u_i; mu_i, sigma_i) - sum_i log(1 - tanh(u_i)^2)."""
    mean, log_std = policy.apply(params, z)
    eps = jax.random.normal(key, mean.shape)
    u = mean + jnp.exp(log_std) * eps
    gaussian = jnp.sum(-0.5 * eps**2 - log_std - 0.5 * math.log(2 * math.pi), axis=-1)
    jacobian = jnp.sum(tanh_log_det_jacobian(u), axis=-1)
    return jnp.tanh(u), mean.shape[-1] * gaussian - jacobian


def q_values(model, params, z, a, members, key=None):
    """The mean of the two-hot read-outs of the Q-heads ``members`` (dropout on when a key is given)."""
    rngs = {"dropout": key} if key is not None else {}
    logits = model.apply(params, z, a, key is not None, method="q", rngs=rngs)
    return jnp.mean(two_hot_inverse(logits[members], bins(logits.shape[-1])), axis=0), logits


def with_q(params, q_params):
    return {"params": {**params["params"], "q_nets": q_params}}


def q_heads(model, params, members):
    """(model, params) whose ``q`` method computes only the Q-heads ``members``, in that order. The planner values
    every sample with 2 of the num_q heads: at 5 heads, computing only those takes 3/5 of the Q arithmetic away,
    which is a quarter of a decision's (the pendulum test's planner: 37 -> 29 ms per decision for 4 envs on a
    2-core CPU). The sums match the full ensemble's to float rounding, not bitwise (XLA picks its matmul tiling
    by the head count). The TD target keeps the full ensemble (no time measurable there: the update is bound by
    its number of small ops) and so does the policy loss (its dropout keys are split over all num_q heads)."""
    q_nets = jax.tree.map(lambda p: p[members], params["params"]["q_nets"])
    return model.clone(cfg=model.cfg.replace(num_q=members.shape[0])), with_q(params, q_nets)


def td_targets(state: State, batch: WindowBatch, key, cfg: Config):
    """y_t = r_t + gamma (1 - terminated_t) min(Qbar_i, Qbar_j)(z'_{t+1}, a'), i, j 2 random target heads,
    z'_{t+1} the online encoder's latent of the true next observation; [B, H]."""
    members_key, action_key = jax.random.split(key)
    next_z = state.model.apply(state.model_params, jax.tree.map(lambda obs: obs[:, 1:], batch.obs), method="encode")
    next_action, _ = sample_policy(state.policy, state.policy_params, next_z, action_key)
    members = jax.random.choice(members_key, cfg.num_q, (2,), replace=False)
    target_q = target_or_online(state.target_q_params, state.model_params["params"]["q_nets"])
    logits = state.model.apply(with_q(state.model_params, target_q), next_z, next_action, method="q")
    next_q = jnp.min(two_hot_inverse(logits[members], bins(cfg.num_bins)), axis=0)
    not_done = 1.0 - batch.terminated.astype(jnp.float32)
    return jax.lax.stop_gradient(batch.reward + cfg.gamma * not_done * next_q), next_z


def world_model_loss(model_params, state: State, batch: WindowBatch, key, cfg: Config):
    """20 L_consistency + 0.1 L_reward + 0.1 L_value on one batch of sub-trajectories (nicklashansen/tdmpc2
    `tdmpc2/tdmpc2.py` ``_update``)."""
    target_key, dropout_key = jax.random.split(key)
    y, next_z = td_targets(state, batch, target_key, cfg)
    next_z = jax.lax.stop_gradient(next_z)
    model = state.model
    horizon = cfg.horizon
    weights = cfg.rho ** jnp.arange(horizon)
    valid = batch.valid.astype(jnp.float32)
    masked_mean = lambda x: jnp.sum(x * valid) / jnp.maximum(jnp.sum(valid), 1.0)  # noqa: E731

    z = model.apply(model_params, jax.tree.map(lambda obs: obs[:, 0], batch.obs), method="encode")
    latents = [z]
    consistency = 0.0
    for t in range(horizon):
        z = model.apply(model_params, z, batch.action[:, t], method="dynamics")
        consistency += weights[t] * masked_mean(jnp.mean(jnp.square(z - next_z[:, t]), axis=-1))
        latents.append(z)
    rolled = jnp.stack(latents[:-1], axis=1)  # z_0..z_{H-1}: [B, H, d]
    grid = bins(cfg.num_bins)
    reward_logits = model.apply(model_params, rolled, batch.action, method="reward")
    reward_ce = soft_cross_entropy(reward_logits, two_hot(batch.reward, grid))  # [B, H]
    q_logits = model.apply(model_params, rolled, batch.action, True, method="q", rngs={"dropout": dropout_key})
    value_ce = soft_cross_entropy(q_logits, two_hot(y, grid)[None])  # [num_q, B, H]
    reward_loss = sum(weights[t] * masked_mean(reward_ce[:, t]) for t in range(horizon)) / horizon
    value_loss = sum(weights[t] * masked_mean(jnp.sum(value_ce[:, :, t], axis=0)) for t in range(horizon))
    value_loss = value_loss / (horizon * cfg.num_q)
    consistency = consistency / horizon
    loss = cfg.consistency_coef * consistency + cfg.reward_coef * reward_loss + cfg.value_coef * value_loss
    info = {"model_loss": loss, "consistency_loss": consistency, "reward_loss": reward_loss,
            "value_loss": value_loss, "q_target_mean": jnp.mean(y)}
    return loss, (info, jax.lax.stop_gradient(jnp.stack(latents, axis=1)))


def policy_loss(policy_params, state: State, latents, key, cfg: Config):
    """sum_t rho^t E[-beta H_t - Q(z_t, pi(z_t)) / S] / (H + 1) on the detached rollout latents; Q is the mean
    of 2 random online heads (dropout on) whose parameters get no gradient. Returns the updated S as aux."""
    action_key, members_key, dropout_key = jax.random.split(key, 3)
    action, scaled_log_prob = sample_policy(state.policy, policy_params, latents, action_key)
    members = jax.random.choice(members_key, cfg.num_q, (2,), replace=False)
    q, _ = q_values(state.model, jax.lax.stop_gradient(state.model_params), latents, action, members, dropout_key)
    q0 = jax.lax.stop_gradient(q[:, 0])
    spread = jnp.percentile(q0, 95.0) - jnp.percentile(q0, 5.0)
    q_scale = state.q_scale + 0.01 * (jnp.maximum(spread, 1.0) - state.q_scale)  # updated before use (official)
    per_step = jnp.mean(-cfg.entropy_coef * (-scaled_log_prob) - q / q_scale, axis=0)  # [H + 1]
    loss = jnp.mean(per_step * cfg.rho ** jnp.arange(per_step.shape[0]))
    return loss, {"policy_loss": loss, "q_scale": q_scale, "entropy": -jnp.mean(scaled_log_prob)}


# ---------------------------------------------------------------------------------------- planning (act)


def planner_config(cfg: Config, action_size: int) -> PlannerConfig:
    """The planner's settings; like the official code (``tdmpc2/tdmpc2.py``), 2 more MPPI iterations when
    |A| >= 20."""
    iterations = cfg.iterations + (2 if action_size >= 20 else 0)
    return PlannerConfig(horizon=cfg.horizon, num_samples=cfg.num_samples, num_elites=cfg.num_elites,
                         num_pi_trajs=cfg.num_pi_trajs, iterations=iterations, temperature=cfg.temperature,
                         min_std=cfg.min_std, max_std=cfg.max_std, gamma=cfg.gamma)


def act(state: State, obs, key, cfg: Config, deterministic: bool = False, carry=None):
    """MPPI for every env at once: ``carry`` [N, H, A] holds each env's previous plan mean (warm start)."""
    model, params = state.model, state.model_params
    grid = bins(cfg.num_bins)
    members_key, key = jax.random.split(key)
    members = jax.random.choice(members_key, cfg.num_q, (2,), replace=False)
    pair, pair_params = q_heads(model, params, members)

    def dynamics(z, a):
        return model.apply(params, z, a, method="dynamics")

    def reward(z, a):
        return two_hot_inverse(model.apply(params, z, a, method="reward"), grid)

    def value(z, a):
        return q_values(pair, pair_params, z, a, slice(None))[0]  # pair holds just the two heads

    def policy(z, key):
        return sample_policy(state.policy, state.policy_params, z, key)[0]

    z = model.apply(params, obs, method="encode")
    decide = lambda z, mean, key: plan(z, shift_mean(mean), key, dynamics, reward, value, policy,  # noqa: E731
                                       planner_config(cfg, carry.shape[-1]), deterministic)
    return jax.vmap(decide)(z, carry, jax.random.split(key, z.shape[0]))


def init_carry(num_envs: int, spec: EnvSpec, cfg: Config):
    """Zero plan means: a fresh episode has no warm start."""
    return jnp.zeros((num_envs, cfg.horizon, spec.action_size), jnp.float32)


def sample_batch(buffer, key, cfg: Config) -> WindowBatch:
    """Sub-trajectories of H transitions (H + 1 observations) inside one episode."""
    return buffer_lib.sample_windows(buffer, key, cfg.batch_size, cfg.horizon)


# ------------------------------------------------------------------------------------- init / update


def optimizers(cfg: Config, progress: Progress | None = None):
    """(world model, policy prior), each clipped to grad_clip_norm first; Adam's settings from cfg
    (``jaxrl.optim.adam``, ``progress`` feeding ``lr_schedule``), except the policy's epsilon, the official 1e-5."""
    model_opt = optax.chain(
        optax.clip_by_global_norm(cfg.grad_clip_norm),
        optax.multi_transform({"encoder": adam(cfg, cfg.lr * cfg.encoder_lr_scale, progress),
                               "rest": adam(cfg, cfg.lr, progress)},
                              lambda params: {"params": {name: ("encoder" if name.startswith("encoder") else "rest")
                                                         for name in params["params"]}}))
    policy_opt = optax.chain(optax.clip_by_global_norm(cfg.grad_clip_norm), adam(cfg, cfg.lr, progress,
                                                                                 adam_eps=1e-5))
    return model_opt, policy_opt


def check_config(cfg: Config) -> None:
    """Called by the loop on the host with concrete values before compiling (inside, numeric fields are traced)."""
    checks.positive_ints(cfg, "latent_dim", "hidden_dim", "encoder_dim", "num_q", "simnorm_dim", "num_bins", "horizon",
                         "batch_size", "num_samples", "num_elites", "num_pi_trajs", "iterations")
    if cfg.latent_dim % cfg.simnorm_dim:
        raise ConfigError(f"latent_dim={cfg.latent_dim} must be a multiple of simnorm_dim={cfg.simnorm_dim}")
    if not 0 < cfg.num_pi_trajs < cfg.num_samples or not 0 < cfg.num_elites <= cfg.num_samples:
        raise ConfigError(f"need 0 < num_pi_trajs={cfg.num_pi_trajs} < num_samples={cfg.num_samples} and "
                          f"0 < num_elites={cfg.num_elites} <= num_samples")
    if cfg.num_q < 2:
        raise ConfigError(f"num_q={cfg.num_q} must be >= 2 (targets take the min of 2 random heads)")
    if cfg.num_bins < 2:
        raise ConfigError(f"num_bins must be an integer >= 2 (two-hot targets need two ends), got {cfg.num_bins}")
    checks.require(cfg, "dropout", lambda x: 0 <= x < 1, "a number in [0, 1)")
    checks.positive(cfg, "lr", "encoder_lr_scale", "grad_clip_norm", "temperature", "min_std", "max_std")
    checks.non_negative(cfg, "consistency_coef", "reward_coef", "value_coef", "entropy_coef")
    checks.unit_interval(cfg, "rho", "gamma", "tau")
    checks.bounds_ordered(cfg, "min_std", "max_std")
    checks.optimizer_fields(cfg)
    if cfg.max_grad_norm is not None:
        raise ConfigError(f"max_grad_norm={cfg.max_grad_norm}: TD-MPC2 clips with grad_clip_norm (official 20), set "
                          "that instead")


def init(key, spec: EnvSpec, cfg: Config) -> State:
    model = WorldModel(static_config(cfg), spec.obs_size, spec.action_size, spec.actor_obs)
    policy = PolicyPrior(cfg.hidden_dim, spec.action_size)
    model_key, policy_key = jax.random.split(key)
    obs, action = zeros_obs(spec, (1,)), jnp.zeros((1, spec.action_size))
    model_params = model.init(model_key, obs, action)
    policy_params = policy.init(policy_key, jnp.zeros((1, cfg.latent_dim)))
    model_opt, policy_opt = optimizers(cfg)
    return State(
        model_params=model_params,
        target_q_params=model_params["params"]["q_nets"] if cfg.target_networks else None,
        policy_params=policy_params,
        model_opt_state=model_opt.init(model_params),
        policy_opt_state=policy_opt.init(policy_params),
        q_scale=jnp.ones((), jnp.float32),
        model=model,
        policy=policy,
    )


def make_update(world_model_loss_fn=world_model_loss, policy_loss_fn=policy_loss):
    def update(state: State, batch: WindowBatch, key, cfg: Config):
        model_key, policy_key = jax.random.split(key)
        model_opt, policy_opt = optimizers(cfg, state.progress)
        model = gradient_step(world_model_loss_fn, state.model_params, state.model_opt_state, model_opt, state,
                              batch, model_key, cfg)
        info, latents = model.aux
        state = state.replace(model_params=model.params, model_opt_state=model.opt_state)
        policy = gradient_step(policy_loss_fn, state.policy_params, state.policy_opt_state, policy_opt, state,
                               latents, policy_key, cfg)
        state = state.replace(
            policy_params=policy.params, policy_opt_state=policy.opt_state, q_scale=policy.aux["q_scale"],
            target_q_params=polyak_update(model.params["params"]["q_nets"], state.target_q_params, cfg.tau))
        return state, {**info, **policy.aux, **grad_norm_metrics(model=model, policy=policy)}

    return update


update = make_update()

# The official values of Config's fields and where each is set (the docs' defaults table puts them beside ours).
_CFG, _SIZE = "nicklashansen/tdmpc2 e9f5932 tdmpc2/config.yaml", "tdmpc2/common/__init__.py MODEL_SIZE[5]"
OFFICIAL = {
    "latent_dim": (512, _SIZE), "hidden_dim": (512, f"{_SIZE}: mlp_dim"), "encoder_dim": (256, f"{_SIZE}: enc_dim"),
    "num_q": (5, _CFG), "simnorm_dim": (8, _CFG), "num_bins": (101, f"{_CFG}: on [vmin, vmax] = [-10, 10]"),
    "horizon": (3, _CFG), "batch_size": (256, _CFG), "num_samples": (512, _CFG), "num_elites": (64, _CFG),
    "num_pi_trajs": (24, _CFG), "iterations": (6, f"{_CFG}; tdmpc2/tdmpc2.py adds 2 for 20 or more action dims"),
    "dropout": (0.01, _CFG), "lr": (3e-4, _CFG), "encoder_lr_scale": (0.3, f"{_CFG}: enc_lr_scale"),
    "grad_clip_norm": (20.0, _CFG), "consistency_coef": (20.0, _CFG), "reward_coef": (0.1, _CFG),
    "value_coef": (0.1, _CFG), "entropy_coef": (1e-4, _CFG), "rho": (0.5, _CFG),
    "gamma": (0.99, "tdmpc2/tdmpc2.py _get_discount: (T/5 - 1)/(T/5) in [0.95, 0.995], 0.99 at DMC's T = 500"),
    "tau": (0.01, _CFG), "temperature": (0.5, _CFG), "min_std": (0.05, _CFG), "max_std": (2.0, _CFG),
}

AGENT = Agent(name="tdmpc2", Config=Config, init=init, act=act, update=update, check_config=check_config,
              init_carry=init_carry, sample_batch=sample_batch, terminal_obs=True,
              loop_defaults=MappingProxyType(dict(learning_starts=5_000, pretrain_updates=5_000,
                                                  updates_per_step=1.0)))
