"""Orbax checkpoints of the whole training state (agent, buffer, envs, RNG, counters), verified on restore.

Each checkpoint holds two orbax items committed together: ``state`` (every leaf, keyed by its pytree path) and
``integrity`` (a CRC-32 of every leaf's bytes). Orbax itself checks no content on restore, so a flipped byte in
an array file would otherwise come back as silently different weights; ``restore`` recomputes the checksums and
treats any mismatch, unreadable file or missing item as a damaged checkpoint. It then falls back to the newest
checkpoint that verifies, and reports the damaged ones to its caller.
"""
from __future__ import annotations

import errno
import glob
import os
import shutil
import zlib
from typing import Callable

import jax
import numpy as np
import orbax.checkpoint as ocp

from jaxrl import ConfigError

STATE, INTEGRITY = "state", "integrity"
# errnos that mean "this file system cannot take the write" rather than a bug.
WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG)


class WriteError(RuntimeError):
    """A run's file could not be written (disk full, read-only, quota): one line naming the path and the bytes."""


def disk_error(exc: BaseException) -> OSError | None:
    """The OSError behind ``exc`` when it is a full / read-only / forbidden file system, else None. Orbax and
    tensorstore wrap the OS error, sometimes only as text, so the chain and the message are both searched."""
    seen = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in WRITE_ERRNOS:
            return seen
        seen = seen.__cause__ or seen.__context__
    text = str(exc)
    for code in WRITE_ERRNOS:
        if os.strerror(code) in text:
            return OSError(code, os.strerror(code))
    return None


def free_bytes(path: str) -> int:
    """Free bytes on the file system of ``path`` (or of its nearest existing parent)."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return shutil.disk_usage(path).free


def write_failure(path: str, needed: int, error: OSError) -> WriteError:
    return WriteError(f"cannot write {path}: {error.strerror or error} ({needed / 2**20:.1f} MiB needed, "
                      f"{free_bytes(path) / 2**20:.1f} MiB free there); earlier checkpoints are intact")


def manager(directory: str, keep: int = 3) -> ocp.CheckpointManager:
    options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True, enable_async_checkpointing=False)
    return ocp.CheckpointManager(os.path.abspath(directory), options=options)


def _flatten(state) -> dict:
    """{key path: array} without zero-size leaves (MJX states have some; orbax refuses to write them)."""
    leaves = jax.tree_util.tree_flatten_with_path(state)[0]
    return {jax.tree_util.keystr(path): leaf for path, leaf in leaves if leaf.size > 0}


def _crc(leaf) -> str | None:
    """CRC-32 of a leaf's bytes; None for a leaf this process cannot see whole (multi-host shards)."""
    if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
        return None
    return f"{zlib.crc32(np.ascontiguousarray(jax.device_get(leaf)).view(np.uint8).reshape(-1)):08x}"


def state_bytes(state) -> int:
    """Bytes a checkpoint of ``state`` (or of its ``jax.eval_shape``) writes, before compression."""
    return sum(int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(state))


def save(mngr: ocp.CheckpointManager, step: int, state) -> None:
    """Synchronous: once this returns, a kill cannot leave the newest checkpoint half-written (orbax writes into
    a temporary directory and renames it on commit). A full or read-only disk raises ``WriteError`` after the
    partial temporary directory is removed; older checkpoints are untouched."""
    flat = _flatten(state)
    integrity = {"crc32": {key: _crc(leaf) for key, leaf in flat.items()}}
    try:
        mngr.save(step, args=ocp.args.Composite(**{STATE: ocp.args.StandardSave(flat),
                                                  INTEGRITY: ocp.args.JsonSave(integrity)}), force=True)
        mngr.wait_until_finished()
    except Exception as e:  # noqa: BLE001 - orbax wraps OS errors in several types
        error = disk_error(e)
        if error is None:
            raise
        for partial in glob.glob(os.path.join(str(mngr.directory), f"{step}.orbax-checkpoint-tmp*")):
            shutil.rmtree(partial, ignore_errors=True)
        raise write_failure(os.path.join(str(mngr.directory), str(step)), state_bytes(flat), error) from None


def steps(directory: str) -> list[int]:
    """Env steps of the committed checkpoints in ``directory``, newest first."""
    if not os.path.isdir(directory):
        return []
    return sorted(manager(directory).all_steps(), reverse=True)


class Damaged(Exception):
    pass


def _restore_one(directory: str, abstract_state, step: int):
    flat_abstract = _flatten(abstract_state)
    # A sharded abstract state (jaxrl.sharding) restores each leaf straight onto its devices.
    target = {k: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=getattr(x, "sharding", None))
              for k, x in flat_abstract.items()}
    try:
        restored = manager(directory).restore(step, args=ocp.args.Composite(**{
            STATE: ocp.args.StandardRestore(target), INTEGRITY: ocp.args.JsonRestore()}))
        values, integrity = restored[STATE], restored[INTEGRITY]
    except Exception as e:  # noqa: BLE001 - orbax raises many types for unreadable / mismatched data
        message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise Damaged(f"unreadable or not this run's shapes: {message[:160]}") from None
    expected = (integrity or {}).get("crc32")
    if not isinstance(expected, dict) or set(expected) != set(target):
        raise Damaged("its checksum record is missing or lists other arrays")
    for key, value in values.items():
        if expected[key] is not None and _crc(value) != expected[key]:
            raise Damaged(f"checksum mismatch in {key}")
    paths, treedef = jax.tree_util.tree_flatten_with_path(abstract_state)
    leaves = [values[jax.tree_util.keystr(p)] if x.size > 0 else jax.numpy.zeros(x.shape, x.dtype) for p, x in paths]
    return jax.tree_util.tree_unflatten(treedef, leaves)


def restore(directory: str, abstract_state, step: int | None = None,
            on_damaged: Callable[[int, str], None] | None = None):
    """``(state, step)`` from the newest checkpoint that verifies (or exactly ``step``), restored into the
    structure of ``abstract_state`` (e.g. ``jax.eval_shape`` of the init). Each damaged newer checkpoint is
    reported to ``on_damaged(step, reason)`` before the fallback is returned; ConfigError (one line) when none
    verifies or there is none."""
    available = steps(directory)
    if not available:
        raise ConfigError(f"no checkpoint in {directory!r}; resume needs at least one saved checkpoint")
    if step is not None and step not in available:
        raise ConfigError(f"no checkpoint at env step {step} in {directory!r}; saved: "
                          f"{', '.join(map(str, available))}")
    damaged = []
    for candidate in [step] if step is not None else available:
        try:
            state = _restore_one(directory, abstract_state, candidate)
        except Damaged as e:
            damaged.append((candidate, str(e)))
            continue
        for bad_step, reason in damaged:
            if on_damaged is not None:
                on_damaged(bad_step, reason)
        return state, candidate
    newest, reason = damaged[0]
    others = f"; the {len(damaged) - 1} older one(s) too" if len(damaged) > 1 else ""
    raise ConfigError(f"no intact checkpoint in {directory}: the one at env step {newest} is damaged ({reason})"
                      f"{others}")


def latest_intact_step(directory: str, abstract_state) -> int | None:
    """The newest checkpoint that verifies, or None: what may be called the last good one."""
    for candidate in steps(directory):
        try:
            _restore_one(directory, abstract_state, candidate)
            return candidate
        except Damaged:
            continue
    return None


def set_aside(directory: str, step: int, where: str) -> str:
    """Move a damaged checkpoint out of orbax's directory (so the run can write that step again), keeping it."""
    os.makedirs(where, exist_ok=True)
    target = os.path.join(where, str(step))
    suffix = 1
    while os.path.exists(target):
        target, suffix = os.path.join(where, f"{step}.{suffix}"), suffix + 1
    os.replace(os.path.join(directory, str(step)), target)
    return target
