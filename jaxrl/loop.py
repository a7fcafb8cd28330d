"""The off-policy training loop: one jitted ``run_chunk`` scans over env steps, updates and evaluation.

    state = trainer.init(seed, num_seeds)        # one pytree, every per-seed leaf with a leading seed axis
    state, metrics = trainer.run_chunk(state)    # eval_every env steps, then one evaluation; no host sync
    
A chunk is a ``lax.scan`` over *blocks*; a block is ``block_iters`` batched env steps (act on all envs ->
step -> add to buffer) followed by ``block_updates`` gradient updates, so fractional update-to-data ratios
(1 update per 16 transitions) need no per-step branch. Seeds are a ``vmap`` over the per-seed state; the
step counters are shared scalars outside that vmap, so "random actions until learning_starts" and "no
updates before learning_starts" stay real ``lax.cond``s instead of computing both sides for every seed.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import flax.struct
import jax
import jax.numpy as jnp

from jaxrl import ConfigError, checks
from jaxrl import buffer as buffer_lib
from jaxrl import sharding as sharding_lib
from jaxrl.agent import Agent
from jaxrl.evaluate import evaluate
from jaxrl.normalization import (Normalizers, init_normalizers, normalize, reward_scale, update_return_stats,
                                 update_stats)


@dataclasses.dataclass(frozen=True)
class LoopConfig:
    """Training-loop settings. Env steps count simulator steps (action repeats included)."""

    steps: int = 50_000
    """total env steps to train for (rounded up to whole chunks of eval_every)"""
    num_envs: int = 16
    """envs stepped together for training"""
    num_eval_envs: int = 10
    """envs (= episodes) per deterministic evaluation"""
    eval_every: int = 10_000
    """env steps per chunk; one evaluation at the end of each (rounded up to whole update blocks)"""
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
        if (checks.as_int(value) or 0) <= 0:
            raise ConfigError(f"{field} must be a positive integer, got {value!r}")
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
    if cfg.episode_length is not None and (checks.as_int(cfg.episode_length) or 0) <= 0:
        raise ConfigError(f"episode_length must be a positive integer of env steps or None, got {cfg.episode_length!r}")
    checks.positive(cfg, "reward_scale_max_return")

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
    return Schedule(env_steps_per_iter, block_iters, block_updates, max(1, -(-cfg.eval_every // block_env_steps)))


def learning_starts(cfg: LoopConfig) -> int:
    """``cfg.learning_starts``, or its default: 5000 env steps, a tenth of the run when that is shorter (so a short
    run still learns instead of ending before its first update)."""
    return min(5_000, cfg.steps // 10) if cfg.learning_starts is None else cfg.learning_starts


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
    carry: Any  # the agent's per-env acting state (planner warm starts); () for memoryless agents
    hparams: Any  # the agent Config of each member: its numeric fields as [K] arrays (a sweep varies them)
    key: jax.Array  # [K, 2]
    env_steps: jax.Array  # int32 scalar shared by all seeds
    updates: jax.Array  # int32 scalar


class Trainer(NamedTuple):
    init: Any  # (seed: int, num_seeds: int) -> TrainState; every member uses the agent config given to make_train
    init_members: Any  # (seeds: list[int], configs: list[Config]) -> TrainState; member k: seeds[k], configs[k]
    run_chunk: Any  # jitted, donates its argument: TrainState -> (TrainState, metrics)
    schedule: Schedule
    metric_names: tuple[str, ...]


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


def make_train(agent: Agent, env, eval_env, cfg: LoopConfig, agent_cfg) -> Trainer:
    """Build the jitted program for ``agent`` on ``env`` (a VecEnv with ``cfg.num_envs`` envs).

    ``agent_cfg`` fixes the program (its static fields) and is every member's config in ``init``; numeric fields
    may differ per member through ``init_members`` (sweeps). Inside the program they are traced arrays."""
    agent.check_config(agent_cfg)
    schedule = make_schedule(cfg)
    spec = env.spec
    batch_size = agent_cfg.batch_size
    rows, _, _ = buffer_lib.layout(cfg.buffer_size, cfg.num_envs, spec.obs_size, spec.action_size,
                                   env.decisions_per_episode, spec.can_terminate)
    if batch_size <= 0 or batch_size > rows * cfg.num_envs:
        raise ConfigError(f"batch_size={batch_size} must be between 1 and the buffer's {rows * cfg.num_envs} "
                          "transitions (buffer_size)")
    num_envs, action_size = cfg.num_envs, spec.action_size
    if cfg.scale_rewards and not hasattr(agent_cfg, "gamma"):
        raise ConfigError(f"scale_rewards needs the agent's discount, but {type(agent_cfg).__name__} has no gamma")
    # Sampling needs a row whose successor is written: never update before two batched steps are in.
    first_update = max(learning_starts(cfg), 2 * schedule.env_steps_per_iter)

    def norm(stats, obs):
        return normalize(stats.obs, obs) if cfg.normalize_obs else obs

    def init_one(key, hparams):
        agent_key, env_key, key = jax.random.split(key, 3)
        return dict(agent=agent.init(agent_key, spec, hparams), hparams=hparams,
                    buffer=buffer_lib.init(cfg.buffer_size, num_envs, spec.obs_size, action_size,
                                           env.decisions_per_episode, spec.can_terminate),
                    env=env.reset(env_key), normalizers=init_normalizers(spec.obs_size, num_envs),
                    carry=agent.init_carry(num_envs, spec, agent_cfg), key=key)

    def _init(keys, hparams):
        per_seed = jax.vmap(init_one)(keys, hparams)
        return TrainState(**per_seed, env_steps=jnp.zeros((), jnp.int32), updates=jnp.zeros((), jnp.int32))

    def init_members(seeds, configs, mesh=None) -> TrainState:
        """Member k trains with key PRNGKey(seeds[k]) and the numeric fields of configs[k]. With a ``mesh``
        (``jaxrl.sharding.member_mesh``), the state is created already split over its devices."""
        if len(seeds) != len(configs) or not seeds:
            raise ConfigError(f"need one config per seed, got {len(seeds)} seed(s) and {len(configs)} config(s)")
        for member in configs:
            agent.check_config(member)
        keys = jnp.stack([jax.random.PRNGKey(seed) for seed in seeds])
        hparams = stack_configs(configs, agent_cfg)
        if mesh is None:
            return jax.jit(_init)(keys, hparams)
        sharding_lib.check_divisible(len(seeds), mesh)
        shardings = sharding_lib.state_shardings(jax.eval_shape(_init, keys, hparams), mesh)
        return jax.jit(_init, out_shardings=shardings)(keys, hparams)

    def init(seed: int, num_seeds: int = 1, mesh=None) -> TrainState:
        """Seed k of a K-seed run uses exactly the key of a single run with seed ``seed + k``."""
        return init_members([seed + k for k in range(num_seeds)], [agent_cfg] * num_seeds, mesh)

    # --------------------------------------------------------------------------- per-seed pieces (vmapped)

    fresh_carry = agent.init_carry(num_envs, spec, agent_cfg)

    def policy_actions(agent_state, hparams, stats, env_state, carry, key):
        # An env that starts an episode starts from a fresh carry (e.g. a zero planner warm start).
        first = env_state.episode_step == 0
        carry = jax.tree.map(lambda fresh, c: jnp.where(first.reshape((-1,) + (1,) * (c.ndim - 1)), fresh, c),
                             fresh_carry, carry)
        return agent.act(agent_state, norm(stats, env_state.obs), key, hparams, False, carry)

    def random_actions(agent_state, hparams, stats, env_state, carry, key):
        return jax.random.uniform(key, (num_envs, action_size), minval=-1.0, maxval=1.0), carry

    def env_step(env_state, buffer, stats, action, hparams):
        new_env_state, out = env.step(env_state, action)
        buffer = buffer_lib.add(buffer, env_state.obs, action, out.reward, out.terminated, out.truncated,
                                out.final_obs, env_state.episode_step)
        if cfg.normalize_obs:
            stats = stats.replace(obs=update_stats(stats.obs, out.obs))
        if cfg.scale_rewards:
            stats = stats.replace(returns=update_return_stats(stats.returns, out.reward, out.done, hparams.gamma))
        done = out.done.astype(jnp.float32)
        return new_env_state, buffer, stats, jnp.sum(done * out.episode_return), jnp.sum(done)

    def prepare(batch, stats):
        """Normalise the batch's observations and scale its rewards with the current statistics."""
        fields = {}
        if cfg.normalize_obs:
            fields.update({name: norm(stats, getattr(batch, name)) for name in ("obs", "next_obs")
                           if hasattr(batch, name)})
        if cfg.scale_rewards:
            fields["reward"] = batch.reward * reward_scale(stats.returns, cfg.reward_scale_max_return)
        return batch.replace(**fields)

    def updates(agent_state, hparams, buffer, stats, key, count=schedule.block_updates):
        def one(agent_state, key):
            sample_key, update_key = jax.random.split(key)
            batch = prepare(agent.sample_batch(buffer, sample_key, hparams), stats)
            return agent.update(agent_state, batch, update_key, hparams)

        agent_state, metrics = jax.lax.scan(one, agent_state, jax.random.split(key, count))
        return agent_state, jax.tree.map(jnp.mean, metrics)

    def eval_one(agent_state, hparams, stats, key):
        policy = lambda obs, carry, key: agent.act(agent_state, norm(stats, obs), key, hparams, True, carry)  # noqa
        return evaluate(eval_env, policy, key, cfg.num_eval_envs, agent.init_carry(cfg.num_eval_envs, spec, agent_cfg))

    # Metric names and shapes, for the "no update yet" branch and the NaN guard.
    def _metric_shapes():
        def probe(key):
            one_seed = init_one(key, agent_cfg)
            return updates(one_seed["agent"], agent_cfg, one_seed["buffer"], one_seed["normalizers"], key)[1]

        return jax.eval_shape(probe, jax.random.PRNGKey(0))

    metric_shapes = _metric_shapes()
    metric_names = tuple(sorted(metric_shapes))

    # ------------------------------------------------------------------------------------ the compiled chunk

    def block(carry, _):
        state, sums = carry
        keys = jax.vmap(lambda k: jax.random.split(k, 3))(state.key)
        key, act_keys, update_keys = keys[:, 0], keys[:, 1], keys[:, 2]

        def iteration(inner, act_key):
            agent_state, env_state, buffer, stats, carry, env_steps, ep_sum, ep_count = inner
            if cfg.warmup == "policy":
                action, carry = over_seeds(policy_actions)(agent_state, hparams, stats, env_state, carry, act_key)
            else:
                action, carry = jax.lax.cond(env_steps < first_update, over_seeds(random_actions),
                                             over_seeds(policy_actions), agent_state, hparams, stats, env_state,
                                             carry, act_key)
            env_state, buffer, stats, ret_sum, count = over_seeds(env_step)(env_state, buffer, stats, action,
                                                                            hparams)
            return (agent_state, env_state, buffer, stats, carry, env_steps + schedule.env_steps_per_iter,
                    ep_sum + ret_sum, ep_count + count), None

        act_keys = jax.vmap(lambda k: jax.random.split(k, schedule.block_iters))(act_keys).swapaxes(0, 1)
        hparams = state.hparams
        inner = (state.agent, state.env, state.buffer, state.normalizers, state.carry, state.env_steps,
                 sums["episode_return_sum"], sums["episodes"])
        inner, _ = jax.lax.scan(iteration, inner, act_keys)
        agent_state, env_state, buffer, stats, carry, env_steps, ep_sum, ep_count = inner

        learning = env_steps >= first_update
        num_seeds = state.key.shape[0]
        updates_done = state.updates
        if cfg.pretrain_updates:
            # One-shot pretraining on the seed data (TD-MPC2), in the first block that learns.
            pretrain_keys = jax.vmap(lambda k: jax.random.fold_in(k, 1))(update_keys)
            pretrain = lambda a, h, b, s, k: over_seeds(  # noqa: E731
                lambda a, h, b, s, k: updates(a, h, b, s, k, cfg.pretrain_updates)[0])(a, h, b, s, k)
            starting = learning & (state.updates == 0)
            agent_state = jax.lax.cond(starting, pretrain, lambda a, h, b, s, k: a, agent_state, hparams, buffer,
                                       stats, pretrain_keys)
            updates_done = updates_done + jnp.where(starting, cfg.pretrain_updates, 0)
        no_update = lambda a, h, b, s, k: (a, jax.tree.map(  # noqa: E731
            lambda m: jnp.zeros((num_seeds,) + m.shape, m.dtype), metric_shapes))
        agent_state, metrics = jax.lax.cond(learning, over_seeds(updates), no_update,
                                            agent_state, hparams, buffer, stats, update_keys)
        # NaN guard: remember, per metric and seed, the first env step at which it was not finite.
        first_bad = {name: jnp.where((sums["first_nonfinite"][name] < 0) & ~jnp.isfinite(metrics[name]),
                                     env_steps, sums["first_nonfinite"][name]) for name in metric_names}
        sums = dict(
            metric_sums={n: sums["metric_sums"][n] + jnp.where(learning, metrics[n], 0.0) for n in metric_names},
            metric_blocks=sums["metric_blocks"] + learning.astype(jnp.float32),
            episode_return_sum=ep_sum, episodes=ep_count, first_nonfinite=first_bad)
        state = state.replace(agent=agent_state, env=env_state, buffer=buffer, normalizers=stats, carry=carry,
                              key=key, env_steps=env_steps,
                              updates=updates_done + jnp.where(learning, schedule.block_updates, 0))
        return (state, sums), None

    def run_chunk(state: TrainState):
        num_seeds = state.key.shape[0]
        zeros = jnp.zeros((num_seeds,), jnp.float32)
        sums = dict(metric_sums={n: zeros for n in metric_names}, metric_blocks=jnp.zeros((), jnp.float32),
                    episode_return_sum=zeros, episodes=zeros,
                    first_nonfinite={n: jnp.full((num_seeds,), -1, jnp.int32) for n in metric_names})
        (state, sums), _ = jax.lax.scan(block, (state, sums), None, length=schedule.chunk_blocks)
        keys = jax.vmap(jax.random.split)(state.key)
        state = state.replace(key=keys[:, 0])
        eval_return = over_seeds(eval_one)(state.agent, state.hparams, state.normalizers, keys[:, 1])
        blocks = jnp.maximum(sums["metric_blocks"], 1.0)
        metrics = {f"train/{n}": sums["metric_sums"][n] / blocks for n in metric_names}
        metrics["train/episode_return"] = jnp.where(
            sums["episodes"] > 0, sums["episode_return_sum"] / jnp.maximum(sums["episodes"], 1.0), jnp.nan)
        metrics["eval/return"] = eval_return
        metrics["nonfinite_step"] = sums["first_nonfinite"]
        metrics["env_steps"] = state.env_steps
        metrics["updates"] = state.updates
        return state, metrics

    return Trainer(init=init, init_members=init_members, run_chunk=jax.jit(run_chunk, donate_argnums=0),
                   schedule=schedule, metric_names=metric_names)
