"""TD-MPC2 planning throughput: agent decisions per second when all envs plan in one vmapped program, against
the same decisions made one env at a time from a Python loop (how the official code and its JAX port plan).

    python bench/planning_throughput.py                       # default 5M model, num_envs 1 16 64
    python bench/planning_throughput.py --small --num-envs 1 16
    python bench/planning_throughput.py --models 5M small --out bench/results/planning_throughput.jsonl
    python bench/planning_throughput.py --table bench/results/planning_throughput.jsonl   # docs/agents/tdmpc2.md's

Prints one JSON line per model and num_envs: decisions/s batched, decisions/s looped (one jitted single-env call per
env), and the ratio. Same model, planner settings and keys' shapes on both sides; compile time excluded. ``--out``
also writes the lines to a file after a first line holding the ``jaxrl.provenance`` stamp (command, date, commit,
environment block); ``--table`` prints the page's table from such a file.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax

from agents import tdmpc2
from jaxrl.types import EnvSpec


def per_second(fn, repeats: int) -> float:
    jax.block_until_ready(fn())  # compile and warm up
    t0 = time.perf_counter()
    for _ in range(repeats):
        out = fn()
    jax.block_until_ready(out)
    return repeats / (time.perf_counter() - t0)


MODELS = {"5M": "default 5M", "small": "small (64-wide, 128 samples, 3 iterations)"}


def config(model: str) -> tdmpc2.Config:
    if model == "small":
        return tdmpc2.Config(latent_dim=64, hidden_dim=64, encoder_dim=64, num_samples=128, num_elites=16,
                             num_pi_trajs=8, iterations=3)
    return tdmpc2.Config()


def table(path: str) -> str:
    """docs/agents/tdmpc2.md's table: per model, "batched vs looped (ratio)" decisions/s at each num_envs."""
    with open(path) as f:
        rows = [row for row in map(json.loads, f) if "num_envs" in row]
    counts = sorted({row["num_envs"] for row in rows})
    lines = ["| model | " + " | ".join(f"{n} env{'s' if n > 1 else ''}" for n in counts) + " |",
             "|---" * (len(counts) + 1) + "|"]
    for model, label in MODELS.items():
        cells = {row["num_envs"]: f"{row['decisions_per_s_batched']:.3g} vs {row['decisions_per_s_python_loop']:.3g} "
                                  f"({row['ratio']:.2f}×)" for row in rows if row["model"] == model}
        if cells:
            lines.append(f"| {label} | " + " | ".join(cells.get(n, "") for n in counts) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-envs", nargs="+", type=int, default=[1, 16, 64])
    parser.add_argument("--obs-size", type=int, default=5)
    parser.add_argument("--action-size", type=int, default=1)
    which = parser.add_mutually_exclusive_group()  # --small is --models small, kept for the old command lines
    which.add_argument("--small", action="store_true", help="a 64-wide model and 128 samples (CPU smoke run)")
    which.add_argument("--models", nargs="+", choices=sorted(MODELS), help="measure these models (default: 5M)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", help="also write the lines, after a provenance line, to this file")
    parser.add_argument("--table", metavar="FILE", help="print the docs' table from a results file")
    args = parser.parse_args()
    if args.table:
        print(table(args.table))
        return
    spec = EnvSpec(obs_size=args.obs_size, action_size=args.action_size, decisions_per_episode=1000,
                   can_terminate=False)
    lines = []
    if args.out:
        from jaxrl import provenance

        lines.append({"provenance": provenance.stamp()})  # before any result: the checkout as the run starts
    for model in args.models or (["small"] if args.small else ["5M"]):
        lines += measure(model, spec, args.num_envs, args.repeats)
    if args.out:
        with open(args.out, "w") as f:
            f.writelines(json.dumps(line) + "\n" for line in lines)


def measure(model: str, spec: EnvSpec, num_envs: list[int], repeats: int) -> list[dict]:
    cfg = config(model)
    state = tdmpc2.init(jax.random.PRNGKey(0), spec, cfg)
    act = jax.jit(tdmpc2.act, static_argnums=(3, 4))
    rows = []
    for n in num_envs:
        obs = jax.random.normal(jax.random.PRNGKey(1), (n, spec.obs_size))
        carry = tdmpc2.init_carry(n, spec, cfg)
        key = jax.random.PRNGKey(2)
        batched = per_second(lambda: act(state, obs, key, cfg, False, carry)[0], repeats) * n  # noqa: B023 (timed here)
        one_carry = tdmpc2.init_carry(1, spec, cfg)

        def looped():
            return [act(state, obs[i:i + 1], key, cfg, False, one_carry)[0] for i in range(n)]  # noqa: B023 (timed here)

        loop_rate = per_second(looped, max(1, repeats // 2)) * n
        rows.append({"num_envs": n, "decisions_per_s_batched": round(batched, 2),
                     "decisions_per_s_python_loop": round(loop_rate, 2), "ratio": round(batched / loop_rate, 2),
                     "model": model, "device": jax.devices()[0].device_kind})
        print(json.dumps(rows[-1]), flush=True)
    return rows


if __name__ == "__main__":
    main()
