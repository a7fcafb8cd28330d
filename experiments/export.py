"""Take a trained policy out of a run: one member as its own run directory, or the actor as an ONNX graph.

    jaxrl export RUN_DIR --member K --out DIR     # a standalone single-member run directory
    jaxrl export RUN_DIR --onnx policy.onnx       # the deterministic actor, for onnxruntime / robot deployment

A member's run directory is an ordinary one (config.json with that member's seed and agent config, its metrics,
its checkpoint at the same env step): ``jaxrl train --resume DIR`` continues it alone, and ``load_policy(DIR)``
gives its acting function. Members are sliced, not retrained: the exported state is the member's exact state. A
population-based training member leaves with the values PBT gave it (its agent config) and the schedule its
networks trained with (``exported_from.pbt_schedule``); the exported run is no population.

The ONNX graph maps ``obs`` [B, n] to ``action`` [B, m] in [-1, 1] exactly as the run's evaluation acts
(observation normalisation folded in with the checkpoint's statistics; with structured observations ``obs`` is
the actor's part alone, e.g. Playground's ``state``). It is converted by jax2onnx from the jitted policy's jaxpr,
so any memoryless agent's actor exports, a plugged-in one included; TD-MPC2, which plans with random samples and a
warm-start carry, has no such graph. After writing, onnxruntime runs the file on random observations and the
largest difference from the jitted policy is reported.
"""
from __future__ import annotations

import dataclasses
import json
import os
from types import SimpleNamespace
from typing import Any

from experiments.signals import REQUESTS, temporaries
from jaxrl import ConfigError
from jaxrl.files import write_bytes_atomic


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
    trainer = make_train(agent, env, eval_env, loop, agent_cfg, resolved.pbt)
    abstract = jax.eval_shape(lambda: trainer.init_members([s for s, _ in members], [c for _, c in members]))
    state, step = checkpoint.restore(os.path.join(run_dir, "checkpoints"), abstract, step, on_damaged=lambda s, why:
                                     rundir.note(f"checkpoint at env step {s} of {run_dir} is damaged ({why}); "
                                                 "using the newest intact one"))
    return SimpleNamespace(agent=agent, run=run, loop=loop, agent_cfg=agent_cfg, members=members,
                           spec=trainer.program.spec, trainer=trainer, state=state, step=step, pbt=resolved.pbt)


def take_member(state, k: int):
    """Member k of a state, keeping a member axis of 1; the shared step counters (scalars) as they are."""
    import jax

    return jax.tree.map(lambda x: x[k:k + 1] if x.ndim else x, state)


def export_member(run_dir: str, member: int, out_dir: str) -> str:
    from experiments import rundir

    saved = rundir.load_saved(run_dir)
    listed = members_of(saved)
    if not 0 <= member < len(listed):
        raise ConfigError(f"--member {member} is out of range: {run_dir} has members 0..{len(listed) - 1}")
    if rundir.run_files(out_dir):
        raise ConfigError(f"--out {out_dir} already holds a run ({', '.join(rundir.run_files(out_dir))}); choose a "
                          "new directory")
    rundir.check_path(out_dir, "--out")
    rundir.check_location(out_dir, "--out")
    created = rundir.missing_dirs(out_dir)
    with REQUESTS.on_stop(lambda: (rundir.remove_run_files(out_dir), rundir.remove_if_empty(created))):
        # A stop signal ends the process at once: an export it cut short leaves no run behind, not even a part.
        return _export_member(run_dir, member, out_dir, saved)


def _export_member(run_dir: str, member: int, out_dir: str, saved: dict[str, Any]) -> str:
    import envs
    from experiments import rundir
    from jaxrl import checkpoint
    from jaxrl import pbt as pbt_lib
    from jaxrl.files import write_json, write_text_atomic
    from jaxrl.logging import member_row, read_rows

    restored = restore_run(run_dir)
    loop, state, step = restored.loop, restored.state, restored.step
    seed, cfg = restored.members[member]
    history = [row for row in read_rows(os.path.join(run_dir, "metrics.jsonl")) if row["env_steps"] <= step]
    population = {}
    if restored.pbt is not None:
        # A PBT member leaves with the values it has now (PBT moved them) and the schedule its networks trained
        # with; as a standalone run it is no population.
        initial = [{e.field: getattr(c, e.field) for e in restored.pbt.explore} for _, c in restored.members]
        population = {"pbt_schedule": pbt_lib.schedule(history, member, restored.pbt, initial, step),
                      "pbt": saved["pbt"]}
        cfg = cfg.replace(**{e.field: float(getattr(state.hparams, e.field)[member]) for e in restored.pbt.explore})
        state = state.replace(pbt=None)
    os.makedirs(out_dir, exist_ok=True)
    run = dataclasses.replace(restored.run, seed=seed, seeds=1, run_dir=out_dir, shard_members=False)
    write_json(os.path.join(out_dir, "config.json"), {
        "agent": saved["agent"], "env_revision": envs.env_revision(run.env), "run": rundir.config_to_dict(run),
        "loop": rundir.config_to_dict(loop), "agent_config": rundir.config_to_dict(cfg),
        "resolved": saved.get("resolved", {}),
        # The origin's stack stays the run's (jaxrl.provenance): the exported state is what it trained.
        **{key: saved[key] for key in ("environment", "resumed_under") if key in saved},
        "exported_from": {"run_dir": os.path.abspath(run_dir), "member": member, "env_steps": step, **population}})
    checkpoint.save(checkpoint.manager(os.path.join(out_dir, "checkpoints"), run.keep_checkpoints), step,
                    take_member(state, member))
    rows = [member_row(row, member) for row in history]
    write_text_atomic(os.path.join(out_dir, "metrics.jsonl"), "".join(json.dumps(r) + "\n" for r in rows))
    return out_dir


def load_policy(run_dir: str, member: int = 0, step: int | None = None):
    """``(policy, init_carry)``: ``policy(obs [N, obs_size], carry, key) -> (actions, carry)`` acts
    deterministically as the run's evaluation does (observation normalisation included), jitted. With structured
    observations ``obs`` is the actor's part alone (``spec.actor_obs``, e.g. ``state``; a whole observation works
    too): a deployed policy never needs the privileged part. ``init_carry(num_envs)`` is the acting state of fresh
    episodes (() for memoryless agents)."""
    return _policy(restore_run(run_dir, step), run_dir, member)


def _policy(restored: SimpleNamespace, run_dir: str, member: int):
    import jax

    from jaxrl.networks import select_part
    from jaxrl.normalization import normalize_obs

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


_ONNX_MISSING = "ONNX export needs jax2onnx and onnxruntime: pip install 'jaxrl[onnx]'"


def actor_obs_size(spec) -> int:
    """The width of the observation a deployed actor reads: the actor's part, or the flat observation."""
    return dict(spec.obs_parts)[spec.actor_obs] if spec.actor_obs is not None else spec.obs_size


def export_onnx(run_dir: str, out_path: str, member: int = 0, step: int | None = None) -> dict[str, Any]:
    """Write member ``member``'s deterministic actor (at checkpoint ``step``, default the newest) to ``out_path``
    as an ONNX graph ``obs`` [B, n] -> ``action`` [B, m]; returns what was written and ``actor_to_onnx``'s
    check of the file against the jitted policy."""
    import jax

    _import_onnx()
    restored = restore_run(run_dir, step)
    policy, init_carry = _policy(restored, run_dir, member)
    if jax.tree.leaves(jax.eval_shape(lambda: init_carry(1))):
        raise ConfigError(f"agent {restored.agent.name} carries acting state between steps (its act plans or "
                          "remembers); ONNX export takes memoryless actors only (an obs -> action graph)")
    key = jax.random.PRNGKey(0)  # the deterministic policy draws nothing; act's signature takes a key anyway
    obs_size = actor_obs_size(restored.spec)
    doc = (f"jaxrl {restored.agent.name} deterministic actor on {restored.run.env}, member {member} at env step "
           f"{restored.step}: obs [B, {obs_size}] -> action [B, {restored.spec.action_size}] in [-1, 1]")
    check = actor_to_onnx(lambda obs: policy(obs, (), key)[0], obs_size, out_path, f"jaxrl_{restored.agent.name}",
                          doc, *_observation_scale(restored, member))
    return {"path": out_path, "agent": restored.agent.name, "env": restored.run.env, "env_steps": restored.step,
            "obs_size": obs_size, "action_size": restored.spec.action_size, **check}


def _import_onnx():
    import logging

    try:
        # jax2onnx's plugin discovery logs a traceback for each optional plugin (dm_pix) it cannot load on this
        # JAX; no actor uses them.
        logging.getLogger("jax2onnx").setLevel(logging.CRITICAL)
        import jax2onnx
        import onnxruntime
    except ImportError:
        raise ConfigError(_ONNX_MISSING) from None
    return jax2onnx, onnxruntime


def actor_to_onnx(act, obs_size: int, out_path: str, model_name: str = "jaxrl_actor", doc: str = "",
                  obs_mean=None, obs_std=None, check_samples: int = 256) -> dict[str, Any]:
    """Convert ``act(obs [B, obs_size]) -> actions`` (a pure JAX function) to an ONNX file with input ``obs`` and
    output ``action`` and a dynamic batch axis, then run the file in onnxruntime on ``check_samples`` observations:
    half drawn around the scale the policy sees (``obs_mean`` + 3 ``obs_std`` x standard normal), half standard
    normal (a constant observation has std 0, and the normaliser's clipping should be exercised too). Returns
    ``max_abs_diff`` (onnxruntime's actions against ``act``'s) and ``check_samples``."""
    import jax.numpy as jnp
    import numpy as np

    jax2onnx, onnxruntime = _import_onnx()
    model = jax2onnx.to_onnx(act, [("B", obs_size)], model_name=model_name, input_names=["obs"],
                             output_names=["action"])
    model.doc_string = doc
    with REQUESTS.on_stop(temporaries(out_path)):  # a stop signal ends the process at once, maybe mid-write
        try:
            os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
            write_bytes_atomic(out_path, model.SerializeToString())
        except OSError as e:  # a place the checks could not foresee (/proc, a full disk): one line
            raise ConfigError(f"{out_path} cannot be written ({e.strerror or e})") from None
    mean = np.zeros(obs_size) if obs_mean is None else np.asarray(obs_mean)
    std = np.ones(obs_size) if obs_std is None else np.asarray(obs_std)
    noise = np.random.default_rng(0).standard_normal((check_samples, obs_size))
    half = check_samples // 2
    obs = np.concatenate([mean + 3.0 * std * noise[:half], noise[half:]]).astype(np.float32)
    session = onnxruntime.InferenceSession(out_path, providers=["CPUExecutionProvider"])
    onnx_actions = session.run(["action"], {"obs": obs})[0]
    jax_actions = np.asarray(act(jnp.asarray(obs)))
    return {"max_abs_diff": float(np.max(np.abs(onnx_actions - jax_actions))), "check_samples": check_samples}


def _observation_scale(restored: SimpleNamespace, member: int):
    """(mean, std) of the actor's observations as the run's normaliser saw them; (None, None) without
    normalisation (``actor_to_onnx`` then draws standard normal observations)."""
    import numpy as np

    if not restored.loop.normalize_obs:
        return None, None
    stats = restored.state.normalizers.obs
    if restored.spec.actor_obs is not None:
        stats = stats[restored.spec.actor_obs]
    return np.asarray(stats.mean)[member], np.sqrt(np.asarray(stats.var)[member])
