"""Run directories: created once, locked while a run uses them, resolved into configs by one rule.

Every command that starts, continues or reads a run (``jaxrl train``, ``train --resume``, ``export``,
``sweep``, ``reproduce``, ``load_policy``) goes through this module, so the rules hold everywhere:

* A new run never writes into a directory that holds a run (``RUN_FILES``); ``--overwrite`` first removes those
  files (and only those) completely. Default names (``runs/<agent>-<env>-<time>-<random>``) are created with an
  atomic ``mkdir``, so two launches in the same second, on any host of a shared file system, never share one.
* A run holds ``run.lock`` (an OS file lock, released by the kernel when the process dies, plus its pid and host
  for the message) while it writes; a second process refuses the directory in one line, and a lock left by a
  dead process is taken over and said so.
* Configs resolve by one precedence rule: the env suite's loop defaults (only without a named config) < agent
  defaults < named config < config file < flags < what the checkpoint fixes. On ``--resume`` the saved
  ``config.json`` is the file; ``resume_request`` compares the request with it before anything is written:
  fields the checkpoint fixes must not change (one-line error), the others are changes applied from the resumed
  env step and recorded in ``config.json`` under ``changes``.
"""
from __future__ import annotations

import dataclasses
import errno
import fcntl
import json
import os
import re
import secrets
import shutil
import socket
import sys
import time
import typing
from typing import Any

from jaxrl import ConfigError

RUN_FILES = ("config.json", "summary.json", "metrics.jsonl", "metrics.csv", "checkpoints", "tensorboard",
             "learning_curve.png", "damaged_checkpoints", "videos", "wandb", "wandb_run.json")
LOCK_FILE = "run.lock"
# What a sweep's output directory holds (experiments/sweep.py): a run never goes into one, nor a sweep into a run.
SWEEP_FILES = ("plan.json", "results.csv", "members", "groups")
SECTIONS = ("run", "loop", "agent_config")
# Fields of a saved run that its checkpoint fixes: they shape the saved state or the program that produced it.
RUN_FIXED = ("env", "seed", "seeds", "brax_backend", "playground_impl", "domain_randomization", "push_randomization")
LOOP_CHANGEABLE = ("steps",)


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
    """output directory (default runs/<agent>-<env>-<time>-<random>); never one that already holds a run"""
    overwrite: bool = False
    """replace the run that run_dir holds (its files are removed first); without it such a run_dir is refused"""
    checkpoint_every: int = 0
    """env steps between checkpoints (0: off); checkpoints are also written every checkpoint_minutes, at the end,
    and when SIGTERM / SIGINT / SIGUSR2 stops the run"""
    checkpoint_minutes: float = 10.0
    """wall-clock minutes between checkpoints, checked at chunk boundaries (0: off): a killed run loses at most
    this plus one chunk"""
    keep_checkpoints: int = 3
    """how many of the latest checkpoints to keep"""
    deterministic: bool = False
    """make XLA choose deterministic GPU kernels too (slower on GPU; CPU runs are already repeatable)"""
    brax_backend: str = "generalized"
    """physics pipeline of brax/ envs: generalized, positional, spring or mjx"""
    playground_impl: str = "jax"
    """MuJoCo implementation of dmc/ envs: jax (MJX) or warp"""
    domain_randomization: bool = False
    """locomotion/ and manipulation/ tasks: Playground's domain randomiser for the task (friction, masses, joint and
    actuator parameters) on the training envs, drawn per env at every reset inside the program (Playground's own
    wrapper draws once per env); evaluation envs stay nominal, as in FastTD3"""
    push_randomization: bool | None = None
    """locomotion/ tasks with random pushes (push_config: T1, G1, Berkeley Humanoid, Apollo; pert_config: Go1):
    true / false switches them on training and evaluation envs; None keeps the task's own setting (Playground's
    default: on for the humanoids, off for Go1; FastTD3 turns them off)"""
    compilation_cache: str | None = "~/.cache/jaxrl/xla"
    """persistent XLA compilation cache directory; None turns it off"""
    shard_members: bool = True
    """split the members (seeds x swept configs) over all devices with jax.sharding when there are several"""
    shard_envs: bool = False
    """data parallelism: split each run's training envs and replay buffer over the devices, each device sampling its
    part of every batch, gradients averaged over them; a new run sets loop.env_shards to the device count when it is
    1 (a divisor of it leaves the other devices to the members)"""
    distributed: bool = False
    """call jax.distributed.initialize() first (multi-host: one process per host, e.g. under SLURM)"""
    video_every: int = 0
    """env steps between videos of one deterministic evaluation episode of env 0 (RUN_DIR/videos/, TensorBoard,
    W&B), plus one of the final policy at the end; 0: off. Rendered by MuJoCo (brax/ and Playground envs) in its
    own jitted rollout, outside the training program"""
    video_width: int = 320
    """video frame width in pixels"""
    video_height: int = 240
    """video frame height in pixels"""
    wandb: bool = False
    """also log to Weights & Biases (pip install 'jaxrl[wandb]'): the TensorBoard scalars, the config, summary.json
    and videos; the W&B run id is kept in RUN_DIR/wandb_run.json, so --resume continues the same W&B run.
    WANDB_MODE=offline logs without an account"""
    wandb_project: str = "jaxrl"
    """W&B project"""
    wandb_entity: str | None = None
    """W&B entity (user or team; default: your W&B default)"""
    wandb_group: str | None = None
    """W&B group (a sweep's programs default to the sweep's output directory name)"""
    wandb_tags: tuple[str, ...] = ()
    """W&B tags"""


def note(message: str) -> None:
    """One line on stderr that is not an error (a fallback taken, a lock taken over)."""
    print(f"jaxrl: {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------ creation, lock


def run_files(run_dir: str) -> list[str]:
    """The run outputs present in ``run_dir`` (empty for a new or non-existent directory)."""
    return [name for name in RUN_FILES if os.path.lexists(os.path.join(run_dir, name))]


def missing_dirs(path: str) -> list[str]:
    """The directories that creating ``path`` would create, deepest first (none if it exists)."""
    missing = []
    path = os.path.abspath(path)
    while not os.path.exists(path):
        missing.append(path)
        path = os.path.dirname(path)
    return missing


def remove_if_empty(directories: list[str]) -> None:
    """Remove those of ``directories`` (deepest first) that are empty: a command that wrote nothing leaves none."""
    for directory in directories:
        if os.path.isdir(directory) and not os.listdir(directory):
            os.rmdir(directory)


def default_run_dir(agent_name: str, env: str, parent: str = "runs") -> str:
    """A fresh directory ``runs/<agent>-<env>-<YYYYmmdd-HHMMSS>-<6 hex>``, created here (mkdir is atomic, also on
    NFS): a name another launch took in the same second is never reused."""
    os.makedirs(parent, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    while True:
        label = re.sub(r"[^A-Za-z0-9_.-]+", "-", agent_name).strip("-")  # a plug-in's import path has ':'
        path = os.path.join(parent, f"{label}-{env.replace('/', '-')}-{stamp}-{secrets.token_hex(3)}")
        try:
            os.mkdir(path)
            return path
        except FileExistsError:
            continue


def sweep_files(path: str) -> list[str]:
    """The sweep outputs present in ``path`` (empty for anything else)."""
    return [name for name in SWEEP_FILES if os.path.lexists(os.path.join(path, name))]


def kind(path: str) -> str:
    """What a directory holds: "run", "sweep", "both" (damaged by an older jaxrl that allowed mixing them), or
    "nothing"."""
    is_run, is_sweep = bool(run_files(path)), os.path.exists(os.path.join(path, "plan.json"))
    return "both" if is_run and is_sweep else "run" if is_run else "sweep" if is_sweep else "nothing"


def sweep_not_run(path: str, flag: str) -> ConfigError:
    return ConfigError(f"{flag} {path} is a sweep's output directory (plan.json), not a run directory; its programs "
                       f"are the runs under {os.path.join(path, 'groups')}/ (jaxrl export "
                       f"{os.path.join(path, 'groups', '<program>')} --member K --out DIR takes one member out)")


def check_is_run(path: str, flag: str) -> None:
    """``path`` is a run directory (not a sweep's output directory, not both)."""
    found = kind(path)
    if found == "sweep":
        raise sweep_not_run(path, flag)
    if found == "both":
        raise ConfigError(f"{flag} {path} holds both a run ({', '.join(run_files(path))}) and a sweep's outputs "
                          f"({', '.join(sweep_files(path))}); move one of them to its own directory")


def check_new(run_dir: str, overwrite: bool) -> None:
    """A new run may start in ``run_dir``: refuse a sweep's output directory always, and one that holds a run
    unless ``overwrite``."""
    check_path(run_dir, "--run-dir")
    check_location(run_dir)
    if sweep_files(run_dir):
        raise ConfigError(f"run directory {run_dir} holds a sweep's outputs ({', '.join(sweep_files(run_dir))}); a "
                          "run never goes into a sweep's directory (not even with --overwrite): choose another "
                          "--run-dir")
    present = run_files(run_dir)
    if present and not overwrite:
        raise ConfigError(f"run directory {run_dir} already holds a run ({', '.join(present)}); continue it with "
                          f"--resume {run_dir}, choose a new --run-dir, or pass --overwrite to replace it")
    # `--run-dir .` in a project, or a home directory: a run's files would land among the user's own.
    others = sorted(name for name in (os.listdir(run_dir) if os.path.isdir(run_dir) else [])
                    if name != LOCK_FILE and name.rpartition(".tmp")[0] not in RUN_FILES)
    if not present and others:
        raise ConfigError(f"--run-dir {run_dir} is a directory of other files ({len(others)}: "
                          f"{', '.join(others[:3])}{', ...' if len(others) > 3 else ''}), not a run: a new run goes "
                          "into a new or empty directory")


def check_path(path: str, flag: str) -> None:
    """A path the command will create: not empty, each name within the file system's limit, the whole path too."""
    if not path or not path.strip():
        raise ConfigError(f"{flag} {path!r} is empty; give a directory or file name")
    existing = os.path.abspath(path)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    try:
        name_max, path_max = os.pathconf(existing, "PC_NAME_MAX"), os.pathconf(existing, "PC_PATH_MAX")
    except (OSError, ValueError):
        name_max, path_max = 255, 4096
    for name in path.split(os.sep):
        if len(os.fsencode(name)) > name_max:
            raise ConfigError(f"{flag}: the name {name[:24]}... is {len(os.fsencode(name))} bytes long; this file "
                              f"system allows {name_max} per name")
    if len(os.fsencode(os.path.abspath(path))) >= path_max:
        raise ConfigError(f"{flag}: the path is {len(os.fsencode(os.path.abspath(path)))} bytes long; this file "
                          f"system allows {path_max - 1}")


def check_output_file(path: str, flag: str, formats: tuple[str, ...] = ()) -> None:
    """A file the command will write (``--onnx``, ``plot --out``, ``video --out``): a valid name whose directory
    exists or can be created, and is writable; not a directory; with ``formats``, a name ending in one of them (or
    without an extension, where the writer has a default)."""
    check_path(path, flag)
    if os.path.isdir(path):
        raise ConfigError(f"{flag} {path} is a directory; give a file name")
    extension = os.path.splitext(path)[1][1:].lower()
    if formats and extension and extension not in formats:
        raise ConfigError(f"{flag} {path}: {extension!r} is not a format this command writes; give a name ending in "
                          f"one of: {', '.join('.' + f for f in formats)}")
    existing = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing) or not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {path} cannot be written ({existing} is not a writable directory)")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise ConfigError(f"{flag} {path} cannot be written (the file is read-only)")


def check_location(run_dir: str, flag: str = "--run-dir") -> None:
    """``run_dir`` can be created (or is a directory) and written."""
    if os.path.exists(run_dir) and not os.path.isdir(run_dir):
        raise ConfigError(f"{flag} {run_dir} is a file, not a directory; choose another {flag}")
    existing = run_dir
    while not os.path.exists(existing):
        existing = os.path.dirname(os.path.abspath(existing))
    if not os.path.isdir(existing):
        raise ConfigError(f"{flag} {run_dir} cannot be created ({existing} is a file)")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {run_dir} cannot be created or written ({existing} is not writable)")


def check_writable(run_dir: str) -> None:
    """A resumed run writes its checkpoints and metrics where it is: refuse a read-only or unwritable one now."""
    for path in (run_dir, os.path.join(run_dir, "checkpoints")):
        if os.path.isdir(path) and not os.access(path, os.W_OK | os.X_OK):
            raise ConfigError(f"run directory {run_dir} cannot be written ({path} is read-only or not writable "
                              "here); resuming writes checkpoints and metrics there: make it writable, or copy the "
                              "run to a writable place and resume the copy")


def check_disk(run_dir: str, needed: int, what: str) -> None:
    """At least ``needed`` bytes free where the run writes (one checkpoint of its state), before compiling."""
    from jaxrl.files import free_bytes

    free = free_bytes(run_dir)
    if free < needed:
        raise ConfigError(f"run directory {run_dir} has {free / 2**20:.1f} MiB free; {what} needs "
                          f"{needed / 2**20:.1f} MiB; free space or choose another --run-dir")


def remove_run_files(run_dir: str) -> None:
    """``--overwrite``: the old run's outputs go completely, with the temporary files of an atomic write that a kill
    interrupted (``metrics.csv.tmp<pid>``, ``jaxrl.files``); other files the user keeps there stay."""
    for name in run_files(run_dir):
        path = os.path.join(run_dir, name)
        shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.unlink(path)
    for name in os.listdir(run_dir) if os.path.isdir(run_dir) else []:
        stem, _, pid = name.rpartition(".tmp")
        if stem in RUN_FILES and pid.isdigit():
            os.unlink(os.path.join(run_dir, name))


class RunLock:
    """``run.lock`` in a run directory, held with ``fcntl.lockf`` (POSIX record locks, which NFS supports) while
    the run writes. The kernel drops the lock when its process dies, so a lock file whose lock is free is stale.
    ``name``, ``what`` and ``instead`` make the same lock for another kind of directory (a sweep's ``--out``)."""

    def __init__(self, run_dir: str, name: str = LOCK_FILE, what: str = "run directory",
                 instead: str = "choose another --run-dir"):
        self.run_dir = run_dir
        self.path = os.path.join(run_dir, name)
        self.what, self.instead = what, instead
        self.fd: int | None = None

    def acquire(self) -> RunLock:
        os.makedirs(self.run_dir, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            previous = _read_owner(fd)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(fd)
                if e.errno not in (errno.EACCES, errno.EAGAIN):
                    raise ConfigError(f"cannot lock {self.path} ({e.strerror}); this file system has no file "
                                      f"locks: use a {self.what} on another one") from None
                raise ConfigError(f"{self.what} {self.run_dir} is in use by {_describe(previous)}; wait for it "
                                  f"to end or {self.instead}") from None
            try:  # the file may have been removed and re-created by its releasing owner meanwhile: lock that one
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            break
        if previous and previous.get("pid") != os.getpid():
            note(f"took over the stale lock of {_describe(previous)} in {self.run_dir} (that process is gone)")
        owner = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%d %H:%M:%S")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(owner).encode(), 0)
        os.fsync(fd)
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        os.close(self.fd)  # closing drops the lock
        self.fd = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


def _read_owner(fd: int) -> dict[str, Any] | None:
    try:
        data = os.pread(fd, 4096, 0)
        return json.loads(data) if data.strip() else None
    except (OSError, ValueError):
        return {"unreadable": True}


def _describe(owner: dict[str, Any] | None) -> str:
    if not owner:
        return "another process"
    if "pid" not in owner or "host" not in owner:
        return "another process (its run.lock names none: written by an older version, or torn)"
    return f"pid {owner.get('pid')} on host {owner.get('host')}" + (f" (since {owner['since']})"
                                                                   if owner.get("since") else "")


# ----------------------------------------------------------------------------------------- configs


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


def load_saved(run_dir: str) -> dict[str, Any]:
    """A run directory's ``config.json``, its tables checked against the current config classes."""
    path = os.path.join(run_dir, "config.json")
    if os.path.exists(run_dir) and not os.path.isdir(run_dir):
        raise ConfigError(f"{run_dir!r} is a file, not a run directory")
    check_is_run(run_dir, "run directory")
    if not os.path.exists(path):
        raise ConfigError(f"{run_dir!r} is not a jaxrl run directory: no config.json there")
    try:
        with open(path) as f:
            saved = json.load(f)
        if not isinstance(saved, dict) or not all(isinstance(saved.get(s), dict)
                                                  for s in ("run", "loop", "agent_config")):
            raise ValueError("expected the tables run, loop and agent_config")
    except (OSError, ValueError) as e:
        raise ConfigError(f"cannot read the run {run_dir!r}: config.json is unreadable ({e})") from None
    return with_current_env_name(saved, run_dir)


def with_current_env_name(saved: dict[str, Any], where: str) -> dict[str, Any]:
    """``saved`` with its env by today's name: a run that trained an env before it changed under the same name
    (``envs.env_revision``; none recorded: revision 1) continues, exports and reports as the env it trained, e.g.
    ``dmc/BallInCup`` saved before dm_control's reset is ``dmc/BallInCupPlayground``."""
    import envs

    env = saved["run"].get("env")
    if not isinstance(env, str):
        return saved
    current = envs.current_env_name(env, saved.get("env_revision", 1))
    if current == env:
        return saved
    note(f"{where} trained {env} before that name changed what it simulates (docs/dmc_audit.md); it is "
         f"{current} now, and the run continues, exports and reports as {current}")
    return {**saved, "run": {**saved["run"], "env": current}, "env_revision": envs.env_revision(current)}


@dataclasses.dataclass(frozen=True)
class Resolved:
    """A run's configs after every source was applied (see the module docstring for the order)."""

    agent: Any
    run: Any
    loop: Any
    agent_cfg: Any
    members: list[tuple[int, Any]] | None  # a sweep group's (seed, agent config) per member; None: run.seeds seeds
    pbt: Any = None  # a population-based training program's jaxrl.pbt.PBTConfig (a sweep's [pbt] table)


def resolve(agent_name: str | None = None, config: str | None = None, saved: dict[str, Any] | None = None,
            run_dir: str | None = None, tables: dict[str, dict[str, Any]] | None = None, where: str = "",
            env: str | None = None) -> Resolved:
    """A run's configs by the one precedence rule: the suite's loop defaults < agent defaults < named config
    ``config`` < ``tables`` (the ``[run]``/``[loop]``/``[agent_config]`` tables of a sweep file or ``reproduce
    --override``s) — or, for a saved run, its ``config.json`` as read by ``load_saved`` (placed at ``run_dir``).
    Flags then apply on top (``jaxrl train`` gives these as tyro's defaults) and ``resume_request`` enforces what the
    checkpoint fixes. Unknown fields and values of the wrong type are one-line errors naming ``where`` they came from.

    The suite's loop defaults (``envs.suite_loop_defaults``) apply only to a new run without a named config: a
    paper config keeps its protocol and a saved run its ``config.json``. Their env is ``env`` (``jaxrl train``'s
    ``--env`` flag, read before the other flags), else the tables' ``run.env``, else ``RunConfig``'s default."""
    import envs
    from agents import get_agent
    from experiments import configs
    from jaxrl.agent import fields_added_later
    from jaxrl.loop import LoopConfig, default_loop_config

    sections = {s: {} for s in SECTIONS}
    source = saved
    if saved is None and config is not None:
        source = configs.load(config)
        task = env or (tables or {}).get("run", {}).get("env") or source["run"].get("env") or DEFAULT_ENV
        source = configs.for_task(source, task)
    if saved is not None and agent_name and agent_name != saved.get("agent"):
        named = get_agent(agent_name)
        # A plug-in run saved before runs recorded import paths holds the agent's name: its path may be given.
        if not (":" in agent_name and named.name == saved.get("agent")):
            raise ConfigError(f"--agent {agent_name} does not match the resumed run's agent {saved.get('agent')!r}")
        saved = {**saved, "agent": agent_name}
    if saved is None and config is not None and agent_name and source.get("agent") \
            and agent_name != source.get("agent"):
        if ":" not in agent_name:  # a built-in agent under another agent's protocol: its settings were never meant
            raise ConfigError(f"--agent {agent_name} differs from config {config}'s agent {source.get('agent')!r}; "
                              f"drop --agent (the config names its agent), or choose a config of {agent_name} "
                              "(jaxrl configs lists them)")
        note(f"plug-in agent {agent_name} trains under config {config}'s protocol (written for "
             f"{source.get('agent')!r}): its [loop] and [agent_config] tables apply, --agent wins")
    try:
        agent = get_agent(agent_name or (source or {}).get("agent") or "sac")
    except ConfigError as e:
        if saved is None or agent_name:
            raise
        raise ConfigError(f"{e}; a plug-in run saved before jaxrl recorded import paths holds only the agent's name: "
                          "resume it with --agent module:ATTRIBUTE") from None
    where = where or (f"{run_dir}/config.json" if saved is not None else f"config {config}" if config else "config")
    for section in SECTIONS:
        sections[section].update((source or {}).get(section, {}))
        sections[section].update((tables or {}).get(section, {}))
    if saved is not None:  # a run saved before a field was added behaves as it did: the field's "before" value
        for name, before in fields_added_later(agent.Config).items():
            sections["agent_config"].setdefault(name, before)
            for member in saved.get("members") or []:
                member["agent_config"].setdefault(name, before)
    for cls, section in ((RunConfig, "run"), (LoopConfig, "loop"), (agent.Config, "agent_config")):
        configs.check_fields(cls, sections[section], f"{where} [{section}]")
    run = config_from_dict(RunConfig, {**sections["run"], **({"run_dir": run_dir} if run_dir else {})})
    suite = {} if source is not None else envs.suite_loop_defaults(env or run.env)
    loop = default_loop_config(agent, suite, **sections["loop"])
    chunk = (saved or {}).get("resolved", {}).get("chunk_env_steps")
    if isinstance(chunk, int) and 0 < chunk < loop.eval_every:
        # A run shorter than one chunk, saved before jaxrl wrote its chunk down as eval_every (loop.written_down):
        # it keeps the chunk it trained, whatever --steps a resume asks for.
        loop = dataclasses.replace(loop, eval_every=chunk)
    agent_cfg = config_from_dict(agent.Config, sections["agent_config"])
    members = None
    if saved is not None and saved.get("members"):
        members = []
        for k, m in enumerate(saved["members"]):
            configs.check_fields(agent.Config, m["agent_config"], f"{where} members[{k}]")
            members.append((m["seed"], config_from_dict(agent.Config, m["agent_config"])))
    from jaxrl import pbt as pbt_lib

    try:
        pbt = pbt_lib.from_saved(saved or {})
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None
    return Resolved(agent, run, loop, agent_cfg, members, pbt)


def differences(base: Resolved, run, loop, agent_cfg) -> dict[str, tuple[Any, Any]]:
    """{"section.field": (saved, requested)} for every field that differs (the run directory aside)."""
    changes = {}
    for section, old, new in (("run", base.run, run), ("loop", base.loop, loop),
                              ("agent_config", base.agent_cfg, agent_cfg)):
        for f in dataclasses.fields(old):
            before, after = getattr(old, f.name), getattr(new, f.name)
            if before != after and f.name != "run_dir":
                changes[f"{section}.{f.name}"] = (before, after)
    return changes


@dataclasses.dataclass(frozen=True)
class ResumeRequest:
    """What a ``--resume`` asks for beyond continuing: changed fields as {"section.field": (old, new)}."""

    changes: dict[str, tuple[Any, Any]]

    @property
    def agent_fields(self) -> list[str]:
        return [name.partition(".")[2] for name in self.changes if name.startswith("agent_config.")]


def resume_request(agent, saved: dict[str, Any], run, loop, agent_cfg) -> ResumeRequest:
    """Compare a resume request with the saved run; one-line ConfigError for a field the checkpoint fixes.

    The checkpoint fixes the run's env, seeds and physics (``RUN_FIXED``), every loop field but ``steps`` (they
    shape the saved buffer and the schedule it was collected with), the agent's static fields (widths, batch
    size: the state's shapes) and which optional fields are None. Numeric agent fields may change: they are the
    training state's ``hparams``, replaced from the resumed env step on; ``check_applicable`` then refuses the
    ones that only ``init`` reads (their change could not reach the restored state)."""
    from jaxrl.loop import program_fields

    base = resolve(saved=saved, run_dir=run.run_dir)
    changes = differences(base, run, loop, agent_cfg)
    static = set(program_fields(base.agent_cfg)) | set(program_fields(agent_cfg))
    for name, (before, after) in changes.items():
        section, _, field = name.partition(".")
        fixed = ((section == "run" and field in RUN_FIXED) or (section == "loop" and field not in LOOP_CHANGEABLE)
                 or (section == "agent_config" and field in static))
        if fixed:
            raise ConfigError(f"--resume cannot change {field} ({before!r} -> {after!r}): the checkpoint fixes it; "
                              f"start a new run for that, or resume {run.run_dir} without the flag")
    return ResumeRequest(changes)


def check_applicable(agent, spec, old_cfg, request: ResumeRequest) -> None:
    """Refuse agent fields whose value only ``init`` reads (e.g. ``init_alpha``): changing one on resume would be
    accepted and ignored. Found by initialising with the old and the new value and comparing the states."""
    import jax
    import numpy as np

    key = jax.random.PRNGKey(0)
    before = jax.tree.leaves(agent.init(key, spec, old_cfg))
    for field in request.agent_fields:
        _, new_value = request.changes[f"agent_config.{field}"]
        after = jax.tree.leaves(agent.init(key, spec, old_cfg.replace(**{field: new_value})))
        if any(not np.array_equal(a, b) for a, b in zip(before, after, strict=True)):
            raise ConfigError(f"--resume cannot change {field}: only the initialisation reads it, and the "
                              "checkpoint holds the state it produced; start a new run for that")
