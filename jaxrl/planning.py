"""MPPI planning in a learned latent model (TD-MPC2's ``_plan``, nicklashansen/tdmpc2
`tdmpc2/tdmpc2.py`), as one pure function.

``plan`` decides for one latent state; ``jax.vmap`` over it plans for every env at once inside the compiled
training loop (the official code and its JAX port plan one env at a time from Python). The model is passed as
four callables so the planner can be tested on a known model:

    dynamics(z, a) -> z'            reward(z, a) -> r            value(z, a) -> Q (already averaged)
    policy(z, key) -> a             (a sample from the policy prior)

Warm start: the caller keeps ``mean`` [H, A] per env, passes ``shift_mean(mean)`` on the next step, and zeros at
an episode start.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp


class PlannerConfig(NamedTuple):
    horizon: int = 3
    num_samples: int = 512
    num_elites: int = 64
    num_pi_trajs: int = 24
    iterations: int = 6
    temperature: float = 0.5  # multiplies (G - max G): an inverse temperature
    min_std: float = 0.05
    max_std: float = 2.0
    gamma: float = 0.99


def rollout_returns(z, actions, dynamics: Callable, reward: Callable, value: Callable, policy: Callable, key,
                    gamma: float):
    """G = sum_{t<H} gamma^t r(z_t, a_t) + gamma^H value(z_H, pi(z_H)) for one action sequence [H, A]."""

    def step(carry, action):
        z, discount, total = carry
        total = total + discount * reward(z, action)
        return (dynamics(z, action), discount * gamma, total), None

    (z_final, discount, total), _ = jax.lax.scan(step, (z, jnp.ones(()), jnp.zeros(())), actions)
    return total + discount * value(z_final, policy(z_final, key))


def policy_trajectories(z, dynamics: Callable, policy: Callable, key, horizon: int, num_trajs: int):
    """[num_trajs, H, A] action sequences of the stochastic policy prior rolled through the model."""

    def one(key):
        def step(z, key):
            action = policy(z, key)
            return dynamics(z, action), action

        return jax.lax.scan(step, z, jax.random.split(key, horizon))[1]

    return jax.vmap(one)(jax.random.split(key, num_trajs))


def shift_mean(mean):
    """Warm start for the next step: mu_{0:H-2} <- mu_{1:H-1}, mu_{H-1} <- 0."""
    return jnp.concatenate([mean[1:], jnp.zeros_like(mean[:1])], axis=0)


def plan(z, mean, key, dynamics: Callable, reward: Callable, value: Callable, policy: Callable,
         cfg: PlannerConfig, deterministic: bool):
    """One MPPI decision from latent ``z`` with warm-start ``mean`` [H, A]: returns (action [A], new mean [H, A]).

    Each iteration samples num_samples - num_pi_trajs Gaussian sequences around (mean, std), clipped to [-1, 1],
    appends the fixed policy-prior sequences, scores all by ``rollout_returns`` (NaN -> 0), and refits mean and
    std to the top num_elites weighted by exp(temperature (G - max G)); std starts at max_std and is clipped to
    [min_std, max_std]. The action is the first step of one elite drawn with probability proportional to its
    weight (Gumbel-max), plus std_0 noise unless ``deterministic``.
    """
    horizon, action_size = mean.shape
    pi_key, key = jax.random.split(key)
    pi_actions = policy_trajectories(z, dynamics, policy, pi_key, horizon, cfg.num_pi_trajs)
    num_gaussian = cfg.num_samples - cfg.num_pi_trajs

    def score(actions, key):
        keys = jax.random.split(key, actions.shape[0])
        returns = jax.vmap(lambda a, k: rollout_returns(z, a, dynamics, reward, value, policy, k, cfg.gamma))(
            actions, keys)
        return jnp.nan_to_num(returns, nan=0.0)

    def iteration(carry, key):
        mean, std, _, _ = carry
        noise_key, score_key = jax.random.split(key)
        noise = jax.random.normal(noise_key, (num_gaussian, horizon, action_size))
        actions = jnp.concatenate([jnp.clip(mean + std * noise, -1.0, 1.0), pi_actions], axis=0)
        returns = score(actions, score_key)
        elite_returns, elite_idx = jax.lax.top_k(returns, cfg.num_elites)
        elites = actions[elite_idx]
        weights = jnp.exp(cfg.temperature * (elite_returns - elite_returns[0]))  # top_k is sorted: [0] is the max
        weights = weights / jnp.sum(weights)
        mean = jnp.einsum("e,eha->ha", weights, elites)
        std = jnp.sqrt(jnp.einsum("e,eha->ha", weights, jnp.square(elites - mean)))
        return (mean, jnp.clip(std, cfg.min_std, cfg.max_std), elites, weights), None

    std = jnp.full_like(mean, cfg.max_std)
    empty_elites = jnp.zeros((cfg.num_elites, horizon, action_size), mean.dtype)
    empty_weights = jnp.zeros((cfg.num_elites,), mean.dtype)
    iter_key, choice_key, noise_key = jax.random.split(key, 3)
    (mean, std, elites, weights), _ = jax.lax.scan(iteration, (mean, std, empty_elites, empty_weights),
                                                   jax.random.split(iter_key, cfg.iterations))
    chosen = jax.random.categorical(choice_key, jnp.log(weights))  # Gumbel-max draw of one elite
    action = elites[chosen, 0]
    if not deterministic:
        action = action + std[0] * jax.random.normal(noise_key, action.shape)
    return jnp.clip(action, -1.0, 1.0), mean
