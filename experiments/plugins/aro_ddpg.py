"""ARO-DDPG: average-reward off-policy deterministic actor-critic (Saxena, Khastagir, Kolathaya & Bhatnagar,
ICML 2023, arXiv 2305.12239), on TD3's machinery.

    jaxrl train --agent experiments.plugins.aro_ddpg:AGENT --env dmc/CheetahRun

The critics learn the differential Q of the average-reward criterion rho(pi) = lim 1/T E sum_t r_t: no discount,
and a learned scalar rho is subtracted from every reward. Following the official code (namansaxena9/ARO-DDPG
5803e81, ``ddpg_model.py: Agent.update``; docs/sources.md):

    y = r + (1 - d) min_j Qbar_j(s', mubar(s'))                      no target-policy smoothing noise
    L(theta, rho) = 1/2 sum_j E[(Q_j(s, a) + rho - y)^2]             one loss, minimised over theta and rho at once
    L_actor = -E[min_j Q_j(s, mu(s))]                                every 2nd update, then Polyak of all targets

rho starts at 0 and has its own Adam (lr 3e-4, as the critics). Exploration is Ornstein-Uhlenbeck noise (theta
0.15, sigma 0.2) added to the actor's action and clipped, one process per env, kept in the loop's acting carry.
Defaults are the code's cheetah_run config: 2x128 ReLU, batch 256, lr 3e-4 everywhere, tau 0.005, 1 update per env
step, 5000 random warm-up steps, buffer 1e5.

Hooks: extra learned state (a ``State`` subclass with rho and its optimizer state, and an ``update`` that moves it
beside TD3's), ``make_update(target_fn=..., critic_loss_fn=..., actor_loss_fn=...)``, and ``init_carry``/``act``
for the noise process. Decisions (where the code leaves a choice):
  * time limits bootstrap (the engine's rule); the code stores the time-limit step as done, which drops the
    bootstrap at the horizon: ``truncation_terminal=True`` reproduces that.
  * no smoothing noise on the target (the code has none); gamma is this Config's own 1.0, not TD3's 0.99.
  * (deviation) each env's noise process restarts from 0 at the start of its episodes (the loop resets the carry);
    the official process is built once in ``train.py`` and never reset.
  * (deviation) the actor and the targets step on updates 2, 4, ... (TD3's ``every_nth``); the official counter
    steps them on updates 1, 3, ...
  * the code's blocks of 1000 updates every 1000 env steps are the loop's 1 update per env step (same count).
"""
from __future__ import annotations

from types import MappingProxyType
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp

from agents import td3
from jaxrl import checks
from jaxrl.losses import target_or_online, td_target
from jaxrl.optim import adam, gradient_step

static = lambda default: flax.struct.field(pytree_node=False, default=default)  # noqa: E731


@flax.struct.dataclass
class Config(td3.Config):
    hidden_sizes: tuple[int, ...] = static((128, 128))
    """hidden layer widths of the actor and of each critic (the code's 2x128)"""
    gamma: float = 1.0
    """1: the average-reward criterion (no discount); below 1 the target is discounted as well"""
    rho_lr: float = 3e-4
    """Adam learning rate of the average reward rho"""
    ou_theta: float = 0.15
    """mean reversion of the Ornstein-Uhlenbeck exploration noise"""
    ou_sigma: float = 0.2
    """std of the Ornstein-Uhlenbeck process's increments"""
    truncation_terminal: bool = static(False)
    """drop the bootstrap at time limits as the official code does (False: time limits bootstrap, the engine's rule)"""


@flax.struct.dataclass
class State(td3.State):
    rho: jax.Array = None  # the average reward estimate
    rho_opt_state: Any = None


def differential_target(state: State, batch, key, cfg: Config):
    """y = r + discount (1 - d) min_j Qbar_j(s', mubar(s')), discount = gamma = 1 by default; no smoothing noise.
    d is ``terminated`` (or ``terminated | truncated`` with ``truncation_terminal``)."""
    next_action = state.actor.apply(target_or_online(state.target_actor_params, state.actor_params), batch.next_obs)
    next_q = state.critic.apply(target_or_online(state.target_critic_params, state.critic_params), batch.next_obs,
                                next_action)
    next_q = jnp.min(next_q[..., 0], axis=0)
    if cfg.truncation_terminal:
        batch = batch.replace(terminated=batch.terminated | batch.truncated)
    return jax.lax.stop_gradient(td_target(batch, next_q))


def differential_critic_loss(critic_params, state: State, batch, key, cfg: Config, target_fn=differential_target):
    """1/2 sum_j E[(Q_j(s, a) + rho - y)^2]: the critics and rho regress on the same residual."""
    target = target_fn(state, batch, key, cfg)
    q = state.critic.apply(critic_params, batch.obs, batch.action)[..., 0]  # [num_critics, B]
    loss = 0.5 * jnp.sum(jnp.mean(jnp.square(q + state.rho - target), axis=-1))
    return loss, {"critic_loss": loss, "q_mean": jnp.mean(q), "target_mean": jnp.mean(target)}


def rho_loss(rho, state: State, batch, key, cfg: Config):
    """The critic loss as a function of rho (its gradient: sum_j E[Q_j + rho - y])."""
    return differential_critic_loss(state.critic_params, state.replace(rho=rho), batch, key, cfg)


def min_q_actor_loss(actor_params, state: State, batch, key, cfg: Config):
    """-E[min_j Q_j(s, mu(s))]: the minimum of the critics, where TD3 follows the first."""
    q = state.critic.apply(state.critic_params, batch.obs, state.actor.apply(actor_params, batch.obs))[..., 0]
    loss = -jnp.mean(jnp.min(q, axis=0))
    return loss, {"actor_loss": loss}


def check_config(cfg: Config) -> None:
    td3.check_config(cfg)
    checks.positive(cfg, "rho_lr")
    checks.non_negative(cfg, "ou_theta", "ou_sigma")


def init(key, spec, cfg: Config) -> State:
    base = td3.init(key, spec, cfg)
    rho = jnp.zeros((), jnp.float32)
    return State(**{f: getattr(base, f) for f in base.__dataclass_fields__ if f != "progress"}, rho=rho,
                 rho_opt_state=adam(cfg, cfg.rho_lr, weight_decay=False).init(rho))


def init_carry(num_envs: int, spec, cfg: Config):
    """Each env's Ornstein-Uhlenbeck noise, 0 at the start of its episodes."""
    return jnp.zeros((num_envs, spec.action_size), jnp.float32)


def act(state: State, obs, key, cfg: Config, deterministic: bool = False, carry=()):
    """mu(s) + x, x <- x - theta x + sigma N(0, I) per env (dt = 1), clipped to the action bounds."""
    action = state.actor.apply(state.actor_params, obs)
    if deterministic:
        return action, carry
    noise = carry - cfg.ou_theta * carry + cfg.ou_sigma * jax.random.normal(key, carry.shape)
    return jnp.clip(action + noise, -1.0, 1.0), noise


td3_update = td3.make_update(critic_loss_fn=differential_critic_loss, actor_loss_fn=min_q_actor_loss,
                             target_fn=differential_target)


def update(state: State, batch, key, cfg: Config):
    """TD3's update on the differential losses, with rho's step taken at the same point as the critics' (the
    official joint step over theta and rho)."""
    critic_key, _ = jax.random.split(key)  # the key TD3's update gives its critic loss (unused: no noise)
    rho_opt = adam(cfg, cfg.rho_lr, state.progress, weight_decay=False)
    rho = gradient_step(rho_loss, state.rho, state.rho_opt_state, rho_opt, state, batch, critic_key, cfg)
    state, metrics = td3_update(state, batch, key, cfg)
    return state.replace(rho=rho.params, rho_opt_state=rho.opt_state), {**metrics, "rho": rho.params}


# The official values of Config's fields and where each is set (the docs' defaults table puts them beside ours).
_CODE = "ARO-DDPG 5803e81 cheetah_run/"
OFFICIAL = {
    "hidden_sizes": ((128, 128), f"{_CODE}config.py actor_hidden, critic_hidden; 2 layers in ddpg_model.py"),
    "gamma": (1.0, f"{_CODE}ddpg_model.py Agent.update: q_target = reward + (1 - done) min(q1, q2)"),
    "rho_lr": (3e-4, f"{_CODE}config.py lr_rho"),
    "ou_theta": (0.15, f"{_CODE}ddpg_model.py OUNoise theta"),
    "ou_sigma": (0.2, f"{_CODE}ddpg_model.py OUNoise max_sigma = min_sigma"),
    "truncation_terminal": (True, f"{_CODE}train.py: done = True at epi_len, stored in the buffer"),
}

AGENT = td3.AGENT._replace(
    name="aro_ddpg", Config=Config, init=init, act=act, init_carry=init_carry, update=update,
    check_config=check_config,
    loop_defaults=MappingProxyType(dict(learning_starts=5000, buffer_size=100_000, updates_per_step=1.0)))
