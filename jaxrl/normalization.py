"""Running mean / variance of observations, kept in the training state (pure update, checkpointed)."""
from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp


@flax.struct.dataclass
class RunningStats:
    mean: jax.Array
    var: jax.Array
    count: jax.Array  # float32 number of samples seen


def init_stats(size: int) -> RunningStats:
    return RunningStats(jnp.zeros((size,), jnp.float32), jnp.ones((size,), jnp.float32), jnp.zeros((), jnp.float32))


def update_stats(stats: RunningStats, x: jax.Array) -> RunningStats:
    """Merge a batch [N, size] into the statistics (Chan et al.'s parallel Welford update)."""
    n = jnp.asarray(x.shape[0], jnp.float32)
    batch_mean = jnp.mean(x, axis=0)
    batch_var = jnp.var(x, axis=0)
    total = stats.count + n
    delta = batch_mean - stats.mean
    mean = stats.mean + delta * n / total
    m2 = stats.var * stats.count + batch_var * n + jnp.square(delta) * stats.count * n / total
    return RunningStats(mean, m2 / total, total)


def normalize(stats: RunningStats, x: jax.Array, clip: float = 10.0) -> jax.Array:
    return jnp.clip((x - stats.mean) / jnp.sqrt(stats.var + 1e-8), -clip, clip)
