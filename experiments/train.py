"""``jaxrl train``: build envs, agent and loop from the configs, run chunks, log, checkpoint, resume.

The run directory's mechanics (creation, lock, config resolution, resume rules) live in ``experiments.rundir``;
checkpoints and their verification in ``jaxrl.checkpoint``. This module is the command: it composes them.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
from typing import Any, NamedTuple

from agents import display_name
from experiments import rundir, signals
from experiments.rundir import RunConfig, config_to_dict
from jaxrl import ConfigError, checks
from jaxrl.loop import LoopConfig, written_down


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
                  brax_backend=run.brax_backend, playground_impl=run.playground_impl,
                  push_randomization=run.push_randomization)
    train_env = envs.make(run.env, loop.num_envs, domain_randomization=run.domain_randomization, **kwargs)
    if run.domain_randomization:
        # Domain randomisation trains robustness; the policy is evaluated on the nominal model (as FastTD3 does).
        return train_env, envs.make(run.env, loop.num_eval_envs, **kwargs)
    # The same task: one loaded model, and the env functions traced once for both batches (envs.VecEnv).
    return train_env, dataclasses.replace(train_env, num_envs=loop.num_eval_envs)


def has_checkpoint(run_dir: str) -> bool:
    """Whether a run directory holds a checkpoint to resume from."""
    from jaxrl import checkpoint

    return bool(checkpoint.steps(os.path.join(run_dir, "checkpoints")))


def validate(run: RunConfig, loop: LoopConfig) -> None:
    for name in ("seeds", "keep_checkpoints"):
        value = getattr(run, name)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    if not isinstance(run.checkpoint_every, int) or run.checkpoint_every < 0:
        raise ConfigError(f"checkpoint_every must be an integer >= 0 env steps (0: off), got {run.checkpoint_every!r}")
    if not (isinstance(run.checkpoint_minutes, (int, float)) and math.isfinite(run.checkpoint_minutes)
            and run.checkpoint_minutes >= 0):
        raise ConfigError(f"checkpoint_minutes must be a finite number >= 0 (0: off), got {run.checkpoint_minutes!r}")
    checks.check_seed(run.seed, run.seeds)
    if not isinstance(run.video_every, int) or isinstance(run.video_every, bool) or run.video_every < 0:
        raise ConfigError(f"video_every must be an integer >= 0 env steps (0: off), got {run.video_every!r}")
    if run.wandb:
        import importlib.util

        from jaxrl.logging import WANDB_MISSING

        if importlib.util.find_spec("wandb") is None:
            raise ConfigError(WANDB_MISSING)
    if run.playground_impl not in ("jax", "warp"):
        raise ConfigError(f"playground_impl={run.playground_impl!r} is not one of: jax, warp")
    if run.playground_impl == "warp":
        import importlib.util

        if importlib.util.find_spec("mujoco_warp") is None:
            raise ConfigError("playground_impl=warp needs the mujoco_warp package, which is not installed here; "
                              "use --playground-impl jax (MJX), which runs on every JAX backend")
    from jaxrl.loop import make_schedule

    make_schedule(loop)


class NonFiniteError(RuntimeError):
    pass


class Interrupted(RuntimeError):
    """A signal stopped the run at a chunk boundary after its state was checkpointed."""

    def __init__(self, signum: int, env_steps: int, run_dir: str):
        self.signum = signum
        super().__init__(f"stopped by {signals.name(signum)} at env step {env_steps} with a checkpoint of the whole "
                         f"state; continue with: jaxrl train --resume {run_dir}")


class OutOfMemory(ConfigError):
    """XLA could not allocate the program's memory (``RESOURCE_EXHAUSTED``): bad input, one line, exit 2."""


OOM_ADVICE = "lower buffer_size, num_envs, num_eval_envs, seeds (or swept members) or the batch size"


def out_of_memory(error: BaseException) -> OutOfMemory | None:
    """The one-line error for XLA's out-of-memory (at compile or run time), or None for any other error."""
    text = str(error)
    if "RESOURCE_EXHAUSTED" not in text:
        return None
    lines = text.split("RESOURCE_EXHAUSTED:", 1)[-1].strip().splitlines()
    detail = lines[0][:160] if lines else "RESOURCE_EXHAUSTED"
    return OutOfMemory(f"out of memory ({detail}); {OOM_ADVICE}")


def _members(run: RunConfig, agent_cfg, members):
    if members is None:
        return run, [(run.seed + k, agent_cfg) for k in range(run.seeds)], False
    return dataclasses.replace(run, seeds=len(members)), list(members), True


def _check_memory(eval_env, seeds: int, key_fn, devices: int = 1) -> int:
    """Bytes of the whole training state plus the evaluation envs, against the memory of the ``devices`` it is split
    over; returns the state's bytes (what one checkpoint writes). Cheap (shapes only), so a grossly oversized run is
    refused before its program is compiled; ``_check_program_memory`` then checks the compiled program's true
    figure per device."""
    import jax

    from jaxrl import buffer as buffer_lib
    from jaxrl.checkpoint import state_bytes

    abstract = jax.eval_shape(key_fn)
    eval_bytes = state_bytes(jax.eval_shape(lambda k: eval_env.reset(k, eval_env.num_envs), jax.random.PRNGKey(0)))
    total, available = state_bytes(abstract) + seeds * eval_bytes, buffer_lib.available_bytes() * devices
    if total > available:
        raise ConfigError(f"the run needs {total / 2**30:.2f} GiB ({seeds} member(s): replay buffer, envs and agent "
                          f"{state_bytes(abstract) / 2**30:.2f} GiB, evaluation envs {seeds * eval_bytes / 2**30:.2f}"
                          f" GiB) but only {available / 2**30:.2f} GiB is available; lower buffer_size, num_envs, "
                          "num_eval_envs or seeds")
    return state_bytes(abstract)


def _check_program_memory(compiled, available: int | None = None) -> None:
    """The compiled chunk's peak per device (XLA's memory analysis: the state it takes and returns, donated, plus
    the working memory of the updates and of the evaluation's envs and activations) against what the device has:
    an out-of-memory becomes one line before any file is written, not a ``RESOURCE_EXHAUSTED`` traceback later."""
    from jaxrl import buffer as buffer_lib

    stats = compiled.memory_analysis()
    if stats is None:  # a backend without memory analysis: the runtime check (out_of_memory) still applies
        return
    state = stats.argument_size_in_bytes
    working = stats.temp_size_in_bytes + max(0, stats.output_size_in_bytes - stats.alias_size_in_bytes)
    available = buffer_lib.available_bytes() if available is None else available
    if state + working > available:
        raise OutOfMemory(f"the compiled training program needs {(state + working) / 2**30:.2f} GiB per device "
                          f"(training state {state / 2**30:.2f} GiB, working memory of a chunk's updates and "
                          f"evaluation {working / 2**30:.2f} GiB) but only {available / 2**30:.2f} GiB is available; "
                          f"{OOM_ADVICE}")


class _Prepared(NamedTuple):
    """A run checked, compiled and ready to train: everything ``_train_locked`` needs."""

    agent: Any
    run: RunConfig
    loop: LoopConfig
    agent_cfg: Any
    members: list[tuple[int, Any]]  # (seed, agent config) per member
    custom_members: bool  # a sweep group's members rather than run.seeds seeds
    saved: dict | None  # the run's config.json when resuming
    request: Any  # rundir.resume_request's verdict when resuming
    trainer: Any
    mesh: Any
    total_chunks: int
    primary: bool  # process 0 writes the files (multi-host runs)
    run_chunk: Any = None  # the compiled chunk (None for a resumed run that has done its steps)
    initial_state: Any = None  # () -> a fresh run's first state, compiled with the chunk; None when resuming
    compile_s: float = 0.0
    prepare_s: float = 0.0  # wall time of the checks, tracing and compilation before the run held its directory
    environment: dict | None = None  # jaxrl.provenance.environment() of this process

    @property
    def target_steps(self) -> int:
        return self.total_chunks * self.trainer.schedule.chunk_env_steps

    def member_lists(self) -> tuple[list[int], list[Any]]:
        return [seed for seed, _ in self.members], [cfg for _, cfg in self.members]

    def init(self):
        if self.initial_state is not None:  # compiled beside the chunk (loop.compile_start)
            return self.initial_state()
        return self.trainer.init_members(*self.member_lists(), self.mesh)

    def abstract_state(self):
        """The state's shapes, dtypes and (with a mesh) shardings, computing nothing."""
        import jax

        from jaxrl import sharding as sharding_lib
        from jaxrl.loop import env_axes

        abstract = jax.eval_shape(self.init)
        if self.mesh is None:
            return abstract
        shardings = sharding_lib.state_shardings(abstract, self.mesh, env_axes(abstract, self.loop.num_envs))
        return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), abstract, shardings)


def train(agent, run: RunConfig, loop: LoopConfig, agent_cfg, resume: bool = False, quiet: bool = False,
          members: list[tuple[int, Any]] | None = None, pbt=None, same_stack: bool = False):
    """Train and write the run directory; returns (summary dict, final state). Raises ConfigError on bad input
    (before anything is written; ``OutOfMemory`` too), NonFiniteError, WriteError (disk full / read-only),
    ``signals.Stopped`` (a stop signal before the run wrote anything), Interrupted (a stop signal later: after a
    checkpoint).

    ``members``: (seed, agent config) per member of one vmapped program (a sweep group); every config must share
    ``agent_cfg``'s static fields. Default: ``run.seeds`` members with seeds ``run.seed + k`` and ``agent_cfg``.
    ``resume``: continue ``run.run_dir`` from its newest intact checkpoint; fields of the request that differ
    from its ``config.json`` follow ``rundir.resume_request``. ``pbt``: the members form a population
    (``jaxrl.pbt.PBTConfig``; a sweep's ``[pbt]`` table), recorded in ``config.json``. A resumed run recorded under
    another stack (``jaxrl.provenance.differences``) continues with a note naming what differs; ``same_stack``
    refuses it instead (ConfigError).
    """
    with signals.REQUESTS.listening() as stop:
        t0 = time.perf_counter()
        try:
            prepared = _prepare(agent, run, loop, agent_cfg, resume, members, pbt, same_stack)
            prepared = prepared._replace(prepare_s=time.perf_counter() - t0)
            stop.check()  # the last moment at which a stop leaves nothing behind
        except signals.Stopped:
            stop.forward()  # a launcher's own handler (submitit requeues) runs for this stop too
            raise
        lock = rundir.RunLock(prepared.run.run_dir).acquire() if prepared.primary else None
        try:
            # A second stop signal ends the process at once (experiments/signals.py), but never inside a checkpoint's
            # write; the metrics are appended (a resume drops a torn last line and the rows after its checkpoint)
            # and every other file is written to a temporary name and renamed: what it cuts short is a temporary
            # file, removed then.
            run_dir = prepared.run.run_dir
            with stop.run_holds_its_directory(run_dir), stop.on_stop(signals.temporaries_in(run_dir)), \
                    stop.on_stop(signals.temporaries_in(os.path.join(run_dir, "videos"))):
                return _train_locked(prepared, quiet, stop)
        finally:
            if lock is not None:
                lock.release()


def recorded_agent(agent) -> str:
    """What ``config.json`` records as the run's agent: what ``agents.get_agent`` loads it back from (a registered
    name or a plug-in's ``module:ATTRIBUTE``), else its name, said once: such a run cannot be resumed by name."""
    from agents import agent_spec

    spec = agent_spec(agent)
    if spec is None:
        rundir.note(f"agent {agent.name!r} is held by no importable module (built in __main__ or a notebook?): the run "
                    "records only its name, so `jaxrl train --resume` cannot load it; define it at module level")
    return spec or agent.name


def _mesh(run: RunConfig, loop: LoopConfig, num_members: int):
    """The devices a run is split over, or None for one device. ``--shard-envs`` with ``loop.env_shards`` > 1: an
    ``envs`` axis of gcd(env_shards, devices) devices (each holds whole shards, so a run resumes on another count of
    devices), and a ``members`` axis of the devices left when ``shard_members`` is on and the members divide over it;
    otherwise the members alone over every device (``shard_members``)."""
    import jax

    from jaxrl import sharding as sharding_lib

    devices = jax.devices()
    if run.shard_envs and (loop.env_shards == 1 or len(devices) == 1):
        rundir.note(f"--shard-envs: {'one device' if len(devices) == 1 else 'this run has env_shards 1'}, so its envs "
                    "stay on one device" + ("" if len(devices) == 1 else " (a resumed run and a sweep member keep "
                                            "their loop.env_shards; set --env-shards for a new one)"))
    if run.shard_envs and loop.env_shards > 1 and len(devices) > 1:
        env_axis = math.gcd(loop.env_shards, len(devices))
        member_axis = len(devices) // env_axis
        if not run.shard_members or num_members % member_axis:
            member_axis = 1
        if env_axis > 1:
            return sharding_lib.run_mesh(devices[:member_axis * env_axis], env_shards=env_axis)
    return sharding_lib.member_mesh() if run.shard_members and len(devices) > 1 else None


def _env_shards(run: RunConfig, loop: LoopConfig, keep: bool) -> LoopConfig:
    """``--shard-envs`` on a new run with ``loop.env_shards`` 1: one shard per device (the run records it, so a
    resume on any number of devices draws its batches the same way). ``keep``: a resumed run keeps its own shards,
    and a sweep's members the ``loop.env_shards`` of their file (it is part of what they are; ``shard_envs`` only
    places them)."""
    import jax

    devices = len(jax.devices())
    if not run.shard_envs or loop.env_shards != 1 or devices == 1 or keep:
        return loop
    if loop.num_envs % devices:
        raise ConfigError(f"--shard-envs: num_envs={loop.num_envs} cannot be split evenly over the {devices} devices "
                          f"JAX sees; use a multiple of {devices} envs")
    return dataclasses.replace(loop, env_shards=devices)


def _prepare(agent, run: RunConfig, loop: LoopConfig, agent_cfg, resume: bool, members, pbt,
             same_stack: bool = False) -> _Prepared:
    """Every check that can fail before a file is written (configs, run directory, memory, disk), then the
    program, compiled (its memory checked against the device's)."""
    from jaxrl import buffer as buffer_lib
    from jaxrl import pbt as pbt_lib
    from jaxrl import provenance
    from jaxrl.loop import traced_fields

    run, members, custom_members = _members(run, agent_cfg, members)
    validate(run, loop)
    loop = written_down(loop)
    for _, cfg in members:
        agent.check_config(cfg)
    if pbt is not None:
        pbt_lib.check(pbt, len(members), loop.eval_every, traced_fields(agent_cfg), agent.check_config,
                      [cfg for _, cfg in members])
    run_dir = run.run_dir
    if run_dir is None:
        raise ConfigError("run_dir is required (the CLI picks runs/<agent>-<env>-<time>-<random> by default)")
    saved, request = None, None
    if resume:
        saved = rundir.load_saved(run_dir)
        if saved.get("agent") == agent.name:  # a plug-in run saved by its name before runs recorded import paths
            saved = {**saved, "agent": recorded_agent(agent)}
        request = rundir.resume_request(agent, saved, run, loop, agent_cfg)
        _check_resumed_members(agent, saved, run_dir, members, custom_members, request)
        _check_resumed_population(saved, run_dir, pbt, request)
        rundir.check_writable(run_dir)
    else:
        rundir.check_new(run_dir, run.overwrite)
    setup_jax(run)  # before anything touches JAX: the compilation cache is configured at the first compile
    loop = _env_shards(run, loop, resume or custom_members)
    from agents import agent_spec

    environment = provenance.environment()
    code = provenance.plugin_code(agent_spec(agent) or "")  # a plug-in's own code: what the commit does not name
    if code is not None:
        environment["agent_code"] = code
    if resume:
        _check_stack(saved, environment, run_dir, same_stack)
    env, eval_env = make_envs(run, loop)
    if run.video_every:
        from jaxrl.video import check_can_record

        check_can_record(eval_env.raw, run.video_width, run.video_height)
    signals.REQUESTS.check()

    import jax

    from jaxrl.loop import buffer_layout, compile_start, make_train

    mesh = _mesh(run, loop, len(members))
    # A state split over accelerators takes a share of each one's memory (host devices share the host's).
    split = mesh.devices.size if mesh is not None and jax.devices()[0].platform != "cpu" else 1
    # Before tracing a buffer that large.
    buffer_lib.check_fits(buffer_layout(agent, loop, env.spec).nbytes, run.seeds, buffer_lib.available_bytes() * split)
    trainer = make_train(agent, env, eval_env, loop, agent_cfg, pbt)  # traces, but compiles nothing yet
    # Multi-host (--distributed): every process trains its own members' shards; process 0 writes the files.
    prepared = _Prepared(agent, run, loop, agent_cfg, members, custom_members, saved, request, trainer, mesh,
                         max(1, math.ceil(loop.steps / trainer.schedule.chunk_env_steps)), jax.process_index() == 0,
                         environment=environment)
    ckpt_bytes = _check_memory(eval_env, run.seeds, lambda: prepared._replace(mesh=None).init(), split)
    done = _check_resume(prepared, trainer.program.spec) if resume else None  # with the parts the networks read
    rundir.check_disk(run_dir, ckpt_bytes, "one checkpoint of this run's state")
    if done is not None and done >= prepared.target_steps:
        return prepared  # finished: nothing to compile
    signals.REQUESTS.check()
    # Compiled before any file is written: an out-of-memory (or a stop signal meanwhile) leaves nothing behind.
    t0 = time.perf_counter()
    initial_state = None
    try:
        if resume:  # the state comes from a checkpoint
            run_chunk = trainer.run_chunk.lower(prepared.abstract_state()).compile()
        else:
            initial_state, run_chunk = compile_start(trainer, *prepared.member_lists(), mesh, prepared.abstract_state())
    except jax.errors.JaxRuntimeError as e:
        if out_of_memory(e) is None:
            raise
        raise out_of_memory(e) from None
    prepared = prepared._replace(run_chunk=run_chunk, initial_state=initial_state,
                                 compile_s=time.perf_counter() - t0)
    _check_program_memory(run_chunk)
    return prepared


def trained_under(saved: dict) -> dict | None:
    """The environment block a saved run last trained under: its newest ``resumed_under`` entry, else the block
    it started with (None for a run made before runs recorded one)."""
    resumed = saved.get("resumed_under") or []
    return resumed[-1]["environment"] if resumed else saved.get("environment")


def _check_stack(saved: dict, environment: dict, run_dir: str, same_stack: bool) -> None:
    """A resume under another stack than the run last trained under: a note naming what differs, or with
    ``same_stack`` a one-line refusal (before anything is compiled or written)."""
    from jaxrl import provenance

    differs = provenance.differences(trained_under(saved), environment)
    if not differs:
        return
    if same_stack:
        raise ConfigError(f"--same-stack: {run_dir} trained under another stack ({'; '.join(differs)}); resume it "
                          "without --same-stack to continue anyway (not bitwise), or with the versions it recorded "
                          "(its config.json, environment)")
    rundir.note(f"{run_dir} trained under another stack ({'; '.join(differs)}): it continues, but not bitwise as it "
                "would have (--same-stack refuses instead)")


def _check_resume(prepared: _Prepared, spec) -> int:
    """The requested changes apply to this run, and its checkpoints allow continuing to the requested steps;
    returns the newest checkpoint's env step."""
    from jaxrl import checkpoint

    run_dir, request, loop = prepared.run.run_dir, prepared.request, prepared.loop
    if request.agent_fields:
        saved_cfg = rundir.resolve(saved=prepared.saved, run_dir=run_dir).agent_cfg
        rundir.check_applicable(prepared.agent, spec, saved_cfg, request)
    ckpt_dir = os.path.join(run_dir, "checkpoints")
    done = max(checkpoint.steps(ckpt_dir), default=None)
    if done is None:
        raise ConfigError(f"no checkpoint in {ckpt_dir}: the run stopped before its first one; start it again "
                          f"with --overwrite")
    if loop.steps < done:
        raise ConfigError(f"--steps {loop.steps} is fewer than the {done} env steps {run_dir} has done; pass "
                          f"--steps >= {done} (larger continues the run)")
    return done


def _check_resumed_members(agent, saved, run_dir, members, custom_members, request) -> None:
    """A sweep group resumes only with its own members (seeds and configs, apart from the requested changes)."""
    if not custom_members:
        return
    base = rundir.resolve(saved=saved, run_dir=run_dir)
    changed = {f: request.changes[f"agent_config.{f}"][1] for f in request.agent_fields}
    expected = [(seed, cfg.replace(**changed)) for seed, cfg in (base.members or [])]
    if expected != [(seed, cfg) for seed, cfg in members]:
        raise ConfigError(f"--resume {run_dir}: the requested members (seeds and configs) are not the ones that run "
                          "trained; a sweep must rerun it into a new directory")


def _check_resumed_population(saved, run_dir, pbt, request) -> None:
    """A PBT run resumes as the population it is: its [pbt] table, and hyperparameters that are PBT's to move."""
    from jaxrl import pbt as pbt_lib

    if saved.get("pbt") != (None if pbt is None else pbt_lib.as_table(pbt)):
        raise ConfigError(f"--resume {run_dir}: the requested population-based training ({saved.get('pbt')} there, "
                          f"{None if pbt is None else pbt_lib.as_table(pbt)} now) is not the one that run trained")
    if pbt is not None and request.agent_fields:
        raise ConfigError(f"--resume {run_dir}: {', '.join(request.agent_fields)} cannot change on resume of a "
                          "population-based training run (its members' values are PBT's, logged in pbt.csv)")


def _train_locked(prepared: _Prepared, quiet: bool, stop: signals.StopRequests):
    """The run under its lock: start or restore the state, write config.json, train chunk by chunk, write
    summary.json. Returns (summary, state). XLA's out-of-memory becomes ``OutOfMemory`` with the run directory as
    the command found it (``_undo_after_out_of_memory``)."""
    import jax

    files_before = _files(os.path.join(prepared.run.run_dir, "tensorboard"))
    try:
        return _train_from_state(prepared, quiet, stop)
    except jax.errors.JaxRuntimeError as e:
        oom = out_of_memory(e)
        if oom is None:
            raise
        _undo_after_out_of_memory(prepared, files_before)
        raise oom from None


def _undo_after_out_of_memory(prepared: _Prepared, files_before: set[str]) -> None:
    """A new run that had trained nothing leaves no files; a resumed one gets its config.json back (the resume's
    changes were not applied) and loses the TensorBoard file this attempt opened. Checkpoints and metrics of chunks
    that did train are kept."""
    if not prepared.primary:
        return
    run_dir = prepared.run.run_dir
    if prepared.saved is None:
        if not os.path.exists(os.path.join(run_dir, "metrics.jsonl")) or not _rows_written(run_dir):
            rundir.remove_run_files(run_dir)
        return
    _write_or_fail(os.path.join(run_dir, "config.json"), prepared.saved)
    for path in _files(os.path.join(run_dir, "tensorboard")) - files_before:
        os.unlink(path)


def _rows_written(run_dir: str) -> bool:
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return bool(f.read().strip())


def _files(directory: str) -> set[str]:
    return {os.path.join(root, name) for root, _, names in os.walk(directory) for name in names}


def _train_from_state(prepared: _Prepared, quiet: bool, stop: signals.StopRequests):
    import jax

    t_init = time.perf_counter()
    t_start = t_init - prepared.prepare_s  # wall_s counts from the start of train(), compilation included
    state, resume_step = _start_or_restore(prepared)
    stop.checkpoint_step = resume_step  # verified on restore: intact
    if prepared.saved is not None and resume_step >= prepared.target_steps:
        return _finished(prepared.agent, prepared.run, prepared.saved, resume_step, state, quiet), state
    jax.block_until_ready(state)
    compile_s = prepared.compile_s + time.perf_counter() - t_init
    run_chunk = prepared.run_chunk
    if run_chunk is None:  # the newest checkpoint was damaged and an older one restored: there is work after all
        t0 = time.perf_counter()
        run_chunk = prepared.trainer.run_chunk.lower(state).compile()
        compile_s += time.perf_counter() - t0
    changes = _write_config(prepared, resume_step)
    wandb_run = _start_wandb(prepared) if prepared.run.wandb and prepared.primary else None
    try:
        try:
            state, chunks = _run_chunks(prepared, run_chunk, state, resume_step, changes, stop, quiet, t_start,
                                        wandb_run)
        except Interrupted:
            stop.forward()  # e.g. submitit requeues the job here (and exits)
            raise
        summary = _summary(prepared, state, chunks, compile_s, resume_step, t_start)
        if prepared.primary:
            _write_or_fail(os.path.join(prepared.run.run_dir, "summary.json"), summary)
    except BaseException:
        if wandb_run is not None:
            wandb_run.finish(exit_code=1)
        raise
    if wandb_run is not None:
        wandb_run.finish(summary)
    return summary, state


def _start_wandb(prepared: _Prepared):
    """The W&B run of this run directory (new, or the one a resumed run started): its config is config.json, plus,
    in a sweep program, ``member_values``: each agent field that differs between members, one value per member."""
    from jaxrl.logging import WandbRun

    run = prepared.run
    config = rundir.load_saved(run.run_dir)
    if prepared.custom_members:
        configs = [config_to_dict(cfg) for _, cfg in prepared.members]
        config["member_values"] = {"seed": [seed for seed, _ in prepared.members],
                                   **{name: [c[name] for c in configs] for name in configs[0]
                                      if len({json.dumps(c[name]) for c in configs}) > 1}}
    return WandbRun(run.run_dir, config, run.wandb_project, run.wandb_entity, run.wandb_group, run.wandb_tags)


def _start_or_restore(prepared: _Prepared):
    """(state, env step resumed from or None): the newest intact checkpoint of a resumed run (damaged newer ones
    are set aside, requested hyperparameter changes applied), else a fresh state."""
    import jax

    from jaxrl import checkpoint
    from jaxrl.loop import stack_configs

    run_dir = prepared.run.run_dir
    if prepared.saved is None:
        if prepared.primary:
            rundir.check_new(run_dir, prepared.run.overwrite)  # again under the lock: another launch may have won
            if prepared.run.overwrite:
                rundir.remove_run_files(run_dir)
        return prepared.init(), None
    abstract = prepared.abstract_state()
    ckpt_dir, damaged = os.path.join(run_dir, "checkpoints"), []
    state, resume_step = checkpoint.restore(ckpt_dir, abstract, on_damaged=lambda s, why: damaged.append((s, why)))
    for step, why in damaged:
        if prepared.primary:
            where = checkpoint.set_aside(ckpt_dir, step, os.path.join(run_dir, "damaged_checkpoints"))
            rundir.note(f"checkpoint at env step {step} is damaged ({why}); moved to {where}; "
                        f"resuming from env step {resume_step}")
    if prepared.request.agent_fields and resume_step < prepared.target_steps:
        state = state.replace(hparams=jax.tree.map(
            lambda new, old: jax.device_put(new.astype(old.dtype), old.sharding),
            stack_configs([cfg for _, cfg in prepared.members], prepared.agent_cfg), state.hparams))
    return state, resume_step


def _write_config(prepared: _Prepared, resume_step: int | None) -> list[dict]:
    """Write config.json (process 0): the resolved configs, the members of a sweep group, every change a resume
    applied with the env step it applied from, and the stack (``environment``; ``resumed_under``: each resume under
    another one, from its env step). Returns the changes."""
    import envs
    from jaxrl import pbt as pbt_lib
    from jaxrl import provenance

    saved, request, run, trainer, mesh = prepared.saved, prepared.request, prepared.run, prepared.trainer, prepared.mesh
    changes = list(saved.get("changes", [])) if saved is not None else []
    if request is not None and request.changes:
        changes.append({"env_step": resume_step,
                        "fields": {name: [old, new] for name, (old, new) in request.changes.items()}})
    # The stack the run started under stays its ``environment``; each resume under another one is appended.
    environment = prepared.environment if saved is None else saved.get("environment")
    resumed_under = list(saved.get("resumed_under", [])) if saved is not None else []
    if saved is not None and provenance.differences(trained_under(saved), prepared.environment):
        resumed_under.append({"env_step": resume_step, "environment": prepared.environment})
    if prepared.primary:
        members = [{"seed": seed, "agent_config": config_to_dict(cfg)} for seed, cfg in prepared.members]
        _write_or_fail(os.path.join(run.run_dir, "config.json"), {
            "agent": recorded_agent(prepared.agent), "env_revision": envs.env_revision(run.env),
            "run": config_to_dict(run), "loop": config_to_dict(prepared.loop),
            "agent_config": config_to_dict(prepared.agent_cfg),
            **({"members": members} if prepared.custom_members else {}),
            **({"pbt": pbt_lib.as_table(trainer.program.pbt)} if trainer.program.pbt is not None else {}),
            **({"changes": changes} if changes else {}),
            **({"environment": environment} if environment is not None else {}),
            **({"resumed_under": resumed_under} if resumed_under else {}),
            "resolved": {"chunk_env_steps": trainer.schedule.chunk_env_steps, "chunks": prepared.total_chunks,
                         "env_steps": prepared.target_steps, "devices": 1 if mesh is None else mesh.devices.size,
                         **trainer.schedule._asdict()}})
    return changes


class _ChunkTimes(NamedTuple):
    """What the training chunks of this invocation took, and the last evaluation per member and on average (as the
    last metrics row logged them: summary.json repeats that row's numbers, it does not reduce them again)."""

    run_s: float
    steps_run: int
    checkpoint_s: float
    last_eval: Any
    last_eval_mean: float


class _Checkpoints:
    """Saves the state at most once per env step, timing the saves, and says when the next one is due."""

    def __init__(self, run: RunConfig, saved_step: int | None, stop: signals.StopRequests):
        from jaxrl import checkpoint

        self.run, self.saved_step, self.seconds, self.stop = run, saved_step, 0.0, stop
        self.directory = os.path.join(run.run_dir, "checkpoints")
        self.manager = checkpoint.manager(self.directory, run.keep_checkpoints)
        self.last_save = time.perf_counter()

    def save(self, env_steps: int, state) -> None:
        from jaxrl import checkpoint

        if self.saved_step != env_steps:
            t0 = time.perf_counter()
            with self.stop.writing_checkpoint():  # a second stop signal ends the process after the write, not in it
                checkpoint.save(self.manager, env_steps, state)
                self.stop.checkpoint_step = env_steps
            self.seconds += time.perf_counter() - t0
            self.saved_step = env_steps
        self.last_save = time.perf_counter()

    def due(self, env_steps: int, chunk_steps: int) -> bool:
        """Every checkpoint_every env steps, and every checkpoint_minutes of wall time."""
        every, minutes = self.run.checkpoint_every, self.run.checkpoint_minutes
        by_steps = every and env_steps // every > (env_steps - chunk_steps) // every
        return bool(by_steps or minutes and time.perf_counter() - self.last_save >= 60 * minutes)


def _check_finite(metrics, checkpoint_dir: str) -> None:
    """NonFiniteError naming the first metric that was NaN/Inf and its env step; the last good checkpoint stays."""
    import numpy as np

    from jaxrl import checkpoint

    bad = {name: int(np.min(s[s >= 0])) for name, s in metrics["nonfinite_step"].items() if np.any(s >= 0)}
    if bad:
        name, step = min(bad.items(), key=lambda kv: kv[1])
        good = checkpoint.latest_intact_step(checkpoint_dir)
        kept = "none was saved" if good is None else f"env step {good}"
        raise NonFiniteError(f"non-finite {name} at env step {step}; stopped, the last good checkpoint ({kept}) is "
                             "kept")


def _run_chunks(prepared: _Prepared, run_chunk, state, resume_step, changes, stop, quiet, t_start, wandb_run=None):
    """The training loop on the host: one compiled chunk at a time, then its metrics are checked (NaN guard),
    logged, and the state checkpointed when due, at the end, or when a signal asked to stop."""
    import numpy as np

    from jaxrl import sharding as sharding_lib
    from jaxrl.logging import RunLogger, member_values

    run, chunk_steps = prepared.run, prepared.trainer.schedule.chunk_env_steps
    # A resume that changed hyperparameters logs their values per member from then on.
    changed = sorted({name.partition(".")[2] for c in changes for name in c["fields"]
                      if name.startswith("agent_config.")})
    hparam_columns = {f"hparams/{name}": np.asarray([float(getattr(cfg, name)) for _, cfg in prepared.members])
                      for name in changed}
    logger = RunLogger(run.run_dir, resume_from_step=resume_step,
                       member_label="member" if prepared.custom_members else "seed", write=prepared.primary,
                       wandb_run=wandb_run)
    checkpoints = _Checkpoints(run, resume_step, stop)
    start_chunk = int(state.env_steps) // chunk_steps
    progress = _Progress(prepared.target_steps, start_chunk * chunk_steps, quiet or not prepared.primary)
    videos = _video_schedule(prepared)
    run_s, steps_run, last_eval, last_eval_mean = 0.0, 0, [float("nan")] * run.seeds, float("nan")
    try:
        if stop.signum is not None:  # a signal while the state was built: keep the initial state too
            checkpoints.save(int(state.env_steps), state)
            raise Interrupted(stop.signum, int(state.env_steps), run.run_dir)
        for chunk in range(start_chunk, prepared.total_chunks):
            t0 = time.perf_counter()
            state, metrics = run_chunk(state)
            metrics = sharding_lib.to_host(metrics)
            run_s += time.perf_counter() - t0
            steps_run += chunk_steps
            env_steps = int(metrics["env_steps"])
            _check_finite(metrics, checkpoints.directory)
            metrics.update(hparam_columns, env_steps_per_s=steps_run / max(run_s, 1e-9),
                           wall_s=time.perf_counter() - t_start)
            row = logger.log(metrics)
            if row.get("pbt/due") and prepared.primary:
                _write_lineage(prepared, logger.rows)
            progress.update(env_steps, row)
            last_eval, last_eval_mean = member_values(row, "eval/return"), row["eval/return"]
            done = chunk + 1 == prepared.total_chunks
            if done or checkpoints.due(env_steps, chunk_steps) or stop.signum is not None:
                checkpoints.save(env_steps, state)
                logger.plot(f"{prepared.agent.name} on {run.env}")
            if stop.signum is not None and not done:
                raise Interrupted(stop.signum, env_steps, run.run_dir)
            # After the checkpoint: a video that fails (or a stop request) loses no training.
            if videos is not None and videos.due(env_steps - chunk_steps, env_steps, done):
                _record_video(videos, state, env_steps, logger, progress)
    finally:
        progress.close()
        logger.close()
    return state, _ChunkTimes(run_s, steps_run, checkpoints.seconds, last_eval, last_eval_mean)


def _write_lineage(prepared: _Prepared, rows) -> None:
    """``pbt.csv``: the population's lineage so far, from the logged rows (rewritten whole: a resume drops the rows
    after its checkpoint, and so does the file)."""
    from jaxrl import pbt as pbt_lib
    from jaxrl.files import csv_text, write_text_atomic

    write_text_atomic(os.path.join(prepared.run.run_dir, "pbt.csv"),
                      csv_text(pbt_lib.lineage(rows, prepared.trainer.program.pbt)))


def _video_schedule(prepared: _Prepared):
    """Videos of member 0 (``--video-every``), by process 0 of a single-process run: a multi-host run's state is
    spread over processes that would all have to join the rollout, so it records none (with a note)."""
    import jax

    from jaxrl.video import VideoSchedule

    run = prepared.run
    if not run.video_every or not prepared.primary:
        return None
    if jax.process_count() > 1:
        rundir.note("--video-every: multi-host runs record no videos (render a checkpoint with `jaxrl video`)")
        return None
    return VideoSchedule(prepared.trainer.program, run.run_dir, run.video_every, run.video_width, run.video_height,
                         prepared.members[0][0])


def _record_video(videos, state, env_steps: int, logger, progress) -> None:
    info = videos.record(state, env_steps)
    logger.video(info["frames"], info["fps"], env_steps, info["path"])
    progress.note(video_note(info))


def video_note(info: dict) -> str:
    """The line a run prints for each video it records (bench/video_cost.py reads it back)."""
    return (f"video {info['path']}: {len(info['frames'])} frames ({info['width']}x{info['height']}), return "
            f"{info['return']:.1f}; rollout {info['rollout_s']:.1f} s, render {info['render_s']:.1f} s, encode "
            f"{info['encode_s']:.1f} s")


def _summary(prepared: _Prepared, state, chunks: _ChunkTimes, compile_s: float, resume_step, t_start) -> dict:
    """summary.json: final evaluation per member and where the time went."""

    run, last_eval = prepared.run, chunks.last_eval
    summary = {
        "agent": display_name(prepared.agent), "env": run.env, "env_steps": int(state.env_steps), "seeds": run.seeds,
        "seed": run.seed, "updates": int(state.updates),
        "final_eval_return": chunks.last_eval_mean,
        "final_eval_return_per_seed": [float(x) for x in last_eval],
        "env_steps_per_s": chunks.steps_run / max(chunks.run_s, 1e-9), "compile_s": compile_s,
        "run_s": chunks.run_s, "checkpoint_s": chunks.checkpoint_s, "wall_s": time.perf_counter() - t_start,
        "resumed_from": resume_step,
    }
    if prepared.custom_members:
        summary["members"] = [{"seed": seed, "agent_config": config_to_dict(cfg), "final_eval_return": float(ret)}
                              for (seed, cfg), ret in zip(prepared.members, last_eval, strict=True)]
    return summary


def _write_or_fail(path: str, data: dict) -> None:
    from jaxrl.files import disk_error, write_failure, write_json

    try:
        write_json(path, data)
    except OSError as e:
        if disk_error(e) is None:
            raise
        raise write_failure(path, len(json.dumps(data, default=str)), disk_error(e)) from None


def _finished(agent, run, saved, step, state, quiet) -> dict:
    """``--resume`` of a run that has done its steps: nothing changes (its summary is rebuilt from the metrics
    only if a kill came between the last checkpoint and summary.json)."""
    path = os.path.join(run.run_dir, "summary.json")
    if not quiet:
        rundir.note(f"run {run.run_dir} is finished ({step} env steps); nothing to do (a larger --steps continues it)")
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)

    from jaxrl.logging import member_values, read_rows

    rows = read_rows(os.path.join(run.run_dir, "metrics.jsonl"))
    last = rows[-1] if rows else {}
    per_member = member_values(last, "eval/return") if "eval/return" in last else [float("nan")] * run.seeds
    summary = {"agent": display_name(agent), "env": run.env, "env_steps": step, "seeds": run.seeds, "seed": run.seed,
               "updates": int(state.updates), "final_eval_return": last.get("eval/return"),
               "final_eval_return_per_seed": per_member, "env_steps_per_s": last.get("env_steps_per_s"),
               "compile_s": None, "run_s": None, "wall_s": last.get("wall_s"), "resumed_from": step}
    _write_or_fail(path, summary)
    return summary


def continue_or_start(agent, run: RunConfig, loop: LoopConfig, agent_cfg, members=None, quiet: bool = False,
                      pbt=None):
    """What sweeps and ``jaxrl reproduce`` do with their own run directories: start the run, continue it if the
    directory holds this very run (same configs; a larger ``steps`` continues), reuse it if it is finished, and
    refuse in one line if it holds a run of other settings (nothing is ever relabelled)."""
    run_dir = run.run_dir
    if not rundir.run_files(run_dir):
        return train(agent, run, loop, agent_cfg, quiet=quiet, members=members, pbt=pbt)
    base = rundir.resolve(saved=rundir.load_saved(run_dir), run_dir=run_dir)
    changes = rundir.differences(base, run, written_down(loop),
                                 agent_cfg)
    # Run fields other than RUN_FIXED (checkpoint cadence, cache, ...) and a larger steps do not change results.
    defining = [f"run.{f}" for f in rundir.RUN_FIXED]
    different = {name: change for name, change in changes.items()
                 if name in defining or name.split(".")[0] in ("loop", "agent_config") and name != "loop.steps"}
    if members is not None:
        if base.members != list(members):
            different["members"] = ("...", "...")
    if base.pbt != pbt:
        different["pbt"] = (base.pbt, pbt)
    if different:
        name, (old, new) = next(iter(different.items()))
        raise ConfigError(f"{run_dir} holds a run with other settings ({name}: {old!r} there, {new!r} now); "
                          "results are never relabelled: choose another output directory")
    if not has_checkpoint(run_dir):
        return train(agent, dataclasses.replace(run, overwrite=True), loop, agent_cfg, quiet=quiet, members=members,
                     pbt=pbt)
    return train(agent, run, loop, agent_cfg, resume=True, quiet=quiet, members=members, pbt=pbt)


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

    def note(self, text: str):
        """A line between progress updates (above the bar on a terminal)."""
        if self.tty:
            self.bar.console.print(text)
        elif not self.quiet:
            print(text, flush=True)

    def close(self):
        if self.tty:
            self.bar.stop()
