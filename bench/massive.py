"""Throughput of the massively parallel recipe: FastTD3 and FastSAC at 64, 256 and 1024 envs.

    python bench/massive.py                                   # CPU: reduced widths and batch (printed)
    python bench/massive.py --full                            # the official widths and batch (accelerators)
    python bench/massive.py --agents fasttd3 --envs dmc/CheetahRun --num-envs 1024 --iters 20

For each (agent, env, num_envs) the two halves of a batched step are jitted and timed on their own, from the
engine's own phases (``jaxrl.loop``): ``act_and_collect`` (policy actions for every env, one env step, the buffer
write) scanned over ``--iters`` batched steps, and ``learn`` (sample -> prepare -> update) for the recipe's updates
per batched step (FastTD3 2, FastSAC 8; 8 for FastTD3 on Go1, its per-task value). Prints one JSON line per
setting: env steps/s of collection alone, ms per update, updates/s, the collect / update split of a batched
step, and the env steps/s of the two together (collect + updates, what a training run's chunk does between
evaluations). Compile time is reported apart and excluded from every rate.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax
import jax.numpy as jnp

import envs
from agents import get_agent
from jaxrl import loop as loop_lib

# CPU: critics and actors at a quarter of the official widths and batch 1024 (the official 32768 / 8192 at 1024
# envs would take seconds per update on 2 cores).
REDUCED = {"fasttd3": dict(critic_hidden_sizes=(256, 128, 64), actor_hidden_sizes=(128, 64, 32), batch_size=1024),
           "fastsac": dict(critic_hidden_sizes=(192, 96, 48), actor_hidden_sizes=(128, 64, 32), batch_size=1024)}
UPDATES_PER_BATCHED_STEP = {"fasttd3": 2, "fastsac": 8}


def updates_per_batched_step(agent: str, env: str) -> int:
    return 8 if agent == "fasttd3" and env.startswith("locomotion/Go1") else UPDATES_PER_BATCHED_STEP[agent]


def timed(fn, *args, repeats: int):
    """(seconds of the first call: compile + one run, mean seconds of the next ``repeats`` calls)."""
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(repeats):
        out = jax.block_until_ready(fn(*args))
    return first, (time.perf_counter() - t0) / repeats, out


def measure(agent_name: str, env_name: str, num_envs: int, iters: int, full: bool) -> dict:
    agent = get_agent(agent_name)
    cfg = agent.Config() if full else agent.Config(**REDUCED[agent_name])
    updates = updates_per_batched_step(agent_name, env_name)
    loop = loop_lib.LoopConfig(num_envs=num_envs, num_eval_envs=1, updates_per_step=updates / num_envs,
                               buffer_size=max(num_envs * (iters + 2), cfg.batch_size * 2), learning_starts=0,
                               warmup="policy", normalize_obs=True, steps=10 * num_envs, eval_every=num_envs)
    program = loop_lib.describe(agent, envs.make(env_name, num_envs), envs.make(env_name, 1), loop, cfg)
    state = loop_lib.init(program, 0, 1)
    episodes = loop_lib.Episodes(jnp.zeros(1), jnp.zeros(1))

    @jax.jit
    def collect(state):
        keys = jax.random.split(state.key[0], iters)
        (state, _), _ = jax.lax.scan(lambda c, k: loop_lib.act_and_collect(program, c, k[None]), (state, episodes),
                                     keys)
        return state

    collect_compile, collect_s, state = timed(collect, state, repeats=2)
    one = jax.tree.map(lambda x: x[0] if x.ndim else x, state)

    @jax.jit
    def learn(agent_state, hparams, buffer, normalizers, key):
        return loop_lib.learn(program, agent_state, hparams, buffer, normalizers, key, updates)

    learn_compile, learn_s, _ = timed(learn, one.agent, one.hparams, one.buffer, one.normalizers, one.key, repeats=3)
    step_collect_s = collect_s / iters
    iteration_s = step_collect_s + learn_s
    return {"agent": agent_name, "env": env_name, "num_envs": num_envs, "device": jax.devices()[0].platform,
            "widths": "official" if full else "reduced", "batch_size": cfg.batch_size,
            "updates_per_batched_step": updates,
            "collect_env_steps_per_s": round(num_envs / step_collect_s, 1),
            "ms_per_update": round(1000 * learn_s / updates, 2), "updates_per_s": round(updates / learn_s, 1),
            "collect_share": round(step_collect_s / iteration_s, 3),
            "train_env_steps_per_s": round(num_envs / iteration_s, 1),
            "compile_s": {"collect": round(collect_compile - collect_s, 1), "learn": round(learn_compile - learn_s, 1)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", nargs="+", default=["fasttd3", "fastsac"])
    parser.add_argument("--envs", nargs="+", default=["dmc/CheetahRun", "locomotion/Go1JoystickFlatTerrain"])
    parser.add_argument("--num-envs", nargs="+", type=int, default=[64, 256, 1024])
    parser.add_argument("--iters", type=int, default=4, help="batched env steps per timed collection")
    parser.add_argument("--full", action="store_true", help="the official widths and batch size")
    parser.add_argument("--out", default=None, help="also append the JSON lines to this file")
    args = parser.parse_args()
    for env_name in args.envs:
        for agent_name in args.agents:
            for num_envs in args.num_envs:
                row = measure(agent_name, env_name, num_envs, args.iters, args.full)
                line = json.dumps(row)
                print(line, flush=True)
                if args.out:
                    with open(args.out, "a") as f:
                        f.write(line + "\n")


if __name__ == "__main__":
    main()
