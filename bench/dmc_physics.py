"""How Playground's simulation options for a dmc/ task change what the task asks, against dm_control's options.

Same model, same collision-free initial states (dm_control's rule), same random actions (uniform, held for 5 control
steps): MuJoCo C and MJX, each with dm_control's options and with Playground's. Prints, per simulator, the mean
|velocity| of a joint, the fraction of steps above a speed, and a random policy's FingerSpin return.

    python bench/dmc_physics.py                 # the finger (envs/dmc.py: FINGER_OPTIONS), 48 episodes x 500 steps
    python bench/dmc_physics.py --out bench/results/dmc_physics.jsonl    # the same, a stamped line per row
    python bench/dmc_physics.py --table bench/results/dmc_physics.jsonl  # docs/dmc_audit.md's table
"""
from __future__ import annotations

import argparse
import copy
import os
import sys

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco import mjx

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from devtime import emit, latest, measured_on, read_rows

HEADER = ("| simulator | options | mean abs velocity | fraction above 5 | max | random-policy return / 1000 steps |\n"
          "|---|---|---|---|---|---|")


def with_options(model, options):
    """A copy of ``model`` with dm_control's simulation ``options`` (envs/dmc.py: set_dm_control_options)."""
    from envs.dmc import set_dm_control_options

    model = copy.deepcopy(model)
    set_dm_control_options(model, options)
    return model


def collision_free_starts(model, n, rng):
    starts, data = [], mujoco.MjData(model)
    while len(starts) < n:  # dm_control's finger._set_random_joint_angles
        low, high = model.jnt_range[:2].T
        qpos = np.append(rng.uniform(low, high), rng.uniform(-np.pi, np.pi))
        data.qpos[:] = qpos
        mujoco.mj_forward(model, data)
        if data.ncon == 0:
            starts.append(qpos)
    return np.array(starts)


def rollout_c(model, starts, actions, control_dt, joint):
    substeps = int(round(control_dt / model.opt.timestep))
    out = np.zeros(actions.shape[:2])
    for i, start in enumerate(starts):
        data = mujoco.MjData(model)
        data.qpos[:] = start
        mujoco.mj_forward(model, data)
        for t, action in enumerate(actions[i]):
            data.ctrl[:] = action
            mujoco.mj_step(model, data, nstep=substeps)
            out[i, t] = data.qvel[joint]
    return out


def rollout_mjx(model, starts, actions, control_dt, joint):
    mjx_model, substeps = mjx.put_model(model, impl="jax"), int(round(control_dt / model.opt.timestep))

    def episode(qpos, episode_actions):
        def control_step(data, action):
            data = jax.lax.fori_loop(0, substeps, lambda _, d: mjx.step(mjx_model, d), data.replace(ctrl=action))
            return data, data.qvel[joint]

        return jax.lax.scan(control_step, mjx.make_data(mjx_model).replace(qpos=qpos), episode_actions)[1]

    return np.asarray(jax.jit(jax.vmap(episode))(jnp.asarray(starts, jnp.float32), jnp.asarray(actions, jnp.float32)))


def table(rows: list[dict]) -> str:
    """The docs' table: a row per simulator and set of options."""
    return HEADER + "".join(
        f"\n| {r['simulator']} | {r['options']} | {r['mean_abs_velocity']:.2f} | {r['fraction_above_5']:.3f} | "
        f"{r['max']:.1f} | {r['return_mean']:.1f} ± {r['return_sem']:.1f} |" for r in rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=48)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--hold", type=int, default=5, help="control steps each random action is held")
    parser.add_argument("--out", default=None, help="also append a JSON line per row (with provenance) to this file")
    parser.add_argument("--table", default=None, metavar="JSONL", help="print the docs' table from this file")
    args = parser.parse_args()
    if args.table:
        rows = latest(read_rows(args.table), "simulator", "options")
        print(f"{table(rows)}\n\n{measured_on(rows[-1]['provenance'], start=True)}.")
        return
    from mujoco_playground import dm_control_suite

    from envs.dmc import FINGER_OPTIONS

    playground = dm_control_suite.load("FingerSpin", config_overrides={"impl": "jax"})  # Playground's options
    model = playground.mj_model
    dm_control = with_options(model, FINGER_OPTIONS)
    rng = np.random.RandomState(0)
    starts = collision_free_starts(model, args.episodes, rng)
    actions = np.repeat(rng.uniform(-1, 1, (args.episodes, args.steps // args.hold, model.nu)), args.hold, axis=1)
    hinge = model.joint("hinge").dofadr[0]
    print(f"finger, {args.episodes} episodes x {args.steps} control steps of {playground.dt} s, random actions held "
          f"{args.hold} steps; hinge velocity (rad/s)")
    rows = []
    for simulator, rollout in (("MuJoCo C", rollout_c), ("MJX", rollout_mjx)):
        for options, m in (("dm_control", dm_control), ("Playground", model)):
            v = rollout(m, starts, actions, playground.dt, hinge)
            ret = (v <= -15).mean(axis=1) * 1000  # finger-spin's reward: hinge velocity <= -15
            rows.append({"simulator": simulator, "options": options, "episodes": args.episodes, "steps": args.steps,
                         "hold": args.hold, "mean_abs_velocity": round(float(np.abs(v).mean()), 4),
                         "fraction_above_5": round(float((np.abs(v) > 5).mean()), 4),
                         "max": round(float(np.abs(v).max()), 2), "return_mean": round(float(ret.mean()), 3),
                         "return_sem": round(float(ret.std(ddof=1) / np.sqrt(len(ret))), 3)})
            emit(rows[-1], args.out)
    print(table(rows))


if __name__ == "__main__":
    main()
