"""One run's env batch and replay buffer split over devices (``loop.env_shards``, ``--shard-envs``) against the same
run's shards on one device: env steps/s and the largest difference of the trained parameters.

    python bench/data_parallel.py                                  # SAC, toy/Pendulum, 2 forced host devices
    python bench/data_parallel.py --env dmc/CartpoleSwingup --num-envs 64 --cpu-devices 2
    python bench/data_parallel.py --out bench/results/data_parallel.jsonl       # + provenance, appended

Both sides run the identical program (the stratified draw of ``env_shards`` = the device count); the split side
places it with ``jaxrl.sharding.run_mesh`` so each device steps its own envs, stores and samples its own
transitions, and the gradients are all-reduced. ``--cpu-devices N`` splits this CPU into N XLA devices
(``--xla_force_host_platform_device_count``): on a 2-core machine that is a check that the split run trains the
same numbers, not a speed figure (the devices share the cores). On a machine with several accelerators leave it out:
JAX's own devices are used and the figure is the real one. Prints one JSON line per side and the ratio.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

if "--cpu-devices" in sys.argv:  # must be set before JAX starts
    count = sys.argv[sys.argv.index("--cpu-devices") + 1]
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={count}")

import jax
import numpy as np

import envs
from agents import get_agent
from jaxrl import sharding
from jaxrl.loop import default_loop_config, make_train


def measure(trainer, cfg, chunks: int, mesh=None) -> tuple[dict, object]:
    """({compile_s, env_steps_per_s (the chunks after the first), final eval return}, final agent state)."""
    t0 = time.perf_counter()
    state = trainer.init_members([0], [cfg], mesh)
    run_chunk = trainer.run_chunk.lower(state).compile()
    compile_s = time.perf_counter() - t0
    state, metrics = run_chunk(state)  # the first chunk also fills the warm-up
    jax.block_until_ready(state)
    t0 = time.perf_counter()
    for _ in range(chunks - 1):
        state, metrics = run_chunk(state)
    jax.block_until_ready(state)
    seconds = time.perf_counter() - t0
    steps = (chunks - 1) * trainer.schedule.chunk_env_steps
    return {"compile_s": round(compile_s, 1), "env_steps_per_s": round(steps / seconds, 1),
            "final_eval_return": float(np.asarray(metrics["eval/return"]).ravel()[0])}, jax.device_get(state.agent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agent", default="sac")
    parser.add_argument("--env", default="toy/Pendulum")
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--steps", type=int, default=8000)
    parser.add_argument("--eval-every", type=int, default=2000)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--cpu-devices", type=int, default=None)
    parser.add_argument("--out")
    args = parser.parse_args()
    devices = len(jax.devices())
    if devices < 2:
        parser.error(f"JAX sees {devices} device; pass --cpu-devices 2 (or run on a machine with several)")
    agent = get_agent(args.agent)
    loop = default_loop_config(agent, {}, steps=args.steps, num_envs=args.num_envs, num_eval_envs=4,
                               eval_every=args.eval_every, learning_starts=args.eval_every // 2,
                               env_shards=devices)
    cfg = agent.Config(hidden_sizes=(args.hidden, args.hidden)) if hasattr(agent.Config, "hidden_sizes") \
        else agent.Config()
    trainer = make_train(agent, envs.make(args.env, args.num_envs), envs.make(args.env, 4), loop, cfg)
    chunks = args.steps // trainer.schedule.chunk_env_steps
    one, params_one = measure(trainer, cfg, chunks)
    split, params_split = measure(trainer, cfg, chunks, sharding.run_mesh(env_shards=devices))
    difference = max(float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))
                     for a, b in zip(jax.tree.leaves(params_one), jax.tree.leaves(params_split), strict=True)
                     if np.issubdtype(np.asarray(a).dtype, np.floating))
    row = {"bench": "data_parallel", "agent": args.agent, "env": args.env, "num_envs": args.num_envs,
           "devices": devices, "device_kind": jax.devices()[0].device_kind, "forced_host_devices": args.cpu_devices,
           "one_device": one, "split": split, "ratio": round(split["env_steps_per_s"] / one["env_steps_per_s"], 2),
           "max_param_difference": difference}
    if args.out:
        from jaxrl import provenance

        row["provenance"] = provenance.stamp()
        with open(args.out, "a") as f:
            f.write(json.dumps(row) + "\n")
    print(json.dumps(row))


if __name__ == "__main__":
    main()
