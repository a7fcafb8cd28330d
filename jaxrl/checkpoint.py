"""Orbax checkpoints of the whole training state (agent, buffer, envs, RNG, counters), verified on restore.

Orbax checks no content on restore: a flipped byte in an array file comes back as silently different weights,
and a truncated file fails deep inside tensorstore with pages of logs. So once orbax has committed a step,
``save`` writes ``MANIFEST`` into it: the size and CRC-32 of every file of the checkpoint. A step is complete
only with its manifest. ``restore`` checks the files against it before orbax reads anything, treats any
difference (or a missing manifest: a kill between orbax's commit and the manifest) as a damaged checkpoint,
falls back to the newest one that verifies, and reports the damaged ones to its caller.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import zlib
from collections.abc import Callable

import jax
import numpy as np
import orbax.checkpoint as ocp

from jaxrl import ConfigError
from jaxrl.files import disk_error, write_failure, write_json

STATE = "state"
MANIFEST = "jaxrl_manifest.json"
def manager(directory: str, keep: int = 3) -> ocp.CheckpointManager:
    options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True, enable_async_checkpointing=False)
    return ocp.CheckpointManager(os.path.abspath(directory), options=options)


def _flatten(state) -> dict:
    """{key path: array} without zero-size leaves (MJX states have some; orbax refuses to write them)."""
    leaves = jax.tree_util.tree_flatten_with_path(state)[0]
    return {jax.tree_util.keystr(path): leaf for path, leaf in leaves if leaf.size > 0}


def state_bytes(state) -> int:
    """Bytes a checkpoint of ``state`` (or of its ``jax.eval_shape``) writes, before compression."""
    return sum(int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(state))


def save(mngr: ocp.CheckpointManager, step: int, state) -> None:
    """Synchronous: once this returns, the checkpoint and its manifest are on disk (orbax writes into a temporary
    directory and renames it on commit; the manifest is written atomically after). A full or read-only disk raises
    ``WriteError`` after the partial temporary directory is removed; older checkpoints are untouched."""
    flat = _flatten(state)
    step_dir = os.path.join(str(mngr.directory), str(step))
    try:
        mngr.save(step, args=ocp.args.Composite(**{STATE: ocp.args.StandardSave(flat)}), force=True)
        mngr.wait_until_finished()
        if jax.process_index() == 0:
            write_json(os.path.join(step_dir, MANIFEST), {"files": _file_sums(step_dir)})
    except Exception as e:
        error = disk_error(e)
        if error is None:
            raise
        for partial in glob.glob(os.path.join(str(mngr.directory), f"{step}.orbax-checkpoint-tmp*")):
            shutil.rmtree(partial, ignore_errors=True)
        if os.path.isdir(step_dir) and not os.path.exists(os.path.join(step_dir, MANIFEST)):
            shutil.rmtree(step_dir, ignore_errors=True)  # committed by orbax but never completed
        raise write_failure(step_dir, state_bytes(flat), error) from None


def _file_sums(step_dir: str) -> dict[str, list[int]]:
    """{path relative to the step directory: [size, crc32]} of every file but the manifest."""
    sums = {}
    for root, _, names in os.walk(step_dir):
        for name in names:
            path = os.path.join(root, name)
            relative = os.path.relpath(path, step_dir)
            if relative == MANIFEST:
                continue
            crc = 0
            with open(path, "rb") as f:
                while chunk := f.read(1 << 22):
                    crc = zlib.crc32(chunk, crc)
            sums[relative] = [os.path.getsize(path), crc]
    return sums


def steps(directory: str) -> list[int]:
    """Env steps of the committed checkpoints in ``directory``, newest first."""
    if not os.path.isdir(directory):
        return []
    return sorted(manager(directory).all_steps(), reverse=True)


class Damaged(Exception):
    pass


def _verify_files(step_dir: str) -> None:
    try:
        with open(os.path.join(step_dir, MANIFEST)) as f:
            expected = json.load(f)["files"]
    except (OSError, ValueError, KeyError, TypeError):
        raise Damaged("its manifest is missing or unreadable (killed while saving?)") from None
    actual = _file_sums(step_dir)
    for relative, (size, crc) in sorted(expected.items()):
        if relative not in actual:
            raise Damaged(f"{relative} is missing")
        if actual[relative][0] != size:
            raise Damaged(f"{relative} has {actual[relative][0]} bytes, the manifest says {size}")
        if actual[relative][1] != crc:
            raise Damaged(f"checksum mismatch in {relative}")


def _layout_mismatch(step_dir: str, target: dict) -> str | None:
    """Where the stored state's leaves differ from ``target``'s (read from orbax's metadata, before any array is
    read: a restore into mismatched shapes fails deep inside tensorstore); None when they all match."""
    from etils import epath  # orbax's path type (one of its dependencies)

    metadata = ocp.PyTreeCheckpointHandler().metadata(epath.Path(os.path.join(step_dir, STATE)))
    stored = {key: (tuple(m.shape), np.dtype(m.dtype)) for key, m in getattr(metadata, "tree", metadata).items()}
    for key, x in target.items():
        if key not in stored:
            return f"it has no {key}"
        if stored[key] != (tuple(x.shape), np.dtype(x.dtype)):
            return (f"{key} is stored as {stored[key][1]}{list(stored[key][0])} where this run builds "
                    f"{np.dtype(x.dtype)}{list(x.shape)}")
    extra = sorted(set(stored) - set(target))
    return f"it holds {extra[0]}, which this run does not have" if extra else None


def _restore_one(directory: str, abstract_state, step: int):
    directory = os.path.abspath(directory)  # orbax's tensorstore paths must be absolute; users type relative ones
    step_dir = os.path.join(directory, str(step))
    _verify_files(step_dir)
    flat_abstract = _flatten(abstract_state)
    # A sharded abstract state (jaxrl.sharding) restores each leaf straight onto its devices; an unsharded one onto
    # the default device, whatever devices wrote the checkpoint (a run split over several resumes on one).
    one_device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    target = {k: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=getattr(x, "sharding", None) or one_device)
              for k, x in flat_abstract.items()}
    mismatch = _layout_mismatch(step_dir, target)
    if mismatch is not None:
        # The files verified against the manifest, so the checkpoint is intact, of another layout (another jaxrl
        # version, e.g. an older replay layout, or other settings). Not damaged: it is neither set aside nor
        # skipped for an older one, which would have the same layout.
        raise ConfigError(f"the checkpoint at env step {step} in {directory} is intact but of another layout "
                          f"({mismatch}): it was written by another jaxrl version or for other settings; resume it "
                          "with the version that wrote it, or start a new run")
    try:
        restored = manager(directory).restore(step, args=ocp.args.Composite(**{
            STATE: ocp.args.StandardRestore(target)}))[STATE]
    except Exception as e:  # noqa: BLE001 - orbax raises many types for unreadable data
        message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise Damaged(f"orbax cannot read it: {message[:160]}") from None
    paths, treedef = jax.tree_util.tree_flatten_with_path(abstract_state)
    leaves = [restored[jax.tree_util.keystr(p)] if x.size > 0 else jax.numpy.zeros(x.shape, x.dtype)
              for p, x in paths]
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


def latest_intact_step(directory: str) -> int | None:
    """The newest checkpoint whose files verify against its manifest, or None: what may be called the last good
    one."""
    for candidate in steps(directory):
        try:
            _verify_files(os.path.join(directory, str(candidate)))
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
