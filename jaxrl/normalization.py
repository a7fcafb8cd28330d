"""Running statistics kept in the training state (pure updates, checkpointed with it): observation mean and
variance, and the discounted-return statistics that scale rewards (SimbaV2: dojeon-ai/SimbaV2
`scale_rl/agents/wrappers/normalization.py`).

Float32 alone is not enough: over 10^6 one-sample updates of data at 1000 +- 0.5 a plain float32 Welford mean
drifted by 0.016 (3 % of the std), because each increment is below the float32 spacing at 1000 (SimbaV2's
users report the same failure, DAVIAN-Robotics/SimbaV2#8). So mean and variance move by *compensated* (Kahan)
increments: a second float32 per statistic carries the rounding error forward, which gives float64-like accuracy
without enabling x64. ``tests/test_normalization.py`` checks a million one-at-a-time updates against float64.
"""
from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp


@flax.struct.dataclass
class RunningStats:
    mean: jax.Array
    var: jax.Array
    count: jax.Array  # int32 number of samples seen (exact)
    mean_error: jax.Array  # Kahan compensation: the true mean is mean - mean_error
    var_error: jax.Array


def init_stats(size: int) -> RunningStats:
    zeros = jnp.zeros((size,), jnp.float32)
    return RunningStats(zeros, jnp.ones((size,), jnp.float32), jnp.zeros((), jnp.int32), zeros, zeros)


def _compensated_add(value, error, increment):
    """Kahan summation step: value + increment with the rounding error carried in ``error``."""
    corrected = increment - error
    total = value + corrected
    return total, (total - value) - corrected


def update_stats(stats: RunningStats, x: jax.Array) -> RunningStats:
    """Merge a batch [N, size] into the statistics (Chan et al.'s parallel update, written as increments
    mean += w delta, var += w (batch_var + (1 - w) delta^2 - var) with w = N / total, each one compensated)."""
    n = x.shape[0]
    batch_mean = jnp.mean(x, axis=0)
    batch_var = jnp.var(x, axis=0)
    total = stats.count + n
    weight = n / total.astype(jnp.float32)
    delta = (batch_mean - stats.mean) + stats.mean_error
    mean, mean_error = _compensated_add(stats.mean, stats.mean_error, weight * delta)
    var_target = batch_var + (1.0 - weight) * jnp.square(delta)
    var_increment = weight * (var_target - (stats.var - stats.var_error))
    var, var_error = _compensated_add(stats.var, stats.var_error, var_increment)
    return RunningStats(mean, var, total, mean_error, var_error)


def normalize(stats: RunningStats, x: jax.Array, clip: float = 10.0) -> jax.Array:
    return jnp.clip((x - stats.mean) / jnp.sqrt(stats.var + 1e-8), -clip, clip)


@flax.struct.dataclass
class ReturnStats:
    """Per-env discounted return G, running statistics of G over all envs and steps, and max |G| seen."""

    discounted_return: jax.Array  # [num_envs]
    stats: RunningStats  # of G, size 1
    max_abs_return: jax.Array  # scalar


def init_return_stats(num_envs: int) -> ReturnStats:
    return ReturnStats(jnp.zeros((num_envs,), jnp.float32), init_stats(1), jnp.zeros((), jnp.float32))


def update_return_stats(returns: ReturnStats, reward: jax.Array, done: jax.Array, gamma) -> ReturnStats:
    """G <- gamma (1 - done) G + r per env (done = terminated or truncated at this step, SimbaV2's rule), then
    the variance and max |G| statistics take the new G of every env."""
    g = gamma * (1.0 - done.astype(jnp.float32)) * returns.discounted_return + reward
    return ReturnStats(g, update_stats(returns.stats, g[:, None]),
                       jnp.maximum(returns.max_abs_return, jnp.max(jnp.abs(g))))


def reward_scale(returns: ReturnStats, max_return: float) -> jax.Array:
    """1 / max(sqrt(var(G) + 1e-8), max|G| / max_return): keeps scaled returns inside +-max_return."""
    return 1.0 / jnp.maximum(jnp.sqrt(returns.stats.var[0] + 1e-8), returns.max_abs_return / max_return)


@flax.struct.dataclass
class Normalizers:
    """Everything the loop normalises with; one pytree in the training state."""

    obs: Any  # RunningStats, or {part: RunningStats} for structured observations (each part on its own)
    returns: ReturnStats


def init_normalizers(obs_structure, num_envs: int) -> Normalizers:
    """``obs_structure``: the observation's size, or {part: size} (``jaxrl.types.obs_structure``)."""
    return Normalizers(jax.tree.map(init_stats, obs_structure), init_return_stats(num_envs))


def update_obs_stats(stats, obs):
    """``update_stats`` on each part of ``obs`` (a [N, size] array or a dict of them)."""
    return jax.tree.map(lambda x, part_stats: update_stats(part_stats, x), obs, stats)


def normalize_obs(stats, obs, clip: float = 10.0):
    """``normalize`` on each part of ``obs``."""
    return jax.tree.map(lambda x, part_stats: normalize(part_stats, x, clip), obs, stats)
