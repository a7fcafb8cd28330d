"""dm_control's collision-free initial states as jaxrl draws them: how often a draw is accepted, and whether MJX's
contact check agrees with MuJoCo C's.

    python bench/dmc_draws.py --out bench/results/dmc_draws.jsonl       # BallInCup, FingerSpin, HumanoidStand
    python bench/dmc_draws.py --sentence bench/results/dmc_draws.jsonl  # docs/dmc_audit.md's words

Per task, ``--draws`` i.i.d. initial states from the task's draw (``envs/dmc.py: DRAWS``, one jitted vmap), each
judged three ways: MuJoCo C's ``ncon`` after ``mj_forward`` (dm_control's rule: accept at 0); MJX's deepest contact
on the model without Playground's contact budget (``contact_check_model``, what a reset checks); and the same on
the model as Playground loads it, budget included. The acceptance rate p is MuJoCo C's share of draws without
contact; a reset's fallback (all ``envs.dmc.CANDIDATES`` candidates touch) has probability (1 - p)^CANDIDATES.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from devtime import emit, measured_on

TASKS = ("BallInCup", "FingerSpin", "HumanoidStand")


def judge(task: str, draws: int, seed: int) -> dict:
    import jax
    import mujoco
    import numpy as np
    from mujoco import mjx
    from mujoco_playground import dm_control_suite

    from envs import dmc

    model = dm_control_suite.load(dmc.playground_original(task) or task, config_overrides={"impl": "jax"}).mj_model
    qpos0 = jax.numpy.asarray(model.qpos0, jax.numpy.float32)
    qpos = np.asarray(jax.jit(jax.vmap(lambda k: dmc.DRAWS[task](model, k, qpos0)))(
        jax.random.split(jax.random.PRNGKey(seed), draws)))

    def mjx_depths(check):
        rest = mjx.make_data(check)
        return np.asarray(jax.jit(jax.vmap(lambda q: dmc.contact_depth(mjx.collision(
            check, mjx.kinematics(check, rest.replace(qpos=q))))))(jax.numpy.asarray(qpos)))

    data = mujoco.MjData(model)
    touching = np.zeros(draws, bool)
    for i, q in enumerate(qpos):
        data.qpos[:] = q
        mujoco.mj_forward(model, data)
        touching[i] = data.ncon > 0
    unbudgeted = mjx_depths(dmc.contact_check_model(model)) > 0
    budgeted = mjx_depths(mjx.put_model(model, impl="jax")) > 0
    p = 1 - touching.mean()
    return {"task": task, "draws": draws, "seed": seed, "accepted": round(float(p), 4),
            "fallback_probability": float((1 - p) ** dmc.CANDIDATES), "candidates": dmc.CANDIDATES,
            "mjx_agrees": int((unbudgeted == touching).sum()),
            "budget_passes_touching": round(float((~budgeted & touching).sum() / max(touching.sum(), 1)), 4)}


def sentence(path: str) -> str:
    with open(path) as f:
        rows = [json.loads(line) for line in f]
    (draws,) = {row["draws"] for row in rows}
    worst = max(rows, key=lambda row: row["fallback_probability"])
    passes = max(rows, key=lambda row: row["budget_passes_touching"])
    agree = ", ".join(f"{row['mjx_agrees']:,}" for row in rows)
    passed = 100 * passes["budget_passes_touching"]
    return (f"Measured p ({draws:,} draws each): " + ", ".join(f"{row['task']} {row['accepted']:.3f}" for row in rows)
            + f", so the fallback's probability is at most {worst['fallback_probability']:.0e} per episode. The "
            f"contact check runs on the model without Playground's contact budget (`max_geom_pairs` culls pairs by "
            f"bounding sphere before the narrow phase; with it, MJX passed {passed:.1f} "
            f"% of the {passes['task']} draws MuJoCo C finds in contact); without it, MJX's verdict agreed with MuJoCo "
            f"C's `ncon` on {agree} of the {draws:,} draws ({measured_on(rows[0]['provenance'])}; `python "
            f"bench/dmc_draws.py --sentence {path}`).")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="also append a JSON line per task (with provenance) to this file")
    parser.add_argument("--sentence", default=None, metavar="JSONL", help="print dmc_audit.md's words from this file")
    args = parser.parse_args()
    if args.sentence:
        print(sentence(args.sentence))
        return
    if args.draws < 1:
        parser.error(f"--draws must be at least 1, got {args.draws}")
    for task in TASKS:
        emit(judge(task, args.draws, args.seed), args.out)


if __name__ == "__main__":
    main()
