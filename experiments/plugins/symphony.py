"""Symphony (Ishuov et al., arXiv 2512.10477), the S3 variant of the official code (timurgepard/Symphony-S2 at
c5eb0db, ``S3/symphony.py``; docs/sources.md): a deterministic-policy agent whose actor and critics are
one network trained by one optimiser step on one loss, with a fading replay buffer.

    jaxrl train --agent experiments.plugins.symphony:AGENT --env dmc/CartpoleSwingup

The pieces, each a function below:

* **Networks** (``FeedForward``): Linear -> LayerNorm -> Linear -> ReSine -> Linear, PyTorch's default init. The
  actor outputs [A, S, B] = tanh(out / 2); the action is tanh(|S| A + N), N = clip(xi, -e, e) / e the bounded
  pre-tanh noise (none when evaluating). The critic is 3 FeedForwards of 128 "nodes" each (384 at width 512).
* **One-pass loss** (``symphony_loss``): the next action comes from the *online* actor (no target actor), the
  target critic's soft value Qbar(s', a') (its nodes sorted, weighted by tanh((pi (1 - n/M))^e)), then
      L = -ReHAE((Qbar' - E) / |E|) + ReHSE(Q(s, a) - y) + Sw(S', B'),   y = r / r_n + gamma (1 - d) sg(Qbar'),
  E = 0.618 e_prev + 0.382 sg(Qbar') the moving baseline (e_prev its batch mean, kept in the state). The first
  term, the temporal advantage, trains the actor through a' alone; the second the critics; swaddling
  Sw(S, B) = mean[Omega(S^(1/sg B)) + B S ln S + Omega(B^2)], Omega(x) = ln((1 + x) / (1 - x)), bounds the scale S of
  the actor's mean and its own temperature B.
* **Optimiser** (``symphony_adam``): Adam without bias correction, betas (0.618, 0.995), weight decay 0.01 added to
  the step: theta <- theta - lr (m / (sqrt(v) + eps) + wd theta). The target critics move by Polyak after each step.
* **Exploration and reward scale**: the first 10,240 env steps act with the initial actor and its noise (the loop's
  ``warmup="policy"``); at their end the engine's ``refresh`` hook (inside the program) fits r_n = mean |r| over
  what the buffer holds and notes how many rows exploration wrote.
* **The fall** (``falling``, ``fall``): once training started (the code's ``Q_learning``, set with its buffer's
  tile-fill; here: exploration ended), decisions 950 to 1000 of every training episode, counted from 1, act with
  the noise alone, a = tanh(N): ``S3/train.py`` at c5eb0db, line 203, ``active = steps<(limit_step-50) if
  Q_learning else True`` with ``limit_step = 1000`` (line 134), passed to ``actor(state, action, noise)``
  (``S3/symphony.py`` line 186: ``tanh(float(action) * S * A + float(noise) * N)``), unconditionally: "we shut
  down actions and leave noise to get Terminal Transition" (the robot falls before its time limit, so the buffer
  holds terminations). Evaluation (its ``testing``) never falls. The per-env decision count is the acting carry
  (``init_carry``), reset by the loop at each episode's start. ``fall=False`` acts with the policy throughout and
  keeps no carry: runs saved before issue 47 (no fall) resume so.
* **Fading replay** (``fading_sample``, through the engine's ``sample_with_state`` hook): an age drawn from the
  code's fixed weights over a full buffer of positions i (oldest 0 .. newest N - 1), tanh((pi i / N)^e), by inverse
  CDF, a new draw for each of the 3 updates per env step. The code fills its buffer after exploration by tiling the
  exploration transitions 50 times (512k rows) and drops the oldest copies as new data arrives; here nothing is
  copied: an age older than the real data maps to the exploration row the tiled buffer would hold there (the
  copies repeat with the exploration's length), so the distribution over transitions is the code's.

What this file decides (deviations):
  * Terminal recycling (the code rolls its buffer by 2 when the oldest transition is a termination, so
    terminations are never dropped) is **not ported**: it changes which transitions the buffer keeps at insertion,
    which the engine's ring does not expose to an agent; sampling alone cannot reproduce it.
  * Ages are drawn per buffer row; with several envs a row holds one transition of each, drawn uniformly.
  * ``ema_epsilon`` (0: the code) guards |E| early in training when set (our reading: code and PDF differ).
  * Actions are in [-1, 1] (the code's train.py sets a_max = 1 too).
  * The fall counts decisions from the code's ``limit_step`` (``fall_limit``, 1000: decisions 950 .. 1000, 51 of
    them), not from the task's time limit: on a task of 1000 decisions (MuJoCo's, DMC's without action repeat)
    these are its last 51, as in the code; on a shorter one it never falls, as the code would not (its episodes
    end before step 950); on a longer one the code cuts the episode at 1000 and this engine does not, so decisions
    after 1000 act with the policy again. Set ``fall_limit`` to the task's decisions per episode to fall in its
    last 51 (e.g. 500 with action repeat 2), or ``fall`` False to act with the policy throughout.
  * The replay's order: the code's ``ReplayBuffer.add`` (``S3/symphony.py`` lines 306-324), once its buffer is
    full (always, after the tile-fill), writes the new transition at position N - 1 and then rolls the buffer by
    -1, so at sampling time the newest transition sits at position N - 2, every transition one position below
    where this file puts it, and position N - 1 holds the oldest one (rolled round from 0, overwritten by the next
    ``add``). Here age 0 (the newest transition whose s' is written) gets position N - 1's weight, and the oldest
    is dropped. The weights w_i = tanh((pi i / N)^e) rise with i, so the two distributions differ by exactly
    w_(N-1) / sum_i w_i in total variation: the stale transition's probability in the code, moved onto the newer
    ones. At the code's N = explore_time x times = 10,240 x 50 = 512,000 (``S3/train.py`` lines 131-132),
    sum_i w_i = N x 0.74603 (the mean of tanh((pi x)^e) over [0, 1)) = 381,965 and w_(N-1) = 1.0 to 1e-9, so
    1 / 381,965 = 2.6e-6 per draw (the ED variant's N = 7,680 x 50 = 384,000, ``ED/train.py`` line 92, gives 3.5e-6):
    about one draw in 1,000 updates of 384 draws. Not ported, as negligible.
  * ``refresh`` fits r_n at ``exploration_steps`` env steps: keep it equal to ``--learning-starts`` (both default
    to the code's 10,240), or updates before it see unscaled rewards.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxrl import ConfigError, checks
from jaxrl import buffer as buffer_lib
from jaxrl.agent import Agent, added_field
from jaxrl.losses import polyak_update, td_target
from jaxrl.networks import reading
from jaxrl.optim import gradient_step
from jaxrl.progress import Progress, progress_field
from jaxrl.types import Batch, EnvSpec, zeros_obs

static = lambda default: flax.struct.field(pytree_node=False, default=default)  # noqa: E731
GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0  # 0.618...: the code's beta1 and its baseline's rate


@flax.struct.dataclass
class Config:
    hidden_size: int = static(512)
    """width of every FeedForward (the code: N_rb / 1000)"""
    critic_nets: int = static(3)
    """FeedForward critics, each with hidden_size / 4 output nodes"""
    batch_size: int = static(384)
    """transitions per update (the code: the critic's node count)"""
    gradient_dropout: float = static(0.0)
    """share of each FeedForward's outputs that pass no gradient (S3: 0; the appendix's S~2: 0.75)"""
    lr: float = 1e-4
    """step size of the one optimiser"""
    beta1: float = GOLDEN
    """first-moment rate (no bias correction)"""
    beta2: float = 0.995
    """second-moment rate"""
    weight_decay: float = 0.01
    """added to the normalised step, times the parameter"""
    adam_epsilon: float = 1e-8
    """added to sqrt(v)"""
    gamma: float = 0.99
    """discount"""
    tau: float = 0.005
    """Polyak rate of the target critics"""
    baseline_rate: float = GOLDEN
    """alpha_E of the moving baseline E = alpha_E e_prev + (1 - alpha_E) sg(Qbar')"""
    ema_epsilon: float = 0.0
    """added to |E| in the temporal advantage's denominator (0: the code)"""
    noise_std: float = 1.0 / math.e
    """scale of the bounded pre-tanh noise"""
    noise_clip: float = math.e
    """the standard normal draw is clipped to +-noise_clip before scaling (so N is in [-1, 1])"""
    scale_floor: float = 1e-3
    """S and B are clipped to [scale_floor, 1 - scale_floor] in the swaddling term"""
    target_exponent: float = static(math.e)
    """exponent of the soft target's node weights tanh((pi (1 - n / M))^exponent)"""
    replay_exponent: float = static(math.e)
    """exponent of the fading replay's weights tanh((pi i / N)^exponent)"""
    exploration_steps: int = static(10_240)
    """env steps of exploration, at whose end r_n is fitted (keep = --learning-starts)"""
    tile_fill: bool = static(True)
    """sample as from the code's buffer filled by tiling the exploration transitions"""
    normalize_rewards: bool = static(True)
    """divide rewards by r_n = mean |r| over the exploration transitions"""
    fall: bool = added_field(True, before=False)
    """the code's fall: after exploration, decisions fall_limit - 50 .. fall_limit of an episode act with noise only"""
    fall_limit: int = added_field(1000)
    """the code's limit_step: the fall covers an episode's decisions fall_limit - 50 .. fall_limit (from 1)"""


def uniform_within(bound: float):
    """PyTorch's default inits: uniform in +-bound."""
    return lambda key, shape: jax.random.uniform(key, shape, minval=-bound, maxval=bound)


class TorchDense(nn.Module):
    """A Dense layer initialised as PyTorch's nn.Linear: kernel and bias uniform in +-1/sqrt(fan_in)."""

    features: int

    @nn.compact
    def __call__(self, x):
        init = uniform_within(1.0 / math.sqrt(x.shape[-1]))
        kernel = self.param("kernel", init, (x.shape[-1], self.features))
        return x @ kernel + self.param("bias", init, (self.features,))


class ReSine(nn.Module):
    """f = s sin(x / s), s = sigmoid(learned), then f sigmoid(1.5 f / s)."""

    @nn.compact
    def __call__(self, x):
        raw = self.param("s", uniform_within(1.0 / math.sqrt(x.shape[-1])), (x.shape[-1],))
        s = jax.nn.sigmoid(raw)
        f = s * jnp.sin(x / s)
        return f * jax.nn.sigmoid(1.5 * f / s)


def gradient_dropout(x, key, rate):
    """y = m x + (1 - m) sg(x), m ~ Bernoulli(1 - rate): the forward pass is x; a share ``rate`` passes no gradient."""
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x, jax.lax.stop_gradient(x))


class FeedForward(nn.Module):
    hidden_size: int
    output_size: int
    dropout: float = 0.0

    @nn.compact
    def __call__(self, x, dropout_key=None):
        x = nn.LayerNorm(epsilon=1e-5)(TorchDense(self.hidden_size)(x))  # no activation in between (the code's)
        x = TorchDense(self.output_size)(ReSine()(TorchDense(self.hidden_size)(x)))
        if self.dropout and dropout_key is not None:
            x = gradient_dropout(x, dropout_key, self.dropout)
        return x


class Actor(nn.Module):
    hidden_size: int
    action_size: int
    dropout: float = 0.0

    @nn.compact
    def __call__(self, obs, dropout_key=None):
        """(A, S, B): the pre-tanh mean direction, its scale |S| and the temperature |B|, each [..., |A|]."""
        out = jnp.tanh(FeedForward(self.hidden_size, 3 * self.action_size, self.dropout)(obs, dropout_key) / 2.0)
        mean, scale, beta = jnp.split(out, 3, axis=-1)
        return mean, jnp.abs(scale), jnp.abs(beta)


class Critic(nn.Module):
    hidden_size: int
    nets: int = 3
    dropout: float = 0.0

    @nn.compact
    def __call__(self, obs, action, dropout_key=None):
        """[..., nets x hidden_size / 4]: every net's nodes, net by net."""
        x = jnp.concatenate([obs, action], axis=-1)
        ensemble = nn.vmap(FeedForward, variable_axes={"params": 0}, split_rngs={"params": True}, in_axes=(None, 0),
                           out_axes=-2, axis_size=self.nets)
        keys = None if dropout_key is None else jax.random.split(dropout_key, self.nets)
        nodes = ensemble(self.hidden_size, self.hidden_size // 4, self.dropout)(x, keys)
        return nodes.reshape(nodes.shape[:-2] + (-1,))


@flax.struct.dataclass
class State:
    params: Any  # {"actor": ..., "critic": ...}: the online networks, one optimiser
    target_critic_params: Any
    opt_state: Any
    baseline: jax.Array  # e_prev, the batch mean of the last update's E (0 at the start)
    reward_scale: jax.Array  # 1 / r_n once exploration ended (1 before)
    exploration_rows: jax.Array  # int32 buffer rows exploration wrote (0 before it ended)
    actor: nn.Module = flax.struct.field(pytree_node=False)
    critic: nn.Module = flax.struct.field(pytree_node=False)
    progress: Progress | None = progress_field()


# ------------------------------------------------------------------------------------ the terms, by hand


def rehse(x):
    """Rectified Huber symmetric error: mean(x tanh(x / 2))."""
    return jnp.mean(x * jnp.tanh(x / 2.0))


def rehae(x):
    """Rectified Huber asymmetric error: mean(|x| tanh(x / 2)), odd and sign-preserving."""
    return jnp.mean(jnp.abs(x) * jnp.tanh(x / 2.0))


def swaddling(scale, beta):
    """mean[Omega(S^(1 / sg B)) + B S ln S + Omega(B^2)], Omega(x) = ln((1 + x) / (1 - x))."""
    def omega_barrier(x):
        return jnp.log((1.0 + x) / (1.0 - x))

    return jnp.mean(omega_barrier(scale ** (1.0 / jax.lax.stop_gradient(beta))) + beta * scale * jnp.log(scale)
                    + omega_barrier(jnp.square(beta)))


def node_weights(nodes: int, exponent: float) -> np.ndarray:
    """p_n proportional to tanh((pi (1 - n / M))^exponent), n = 0 .. M - 1 over the nodes sorted ascending."""
    w = np.tanh((math.pi * (1.0 - np.arange(nodes) / nodes)) ** exponent)
    return (w / w.sum()).astype(np.float32)


def soft_value(nodes, exponent: float):
    """The code's critic_soft: the nodes sorted ascending, weighted by ``node_weights`` (mostly the lower ones)."""
    return jnp.sort(nodes, axis=-1) @ node_weights(nodes.shape[-1], exponent)


def fading_weights(rows: int, exponent: float) -> np.ndarray:
    """tanh((pi i / N)^exponent) for positions i = 0 (oldest) .. N - 1 (newest) of a full buffer (unnormalised)."""
    return np.tanh((math.pi * np.arange(rows) / rows) ** exponent)


def action_from(mean, scale, noise):
    return jnp.tanh(scale * mean + noise)


def bounded_noise(key, shape, cfg: Config):
    return cfg.noise_std * jnp.clip(jax.random.normal(key, shape), -cfg.noise_clip, cfg.noise_clip)


class SymphonyAdamState(NamedTuple):
    m: Any
    v: Any


def symphony_adam(lr, beta1, beta2, epsilon, weight_decay) -> optax.GradientTransformation:
    """The code's Adam: no bias correction, weight decay inside the step (optax's adam always corrects the bias)."""
    def init(params):
        zeros = jax.tree.map(jnp.zeros_like, params)
        return SymphonyAdamState(zeros, zeros)

    def update(grads, state, params):
        m = jax.tree.map(lambda m, g: beta1 * m + (1.0 - beta1) * g, state.m, grads)
        v = jax.tree.map(lambda v, g: beta2 * v + (1.0 - beta2) * jnp.square(g), state.v, grads)
        step = jax.tree.map(lambda m, v, p: -lr * (m / (jnp.sqrt(v) + epsilon) + weight_decay * p), m, v, params)
        return step, SymphonyAdamState(m, v)

    return optax.GradientTransformation(init, update)


def optimizer(cfg: Config):
    return symphony_adam(cfg.lr, cfg.beta1, cfg.beta2, cfg.adam_epsilon, cfg.weight_decay)


# ------------------------------------------------------------------------------------------------- loss


def symphony_loss(params, state: State, batch: Batch, key, cfg: Config):
    """-temporal advantage + TD + swaddling, one function of all online parameters (the code's one-loss update)."""
    noise_key, actor_drop, target_drop, critic_drop = jax.random.split(key, 4)
    mean, scale, beta = state.actor.apply(params["actor"], batch.next_obs, actor_drop)
    next_action = action_from(mean, scale, bounded_noise(noise_key, mean.shape, cfg))
    next_value = soft_value(state.critic.apply(state.target_critic_params, batch.next_obs, next_action, target_drop),
                            cfg.target_exponent)  # [B], with the actor's gradient through a'
    fixed_next = jax.lax.stop_gradient(next_value)
    target = td_target(batch.replace(reward=batch.reward * state.reward_scale), fixed_next)
    q = state.critic.apply(params["critic"], batch.obs, batch.action, critic_drop)  # [B, nodes]
    baseline = cfg.baseline_rate * state.baseline + (1.0 - cfg.baseline_rate) * fixed_next  # [B], no gradient
    temporal_advantage = rehae((next_value - baseline) / (jnp.abs(baseline) + cfg.ema_epsilon))
    td = rehse(q - target[:, None])
    floor = cfg.scale_floor
    swaddle = swaddling(jnp.clip(scale, floor, 1.0 - floor), jnp.clip(beta, floor, 1.0 - floor))
    loss = -temporal_advantage + td + swaddle
    return loss, {"loss": loss, "temporal_advantage": temporal_advantage, "td_loss": td, "swaddling": swaddle,
                  "q_mean": jnp.mean(q), "target_mean": jnp.mean(target), "scale": jnp.mean(scale),
                  "beta": jnp.mean(beta), "baseline": jnp.mean(baseline)}


# ------------------------------------------------------------------------------------------- replay hooks


def end_of_exploration(state: State, buffer, key, cfg: Config) -> State:
    """The engine's ``refresh`` at ``exploration_steps``: r_n = mean |r| over every row written so far, and how many
    rows that is (the block the fading replay's virtual copies come from); once, later calls keep both."""
    rows = buffer.reward.shape[0]
    written = (jnp.arange(rows) < buffer.size)[:, None]
    mean_abs = jnp.sum(jnp.where(written, jnp.abs(buffer.reward), 0.0)) / jnp.maximum(jnp.sum(written) *
                                                                                      buffer.reward.shape[1], 1)
    first = state.exploration_rows == 0
    scale = 1.0 / jnp.maximum(mean_abs, 1e-8) if cfg.normalize_rewards else jnp.float32(1.0)
    return state.replace(reward_scale=jnp.where(first, scale, state.reward_scale),
                         exploration_rows=jnp.where(first, buffer.size, state.exploration_rows))


def exploration_interval(cfg: Config) -> int:
    return cfg.exploration_steps


def fading_rows(state: State, buffer, key, count: int, cfg: Config):
    """Rows drawn by the fading replay: an age a (0 the newest sampleable row) from the fixed weights over a full
    buffer; where the ring is not full and a is older than its data, the exploration row a tiled buffer holds
    there, e = (new - 1 - a) mod E (``new`` rows written after exploration's E). Without ``tile_fill``, the same
    weights over the n rows written so far (i / n instead of i / N)."""
    rows = buffer.reward.shape[0]
    sampleable = jnp.maximum(buffer.size - 1, 1)
    if not cfg.tile_fill:  # the weights over the rows there are (newest excluded), not over a full buffer
        positions = jnp.arange(rows)
        weights = jnp.tanh((jnp.pi * positions / sampleable) ** cfg.replay_exponent)
        cdf = jnp.cumsum(jnp.where(positions < sampleable, weights, 0.0))
        u = jax.random.uniform(key, (count,), maxval=cdf[-1])
        position = jnp.minimum(jnp.searchsorted(cdf, u, side="right"), sampleable - 1)
        return (buffer.ptr - 2 - (sampleable - 1 - position)) % rows
    cdf = np.cumsum(fading_weights(rows, cfg.replay_exponent))
    u = jax.random.uniform(key, (count,), maxval=float(cdf[-1]))
    position = jnp.minimum(jnp.searchsorted(jnp.asarray(cdf, jnp.float32), u, side="right"), rows - 1)
    age = rows - 1 - position
    real = (buffer.ptr - 2 - jnp.minimum(age, sampleable - 1)) % rows
    explored = jnp.maximum(state.exploration_rows, 1)
    new = sampleable - state.exploration_rows
    tiled = (new - 1 - age) % explored  # exploration wrote rows 0 .. E - 1 of a ring that has not wrapped yet
    virtual = (age >= sampleable) & (buffer.size < rows) & (state.exploration_rows > 0)
    return jnp.where(virtual, tiled, real)


def fading_sample(state: State, buffer, key, cfg: Config) -> Batch:
    """``cfg.batch_size`` one-step transitions from the fading replay (the engine's ``sample_with_state``)."""
    row_key, env_key = jax.random.split(key)
    row = fading_rows(state, buffer, row_key, cfg.batch_size, cfg)
    env = jax.random.randint(env_key, (cfg.batch_size,), 0, buffer.reward.shape[1])
    return buffer_lib.transitions_at(buffer, row, env, cfg.gamma)


# ------------------------------------------------------------------------------------- init / act / update


def check_config(cfg: Config) -> None:
    checks.positive_ints(cfg, "hidden_size", "critic_nets", "batch_size", "exploration_steps")
    if cfg.hidden_size % 4:
        raise ConfigError(f"hidden_size={cfg.hidden_size} must be a multiple of 4 (each critic has hidden_size / 4 "
                          "nodes)")
    checks.positive(cfg, "lr", "adam_epsilon", "noise_std", "noise_clip", "target_exponent", "replay_exponent")
    checks.non_negative(cfg, "weight_decay", "ema_epsilon")
    checks.unit_interval(cfg, "gamma", "tau")
    for name in ("beta1", "beta2", "baseline_rate", "gradient_dropout"):
        checks.require(cfg, name, lambda x: 0.0 <= x < 1.0, "a number in [0, 1)")
    checks.require(cfg, "scale_floor", lambda x: 0.0 < x < 0.5, "a number in (0, 0.5)")
    checks.positive_ints(cfg, "fall_limit")
    if cfg.fall_limit <= FALL_MARGIN + 1:  # the window fall_limit - 50 .. fall_limit would cover whole episodes
        raise ConfigError(f"fall_limit={cfg.fall_limit} must be > {FALL_MARGIN + 1} (the fall is decisions "
                          f"fall_limit - {FALL_MARGIN} .. fall_limit of an episode; --symphony.fall False: none)")


def init(key, spec: EnvSpec, cfg: Config) -> State:
    actor = reading(spec.actor_obs, Actor(cfg.hidden_size, spec.action_size, cfg.gradient_dropout))
    critic = reading(spec.critic_obs, Critic(cfg.hidden_size, cfg.critic_nets, cfg.gradient_dropout))
    actor_key, critic_key = jax.random.split(key)
    obs, action = zeros_obs(spec, (1,)), jnp.zeros((1, spec.action_size))
    params = {"actor": actor.init(actor_key, obs), "critic": critic.init(critic_key, obs, action)}
    return State(params=params, target_critic_params=params["critic"], opt_state=optimizer(cfg).init(params),
                 baseline=jnp.zeros((), jnp.float32), reward_scale=jnp.ones((), jnp.float32),
                 exploration_rows=jnp.zeros((), jnp.int32), actor=actor, critic=critic)


# The code's fall: ``active = steps<(limit_step-50)`` (S3/train.py line 203), steps counted from 1.
FALL_MARGIN = 50


def init_carry(num_envs: int, spec: EnvSpec, cfg: Config):
    """The decisions each env has taken in its episode (0 at its start; the loop resets it there): the fall's
    clock. Without the fall, none (the carry of runs saved before the fall existed, which resume with it off)."""
    return jnp.zeros((num_envs,), jnp.int32) if cfg.fall else ()


def falling(state: State, decisions, cfg: Config):
    """Whether each env's next decision (number ``decisions`` + 1 of its episode) is the fall's: noise alone.
    Only once training started (the code's Q_learning: here, exploration ended, ``exploration_rows`` > 0)."""
    step = decisions + 1  # the code's ``steps``, counted from 1
    window = (step >= cfg.fall_limit - FALL_MARGIN) & (step <= cfg.fall_limit)  # past its limit_step: see docstring
    return cfg.fall & (state.exploration_rows > 0) & window


def act(state: State, obs, key, cfg: Config, deterministic: bool = False, carry=()):
    """tanh(S A + N); in the fall tanh(N) (the code's ``float(action) * S * A`` with action False); evaluation drops
    N and never falls. ``carry``: each env's decisions so far in its episode (``init_carry``); () acts without the
    fall (no clock)."""
    mean, scale, _ = state.actor.apply(state.params["actor"], obs)
    clock = not isinstance(carry, tuple)
    next_carry = carry + 1 if clock else carry
    if deterministic:
        return action_from(mean, scale, 0.0), next_carry
    if clock:
        scale = jnp.where(falling(state, carry, cfg)[..., None], 0.0, scale)
    return action_from(mean, scale, bounded_noise(key, mean.shape, cfg)), next_carry


def make_update(loss_fn=symphony_loss):
    """One optimiser step on all online parameters, then the target critics' Polyak step and the new baseline."""
    def update(state: State, batch: Batch, key, cfg: Config):
        step = gradient_step(loss_fn, state.params, state.opt_state, optimizer(cfg), state, batch, key, cfg)
        target = polyak_update(step.params["critic"], state.target_critic_params, cfg.tau)
        state = state.replace(params=step.params, opt_state=step.opt_state, target_critic_params=target,
                              baseline=step.aux["baseline"])
        return state, {**step.aux, "grad_norm/nets": step.grad_norm, "reward_scale": state.reward_scale}

    return update


update = make_update()

# The official values of Config's fields and where each is set (the docs' defaults table puts them beside ours).
_NETS, _TRAIN = "Symphony-S2 c5eb0db S3/symphony.py", "Symphony-S2 c5eb0db S3/train.py"
OFFICIAL = {
    "hidden_size": (512, f"{_TRAIN}: h_dim = capacity // 1000, capacity 10240 x 50"),
    "critic_nets": (3, f"{_NETS}: qA, qB, qC"), "batch_size": (384, f"{_NETS}: batch_size = q_dist, 3 x h_dim // 4"),
    "gradient_dropout": (0.0, f"{_NETS}: no GradientDropout in FeedForward"),
    "beta1": (GOLDEN, f"{_NETS} Adam: (sqrt(5) - 1) / 2"), "beta2": (0.995, f"{_NETS} Adam"),
    "weight_decay": (0.01, f"{_NETS} Adam"), "baseline_rate": (GOLDEN, f"{_NETS} Nets.alpha"),
    "ema_epsilon": (0.0, f"{_NETS}: / q_next_ema.abs()"), "noise_std": (1.0 / math.e, f"{_NETS} ActorCritic.std"),
    "noise_clip": (math.e, f"{_NETS}: randn clamped to +-e"),
    "target_exponent": (math.e, f"{_NETS} ActorCritic.probs"),
    "replay_exponent": (math.e, f"{_NETS} ReplayBuffer.norm_fill"),
    "exploration_steps": (10_240, f"{_TRAIN} explore_time"),
    "tile_fill": (True, f"{_NETS} ReplayBuffer.norm_fill, {_TRAIN} times 50"),
    "normalize_rewards": (True, f"{_NETS} ReplayBuffer.norm_fill: mean |r|"),
    "fall": (True, f"{_TRAIN} line 203"), "fall_limit": (1000, f"{_TRAIN} limit_step, line 134"),
}

AGENT = Agent(name="symphony", Config=Config, init=init, act=act, update=update, check_config=check_config,
              init_carry=init_carry,
              loop_defaults={"learning_starts": 10_240, "warmup": "policy", "updates_per_step": 3.0,
                             "buffer_size": 512_000},
              refresh=end_of_exploration, refresh_interval=exploration_interval, sample_with_state=fading_sample)
