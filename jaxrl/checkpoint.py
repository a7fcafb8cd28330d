"""Orbax checkpoints of the whole training state (agent, buffer, envs, RNG, counters)."""
from __future__ import annotations

import os

import jax
import orbax.checkpoint as ocp

from jaxrl import ConfigError


def manager(directory: str, keep: int = 3) -> ocp.CheckpointManager:
    options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True, enable_async_checkpointing=False)
    return ocp.CheckpointManager(os.path.abspath(directory), options=options)


def _flatten(state) -> dict:
    """{key path: array} without zero-size leaves (MJX states have some; orbax refuses to write them)."""
    leaves = jax.tree_util.tree_flatten_with_path(state)[0]
    return {jax.tree_util.keystr(path): leaf for path, leaf in leaves if leaf.size > 0}


def save(mngr: ocp.CheckpointManager, step: int, state) -> None:
    """Synchronous: once this returns, a kill cannot leave the newest checkpoint half-written."""
    mngr.save(step, args=ocp.args.StandardSave(_flatten(state)), force=True)
    mngr.wait_until_finished()


def latest_step(directory: str) -> int:
    if not os.path.isdir(directory):
        raise ConfigError(f"no checkpoint directory {directory!r}; resume needs a run directory written by "
                          "`jaxrl train` with checkpoints")
    step = manager(directory).latest_step()
    if step is None:
        raise ConfigError(f"no checkpoint in {directory!r}; resume needs at least one saved checkpoint")
    return step


def restore(directory: str, abstract_state, step: int | None = None):
    """Restore into the structure of ``abstract_state`` (e.g. ``jax.eval_shape`` of the init)."""
    step = latest_step(directory) if step is None else step
    # A sharded abstract state (jaxrl.sharding) restores each leaf straight onto its devices.
    target = {k: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=getattr(x, "sharding", None))
              for k, x in _flatten(abstract_state).items()}
    try:
        restored = manager(directory).restore(step, args=ocp.args.StandardRestore(target))
        paths, treedef = jax.tree_util.tree_flatten_with_path(abstract_state)
        leaves = [restored[jax.tree_util.keystr(p)] if x.size > 0 else jax.numpy.zeros(x.shape, x.dtype)
                  for p, x in paths]
        return jax.tree_util.tree_unflatten(treedef, leaves), step
    except Exception as e:  # orbax raises many types for unreadable / mismatched data
        message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"checkpoint {directory}/{step} is corrupt or does not match this config: "
                          f"{message[:200]}") from None
