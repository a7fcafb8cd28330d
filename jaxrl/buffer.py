"""Device replay buffer: a pytree ring of rows, one row per batched env step. Pure init / add / sample.

Layout. ``capacity`` counts **total transitions**; with N envs the ring has R = capacity // N rows of N
transitions each. Each observation is stored once: the transition in row r of env e has s = obs[r, e] and
s' = obs[r + 1, e] — except where the episode ended at row r, since row r + 1 then holds the first
observation of the next episode. Those true final observations go to a small side ring ``final_obs``
(F slots per env, written only at episode ends), and ``final_slot[r, e]`` points into it.

Which ends need their final observation: a time limit bootstraps from it, so always; a termination does not
bootstrap (its s' is multiplied by zero), so only for agents whose losses read s' there anyway (TD-MPC2's
latent consistency: ``Agent.terminal_obs``). Without those, a terminated transition's s' is row r + 1's
observation (finite, and unused) and only time limits take a slot: they come at least one episode length apart,
so F = ceil(R / decisions per episode) + 2 slots always outlive every row that points at them, whether or not the
task can terminate. With them, on a task that can terminate at any step, F = R (every row could be an end) —
twice the observation memory (T1 at 1024 envs x 10,240 steps: 21.7 GiB against 11.2 GiB).

The newest row is never sampled (its s' is not written yet), so sampling never reads across the write head.

Observations may be structured (a dict of parts, ``EnvSpec.obs_parts``): ``obs`` and ``final_obs`` are then
dicts of such arrays, each part stored once, and every batch's observations are dicts of the same parts.
"""
from __future__ import annotations

import math
import os
from typing import Any, NamedTuple

import flax.struct
import jax
import jax.numpy as jnp

from jaxrl import ConfigError
from jaxrl.types import Batch, EnvSpec, WindowBatch, obs_structure


@flax.struct.dataclass
class BufferState:
    obs: Any  # [R, N, obs_size], or {part: [R, N, size]}
    action: jax.Array  # [R, N, action_size]
    reward: jax.Array  # [R, N]
    terminated: jax.Array  # [R, N] bool
    truncated: jax.Array  # [R, N] bool
    episode_step: jax.Array  # [R, N] int32 index of the transition within its episode
    final_slot: jax.Array  # [R, N] int32 slot of final_obs holding s' where the episode ended at this row
    final_obs: Any  # [F, N, obs_size], or {part: [F, N, size]}
    final_count: jax.Array  # [N] int32 episode ends written per env (next slot = count % F)
    ptr: jax.Array  # int32 next row to write
    size: jax.Array  # int32 rows written so far (<= R)
    terminal_obs: bool = flax.struct.field(pytree_node=False, default=True)  # final obs kept at terminations too


class Layout(NamedTuple):
    """The shapes of a buffer and the memory they take."""

    rows: int  # R batched env steps
    num_envs: int  # N
    final_slots: int  # F final observations per env
    obs: Any  # obs_size, or {part: size}: the observation's sizes as its pytree
    action_size: int
    nbytes: int
    terminal_obs: bool = True  # final observations kept at terminations too (see the module docstring)


def final_slots_needed(rows: int, decisions_per_episode: int, can_terminate: bool) -> int:
    """Final-observation slots per env: ``can_terminate`` means that terminations take slots too."""
    if can_terminate:
        return rows
    return min(rows, math.ceil(rows / max(1, decisions_per_episode)) + 2)


def layout(capacity: int, num_envs: int, spec: EnvSpec, terminal_obs: bool = True) -> Layout:
    """The layout of a buffer of ``capacity`` transitions over ``num_envs`` envs of ``spec``, validating the sizes
    (ConfigError, one line). ``terminal_obs``: keep the final observation of terminated episodes too."""
    if capacity <= 0:
        raise ConfigError(f"buffer_size must be a positive number of transitions, got {capacity}")
    rows = capacity // num_envs
    if rows < 2:
        raise ConfigError(f"buffer_size={capacity} transitions gives {rows} row(s) for num_envs={num_envs}; "
                          f"it must hold at least 2 steps of every env (>= {2 * num_envs})")
    slots = final_slots_needed(rows, spec.decisions_per_episode, spec.can_terminate and terminal_obs)
    # obs, action, reward (float32), terminated and truncated (bool), episode_step and final_slot (int32).
    obs_floats = sum(jax.tree.leaves(obs_structure(spec)))  # every part is stored
    per_transition = 4 * (obs_floats + spec.action_size + 1) + 2 + 4 + 4
    nbytes = rows * num_envs * per_transition + slots * num_envs * 4 * obs_floats
    return Layout(rows, num_envs, slots, obs_structure(spec), spec.action_size, nbytes, terminal_obs)


def available_bytes(device=None) -> int:
    """Memory a buffer may take on ``device``: the accelerator's limit, or the host's available RAM."""
    device = device or jax.devices()[0]
    stats = device.memory_stats() if device.platform != "cpu" else None
    if stats and "bytes_limit" in stats:
        return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def check_fits(nbytes: int, copies: int = 1, limit: int | None = None) -> None:
    limit = available_bytes() if limit is None else limit
    total = nbytes * copies
    if total > limit:
        raise ConfigError(f"replay buffer needs {total / 2**30:.2f} GiB ({copies} seed(s) x "
                          f"{nbytes / 2**30:.2f} GiB) but only {limit / 2**30:.2f} GiB is available; "
                          "lower buffer_size or seeds")


def init(layout: Layout) -> BufferState:
    rows, num_envs = layout.rows, layout.num_envs
    return BufferState(
        obs=jax.tree.map(lambda size: jnp.zeros((rows, num_envs, size), jnp.float32), layout.obs),
        action=jnp.zeros((rows, num_envs, layout.action_size), jnp.float32),
        reward=jnp.zeros((rows, num_envs), jnp.float32),
        terminated=jnp.zeros((rows, num_envs), jnp.bool_),
        truncated=jnp.zeros((rows, num_envs), jnp.bool_),
        episode_step=jnp.zeros((rows, num_envs), jnp.int32),
        final_slot=jnp.zeros((rows, num_envs), jnp.int32),
        final_obs=jax.tree.map(lambda size: jnp.zeros((layout.final_slots, num_envs, size), jnp.float32),
                               layout.obs),
        final_count=jnp.zeros((num_envs,), jnp.int32),
        ptr=jnp.zeros((), jnp.int32),
        size=jnp.zeros((), jnp.int32),
        terminal_obs=layout.terminal_obs,
    )


def rows_of(state: BufferState) -> int:
    return state.reward.shape[0]


def final_slots_of(state: BufferState) -> int:
    return jax.tree.leaves(state.final_obs)[0].shape[0]


def _keeps_final(state: BufferState, terminated, truncated):
    """Where an episode end's final observation is in the side ring."""
    return terminated | truncated if state.terminal_obs else truncated


def add(state: BufferState, obs, action, reward, terminated, truncated, final_obs, episode_step) -> BufferState:
    """Write one batched step (leading axis N) at the write head. ``final_obs`` is kept only where the episode
    ended (at a time limit only, without ``terminal_obs``)."""
    rows, num_envs = state.reward.shape
    done = _keeps_final(state, terminated, truncated)
    env_index = jnp.arange(num_envs)
    slot = state.final_count % final_slots_of(state)
    kept = jax.tree.map(lambda new, old: jnp.where(done[:, None], new, old[slot, env_index]), final_obs,
                        state.final_obs)
    return state.replace(
        obs=jax.tree.map(lambda rows_, o: rows_.at[state.ptr].set(o), state.obs, obs),
        action=state.action.at[state.ptr].set(action),
        reward=state.reward.at[state.ptr].set(reward),
        terminated=state.terminated.at[state.ptr].set(terminated),
        truncated=state.truncated.at[state.ptr].set(truncated),
        episode_step=state.episode_step.at[state.ptr].set(episode_step),
        final_slot=state.final_slot.at[state.ptr].set(slot),
        final_obs=jax.tree.map(lambda ring, o: ring.at[slot, env_index].set(o), state.final_obs, kept),
        final_count=state.final_count + done.astype(jnp.int32),
        ptr=(state.ptr + 1) % rows,
        size=jnp.minimum(state.size + 1, rows),
    )


def _next_obs(state: BufferState, row, env):
    rows = rows_of(state)
    done = _keeps_final(state, state.terminated[row, env], state.truncated[row, env])
    slot = state.final_slot[row, env]
    return jax.tree.map(lambda final, obs: jnp.where(done[..., None], final[slot, env], obs[(row + 1) % rows, env]),
                        state.final_obs, state.obs)


def sample(state: BufferState, key: jax.Array, batch_size: int, n_step: int = 1, gamma=1.0) -> Batch:
    """Uniform over sampleable start transitions; each carries the return of up to ``n_step`` steps.

    A window of n steps from row t stops early, after step m, where step m ends its episode (terminated or
    truncated: the sum never crosses into the next episode, and a time limit bootstraps from the true final
    observation) or where the next step is the newest row (never across the write head). ``gamma`` may be traced
    (a per-member hyperparameter). The buffer must hold at least two rows.
    """
    rows, num_envs = state.reward.shape
    key_row, key_env = jax.random.split(key)
    offset = jax.random.randint(key_row, (batch_size,), 0, jnp.maximum(state.size - 1, 1))
    row = (state.ptr - state.size + offset) % rows
    env = jax.random.randint(key_env, (batch_size,), 0, num_envs)
    steps = jnp.arange(n_step)
    window_rows = (row[:, None] + steps) % rows  # [B, n]
    ended = state.terminated[window_rows, env[:, None]] | state.truncated[window_rows, env[:, None]]
    ended_before = (jnp.cumsum(ended, axis=1) - ended) > 0
    # offset + k <= size - 2 keeps step k off the newest row, whose successor is not written yet.
    in_window = (offset[:, None] + steps <= state.size - 2) & ~ended_before
    in_window = in_window.at[:, 0].set(True)
    powers = jnp.cumprod(jnp.concatenate([jnp.ones((1,)), jnp.full((n_step - 1,), gamma)]))  # gamma^k, exact at k <= 1
    rewards = state.reward[window_rows, env[:, None]]
    count = jnp.sum(in_window, axis=1)
    last = (row + count - 1) % rows
    return Batch(obs=jax.tree.map(lambda obs: obs[row, env], state.obs), action=state.action[row, env],
                 reward=jnp.sum(jnp.where(in_window, powers * rewards, 0.0), axis=1),
                 next_obs=_next_obs(state, last, env), terminated=state.terminated[last, env],
                 truncated=state.truncated[last, env], discount=gamma * powers[count - 1])


def transitions_at(state: BufferState, row, env, gamma=1.0) -> Batch:
    """One-step transitions at the given rows and envs (index arrays of one shape; a row must not be the newest,
    whose s' is not written yet): for samplers that choose their own rows (Symphony's fading replay)."""
    return Batch(obs=jax.tree.map(lambda obs: obs[row, env], state.obs), action=state.action[row, env],
                 reward=state.reward[row, env], next_obs=_next_obs(state, row, env),
                 terminated=state.terminated[row, env], truncated=state.truncated[row, env],
                 discount=jnp.full(jnp.shape(row), gamma, jnp.float32))


class Recent(NamedTuple):
    """The newest transitions in the order they were written (oldest first; within a batched step, env 0 first)."""

    obs: Any  # [count, obs_size], or {part: [count, size]}
    action: jax.Array  # [count, action_size]
    reward: jax.Array  # [count]
    terminated: jax.Array  # [count] bool
    truncated: jax.Array  # [count] bool
    valid: jax.Array  # [count] bool: written (False while the buffer holds fewer than ``count`` transitions)


def recent(state: BufferState, count: int) -> Recent:
    """The ``count`` newest transitions (s, a, r and how each ended; ``count`` a Python int, at most the capacity),
    a window read of the ring rather than a sample: ACE's causal weights fit on them. The newest row is included
    (its s' is not written yet, so there is no next observation here)."""
    rows, num_envs = state.reward.shape
    if not 0 < count <= rows * num_envs:
        raise ValueError(f"recent(count={count}) needs 1 <= count <= the buffer's {rows * num_envs} transitions")
    window = -(-count // num_envs)
    row = (state.ptr - window + jnp.arange(window)) % rows  # oldest first; the newest row is ptr - 1
    written = jnp.arange(window) >= window - state.size

    def newest(in_window_order):
        flat = in_window_order.reshape((window * num_envs,) + in_window_order.shape[2:])
        return flat[window * num_envs - count:]

    def take(x):
        return newest(x[row])

    return Recent(obs=jax.tree.map(take, state.obs), action=take(state.action), reward=take(state.reward),
                  terminated=take(state.terminated), truncated=take(state.truncated),
                  valid=newest(jnp.broadcast_to(written[:, None], (window, num_envs))))


def sample_windows(state: BufferState, key: jax.Array, batch_size: int, length: int,
                   candidates: int = 16) -> WindowBatch:
    """Contiguous windows of ``length`` transitions inside one episode, uniformly over such windows.

    A window may end with the episode's last transition (its final obs comes from the side ring) but never
    contains an episode end before that, and never reaches the newest row. Each batch element draws
    ``candidates`` starts and keeps the first valid one (rejection sampling keeps it uniform); ``valid`` is
    False for the rare element whose candidates were all invalid (weight its loss by it).
    """
    rows, num_envs = state.reward.shape
    key_row, key_env = jax.random.split(key)
    shape = (batch_size, candidates)
    span = jnp.maximum(state.size - length, 1)  # starts k with k + length <= size - 1
    offset = jax.random.randint(key_row, shape, 0, span)
    start = (state.ptr - state.size + offset) % rows
    env = jax.random.randint(key_env, shape, 0, num_envs)
    last = (start + length - 1) % rows
    valid = (state.episode_step[last, env] == state.episode_step[start, env] + length - 1)
    valid &= state.size - 1 >= length
    choice = jnp.argmax(valid, axis=1)

    def pick(x):
        return jnp.take_along_axis(x, choice[:, None], axis=1)[:, 0]

    start, env, ok = pick(start), pick(env), jnp.any(valid, axis=1)
    rows_idx = (start[:, None] + jnp.arange(length)[None, :]) % rows  # [B, L]
    env_idx = env[:, None]
    last_next = _next_obs(state, rows_idx[:, -1], env)
    obs = jax.tree.map(lambda obs, last: jnp.concatenate([obs[rows_idx, env_idx], last[:, None]], axis=1), state.obs,
                       last_next)
    window = WindowBatch(obs=obs,
                         action=state.action[rows_idx, env_idx], reward=state.reward[rows_idx, env_idx],
                         terminated=state.terminated[rows_idx, env_idx],
                         truncated=state.truncated[rows_idx, env_idx], valid=ok)
    return window
