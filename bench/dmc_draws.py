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
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from devtime import emit, latest, measured_on, read_rows

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
    """dmc_audit.md's words, from the newest line per task."""
    rows = latest(read_rows(path), "task")
    counts = {row["draws"] for row in rows}
    each = f" ({counts.pop():,} draws each)" if len(counts) == 1 else ""
    accepted = ", ".join(f"{row['task']} {row['accepted']:.3f}" + ("" if each else f" ({row['draws']:,} draws)")
                         for row in rows)
    worst = max(rows, key=lambda row: row["fallback_probability"])
    passes = max(rows, key=lambda row: row["budget_passes_touching"])
    if all(row["mjx_agrees"] == row["draws"] for row in rows):
        agree = "on every draw of each task"
    else:
        agree = "on " + ", ".join(f"{row['mjx_agrees']:,} of the {row['draws']:,} {row['task']} draws" for row in rows)
    return (f"Measured p{each}: {accepted}, so the fallback's probability is at most "
            f"{worst['fallback_probability']:.0e} per episode. The contact check runs on the model without "
            f"Playground's contact budget (`max_geom_pairs` culls pairs by bounding sphere before the narrow phase; "
            f"with it, MJX passed {100 * passes['budget_passes_touching']:.1f} % of the {passes['task']} draws "
            f"MuJoCo C finds in contact); without it, MJX's verdict agreed with MuJoCo C's `ncon` {agree} "
            f"({measured_on(rows[-1]['provenance'])}; `python bench/dmc_draws.py --sentence {path}`).")


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
