"""Trained pendulum policies on shifted physics: issue 33's DR-SAC comparison (DR-SAC's ``param_shift`` evaluation).

    python bench/robust_pendulum.py /tmp/sweeps/issue33_pendulum_sac /tmp/sweeps/issue33_pendulum_dr_sac

Every argument is a sweep output directory (each of its ``groups/*``) or a run directory trained on toy/Pendulum.
Each member's final deterministic policy (``experiments.export.load_policy``: as the run's evaluation acts) plays
``--episodes`` episodes from the same initial states on the nominal pendulum and on pendulums whose mass, length or
gravity is scaled (training never saw them). Prints, per directory and shift, the mean return over members, their
spread (std over members) and each member's mean, members of a swept
value apart; ``--out F.json`` writes one row per (directory, member, shift) beside the ``jaxrl.provenance`` stamp
(command, date, commit, environment) and the commit each directory's sweep trained at. ``--table F`` prints the
docs' table from such a file (or from a ``--csv`` file of before the stamp: mean +- std over members per shift and
column) and runs nothing.
"""
from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from envs.toy import pendulum

# (name, gravity, mass, length): the nominal pendulum, then one factor at a time (DR-SAC's env_mods.yaml factors).
SHIFTS = [("nominal", 10.0, 1.0, 1.0), ("mass x1.5", 10.0, 1.5, 1.0), ("mass x2", 10.0, 2.0, 1.0),
          ("length x1.25", 10.0, 1.0, 1.25), ("length x1.5", 10.0, 1.0, 1.5), ("gravity x1.5", 15.0, 1.0, 1.0)]


def returns(policy, env, episodes: int, seed: int = 0) -> np.ndarray:
    """Undiscounted returns of ``episodes`` full-length episodes (all in one batch), initial states from ``seed``."""
    states, obs = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(seed), episodes))

    def step(carry, _):
        states, obs = carry
        actions, _ = policy(obs, (), jax.random.PRNGKey(0))
        states, obs, reward, _ = jax.vmap(env.step)(states, actions)
        return (states, obs), reward

    _, rewards = jax.lax.scan(step, (states, obs), None, length=env.episode_length)
    return np.asarray(jnp.sum(rewards, axis=0))


def run_dirs(path: str) -> list[str]:
    return sorted(glob.glob(os.path.join(path, "groups", "*"))) if os.path.isdir(os.path.join(path, "groups")) \
        else [path]


def table(path: str) -> str:
    """Markdown: one row per shift, one column per (directory, swept value): directories in the file's order, a
directory's swept values sorted."""
    values: dict[tuple[str, str], dict[str, list[float]]] = {}
    with open(path, newline="") as f:
        rows = json.load(f)["evaluations"] if path.endswith(".json") else list(csv.DictReader(f))
        for row in rows:
            column = (os.path.basename(row["dir"].rstrip("/")), row["swept"])
            values.setdefault(column, {}).setdefault(row["shift"], []).append(float(row["mean_return"]))
    position = {d: i for i, d in enumerate(dict.fromkeys(d for d, _ in values))}
    columns = sorted(values, key=lambda column: (position[column[0]], column[1]))
    lines = ["| shift | " + " | ".join(f"{d} {swept}".strip() for d, swept in columns) + " |",
             "|---|" + "---|" * len(columns)]
    for name, *_ in SHIFTS:
        lines.append(f"| {name} | " + " | ".join(f"{np.mean(values[c][name]):.1f} ± {np.std(values[c][name]):.1f}"
                                                 for c in columns) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="*")
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--out", default=None, metavar="F.json", help="write the evaluations, stamped, to this file")
    parser.add_argument("--table", default=None, metavar="F", help="print the table of an --out file and exit")
    args = parser.parse_args()
    if args.table:
        print(table(args.table))
        return
    if not args.dirs:
        parser.error("give sweep or run directories (or --table F)")
    from experiments.export import load_policy
    from jaxrl import provenance

    stamp = provenance.stamp()  # the checkout as the evaluation starts
    rows, t0 = [], time.perf_counter()
    args.dirs = [path.rstrip("/") for path in args.dirs]
    for path in args.dirs:
        members = []  # (run dir, index in it, agent config)
        for run_dir in run_dirs(path):
            saved = json.load(open(os.path.join(run_dir, "config.json")))
            if saved["run"]["env"] != "toy/Pendulum":
                sys.exit(f"{run_dir} trained on {saved['run']['env']}, not toy/Pendulum")
            configs = [m["agent_config"] for m in saved.get("members") or []] or \
                [saved["agent_config"]] * saved["run"]["seeds"]
            members += [(run_dir, k, c) for k, c in enumerate(configs)]
        swept = sorted(f for f in members[0][2] if len({json.dumps(c[f]) for *_, c in members}) > 1)
        curves: dict[tuple[str, str], list[float]] = {}
        for run_dir, member, config in members:
            label = " ".join(f"{f}={config[f]}" for f in swept)
            policy, _ = load_policy(run_dir, member)
            for name, gravity, mass, length in SHIFTS:
                mean = float(np.mean(returns(policy, pendulum(gravity, mass, length), args.episodes)))
                curves.setdefault((label, name), []).append(mean)
                rows.append({"dir": path, "run": run_dir, "member": member, "swept": label, "shift": name,
                             "mean_return": mean})
        print(f"\n{path}")
        for (label, name), values in curves.items():
            print(f"  {label:<12} {name:<13} {np.mean(values):8.1f} +- {np.std(values):6.1f}   members "
                  + " ".join(f"{v:.1f}" for v in values))
    if args.out:
        trained = {}  # the commit(s) each sweep's members trained at (its results.csv column), "" before it had one
        for path in args.dirs:
            results = os.path.join(path, "results.csv")
            if os.path.exists(results):
                with open(results, newline="") as f:
                    trained[path] = sorted({row.get("commit", "") for row in csv.DictReader(f)})
        with open(args.out, "w") as f:
            json.dump({"provenance": stamp, "seconds": round(time.perf_counter() - t0, 1),
                       "trained": trained, "evaluations": rows}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
