"""``jaxrl train``: build envs, agent and loop from the configs, run chunks, log, checkpoint, resume."""
from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
import typing
from typing import Any

from jaxrl import ConfigError
from jaxrl.loop import LoopConfig

DEFAULT_ENV = "dmc/CartpoleSwingup"


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """What to run and where its outputs go."""

    env: str = DEFAULT_ENV
    """env name: brax/<env>, dmc/<Task> or toy/<Name> (`jaxrl envs` lists them)"""
    seed: int = 0
    """seed of the first run; seed k of a --seeds K run equals a single run with seed + k"""
    seeds: int = 1
    """independent seeds trained together as one vmapped program"""
    run_dir: str | None = None
    """output directory (default runs/<agent>-<env>-<time>)"""
    checkpoint_every: int = 0
    """env steps between checkpoints of the whole training state (0: only at the end)"""
    keep_checkpoints: int = 3
    """how many of the latest checkpoints to keep"""
    deterministic: bool = False
    """make XLA choose deterministic GPU kernels too (slower on GPU; CPU runs are already repeatable)"""
    brax_backend: str = "generalized"
    """physics pipeline of brax/ envs: generalized, positional, spring or mjx"""
    playground_impl: str = "jax"
    """MuJoCo implementation of dmc/ envs: jax (MJX) or warp"""
    compilation_cache: str | None = "~/.cache/jaxrl/xla"
    """persistent XLA compilation cache directory; None turns it off"""
    shard_members: bool = True
    """split the members (seeds x swept configs) over all devices with jax.sharding when there are several"""
    distributed: bool = False
    """call jax.distributed.initialize() first (multi-host: one process per host, e.g. under SLURM)"""


def config_to_dict(cfg) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def config_from_dict(cls, data: dict[str, Any]):
    """Inverse of ``config_to_dict`` for flat dataclasses (JSON lists back to tuples)."""
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            value = data[f.name]
            if isinstance(value, list) and "tuple" in str(hints.get(f.name, "")):
                value = tuple(value)
            kwargs[f.name] = value
    return cls(**kwargs)


def setup_jax(run: RunConfig) -> None:
    """Process-wide JAX settings; must run before the first computation."""
    if run.deterministic:
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = (flags + " --xla_gpu_deterministic_ops=true"
                                   " --xla_gpu_exclude_nondeterministic_ops=true").strip()
    import jax

    if run.distributed and not jax.distributed.is_initialized():
        jax.distributed.initialize()
    if run.compilation_cache:
        jax.config.update("jax_compilation_cache_dir", os.path.expanduser(run.compilation_cache))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


def make_envs(run: RunConfig, loop: LoopConfig):
    """(training env batch, evaluation env batch) of a run; ``train`` and ``export.restore_run`` share it."""
    import envs

    kwargs = dict(action_repeat=loop.action_repeat, episode_length=loop.episode_length,
                  brax_backend=run.brax_backend, playground_impl=run.playground_impl)
    return envs.make(run.env, loop.num_envs, **kwargs), envs.make(run.env, loop.num_eval_envs, **kwargs)


def has_checkpoint(run_dir: str) -> bool:
    """Whether a run directory holds a checkpoint to resume from (sweeps and reproduce rerun into it)."""
    checkpoints = os.path.join(run_dir, "checkpoints")
    return os.path.isdir(checkpoints) and bool(os.listdir(checkpoints))


def validate(run: RunConfig, loop: LoopConfig) -> None:
    for name in ("seeds", "keep_checkpoints"):
        if getattr(run, name) <= 0:
            raise ConfigError(f"{name} must be a positive integer, got {getattr(run, name)}")
    if run.checkpoint_every < 0:
        raise ConfigError(f"checkpoint_every must be >= 0 env steps (0: only at the end), got {run.checkpoint_every}")


class NonFiniteError(RuntimeError):
    pass


def train(agent, run: RunConfig, loop: LoopConfig, agent_cfg, resume: bool = False, quiet: bool = False,
          members: list[tuple[int, Any]] | None = None):
    """Train and write the run directory; returns (summary dict, final state). Raises ConfigError on bad input.

    ``members``: (seed, agent config) per member of one vmapped program (a sweep group); every config must share
    ``agent_cfg``'s static fields. Default: ``run.seeds`` members with seeds ``run.seed + k`` and ``agent_cfg``.
    """
    from jaxrl import buffer as buffer_lib

    if members is None:
        members = [(run.seed + k, agent_cfg) for k in range(run.seeds)]
        custom_members = False
    else:
        run = dataclasses.replace(run, seeds=len(members))
        custom_members = True
    validate(run, loop)
    setup_jax(run)  # before anything touches JAX: the compilation cache is configured at the first compile
    env, eval_env = make_envs(run, loop)
    spec = env.spec
    _, _, nbytes = buffer_lib.layout(loop.buffer_size, loop.num_envs, spec.obs_size, spec.action_size,
                                     env.decisions_per_episode, spec.can_terminate)
    buffer_lib.check_fits(nbytes, run.seeds)

    import jax
    import numpy as np

    from jaxrl import checkpoint
    from jaxrl import sharding as sharding_lib
    from jaxrl.logging import RunLogger, write_json
    from jaxrl.loop import make_train

    run_dir = run.run_dir
    ckpt_dir = os.path.join(run_dir, "checkpoints")
    resume_step = checkpoint.latest_step(ckpt_dir) if resume else None

    trainer = make_train(agent, env, eval_env, loop, agent_cfg)
    seeds, configs = [seed for seed, _ in members], [cfg for _, cfg in members]
    mesh = sharding_lib.member_mesh() if run.shard_members and len(jax.devices()) > 1 else None
    init = lambda: trainer.init_members(seeds, configs, mesh)  # noqa: E731
    chunk_steps = trainer.schedule.chunk_env_steps
    total_chunks = max(1, math.ceil(loop.steps / chunk_steps))
    ckpt_every_chunks = max(1, math.ceil(run.checkpoint_every / chunk_steps)) if run.checkpoint_every else None

    # Multi-host (--distributed): every process trains its own members' shards; process 0 writes the files.
    primary = jax.process_index() == 0
    os.makedirs(run_dir, exist_ok=True)
    if primary:
        write_json(os.path.join(run_dir, "config.json"), {
            "agent": agent.name, "run": config_to_dict(run), "loop": config_to_dict(loop),
            "agent_config": config_to_dict(agent_cfg),
            **({"members": [{"seed": seed, "agent_config": config_to_dict(cfg)} for seed, cfg in members]}
               if custom_members else {}),
            "resolved": {"chunk_env_steps": chunk_steps, "chunks": total_chunks,
                         "env_steps": total_chunks * chunk_steps,
                         "devices": 1 if mesh is None else mesh.devices.size, **trainer.schedule._asdict()}})

    t_start = time.perf_counter()
    compile_s = 0.0
    t0 = time.perf_counter()
    if resume:
        abstract = jax.eval_shape(init)
        if mesh is not None:
            shardings = sharding_lib.state_shardings(abstract, mesh)
            abstract = jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), abstract,
                                    shardings)
        state, resume_step = checkpoint.restore(ckpt_dir, abstract, resume_step)
    else:
        state = init()
    jax.block_until_ready(state)
    compile_s += time.perf_counter() - t0
    t0 = time.perf_counter()
    run_chunk = trainer.run_chunk.lower(state).compile()
    compile_s += time.perf_counter() - t0

    logger = RunLogger(run_dir, resume_from_step=resume_step, member_label="member" if custom_members else "seed",
                       write=primary)
    mngr = checkpoint.manager(ckpt_dir, run.keep_checkpoints)
    start_chunk = int(state.env_steps) // chunk_steps
    progress = _Progress(total_chunks * chunk_steps, start_chunk * chunk_steps, quiet or not primary)
    run_s = 0.0
    steps_run = 0
    row: dict[str, Any] = {}
    last_eval = np.full((run.seeds,), np.nan)
    try:
        for chunk in range(start_chunk, total_chunks):
            t0 = time.perf_counter()
            state, metrics = run_chunk(state)
            metrics = sharding_lib.to_host(metrics)
            run_s += time.perf_counter() - t0
            steps_run += chunk_steps
            env_steps = int(metrics["env_steps"])
            bad = {name: int(np.min(s[s >= 0])) for name, s in metrics["nonfinite_step"].items() if np.any(s >= 0)}
            if bad:
                name, step = min(bad.items(), key=lambda kv: kv[1])
                raise NonFiniteError(f"non-finite {name} at env step {step}; stopped, the last good checkpoint "
                                     f"({_latest(mngr)}) is kept")
            metrics["env_steps_per_s"] = steps_run / max(run_s, 1e-9)
            metrics["wall_s"] = time.perf_counter() - t_start
            row = logger.log(metrics)
            last_eval = np.atleast_1d(metrics["eval/return"])
            progress.update(env_steps, row)
            done = chunk + 1 == total_chunks
            if done or (ckpt_every_chunks and (chunk + 1) % ckpt_every_chunks == 0):
                checkpoint.save(mngr, env_steps, state)
                logger.plot(f"{agent.name} on {run.env}")
    finally:
        progress.close()
        logger.close()
    summary = {
        "agent": agent.name, "env": run.env, "env_steps": int(state.env_steps), "seeds": run.seeds,
        "seed": run.seed, "updates": int(state.updates),
        "final_eval_return": float(np.mean(last_eval)),
        "final_eval_return_per_seed": [float(x) for x in last_eval],
        "env_steps_per_s": steps_run / max(run_s, 1e-9), "compile_s": compile_s, "run_s": run_s,
        "wall_s": time.perf_counter() - t_start, "resumed_from": resume_step,
    }
    if custom_members:
        summary["members"] = [{"seed": seed, "agent_config": config_to_dict(cfg), "final_eval_return": float(ret)}
                              for (seed, cfg), ret in zip(members, last_eval)]
    if primary:
        write_json(os.path.join(run_dir, "summary.json"), summary)
    return summary, state


def _latest(mngr) -> str:
    step = mngr.latest_step()
    return "none saved yet" if step is None else f"env step {step}"


class _Progress:
    """rich progress bar on a terminal; one plain line per chunk otherwise (CI logs, pipes)."""

    def __init__(self, total: int, completed: int, quiet: bool):
        self.quiet = quiet
        self.tty = sys.stdout.isatty() and not quiet
        self.total = total
        if self.tty:
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("[bold]{task.completed:,.0f}/{task.total:,.0f} env steps"), BarColumn(),
                                TextColumn("{task.fields[rate]:,.0f} steps/s  eval {task.fields[eval]}"),
                                TimeRemainingColumn())
            self.task = self.bar.add_task("train", total=total, completed=completed, rate=0.0, eval="-")
            self.bar.start()

    def update(self, env_steps: int, row: dict):
        ret = row.get("eval/return", float("nan"))
        if self.tty:
            self.bar.update(self.task, completed=env_steps, rate=row.get("env_steps_per_s", 0.0), eval=f"{ret:.1f}")
        elif not self.quiet:
            print(f"env_steps {env_steps}/{self.total}  eval_return {ret:.2f}  "
                  f"train_return {row.get('train/episode_return', float('nan')):.2f}  "
                  f"{row.get('env_steps_per_s', 0.0):.0f} steps/s", flush=True)

    def close(self):
        if self.tty:
            self.bar.stop()


def load_run_config(run_dir: str) -> dict[str, Any]:
    path = os.path.join(run_dir, "config.json")
    if not os.path.exists(path):
        raise ConfigError(f"cannot resume {run_dir!r}: no config.json there (not a jaxrl run directory)")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise ConfigError(f"cannot resume {run_dir!r}: config.json is unreadable ({e})") from None
