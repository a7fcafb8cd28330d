"""TD-MPC2 planning throughput: agent decisions per second when all envs plan in one vmapped program, against
the same decisions made one env at a time from a Python loop (how the official code and its JAX port plan).

    python bench/planning_throughput.py                       # default 5M model, num_envs 1 16 64
    python bench/planning_throughput.py --small --num-envs 1 16

Prints one JSON line per num_envs: decisions/s batched, decisions/s looped (one jitted single-env call per env),
and the ratio. Same model, planner settings and keys' shapes on both sides; compile time excluded.
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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-envs", nargs="+", type=int, default=[1, 16, 64])
    parser.add_argument("--obs-size", type=int, default=5)
    parser.add_argument("--action-size", type=int, default=1)
    parser.add_argument("--small", action="store_true", help="a 64-wide model and 128 samples (CPU smoke run)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    spec = EnvSpec(obs_size=args.obs_size, action_size=args.action_size, decisions_per_episode=1000,
                   can_terminate=False)
    cfg = tdmpc2.Config()
    if args.small:
        cfg = tdmpc2.Config(latent_dim=64, hidden_dim=64, encoder_dim=64, num_samples=128, num_elites=16,
                            num_pi_trajs=8, iterations=3)
    state = tdmpc2.init(jax.random.PRNGKey(0), spec, cfg)
    act = jax.jit(tdmpc2.act, static_argnums=(3, 4))
    for n in args.num_envs:
        obs = jax.random.normal(jax.random.PRNGKey(1), (n, spec.obs_size))
        carry = tdmpc2.init_carry(n, spec, cfg)
        key = jax.random.PRNGKey(2)
        batched = per_second(lambda: act(state, obs, key, cfg, False, carry)[0], args.repeats) * n  # noqa: B023 (timed here)
        one_carry = tdmpc2.init_carry(1, spec, cfg)

        def looped():
            return [act(state, obs[i:i + 1], key, cfg, False, one_carry)[0] for i in range(n)]  # noqa: B023 (timed here)

        loop_rate = per_second(looped, max(1, args.repeats // 2)) * n
        print(json.dumps({"num_envs": n, "decisions_per_s_batched": round(batched, 2),
                          "decisions_per_s_python_loop": round(loop_rate, 2), "ratio": round(batched / loop_rate, 2),
                          "model": "small" if args.small else "5M", "device": jax.devices()[0].device_kind}),
              flush=True)


if __name__ == "__main__":
    main()
