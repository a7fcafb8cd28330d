"""Pull one member out of a multi-member run (a sweep group or a ``--seeds K`` run).

    jaxrl export RUN_DIR --member K --out DIR     # a standalone single-member run directory

The output is an ordinary run directory (config.json with that member's seed and agent config, its metrics,
its checkpoint at the same env step): ``jaxrl train --resume DIR`` continues it alone, and ``load_policy(DIR)``
gives its acting function. Members are sliced, not retrained: the exported state is the member's exact state.
"""
from __future__ import annotations

import dataclasses
import json
import os
from types import SimpleNamespace
from typing import Any

from jaxrl import ConfigError


def members_of(saved: dict[str, Any]) -> list[dict[str, Any]]:
    """(seed, agent_config) of every member of a saved run: a sweep group lists them, a --seeds run implies them."""
    if saved.get("members"):
        return saved["members"]
    run = saved["run"]
    return [{"seed": run["seed"] + k, "agent_config": saved["agent_config"]} for k in range(run["seeds"])]


def restore_run(run_dir: str, step: int | None = None) -> SimpleNamespace:
    """A run's checkpoint and everything around it: agent, run, loop, agent_cfg, members [(seed, cfg)], spec,
    trainer, state, step."""
    import jax

    from experiments import rundir
    from experiments.train import make_envs, setup_jax
    from jaxrl import checkpoint
    from jaxrl.loop import make_train

    saved = rundir.load_saved(run_dir)
    resolved = rundir.resolve(saved=saved, run_dir=run_dir)
    agent, run, loop, agent_cfg = resolved.agent, resolved.run, resolved.loop, resolved.agent_cfg
    members = resolved.members or [(run.seed + k, agent_cfg) for k in range(run.seeds)]
    setup_jax(dataclasses.replace(run, distributed=False))
    env, eval_env = make_envs(run, loop)
    trainer = make_train(agent, env, eval_env, loop, agent_cfg)
    abstract = jax.eval_shape(lambda: trainer.init_members([s for s, _ in members], [c for _, c in members]))
    state, step = checkpoint.restore(os.path.join(run_dir, "checkpoints"), abstract, step, on_damaged=lambda s, why:
                                     rundir.note(f"checkpoint at env step {s} of {run_dir} is damaged ({why}); "
                                                 "using the newest intact one"))
    return SimpleNamespace(agent=agent, run=run, loop=loop, agent_cfg=agent_cfg, members=members,
                           spec=trainer.program.spec, trainer=trainer, state=state, step=step)


def take_member(state, k: int):
    """Member k of a state, keeping a member axis of 1; the shared step counters (scalars) as they are."""
    import jax

    return jax.tree.map(lambda x: x[k:k + 1] if x.ndim else x, state)


def export_member(run_dir: str, member: int, out_dir: str) -> str:
    from experiments import rundir
    from jaxrl import checkpoint
    from jaxrl.files import write_json, write_text_atomic
    from jaxrl.logging import member_row, read_rows

    saved = rundir.load_saved(run_dir)
    listed = members_of(saved)
    if not 0 <= member < len(listed):
        raise ConfigError(f"--member {member} is out of range: {run_dir} has members 0..{len(listed) - 1}")
    if rundir.run_files(out_dir):
        raise ConfigError(f"--out {out_dir} already holds a run ({', '.join(rundir.run_files(out_dir))}); choose a "
                          "new directory")
    rundir.check_location(out_dir)
    restored = restore_run(run_dir)
    agent, loop, state, step = restored.agent, restored.loop, restored.state, restored.step
    seed, cfg = restored.members[member]
    os.makedirs(out_dir, exist_ok=True)
    run = dataclasses.replace(restored.run, seed=seed, seeds=1, run_dir=out_dir, shard_members=False)
    write_json(os.path.join(out_dir, "config.json"), {
        "agent": agent.name, "run": rundir.config_to_dict(run), "loop": rundir.config_to_dict(loop),
        "agent_config": rundir.config_to_dict(cfg), "resolved": saved.get("resolved", {}),
        "exported_from": {"run_dir": os.path.abspath(run_dir), "member": member, "env_steps": step}})
    checkpoint.save(checkpoint.manager(os.path.join(out_dir, "checkpoints"), run.keep_checkpoints), step,
                    take_member(state, member))
    rows = [member_row(row, member) for row in read_rows(os.path.join(run_dir, "metrics.jsonl"))
            if row["env_steps"] <= step]
    write_text_atomic(os.path.join(out_dir, "metrics.jsonl"), "".join(json.dumps(r) + "\n" for r in rows))
    return out_dir


def load_policy(run_dir: str, member: int = 0, step: int | None = None):
    """``(policy, init_carry)``: ``policy(obs [N, obs_size], carry, key) -> (actions, carry)`` acts
    deterministically as the run's evaluation does (observation normalisation included), jitted. With structured
    observations ``obs`` is the actor's part alone (``spec.actor_obs``, e.g. ``state``; a whole observation works
    too): a deployed policy never needs the privileged part. ``init_carry(num_envs)`` is the acting state of fresh
    episodes (() for memoryless agents)."""
    import jax

    from jaxrl.networks import select_part
    from jaxrl.normalization import normalize_obs

    restored = restore_run(run_dir, step)
    agent, loop = restored.agent, restored.loop
    if not 0 <= member < len(restored.members):
        raise ConfigError(f"member {member} is out of range: {run_dir} has members 0..{len(restored.members) - 1}")
    one = jax.tree.map(lambda x: x[member] if x.ndim else x, restored.state)
    actor_part = restored.spec.actor_obs
    obs_stats = one.normalizers.obs if actor_part is None else one.normalizers.obs[actor_part]

    @jax.jit
    def policy(obs, carry, key):
        obs = select_part(obs, actor_part)  # a whole structured observation works too
        if loop.normalize_obs:
            obs = normalize_obs(obs_stats, obs)
        return agent.act(one.agent, obs, key, one.hparams, True, carry)

    def init_carry(num_envs: int):
        return agent.init_carry(num_envs, restored.spec, one.hparams)

    return policy, init_carry
