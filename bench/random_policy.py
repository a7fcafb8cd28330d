"""A uniformly random policy's return on an env: ``python bench/random_policy.py dmc/BallInCup [--envs 64]``.

One jitted episode of the env's own length for every env in the batch; prints the mean and max return and the
fraction of episodes that collect any reward (whether exploration can meet the reward at all).

    python bench/random_policy.py dmc/BallInCupPlayground dmc/BallInCup --out bench/results/random_policy.jsonl
    python bench/random_policy.py --sentence bench/results/random_policy.jsonl  # guide/reproduce.md's words
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax
import jax.numpy as jnp
import numpy as np
from devtime import emit, latest, measured_on, read_rows

import envs


def sentence(path: str) -> str:
    """Each env's mean return over its episodes (the newest line per env), as guide/reproduce.md words it."""
    rows = latest(read_rows(path), "env")
    episodes = {row["episodes"] for row in rows}
    each = f", on average over {rows[0]['episodes']} episodes each" if len(episodes) == 1 else ""
    means = [f"{row['mean']:.1f} on `{row['env']}`" + ("" if each else f" (mean of {row['episodes']} episodes)")
             for row in rows]
    listed = means[0] if len(means) == 1 else ", ".join(means[:-1]) + f" and {means[-1]}"
    return (f"a random policy collects {listed}{each} ({measured_on(rows[-1]['provenance'])}; `python "
            f"bench/random_policy.py --sentence {path}`)")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("env", nargs="*", help="one or more env names")
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="also append a JSON line per env (with provenance) to this file")
    parser.add_argument("--sentence", default=None, metavar="JSONL", help="print reproduce.md's words from this file")
    args = parser.parse_args()
    if args.sentence:
        print(sentence(args.sentence))
        return
    if not args.env:
        parser.error("name at least one env (or --sentence FILE)")
    for name in args.env:
        measure(name, args.envs, args.seed, args.out)


def measure(name: str, num_envs: int, seed: int, out: str | None) -> None:
    env = envs.make(name, num_envs)

    def episode(key):
        def step(carry, k):
            state, total = carry
            action = jax.random.uniform(k, (num_envs, env.spec.action_size), minval=-1, maxval=1)
            state, stepped = env.step(state, action)
            return (state, total + stepped.reward), None

        reset_key, key = jax.random.split(key)
        carry = (env.reset(reset_key), jnp.zeros(num_envs))
        return jax.lax.scan(step, carry, jax.random.split(key, env.raw.episode_length))[0][1]

    total = np.asarray(jax.jit(episode)(jax.random.PRNGKey(seed)))
    emit({"env": name, "episodes": num_envs, "episode_length": env.raw.episode_length, "seed": seed,
          "mean": round(float(total.mean()), 2), "max": round(float(total.max()), 2),
          "share_with_reward": round(float((total > 0).mean()), 3)}, out)


if __name__ == "__main__":
    main()
