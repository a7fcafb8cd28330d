"""TD3: Twin Delayed DDPG (Fujimoto et al. 2018, arXiv 1802.09477).

Reads top to bottom: Config -> State -> losses -> init / act / update -> AGENT.

Defaults follow the current official code (sfujim/TD3 `main.py`/`TD3.py`): 2x256 ReLU MLPs, Adam 3e-4, batch
256, gamma 0.99, tau 0.005, target policy smoothing sigma 0.2 clipped at 0.5, the actor and all targets updated
every 2nd critic update, Gaussian exploration noise 0.1. Actions live in [-1, 1], so the official scaling of every
noise by max_action (`main.py`) is the identity here. Deviations:
  * weights use lecun_uniform with zero biases (Brax) rather than PyTorch's default init;
  * data comes from batched envs (default 16) with one update per transition, not one env;
  * the official 25k random warm-up steps are the loop's ``--learning-starts`` (default 5000): pass 25000.
"""
from __future__ import annotations

from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp

from jaxrl import checks
from jaxrl.agent import Agent, added_field, delay_fields, extra_field
from jaxrl.losses import polyak_update, target_or_online, td_target, with_target
from jaxrl.networks import MLP, CriticEnsemble, forward, reading
from jaxrl.optim import (
    OptimizerConfig,
    adam,
    delayed_step,
    every_nth,
    grad_norm_metrics,
    gradient_step,
    network_state,
    trainable,
)
from jaxrl.progress import Progress, progress_field
from jaxrl.types import Batch, EnvSpec, zeros_obs

static = lambda default: flax.struct.field(pytree_node=False, default=default)  # noqa: E731


@flax.struct.dataclass
class Config(OptimizerConfig):  # Adam's betas, eps, weight decay, clipping, lr schedule
    hidden_sizes: tuple[int, ...] = static((256, 256))
    """hidden layer widths of the actor and of each critic"""
    batch_size: int = static(256)
    """transitions per gradient update"""
    n_step: int = static(1)
    """rewards summed per sampled transition before bootstrapping (n-step returns; 1 = the paper's one-step target)"""
    policy_delay: int = static(2)
    """critic updates per actor (and target) update"""
    num_critics: int = added_field(2)
    """critics in the ensemble; the target takes the minimum over all of them, the actor follows the first"""
    actor_lr: float = 3e-4
    """Adam learning rate of the actor"""
    critic_lr: float = 3e-4
    """Adam learning rate of the twin critics"""
    gamma: float = 0.99
    """discount"""
    tau: float = 0.005
    """Polyak rate of the target actor and critics"""
    policy_noise: float = 0.2
    """std of the target policy smoothing noise"""
    noise_clip: float = 0.5
    """the smoothing noise is clipped to [-noise_clip, noise_clip]"""
    exploration_noise: float = 0.1
    """std of the Gaussian noise added to actions while collecting data"""
    target_networks: bool = added_field(True)
    """a target actor and target critics moved by Polyak averaging (tau); False: the TD target reads the online
    actor and critics under stop_gradient, with no copies kept and no Polyak step"""


class DeterministicActor(nn.Module):
    hidden_sizes: tuple[int, ...]
    action_size: int

    @nn.compact
    def __call__(self, obs):
        return jnp.tanh(MLP(self.hidden_sizes, self.action_size)(obs))


@flax.struct.dataclass
class State:
    actor_params: Any
    target_actor_params: Any
    critic_params: Any
    target_critic_params: Any
    actor_opt_state: Any
    critic_opt_state: Any
    num_updates: jax.Array  # critic updates so far: the actor moves when it is a multiple of policy_delay
    last_actor_metrics: dict[str, jax.Array]  # the last actor step's (DELAYED_METRICS), reported on the updates
    # that skip the actor
    actor: nn.Module = flax.struct.field(pytree_node=False)
    critic: nn.Module = flax.struct.field(pytree_node=False)
    progress: Progress | None = progress_field()  # where the run is, set by the loop for act/update
    extra: Any = extra_field()  # a plug-in's own learned state; the engine never touches it


# ---------------------------------------------------------------------------------------------- losses


def smoothed_target_action(state: State, next_obs, key, cfg: Config):
    """clip(pi_target(s') + clip(eps, -c, c), -1, 1), eps ~ N(0, sigma^2) (target policy smoothing)."""
    action, _ = forward(state.actor, target_or_online(state.target_actor_params, state.actor_params), next_obs)
    noise = jnp.clip(cfg.policy_noise * jax.random.normal(key, action.shape), -cfg.noise_clip, cfg.noise_clip)
    return jnp.clip(action + noise, -1.0, 1.0)


def clipped_td_target(state: State, batch: Batch, key, cfg: Config):
    """y = r + gamma (1 - terminated) min_j Qbar_j(s', smoothed a'), no gradient (clipped double Q; Qbar: the
    target critics, or the online ones under stop_gradient with ``target_networks`` off)."""
    next_action = smoothed_target_action(state, batch.next_obs, key, cfg)
    next_q, _ = forward(state.critic, target_or_online(state.target_critic_params, state.critic_params),
                        batch.next_obs, next_action, train=True, key=jax.random.fold_in(key, 1))
    next_q = next_q[..., 0]
    return jax.lax.stop_gradient(td_target(batch, jnp.min(next_q, axis=0)))


def critic_loss(critic_params, state: State, batch: Batch, key, cfg: Config, target_fn=clipped_td_target):
    """sum_j E[(Q_j(s, a) - y)^2] with the TD target y = target_fn(...) (default: the clipped double-Q target).
    Critic passes are training passes (dropout keys folded from ``key``); new statistics return as
    aux[NETWORK_STATE]."""
    target = target_fn(state, batch, key, cfg)
    q, statistics = forward(state.critic, critic_params, batch.obs, batch.action, train=True,
                            key=jax.random.fold_in(key, 2))
    q = q[..., 0]
    loss = jnp.sum(jnp.mean(jnp.square(q - target), axis=-1))
    return loss, {"critic_loss": loss, "q_mean": jnp.mean(q), "target_mean": jnp.mean(target),
                  **network_state(statistics)}


def actor_loss(actor_params, state: State, batch: Batch, key, cfg: Config):
    """-E[Q_1(s, pi(s))]: only the first critic, as in the paper and the official code."""
    action, statistics = forward(state.actor, actor_params, batch.obs, train=True, key=jax.random.fold_in(key, 1))
    q, _ = forward(state.critic, state.critic_params, batch.obs, action, train=True, key=jax.random.fold_in(key, 2))
    loss = -jnp.mean(q[0, :, 0])
    return loss, {"actor_loss": loss, **network_state(statistics)}


# ------------------------------------------------------------------------------------- init / act / update


def optimizers(cfg: Config, progress: Progress | None = None):
    """Built from cfg at every call so learning rates may be traced values (sweeps vmap over them); ``progress``
    (``state.progress``) feeds ``lr_schedule``."""
    return adam(cfg, cfg.actor_lr, progress), adam(cfg, cfg.critic_lr, progress)


def check_config(cfg: Config) -> None:
    """Called by the loop on the host with concrete values before compiling (inside, numeric fields are traced)."""
    checks.positive_ints(cfg, "hidden_sizes", "batch_size", "n_step", "policy_delay", "num_critics")
    checks.positive(cfg, "actor_lr", "critic_lr")
    checks.unit_interval(cfg, "gamma", "tau")
    checks.non_negative(cfg, "policy_noise", "noise_clip", "exploration_noise")
    checks.optimizer_fields(cfg)


def init(key, spec: EnvSpec, cfg: Config) -> State:
    actor = reading(spec.actor_obs, DeterministicActor(cfg.hidden_sizes, spec.action_size))
    critic = reading(spec.critic_obs, CriticEnsemble(cfg.hidden_sizes, num_critics=cfg.num_critics))
    actor_key, critic_key = jax.random.split(key)
    obs, action = zeros_obs(spec, (1,)), jnp.zeros((1, spec.action_size))
    actor_params = actor.init(actor_key, obs)
    critic_params = critic.init(critic_key, obs, action)
    actor_opt, critic_opt = optimizers(cfg)
    return State(
        actor_params=actor_params,
        target_actor_params=actor_params if cfg.target_networks else None,
        critic_params=critic_params,
        target_critic_params=critic_params if cfg.target_networks else None,
        actor_opt_state=actor_opt.init(trainable(actor_params)),
        critic_opt_state=critic_opt.init(trainable(critic_params)),
        **delay_fields(DELAYED_METRICS),
        actor=actor,
        critic=critic,
    )


def act(state: State, obs, key, cfg: Config, deterministic: bool = False, carry=()):
    action, _ = forward(state.actor, state.actor_params, obs)
    if deterministic:
        return action, carry
    return jnp.clip(action + cfg.exploration_noise * jax.random.normal(key, action.shape), -1.0, 1.0), carry


# What the delayed actor step reports; the updates in between repeat its last values.
DELAYED_METRICS = ("actor_loss", "grad_norm/actor")


def make_update(critic_loss_fn=critic_loss, actor_loss_fn=actor_loss, target_fn=None):
    """An ``update`` optimising the given losses; the actor and the targets move every policy_delay-th call.
    ``target_fn`` replaces the critic loss's TD target alone (same signature as ``clipped_td_target``)."""
    critic_loss_fn = with_target(critic_loss_fn, target_fn)

    def update(state: State, batch: Batch, key, cfg: Config):
        critic_key, actor_key = jax.random.split(key)
        actor_opt, critic_opt = optimizers(cfg, state.progress)
        critic = gradient_step(critic_loss_fn, state.critic_params, state.critic_opt_state, critic_opt, state, batch,
                               critic_key, cfg)
        state = state.replace(critic_params=critic.params, critic_opt_state=critic.opt_state,
                              num_updates=state.num_updates + 1)

        def actor_and_targets(state):
            actor = gradient_step(actor_loss_fn, state.actor_params, state.actor_opt_state, actor_opt, state, batch,
                                  actor_key, cfg)
            return state.replace(
                actor_params=actor.params, actor_opt_state=actor.opt_state,
                target_actor_params=polyak_update(actor.params, state.target_actor_params, cfg.tau),
                target_critic_params=polyak_update(state.critic_params, state.target_critic_params, cfg.tau),
            ), {"actor_loss": actor.aux["actor_loss"], **grad_norm_metrics(actor=actor)}

        # The official code updates on iterations where total_it % policy_freq == 0 (total_it counted from 1).
        state, delayed = delayed_step(every_nth(state.num_updates, cfg.policy_delay), actor_and_targets, state)
        return state, {**critic.aux, **grad_norm_metrics(critic=critic), **delayed}

    return update


update = make_update()

# The official values of Config's fields and where each is set (the docs' defaults table puts them beside ours).
_MAIN, _TD3 = "sfujim/TD3 34770cc main.py", "sfujim/TD3 34770cc TD3.py"
_HALF_RANGE = "times (max_action - min_action) / 2, which is 1 here"  # main.py scales every noise by it
OFFICIAL = {
    "hidden_sizes": ((256, 256), f"{_TD3}: Actor, Critic"), "batch_size": (256, f"{_MAIN} --batch_size"),
    "policy_delay": (2, f"{_MAIN} --policy_freq"), "num_critics": (2, f"{_TD3}: Q1, Q2"),
    "actor_lr": (3e-4, _TD3), "critic_lr": (3e-4, _TD3), "gamma": (0.99, f"{_MAIN} --discount"),
    "tau": (0.005, f"{_MAIN} --tau"), "policy_noise": (0.2, f"{_MAIN} --policy_noise, {_HALF_RANGE}"),
    "noise_clip": (0.5, f"{_MAIN} --noise_clip, {_HALF_RANGE}"),
    "exploration_noise": (0.1, f"{_MAIN} --expl_noise, {_HALF_RANGE}"),
}

AGENT = Agent(name="td3", Config=Config, init=init, act=act, update=update, check_config=check_config)
