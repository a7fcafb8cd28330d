"""Tiny pure-JAX environments with known answers, fast enough for learning tests on a CPU.

Each is a ``RawEnv``: single-env ``reset(key) -> (state, obs)`` and
``step(state, action) -> (state, obs, reward, terminated)`` with actions in [-1, 1]; the wrappers add
batching, time limits, auto-reset and statistics.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from envs.raw import RawEnv


def pendulum(gravity: float = 10.0, mass: float = 1.0, length: float = 1.0) -> RawEnv:
    """Gym's Pendulum-v1 swing-up (g=10, m=l=1, dt=0.05, torque in [-2, 2] mapped from [-1, 1]).

    200 steps, never terminates. Random actions score about -1200; a solved swing-up about -150. Other ``gravity``,
    ``mass`` and ``length`` give the shifted pendulums robustness is evaluated on (DR-SAC's ``param_shift``); the
    registered ``toy/Pendulum`` is the nominal one.
    """
    max_speed, max_torque, dt, g = 8.0, 2.0, 0.05, gravity

    def observe(theta, theta_dot):
        return jnp.stack([jnp.cos(theta), jnp.sin(theta), theta_dot])

    def reset(key):
        high = jnp.array([jnp.pi, 1.0])
        theta, theta_dot = jax.random.uniform(key, (2,), minval=-high, maxval=high)
        state = jnp.stack([theta, theta_dot])
        return state, observe(theta, theta_dot)

    def step(state, action):
        theta, theta_dot = state[0], state[1]
        torque = max_torque * jnp.clip(action[0], -1.0, 1.0)
        angle = jnp.mod(theta + jnp.pi, 2 * jnp.pi) - jnp.pi
        cost = angle**2 + 0.1 * theta_dot**2 + 0.001 * torque**2
        acceleration = 3 * g / (2 * length) * jnp.sin(theta) + 3.0 / (mass * length**2) * torque
        theta_dot = jnp.clip(theta_dot + acceleration * dt, -max_speed, max_speed)
        theta = theta + theta_dot * dt
        new_state = jnp.stack([theta, theta_dot])
        return new_state, observe(theta, theta_dot), -cost, jnp.bool_(False)

    return RawEnv("toy/Pendulum", obs_size=3, action_size=1, episode_length=200, can_terminate=False,
                  reset=reset, step=step)


def point_mass() -> RawEnv:
    """A point in the plane moved by velocity commands x' = x + 0.1 a; reward -||x||, 50 steps.

    Start uniform in [-1, 1]^2. Random actions score about -38; heading straight for the origin about -5.
    """

    def reset(key):
        pos = jax.random.uniform(key, (2,), minval=-1.0, maxval=1.0)
        return pos, pos

    def step(pos, action):
        pos = jnp.clip(pos + 0.1 * jnp.clip(action, -1.0, 1.0), -2.0, 2.0)
        return pos, pos, -jnp.linalg.norm(pos), jnp.bool_(False)

    return RawEnv("toy/PointMass", obs_size=2, action_size=2, episode_length=50, can_terminate=False,
                  reset=reset, step=step)


def bandit() -> RawEnv:
    """One-step probe: reward 1 - ||a - 0.5||^2, then the episode terminates. Q(s, a) = r; best action 0.5."""

    def reset(key):
        return jnp.zeros(()), jnp.ones((1,))

    def step(state, action):
        reward = 1.0 - jnp.sum(jnp.square(action - 0.5))
        return state, jnp.ones((1,)), reward, jnp.bool_(True)

    return RawEnv("toy/Bandit", obs_size=1, action_size=1, episode_length=1, can_terminate=True,
                  reset=reset, step=step)


def privileged_bandit() -> RawEnv:
    """One-step probe with an asymmetric observation: each episode draws a target c in {-0.5, 0.5}; reward
    1 - ||a - c||^2, then termination. ``state`` (what an actor reads) is a constant 1, ``privileged_state`` (what
    a critic may read) is c. A critic on the privileged part learns Q(c, a) = 1 - (a - c)^2; the best the actor can
    do without c is a = E[c] = 0 (return 0.75); a critic on ``state`` can only learn 0.75 - a^2."""

    def reset(key):
        target = jnp.where(jax.random.bernoulli(key), 0.5, -0.5)
        return target, {"state": jnp.ones((1,)), "privileged_state": target[None]}

    def step(target, action):
        reward = 1.0 - jnp.sum(jnp.square(action - target))
        return target, {"state": jnp.ones((1,)), "privileged_state": target[None]}, reward, jnp.bool_(True)

    return RawEnv("toy/PrivilegedBandit", obs_size=2, action_size=1, episode_length=1, can_terminate=True,
                  reset=reset, step=step, obs_parts=(("state", 1), ("privileged_state", 1)))


def constant_truncated() -> RawEnv:
    """Probe that never terminates and is truncated after 10 steps, reward 1 every step.

    A critic that bootstraps through truncation learns Q = 1 / (1 - gamma); one that treats the time limit as
    a termination learns a value that depends on the step, which the observation (constant) cannot tell.
    """

    def reset(key):
        return jnp.zeros(()), jnp.ones((1,))

    def step(state, action):
        return state, jnp.ones((1,)), jnp.float32(1.0), jnp.bool_(False)

    return RawEnv("toy/ConstantTruncated", obs_size=1, action_size=1, episode_length=10, can_terminate=False,
                  reset=reset, step=step)


TOY_ENVS = {
    "Pendulum": pendulum,
    "PointMass": point_mass,
    "Bandit": bandit,
    "PrivilegedBandit": privileged_bandit,
    "ConstantTruncated": constant_truncated,
}
