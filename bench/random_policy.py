"""A uniformly random policy's return on an env: ``python bench/random_policy.py dmc/BallInCup [--envs 64]``.

One jitted episode of the env's own length for every env in the batch; prints the mean and max return and the
fraction of episodes that collect any reward (whether exploration can meet the reward at all)."""
from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

import envs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env")
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    env = envs.make(args.env, args.envs)

    def episode(key):
        def step(carry, k):
            state, total = carry
            action = jax.random.uniform(k, (args.envs, env.spec.action_size), minval=-1, maxval=1)
            state, out = env.step(state, action)
            return (state, total + out.reward), None

        reset_key, key = jax.random.split(key)
        carry = (env.reset(reset_key), jnp.zeros(args.envs))
        return jax.lax.scan(step, carry, jax.random.split(key, env.raw.episode_length))[0][1]

    total = np.asarray(jax.jit(episode)(jax.random.PRNGKey(args.seed)))
    print(f"{args.env}: random policy, {args.envs} episodes x {env.raw.episode_length} steps: return mean "
          f"{total.mean():.1f}, max {total.max():.1f}, episodes with any reward {(total > 0).mean():.2f}")


if __name__ == "__main__":
    main()
