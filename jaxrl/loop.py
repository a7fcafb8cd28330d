"""The off-policy training loop: one jitted ``run_chunk`` scans over env steps, updates and evaluation.

    state = trainer.init(seed, num_seeds)        # one pytree, every per-seed leaf with a leading seed axis
    state, metrics = trainer.run_chunk(state)    # eval_every env steps, then one evaluation; no host sync

A chunk is a ``lax.scan`` over *blocks*; a block is ``block_iters`` batched env steps (act on all envs ->
step -> add to buffer) followed by ``block_updates`` gradient updates, so fractional update-to-data ratios
(1 update per 16 transitions) need no per-step branch. Seeds are a ``vmap`` over the per-seed state; the
step counters are shared scalars outside that vmap, so "random actions until learning_starts" and "no
updates before learning_starts" stay real ``lax.cond``s instead of computing both sides for every seed.

The chunk's phases (acting, collecting, learning, evaluating) are module-level functions of a ``Program``
(what the compiled program is about: agent, envs, loop config, schedule, buffer layout) and the ``TrainState``;
the map of which calls which is above ``Program``. ``learn`` is where a batch reaches ``agent.update``.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import flax.struct
import jax
import jax.numpy as jnp

from jaxrl import ConfigError, checks
from jaxrl import buffer as buffer_lib
from jaxrl import pbt as pbt_lib
from jaxrl import progress as progress_lib
from jaxrl import sharding as sharding_lib
from jaxrl.agent import Agent, check_config_type, checked_init, checked_update, draw_batch
from jaxrl.evaluate import evaluate
from jaxrl.normalization import (
    Normalizers,
    init_normalizers,
    normalize_obs,
    reward_scale,
    update_obs_stats,
    update_return_stats,
)
from jaxrl.types import EnvSpec, obs_structure


@dataclasses.dataclass(frozen=True)
class LoopConfig:
    """Training-loop settings. Env steps count simulator steps (action repeats included)."""

    steps: int = 50_000
    """total env steps to train for (rounded up to whole chunks of eval_every when it is longer than one)"""
    num_envs: int = 16
    """envs stepped together for training"""
    num_eval_envs: int = 10
    """envs (= episodes) per deterministic evaluation"""
    eval_every: int = 10_000
    """env steps per chunk; one evaluation at the end of each (rounded up to whole update blocks; a run shorter
    than one chunk is one chunk of its steps)"""
    learning_starts: int | None = None
    """env steps collected before the first update; None: 5000, or a tenth of steps in runs shorter than 50k"""
    warmup: str = "uniform"
    """actions before learning_starts: uniform (random in [-1, 1]) or policy (the initial stochastic policy)"""
    updates_per_step: float = 1.0
    """gradient updates per transition added (one agent step of one env); fractions like 1/16 allowed"""
    buffer_size: int = 1_000_000
    """replay capacity in total transitions (over all envs)"""
    action_repeat: int = 1
    """simulator steps per agent decision"""
    episode_length: int | None = None
    """time limit in env steps; None keeps the task's own"""
    normalize_obs: bool = False
    """normalise observations by running statistics kept in the training state"""
    pretrain_updates: int = 0
    """extra updates done in one go when learning starts (TD-MPC2: as many as its seed steps)"""
    scale_rewards: bool = False
    """divide rewards at update time by max(std(G), max|G| / reward_scale_max_return), G the running discounted
    return per env with the agent's gamma (SimbaV2)"""
    reward_scale_max_return: float = 5.0
    """scaled discounted returns stay within +- this (SimbaV2: its critic support's G_max)"""
    actor_obs: str | None = None
    """structured observations: the part the actor reads (and evaluation and exported policies); None: state"""
    critic_obs: str | None = None
    """structured observations: the part the critics read; None: privileged_state where the env has it, else the
    actor's part"""
    env_shards: int = 1
    """split the training envs and the replay buffer into this many equal shards: every batch draws batch_size /
    env_shards transitions from each shard's envs, with the shard's own key (stratified), so the run computes the
    same numbers whether its shards share one device or sit on as many (--shard-envs)"""


class Schedule(NamedTuple):
    env_steps_per_iter: int  # num_envs * action_repeat
    block_iters: int
    block_updates: int
    chunk_blocks: int

    @property
    def chunk_env_steps(self) -> int:
        return self.env_steps_per_iter * self.block_iters * self.chunk_blocks


MAX_UPDATES_PER_STEP = 1024


def _layout(cfg: LoopConfig) -> tuple[int, int, bool]:
    """(batched steps, updates) per block for cfg's update-to-data ratio, and whether that ratio is exact."""
    per_iter = cfg.updates_per_step * cfg.num_envs
    if per_iter >= 1:
        block_updates = round(per_iter)
        return 1, block_updates, math.isclose(per_iter, block_updates, rel_tol=1e-6)
    block_iters = round(1 / per_iter)
    return block_iters, 1, math.isclose(1 / per_iter, block_iters, rel_tol=1e-6)


def check_loop_config(cfg: LoopConfig) -> None:
    """Raise ConfigError (one line) for LoopConfig values the loop cannot run; ``make_schedule`` calls it."""
    for field in ("steps", "num_envs", "num_eval_envs", "eval_every", "buffer_size", "action_repeat"):
        value = getattr(cfg, field)
        if not 0 < (checks.as_int(value) or 0) <= checks.INT32_MAX:  # the program counts them in int32
            raise ConfigError(f"{field} must be a positive integer <= {checks.INT32_MAX}, got {value!r}")
    if cfg.learning_starts is not None and (checks.as_int(cfg.learning_starts) is None or cfg.learning_starts < 0):
        raise ConfigError(f"learning_starts must be an integer >= 0 env steps, got {cfg.learning_starts!r}")
    if cfg.learning_starts is not None and cfg.learning_starts >= cfg.steps:
        raise ConfigError(f"learning_starts={cfg.learning_starts} must be < steps={cfg.steps} (updates start after "
                          "learning_starts env steps: no update would happen before the run ends)")
    if checks.as_int(cfg.pretrain_updates) is None or cfg.pretrain_updates < 0:
        raise ConfigError(f"pretrain_updates must be an integer >= 0, got {cfg.pretrain_updates!r}")
    if cfg.warmup not in ("uniform", "policy"):
        raise ConfigError(f"warmup={cfg.warmup!r} is not one of: uniform, policy")
    checks.require(cfg, "updates_per_step", lambda x: 0 < x <= MAX_UPDATES_PER_STEP,
                   f"a finite number in (0, {MAX_UPDATES_PER_STEP}] updates per transition")
    if cfg.episode_length is not None and not 0 < (checks.as_int(cfg.episode_length) or 0) <= checks.INT32_MAX:
        raise ConfigError(f"episode_length must be a positive integer of env steps (<= {checks.INT32_MAX}) or None, "
                          f"got {cfg.episode_length!r}")
    checks.positive(cfg, "reward_scale_max_return")
    if not 0 < (checks.as_int(cfg.env_shards) or 0) <= cfg.num_envs or cfg.num_envs % cfg.env_shards:
        raise ConfigError(f"env_shards={cfg.env_shards!r} must be a whole number that divides num_envs="
                          f"{cfg.num_envs} (each shard holds num_envs / env_shards envs)")

    per_iter = cfg.updates_per_step * cfg.num_envs
    if 1 / per_iter > checks.INT32_MAX:
        raise ConfigError(f"updates_per_step={cfg.updates_per_step} with num_envs={cfg.num_envs} gives fewer than one "
                          f"update per {checks.INT32_MAX} batched steps")
    block_iters, block_updates, exact = _layout(cfg)
    if not exact:
        raise ConfigError(f"updates_per_step={cfg.updates_per_step} with num_envs={cfg.num_envs} gives "
                          f"{per_iter:g} updates per batched step; it must be a whole number or 1/whole number")
    # The env-step and update counters of TrainState are int32: the rounded-up run must fit in them.
    schedule = _schedule(cfg, block_iters, block_updates)
    if cfg.steps + schedule.chunk_env_steps >= checks.INT32_MAX:
        raise ConfigError(f"steps={cfg.steps} plus one chunk of {schedule.chunk_env_steps} env steps must be < "
                          f"{checks.INT32_MAX} (the int32 env-step counter)")
    chunks = -(-cfg.steps // schedule.chunk_env_steps)
    total_updates = chunks * schedule.chunk_blocks * block_updates + cfg.pretrain_updates
    if total_updates >= checks.INT32_MAX:
        raise ConfigError(f"steps={cfg.steps} at updates_per_step={cfg.updates_per_step} (+ pretrain_updates="
                          f"{cfg.pretrain_updates}) means {total_updates} updates; the int32 update counter allows < "
                          f"{checks.INT32_MAX}")


def _schedule(cfg: LoopConfig, block_iters: int, block_updates: int) -> Schedule:
    env_steps_per_iter = cfg.num_envs * cfg.action_repeat
    block_env_steps = env_steps_per_iter * block_iters
    # min(): a run shorter than eval_every must not be stretched to a whole chunk (--steps 2000 once trained 10k).
    chunk_env_steps = min(cfg.eval_every, cfg.steps)
    return Schedule(env_steps_per_iter, block_iters, block_updates, max(1, -(-chunk_env_steps // block_env_steps)))


def observation_roles(spec: EnvSpec, cfg: LoopConfig) -> EnvSpec:
    """``spec`` with ``actor_obs`` / ``critic_obs`` set from ``cfg`` (ConfigError, one line, for parts the env
    does not have). Flat observations have no parts to choose."""
    parts = [name for name, _ in spec.obs_parts]
    if not parts:
        for field in ("actor_obs", "critic_obs"):
            if getattr(cfg, field) is not None:
                raise ConfigError(f"{field}={getattr(cfg, field)!r}: this env's observation is one flat vector, so "
                                  "there is no part to choose; leave actor_obs and critic_obs unset")
        return spec
    actor = cfg.actor_obs if cfg.actor_obs is not None else "state"
    critic = cfg.critic_obs if cfg.critic_obs is not None else "privileged_state" if "privileged_state" in parts \
        else actor
    for field, part in (("actor_obs", actor), ("critic_obs", critic)):
        if part not in parts:
            raise ConfigError(f"{field}={part!r} is not a part of this env's observation; its parts: "
                              + ", ".join(parts))
    return spec.replace(actor_obs=actor, critic_obs=critic)


def learning_starts(cfg: LoopConfig) -> int:
    """``cfg.learning_starts``, or its default: 5000 env steps, a tenth of the run when that is shorter (so a short
    run still learns instead of ending before its first update)."""
    return min(5_000, cfg.steps // 10) if cfg.learning_starts is None else cfg.learning_starts


def written_down(cfg: LoopConfig) -> LoopConfig:
    """``cfg`` with the values its run resolves to written down, so that a resume with a larger ``steps`` keeps
    the run's own: ``learning_starts`` (its default depends on ``steps``) and, in a run shorter than one chunk,
    ``eval_every`` = ``steps`` (the chunk such a run trains; ``--resume --steps`` longer must not stretch it)."""
    return dataclasses.replace(cfg, learning_starts=learning_starts(cfg), eval_every=min(cfg.eval_every, cfg.steps))


def make_schedule(cfg: LoopConfig) -> Schedule:
    check_loop_config(cfg)
    block_iters, block_updates, _ = _layout(cfg)
    return _schedule(cfg, block_iters, block_updates)


@flax.struct.dataclass
class TrainState:
    """Everything a run needs to continue exactly; per-seed leaves have a leading seed axis."""

    agent: Any
    buffer: buffer_lib.BufferState
    env: Any
    normalizers: Normalizers  # observation and return statistics
    carry: Any  # the agent's per-env acting carry (planner warm starts); () for memoryless agents
    hparams: Any  # the agent Config of each member: its numeric fields as [K] arrays (a sweep varies them)
    key: jax.Array  # [K, 2]
    env_steps: jax.Array  # int32 scalar shared by all seeds
    updates: jax.Array  # int32 scalar
    pbt: Any = None  # population-based training's per-member record (jaxrl.pbt.PBTState); None without PBT


class Trainer(NamedTuple):
    init: Any  # (seed: int, num_seeds: int) -> TrainState; every member uses the agent config given to make_train
    init_members: Any  # (seeds: list[int], configs: list[Config]) -> TrainState; member k: seeds[k], configs[k]
    run_chunk: Any  # jitted, donates its argument: TrainState -> (TrainState, metrics)
    schedule: Schedule
    metric_names: tuple[str, ...]
    program: Program  # what the program is about (buffer layout, first update, metric shapes, ...)


def over_seeds(fn):
    """``jax.vmap(fn)`` over the leading seed axis; with one seed, a plain call on the squeezed arguments.

    Measured on a 2-core CPU: a vmapped SAC update with a batch axis of 1 runs ~4 % slower than the plain one
    (XLA lowers the matmuls to batched dots), and one seed is the common case.
    """

    def call(*args):
        if jax.tree.leaves(args)[0].shape[0] != 1:
            return jax.vmap(fn)(*args)
        out = fn(*jax.tree.map(lambda x: x[0], args))
        return jax.tree.map(lambda x: x[None], out)

    return call


def program_fields(cfg) -> dict[str, Any]:
    """The fields of an agent Config that fix the compiled program: static fields, and which fields are None."""
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)
            if not f.metadata.get("pytree_node", True) or getattr(cfg, f.name) is None}


def traced_fields(cfg) -> dict[str, Any]:
    """The numeric fields of an agent Config that are traced (per member) inside the program: not ``program_fields``."""
    fixed = program_fields(cfg)
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.name not in fixed}


def stack_configs(configs, template):
    """Member configs -> one Config whose numeric leaves are [K] arrays. Every member must share the template's
    static fields (widths, batch size, ...) and None fields: those fix the compiled program."""
    expected = program_fields(template)
    for k, member in enumerate(configs):
        got = program_fields(member)
        if got != expected:
            diff = sorted(n for n in set(got) | set(expected) if got.get(n, "<number>") != expected.get(n, "<number>"))
            raise ConfigError(f"member {k} differs from its program in field(s) that fix shapes or code: "
                              + ", ".join(f"{n}={got.get(n, '<number>')!r} vs {expected.get(n, '<number>')!r}"
                                          for n in diff) + "; such members need a separate program")
    return jax.tree.map(lambda *values: jnp.asarray(values), *configs)


def default_loop_config(agent: Agent, suite_defaults: dict[str, Any] | None = None, **overrides) -> LoopConfig:
    """LoopConfig with, in this order, an env suite's loop defaults (``envs.suite_loop_defaults``), the agent's own
    (``agent.loop_defaults``) and ``overrides`` applied: each layer wins over the one before."""
    return LoopConfig(**{**(suite_defaults or {}), **agent.loop_defaults, **overrides})


# ------------------------------------------------------------------------------ the program and its phases
#
# A compiled program is a ``Program`` (what jit closes over) and a ``TrainState`` (what it carries). The
# phases below are plain functions of them, in the order a chunk runs them:
#
#   run_chunk: scan ``block`` chunk_blocks times, then ``evaluate_policy``
#     block:   scan ``act_and_collect`` block_iters times, then ``refresh_phase``, then ``learning_phase``
#       act_and_collect:  ``policy_actions`` or ``warmup_actions``, then ``collect`` (env step -> buffer)
#       refresh_phase:    the agent's ``refresh`` (reads the buffer) where env steps crossed its interval
#       learning_phase:   ``learn`` block_updates times (sample -> prepare -> update), or zero metrics
#
# The per-seed phases (policy_actions ... evaluate_policy) see one seed; ``over_seeds`` maps them over the
# seed axis. The step counters are shared by all seeds, so the branches on them are real ``lax.cond``s.


@dataclasses.dataclass(frozen=True, eq=False)
class Program:
    """What one compiled program is about, fixed for the whole run; ``jit`` closes over it.

    ``agent_cfg`` is the template config: its static fields (widths, batch size) fix shapes and code paths.
    The numeric hyperparameters each member trains with are ``TrainState.hparams``, which reach the phases
    as ``hparams`` (traced arrays, so a sweep vmaps over them like over seeds).
    """

    agent: Agent
    env: Any  # VecEnv of loop.num_envs training envs
    eval_env: Any  # VecEnv of loop.num_eval_envs evaluation envs
    loop: LoopConfig
    agent_cfg: Any
    schedule: Schedule
    buffer_layout: buffer_lib.Layout
    first_update_env_step: int
    metric_shapes: Mapping[str, jax.ShapeDtypeStruct]  # what ``learn`` returns per seed
    planned_updates: int = 0  # what the whole run does (``jaxrl.progress.Progress``'s totals)
    planned_env_steps: int = 0
    pbt: pbt_lib.PBTConfig | None = None  # exploit/explore over the members at chunk ends (jaxrl.pbt)
    refresh_interval: int = 0  # env steps between the agent's ``refresh`` calls (0: never), from ``agent_cfg``

    @property
    def spec(self) -> EnvSpec:
        """The env's spec with the observation parts the actor and critics read (what the agent is built from)."""
        return observation_roles(self.env.spec, self.loop)

    @property
    def metric_names(self) -> tuple[str, ...]:
        return tuple(sorted(self.metric_shapes))

    def progress(self, updates, env_steps) -> progress_lib.Progress:
        """What the agent's functions see as ``state.progress`` at these counters (``jaxrl.progress``)."""
        return progress_lib.at(updates, env_steps, self.planned_updates, self.planned_env_steps)

    @functools.cached_property
    def initial_state(self):
        """``init_state`` bound to this program, one function object so that jit compiles it once."""
        return functools.partial(init_state, self)


class Episodes(NamedTuple):
    """Training episodes finished in a chunk, per seed."""

    return_sum: jax.Array
    count: jax.Array


class ChunkSums(NamedTuple):
    """What a chunk accumulates for its metrics, per seed (``learning_blocks`` is shared)."""

    metric_sums: dict[str, jax.Array]
    learning_blocks: jax.Array  # blocks that updated
    episodes: Episodes
    first_nonfinite: dict[str, jax.Array]  # int32 env step at which a metric was first not finite; -1: never


def observe(program: Program, normalizers: Normalizers, obs):
    """What the agent sees: ``obs`` normalised by the running statistics when ``normalize_obs`` is on."""
    return normalize_obs(normalizers.obs, obs) if program.loop.normalize_obs else obs


def policy_actions(program: Program, agent_state, hparams, normalizers, env_state, acting_carry, key, progress=None):
    """The agent's exploring actions for every env, ``state.progress`` set to ``progress`` (default: the run's
    start). An env that starts an episode starts from a fresh acting carry (e.g. a zero planner warm start)."""
    fresh = program.agent.init_carry(program.loop.num_envs, program.spec, program.agent_cfg)
    first = env_state.episode_step == 0
    acting_carry = jax.tree.map(lambda new, old: jnp.where(first.reshape((-1,) + (1,) * (old.ndim - 1)), new, old),
                                fresh, acting_carry)
    obs = observe(program, normalizers, env_state.obs)
    agent_state = progress_lib.attach(agent_state, program.progress(0, 0) if progress is None else progress)
    return program.agent.act(agent_state, obs, key, hparams, False, acting_carry)


def warmup_actions(program: Program, agent_state, hparams, normalizers, env_state, acting_carry, key, progress=None):
    """Uniform random actions in [-1, 1] for every env (before the first update, with ``warmup="uniform"``)."""
    shape = (program.loop.num_envs, program.spec.action_size)
    return jax.random.uniform(key, shape, minval=-1.0, maxval=1.0), acting_carry


def collect(program: Program, env_state, buffer, normalizers, action, hparams):
    """One batched env step: the transition goes into the buffer, the new observation and reward into the running
    statistics. Returns (env state, buffer, normalizers, episodes finished in this step)."""
    loop = program.loop
    next_env_state, out = program.env.step(env_state, action)
    buffer = buffer_lib.add(buffer, env_state.obs, action, out.reward, out.terminated, out.truncated, out.final_obs,
                            env_state.episode_step)
    if loop.normalize_obs:
        normalizers = normalizers.replace(obs=update_obs_stats(normalizers.obs, out.obs))
    if loop.scale_rewards:
        returns = update_return_stats(normalizers.returns, out.reward, out.done, hparams.gamma)
        normalizers = normalizers.replace(returns=returns)
    done = out.done.astype(jnp.float32)
    return next_env_state, buffer, normalizers, Episodes(jnp.sum(done * out.episode_return), jnp.sum(done))


def prepare(program: Program, batch, normalizers):
    """The batch as the agent trains on it: observations normalised and rewards scaled by the current statistics
    (when those options are on)."""
    fields = {}
    if program.loop.normalize_obs:
        fields.update({name: observe(program, normalizers, getattr(batch, name)) for name in ("obs", "next_obs")
                       if hasattr(batch, name)})
    if program.loop.scale_rewards:
        fields["reward"] = batch.reward * reward_scale(normalizers.returns, program.loop.reward_scale_max_return)
    return batch.replace(**fields)


def check_shardable(agent: Agent, agent_cfg, shards: int) -> None:
    """ConfigError (one line) unless ``agent`` can draw its batches stratified over ``shards`` env shards."""
    if agent.sample_with_state is not None:
        raise ConfigError(f"env_shards={shards}: {agent.name} samples with its own state (sample_with_state), which "
                          "draws from the whole buffer; train it with env_shards=1")
    batch_size = getattr(agent_cfg, "batch_size", None)
    if not isinstance(batch_size, int) or batch_size % shards:
        raise ConfigError(f"env_shards={shards} needs a batch_size that it divides (each shard draws batch_size / "
                          f"env_shards transitions); {agent.name}'s batch_size is {batch_size!r}")


def split_env_shards(buffer: buffer_lib.BufferState, shards: int) -> buffer_lib.BufferState:
    """The buffer as ``shards`` buffers of ``num_envs / shards`` envs each, stacked on a new leading axis (env
    e of shard d is env d * num_envs / shards + e); the write position and fill are shared."""
    def split(x, axis):
        shape = x.shape[:axis] + (shards, x.shape[axis] // shards) + x.shape[axis + 1:]
        return jnp.moveaxis(x.reshape(shape), axis, 0)

    per_row = lambda x: split(x, 1)  # noqa: E731 - [R or F, N, ...] leaves
    shared = lambda x: jnp.broadcast_to(x, (shards,) + x.shape)  # noqa: E731
    return buffer.replace(obs=jax.tree.map(per_row, buffer.obs), action=per_row(buffer.action),
                          reward=per_row(buffer.reward), terminated=per_row(buffer.terminated),
                          truncated=per_row(buffer.truncated), episode_step=per_row(buffer.episode_step),
                          final_slot=per_row(buffer.final_slot), final_obs=jax.tree.map(per_row, buffer.final_obs),
                          final_count=split(buffer.final_count, 0), ptr=shared(buffer.ptr), size=shared(buffer.size))


def draw(program: Program, agent_state, buffer, key, hparams):
    """The batch of one update: the agent's own draw (``jaxrl.agent.draw_batch``), or with ``loop.env_shards`` > 1
    that draw on each shard's envs with batch_size / env_shards and the key folded with the shard's index, the
    shards' batches concatenated in shard order. The shards' gathers read only their own envs, so with the envs
    axis split over devices (``jaxrl.sharding``) each device samples from its own part of the buffer and the
    batch comes out split the same way; the update's gradients then average over devices by themselves."""
    shards = program.loop.env_shards
    if shards == 1:
        return draw_batch(program.agent, agent_state, buffer, key, hparams)
    per_shard = hparams.replace(batch_size=hparams.batch_size // shards)
    keys = jax.vmap(lambda d: jax.random.fold_in(key, d))(jnp.arange(shards))
    batches = jax.vmap(lambda part, k: program.agent.sample_batch(part, k, per_shard))(
        split_env_shards(buffer, shards), keys)
    sizes = {x.shape[1] for x in jax.tree.leaves(batches)}
    if sizes != {per_shard.batch_size}:  # at trace time: a sampler that is not batch-major or ignores batch_size
        raise ConfigError(f"env_shards={shards}: {program.agent.name}'s sample_batch returned leaves of batch sizes "
                          f"{sorted(sizes)}, not batch_size / env_shards = {per_shard.batch_size} on their first axis")
    return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), batches)


def env_axes(state: TrainState, num_envs: int):
    """Per leaf of a member-stacked ``TrainState`` (or its abstract shapes): the axis that indexes the training
    envs, -1 where none does. The buffer's rows are ``[K, R, N, ...]`` (its fill counters have none), the envs'
    states and the acting carry ``[K, N, ...]``, the running discounted return of reward scaling ``[K, N]``."""
    def at(axis):
        return lambda x: axis if len(x.shape) > axis and x.shape[axis] == num_envs else -1

    none = lambda tree: jax.tree.map(lambda _: -1, tree)  # noqa: E731
    buffer = state.buffer
    buffer_axes = jax.tree.map(at(2), buffer).replace(final_count=at(1)(buffer.final_count), ptr=-1, size=-1)
    returns = state.normalizers.returns
    normalizer_axes = none(state.normalizers).replace(
        returns=none(returns).replace(discounted_return=at(1)(returns.discounted_return)))
    return state.replace(agent=none(state.agent), buffer=buffer_axes, env=jax.tree.map(at(1), state.env),
                         normalizers=normalizer_axes, carry=jax.tree.map(at(1), state.carry),
                         hparams=none(state.hparams), key=-1, env_steps=-1, updates=-1, pbt=none(state.pbt))


def learn(program: Program, agent_state, hparams, buffer, normalizers, key, count: int, progress=None):
    """``count`` gradient updates, each on a fresh batch: how a batch reaches ``agent.update``, with
    ``state.progress`` at its own update count (``progress.updates`` counts the updates before the first;
    default: the run's start).

    Returns the new agent state and each metric's mean over the ``count`` updates.
    """

    progress = program.progress(0, 0) if progress is None else progress

    def one_update(agent_state, key_and_index):
        key, index = key_and_index
        sample_key, update_key = jax.random.split(key)
        now = progress.replace(updates=progress.updates + index)
        agent_state = progress_lib.attach(agent_state, now)
        batch = prepare(program, draw(program, agent_state, buffer, sample_key, hparams), normalizers)
        agent_state, metrics = checked_update(program.agent.name, agent_state,
                                              program.agent.update(agent_state, batch, update_key, hparams))
        return progress_lib.detach(agent_state), metrics

    steps = (jax.random.split(key, count), jnp.arange(count, dtype=jnp.int32))
    agent_state, metrics = jax.lax.scan(one_update, agent_state, steps)
    return agent_state, jax.tree.map(jnp.mean, metrics)


def evaluate_policy(program: Program, agent_state, hparams, normalizers, key, progress=None):
    """Mean return of one deterministic episode on each evaluation env (``state.progress``: ``progress``, default
    the run's start)."""
    agent_state = progress_lib.attach(agent_state, program.progress(0, 0) if progress is None else progress)

    def policy(obs, acting_carry, key):
        return program.agent.act(agent_state, observe(program, normalizers, obs), key, hparams, True, acting_carry)

    num_envs = program.loop.num_eval_envs
    fresh = program.agent.init_carry(num_envs, program.spec, program.agent_cfg)
    return evaluate(program.eval_env, policy, key, num_envs, fresh)


# ---------------------------------------------------------------------------- all seeds: the compiled chunk


def act_and_collect(program: Program, scanned, act_key):
    """One batched env step of every seed, the body of a block's scan over ``scanned = (state, episodes)``: act
    (warm-up or policy actions), then collect. Returns the state with its env, buffer, normalizers, acting carry
    and env-step counter advanced, and the episodes finished so far."""
    state, episodes = scanned
    operands = (state.agent, state.hparams, state.normalizers, state.env, state.carry, act_key)
    progress = program.progress(state.updates, state.env_steps)
    policy = over_seeds(functools.partial(policy_actions, program, progress=progress))
    if program.loop.warmup == "policy":
        action, acting_carry = policy(*operands)
    else:
        warmup = over_seeds(functools.partial(warmup_actions, program, progress=progress))
        action, acting_carry = jax.lax.cond(state.env_steps < program.first_update_env_step, warmup, policy,
                                            *operands)
    env_state, buffer, normalizers, finished = over_seeds(functools.partial(collect, program))(
        state.env, state.buffer, state.normalizers, action, state.hparams)
    state = state.replace(env=env_state, buffer=buffer, normalizers=normalizers, carry=acting_carry,
                          env_steps=state.env_steps + program.schedule.env_steps_per_iter)
    return (state, Episodes(episodes.return_sum + finished.return_sum, episodes.count + finished.count)), None


def refresh_phase(program: Program, state: TrainState, block_start_env_steps, update_keys) -> TrainState:
    """The agent's ``refresh(state, buffer, key, cfg)`` for every seed when this block's env steps crossed a multiple
    of ``refresh_interval`` (a real ``lax.cond``: the counters are shared), before the block's updates. Its key is
    folded from the block's update key, so agents without a refresh keep their random streams."""
    interval = program.refresh_interval
    if not interval:
        return state
    due = state.env_steps // interval > block_start_env_steps // interval
    progress = program.progress(state.updates, state.env_steps)

    def refresh(agent_state, buffer, hparams, key):
        agent_state = progress_lib.attach(agent_state, progress)
        return progress_lib.detach(program.agent.refresh(agent_state, buffer, key, hparams))

    keep = lambda agent_state, *_: agent_state  # noqa: E731
    keys = jax.vmap(lambda k: jax.random.fold_in(k, 2))(update_keys)
    agent_state = jax.lax.cond(due, over_seeds(refresh), keep, state.agent, state.buffer, state.hparams, keys)
    return state.replace(agent=agent_state)


def learning_phase(program: Program, state: TrainState, learning, update_keys):
    """A block's updates for every seed once learning has started, else zero metrics; in the first block that
    learns, also the one-shot pretraining (``pretrain_updates``, TD-MPC2). Returns (state, metrics)."""
    loop, num_seeds = program.loop, update_keys.shape[0]
    operands = (state.agent, state.hparams, state.buffer, state.normalizers)
    update_count = state.updates
    agent_state = state.agent
    if loop.pretrain_updates:
        starting = learning & (state.updates == 0)
        pretrain_progress = program.progress(state.updates, state.env_steps)
        pretrain = over_seeds(lambda *args: learn(program, *args, loop.pretrain_updates, pretrain_progress)[0])
        skip = lambda agent_state, *_: agent_state  # noqa: E731
        pretrain_keys = jax.vmap(lambda k: jax.random.fold_in(k, 1))(update_keys)
        agent_state = jax.lax.cond(starting, pretrain, skip, *operands, pretrain_keys)
        update_count = update_count + jnp.where(starting, loop.pretrain_updates, 0)

    def no_update(agent_state, *_):
        return agent_state, {name: jnp.zeros((num_seeds,) + shape.shape, shape.dtype)
                             for name, shape in program.metric_shapes.items()}

    block_updates = program.schedule.block_updates
    progress = program.progress(update_count, state.env_steps)
    update = over_seeds(lambda *args: learn(program, *args, block_updates, progress))
    agent_state, metrics = jax.lax.cond(learning, update, no_update, agent_state, *operands[1:], update_keys)
    update_count = update_count + jnp.where(learning, block_updates, 0)
    return state.replace(agent=agent_state, updates=update_count), metrics


def accumulate(sums: ChunkSums, metrics, learning, episodes: Episodes, env_steps) -> ChunkSums:
    """Add a block's metrics (where it learned) to the chunk's sums, and note the first non-finite value of each
    metric (the NaN guard's evidence: which metric, which seed, which env step)."""
    first_nonfinite = {name: jnp.where((first < 0) & ~jnp.isfinite(metrics[name]), env_steps, first)
                       for name, first in sums.first_nonfinite.items()}
    metric_sums = {name: total + jnp.where(learning, metrics[name], 0.0) for name, total in sums.metric_sums.items()}
    return ChunkSums(metric_sums, sums.learning_blocks + learning.astype(jnp.float32), episodes, first_nonfinite)


def block(program: Program, scanned, _):
    """``block_iters`` batched env steps of every seed, then ``block_updates`` updates: the body of a chunk's scan
    over ``scanned = (state, sums)``. A fractional update-to-data ratio is a block of several env steps and one
    update."""
    state, sums = scanned
    keys = jax.vmap(lambda k: jax.random.split(k, 3))(state.key)
    next_key, act_keys, update_keys = keys[:, 0], keys[:, 1], keys[:, 2]
    act_keys = jax.vmap(lambda k: jax.random.split(k, program.schedule.block_iters))(act_keys).swapaxes(0, 1)
    block_start_env_steps = state.env_steps
    (state, episodes), _ = jax.lax.scan(functools.partial(act_and_collect, program), (state, sums.episodes), act_keys)
    state = refresh_phase(program, state, block_start_env_steps, update_keys)
    learning = state.env_steps >= program.first_update_env_step
    state, metrics = learning_phase(program, state, learning, update_keys)
    sums = accumulate(sums, metrics, learning, episodes, state.env_steps)
    return (state.replace(key=next_key), sums), None


def run_chunk(program: Program, state: TrainState):
    """``eval_every`` env steps of training, then one evaluation. Returns (state, metrics); per-seed metrics have
    the seed axis first, ``train/*`` are means over the chunk's updates."""
    names, num_seeds = program.metric_names, state.key.shape[0]
    zeros = jnp.zeros((num_seeds,), jnp.float32)
    sums = ChunkSums({name: zeros for name in names}, jnp.zeros((), jnp.float32), Episodes(zeros, zeros),
                     {name: jnp.full((num_seeds,), -1, jnp.int32) for name in names})
    (state, sums), _ = jax.lax.scan(functools.partial(block, program), (state, sums), None,
                                    length=program.schedule.chunk_blocks)
    keys = jax.vmap(jax.random.split)(state.key)
    state = state.replace(key=keys[:, 0])
    progress = program.progress(state.updates, state.env_steps)
    eval_return = over_seeds(functools.partial(evaluate_policy, program, progress=progress))(
        state.agent, state.hparams, state.normalizers, keys[:, 1])
    blocks = jnp.maximum(sums.learning_blocks, 1.0)
    episodes = sums.episodes
    metrics = {f"train/{name}": sums.metric_sums[name] / blocks for name in names}
    metrics["train/episode_return"] = jnp.where(
        episodes.count > 0, episodes.return_sum / jnp.maximum(episodes.count, 1.0), jnp.nan)
    metrics["eval/return"] = eval_return
    metrics["nonfinite_step"] = sums.first_nonfinite
    metrics["env_steps"] = state.env_steps
    metrics["updates"] = state.updates
    if program.pbt is not None:
        chunks_per_interval = program.pbt.interval // program.loop.eval_every
        due = (state.env_steps // program.schedule.chunk_env_steps) % chunks_per_interval == 0
        state, pbt_metrics = pbt_lib.step(program.pbt, state, eval_return, due)
        metrics.update(pbt_metrics)
    return state, metrics


# ------------------------------------------------------------------------------------------ initial state


def init_seed(program: Program, key, hparams) -> dict[str, Any]:
    """One seed's fresh per-seed fields of the TrainState."""
    agent_key, env_key, key = jax.random.split(key, 3)
    num_envs, spec = program.loop.num_envs, program.spec
    return dict(agent=checked_init(program.agent, agent_key, spec, hparams), hparams=hparams,
                buffer=buffer_lib.init(program.buffer_layout), env=program.env.reset(env_key),
                normalizers=init_normalizers(obs_structure(spec), num_envs),
                carry=program.agent.init_carry(num_envs, spec, program.agent_cfg), key=key)


def init_state(program: Program, keys, hparams) -> TrainState:
    # Several seeds are initialised one after another (lax.map): on XLA:CPU (jaxlib 0.10.2) SimbaV2's critic init
    # vmapped over 2+ seeds (orthogonal inits of 2 blocks at width 128, or 1 at 512) never finishes, every thread
    # idle. One seed keeps the vmap: inside a map, an MJX reset rounds differently (dmc/CheetahRun's 2k-step
    # return moved 15.31 -> 16.67), and single runs stay exactly as before. Once per run: the map costs nothing.
    init_one = functools.partial(init_seed, program)
    if keys.shape[0] == 1:
        per_seed = jax.vmap(init_one)(keys, hparams)
    else:
        per_seed = jax.lax.map(lambda args: init_one(*args), (keys, hparams))
    pbt = None if program.pbt is None else pbt_lib.init_state(keys, program.pbt)
    return TrainState(**per_seed, env_steps=jnp.zeros((), jnp.int32), updates=jnp.zeros((), jnp.int32), pbt=pbt)


def init_members(program: Program, seeds: list[int], configs: list, mesh=None) -> TrainState:
    """Member k trains with key PRNGKey(seeds[k]) and the numeric fields of configs[k]. With a ``mesh``
    (``jaxrl.sharding.member_mesh``), the state is created already split over its devices."""
    initial_state, args = initial_state_program(program, seeds, configs, mesh)
    return initial_state(*args)


def initial_state_program(program: Program, seeds: list[int], configs: list, mesh=None):
    """``init_members``'s jitted program and its arguments, ``(fn, (keys, hparams))``, checked as it checks them:
    ``compile_start`` compiles it ahead of time beside the chunk."""
    if len(seeds) != len(configs) or not seeds:
        raise ConfigError(f"need one config per seed, got {len(seeds)} seed(s) and {len(configs)} config(s)")
    for member in configs:
        program.agent.check_config(member)
    if program.pbt is not None:
        pbt_lib.check(program.pbt, len(configs), program.loop.eval_every, traced_fields(program.agent_cfg),
                      program.agent.check_config, configs)
    keys = jnp.stack([jax.random.PRNGKey(seed) for seed in seeds])
    hparams = stack_configs(configs, program.agent_cfg)
    if mesh is None:
        return jax.jit(program.initial_state), (keys, hparams)
    sharding_lib.check_divisible(len(seeds), mesh)
    abstract = jax.eval_shape(program.initial_state, keys, hparams)
    shardings = sharding_lib.state_shardings(abstract, mesh, env_axes(abstract, program.loop.num_envs))
    return jax.jit(program.initial_state, out_shardings=shardings), (keys, hparams)


def compile_start(trainer: Trainer, seeds: list[int], configs: list, mesh=None, abstract_state=None):
    """A fresh run's two programs compiled together: returns ``(init_state, run_chunk)``, where ``init_state()``
    makes exactly ``trainer.init_members(seeds, configs, mesh)``'s state and ``run_chunk`` is the compiled chunk.

    Both are traced and lowered here, one after the other (Python holds the GIL), then XLA compiles them in two
    threads (it releases the GIL): the chunk's HLO passes run on one core while the initial state's program
    compiles on another, instead of one after the other (measured in the docs' compile table).
    ``abstract_state``: the chunk's argument (shapes, dtypes, shardings); default the initial state's shapes."""
    import concurrent.futures

    initial_state, args = initial_state_program(trainer.program, seeds, configs, mesh)
    init_lowered = initial_state.trace(*args).lower()
    if abstract_state is None:
        abstract_state = jax.eval_shape(initial_state, *args)
    chunk_lowered = trainer.run_chunk.trace(abstract_state).lower()
    with concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="jaxrl-compile") as pool:
        chunk_job = pool.submit(chunk_lowered.compile)  # the longer one first
        init_job = pool.submit(init_lowered.compile)
        run_chunk_compiled, init_compiled = chunk_job.result(), init_job.result()
    return functools.partial(init_compiled, *args), run_chunk_compiled


def init(program: Program, seed: int, num_seeds: int = 1, mesh=None) -> TrainState:
    """Every member uses the program's agent config; seed k of a K-seed run uses exactly the key of a single run
    with seed ``seed + k``."""
    return init_members(program, [seed + k for k in range(num_seeds)], [program.agent_cfg] * num_seeds, mesh)


# -------------------------------------------------------------------------------------------- make_train


def buffer_layout(agent: Agent, loop: LoopConfig, spec: EnvSpec) -> buffer_lib.Layout:
    """The replay buffer a run of ``loop`` on envs of ``spec`` holds; ``describe`` and the CLI's memory check (which
    must come before anything is traced) both take it from here."""
    return buffer_lib.layout(loop.buffer_size, loop.num_envs, spec, terminal_obs=agent.terminal_obs)


def describe(agent: Agent, env, eval_env, loop: LoopConfig, agent_cfg, pbt: pbt_lib.PBTConfig | None = None
             ) -> Program:
    """The Program for ``agent`` on ``env``, validating the sizes first (ConfigError, one line). With ``pbt`` the
    members form a population (``jaxrl.pbt``), checked against the members in ``init_members``."""
    if not isinstance(agent.name, str) or not agent.name.strip():
        raise ConfigError(f"the agent's name is {agent.name!r}: give Agent(name=...) a name (run directories, "
                          "summaries and plots show it)")
    check_config_type(agent, agent_cfg)
    agent.check_config(agent_cfg)
    schedule = make_schedule(loop)
    refresh_interval = agent.refresh_interval(agent_cfg)
    if not isinstance(refresh_interval, int) or isinstance(refresh_interval, bool) or refresh_interval < 0:
        raise ConfigError(f"{agent.name}'s refresh_interval is {refresh_interval!r}: it must be a whole number of env "
                          "steps >= 0 (0: never), read from a static field of its Config")
    observation_roles(env.spec, loop)
    # The buffer and the scans are sized by the loop's num_envs: a training batch of another size fails deep in
    # tracing. (The evaluation resets its env at loop.num_eval_envs, whatever the batch was made with.)
    if getattr(env, "num_envs", loop.num_envs) != loop.num_envs:
        raise ConfigError(f"env steps {env.num_envs} envs at once but loop.num_envs is {loop.num_envs}: make it with "
                          f"envs.make(name, {loop.num_envs})")
    for name, batch in (("env", env), ("eval_env", eval_env)):
        if getattr(batch, "action_repeat", loop.action_repeat) != loop.action_repeat:
            raise ConfigError(f"{name} repeats each action {batch.action_repeat} times but loop.action_repeat is "
                              f"{loop.action_repeat}: make it with envs.make(name, n, action_repeat="
                              f"{loop.action_repeat})")
    # An n-step return longer than an episode only ever sums across its end (every sampled window is cut short),
    # and the buffer's window gather costs n per sample: 10^6 ran 1000x slower and learned nothing more.
    n_step = getattr(agent_cfg, "n_step", 1)
    if isinstance(n_step, int) and n_step > env.spec.decisions_per_episode:
        raise ConfigError(f"n_step={n_step} is longer than {env.name}'s episodes ({env.spec.decisions_per_episode} "
                          f"agent decisions): use an n_step <= {env.spec.decisions_per_episode} (1-5 is usual)")
    layout = buffer_layout(agent, loop, env.spec)
    if agent_cfg.batch_size <= 0 or agent_cfg.batch_size > layout.rows * loop.num_envs:
        raise ConfigError(f"batch_size={agent_cfg.batch_size} must be between 1 and the buffer's "
                          f"{layout.rows * loop.num_envs} transitions (buffer_size)")
    if loop.env_shards > 1:
        check_shardable(agent, agent_cfg, loop.env_shards)
    if loop.scale_rewards and not hasattr(agent_cfg, "gamma"):
        raise ConfigError(f"scale_rewards needs the agent's discount, but {type(agent_cfg).__name__} has no gamma")
    # Sampling needs a row whose successor is written: never update before two batched steps are in.
    first_update = max(learning_starts(loop), 2 * schedule.env_steps_per_iter)
    chunks = -(-loop.steps // schedule.chunk_env_steps)
    planned_updates, planned_env_steps = progress_lib.planned_totals(
        chunks * schedule.chunk_blocks, schedule.env_steps_per_iter * schedule.block_iters, schedule.block_updates,
        first_update, loop.pretrain_updates)
    program = Program(
        agent=agent,
        env=env,
        eval_env=eval_env,
        loop=loop,
        agent_cfg=agent_cfg,
        schedule=schedule,
        buffer_layout=layout,
        first_update_env_step=first_update,
        metric_shapes={},
        planned_updates=planned_updates,
        planned_env_steps=planned_env_steps,
        pbt=pbt,
        refresh_interval=refresh_interval,
    )

    def one_seed_metrics(key):
        seed = init_seed(program, key, agent_cfg)
        return learn(program, seed["agent"], agent_cfg, seed["buffer"], seed["normalizers"], key,
                     schedule.block_updates)[1]

    return dataclasses.replace(program, metric_shapes=jax.eval_shape(one_seed_metrics, jax.random.PRNGKey(0)))


def make_train(agent: Agent, env, eval_env, loop: LoopConfig, agent_cfg, pbt: pbt_lib.PBTConfig | None = None
               ) -> Trainer:
    """Build the jitted program for ``agent`` on ``env`` (a VecEnv with ``loop.num_envs`` envs).

    ``agent_cfg`` fixes the program (its static fields) and is every member's config in ``init``; numeric fields
    may differ per member through ``init_members`` (sweeps). Inside the program they are traced arrays. ``pbt``:
    population-based training over the members (``jaxrl.pbt``)."""
    program = describe(agent, env, eval_env, loop, agent_cfg, pbt)
    return Trainer(
        init=functools.partial(init, program),
        init_members=functools.partial(init_members, program),
        run_chunk=jax.jit(functools.partial(run_chunk, program), donate_argnums=0),
        schedule=program.schedule,
        metric_names=program.metric_names,
        program=program,
    )
