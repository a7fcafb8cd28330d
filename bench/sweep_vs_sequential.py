"""K seeds as one vmapped program against the same K runs one after another, on this machine.

    python bench/sweep_vs_sequential.py                                    # SAC, dmc/CartpoleSwingup, 8 seeds
    python bench/sweep_vs_sequential.py --env toy/Pendulum --hidden 64 --steps 20000
    python bench/sweep_vs_sequential.py --cpu-devices 2     # the K seeds sharded over 2 host devices (one per core)
    python bench/sweep_vs_sequential.py --out bench/results/sweep_vs_sequential.jsonl   # + provenance, appended
    python bench/sweep_vs_sequential.py --table bench/results/sweep_vs_sequential.jsonl # the docs' table

Both sides use the same compiled-program builder; the sequential side compiles its program once and reuses it
for every seed (the most favourable case for it: separate `jaxrl train` processes would also pay start-up and a
compilation-cache load each). Prints one JSON line: wall seconds of each side (compile reported apart), the
ratio, and every seed's final eval return on both sides with their largest difference.

``--cpu-devices N`` splits the host into N XLA devices (``--xla_force_host_platform_device_count``) and shards
the vmapped side's member axis over them (``jaxrl.sharding``), as `jaxrl train --seeds K` does on several
devices; the sequential side runs on one device. On a CPU whose cores one seed's program cannot keep busy, this
is what runs members in parallel.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

if "--cpu-devices" in sys.argv:  # must be set before JAX starts
    count = sys.argv[sys.argv.index("--cpu-devices") + 1]
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={count}")

import jax
import numpy as np

import envs
from agents import get_agent
from jaxrl import sharding
from jaxrl.loop import default_loop_config, make_train


def compiled(trainer, cfg, num_members, mesh=None):
    """(compiled run_chunk for ``num_members`` members, compile seconds)."""
    t0 = time.perf_counter()
    state = trainer.init_members(list(range(num_members)), [cfg] * num_members, mesh)
    return trainer.run_chunk.lower(state).compile(), time.perf_counter() - t0


def train(trainer, run_chunk, cfg, seeds, chunks, mesh=None):
    """(final eval returns [K], run seconds, init included) of one program over ``seeds``."""
    t0 = time.perf_counter()
    state = trainer.init_members(seeds, [cfg] * len(seeds), mesh)
    for _ in range(chunks):
        state, metrics = run_chunk(state)
    returns = jax.device_get(metrics["eval/return"])
    return returns, time.perf_counter() - t0


def table(path: str) -> str:
    """The docs' table of a results file: one row per measured setting."""
    lines = ["| setting | vmapped run | sequential run | ratio (run only) | ratio counting one compile per sequential "
             "run | largest final-return difference (returns) |", "|---|---|---|---|---|---|"]
    for line in open(path):
        r = json.loads(line)
        setting = (f"{r['agent']}, `{r['env']}`, {r['seeds']} seeds, "
                   f"{r['num_envs']} env{'s' if r['num_envs'] > 1 else ''}, 2×{r['hidden']}, "
                   f"batch {r['batch_size']}, {r['env_steps'] // 1000}k steps")
        if r["cpu_devices"] > 1:
            setting += f", members sharded over {r['cpu_devices']} host devices"
        both = r["final_eval_vmapped"] + r["final_eval_sequential"]
        lines.append(f"| {setting} | {r['vmapped_run_s']:.1f} s | {r['sequential_run_s']:.1f} s | "
                     f"{r['ratio_run']:.2f}× | {r['ratio_with_compile_per_run']:.2f}× | "
                     f"{r['max_abs_diff']:.1f} ({min(both):.0f} … {max(both):.0f}) |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agent", default="sac")
    parser.add_argument("--env", default="dmc/CartpoleSwingup")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=256, help="width of the 2-layer networks (SAC/TD3 names)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--cpu-devices", type=int, default=1, help="host devices to shard the members over")
    parser.add_argument("--eval-every", type=int, default=10_000)
    parser.add_argument("--out", default=None, help="also append the JSON line (with provenance) to this file")
    parser.add_argument("--table", default=None, metavar="JSONL", help="print the docs' table of a results file")
    args = parser.parse_args()
    if args.table:
        print(table(args.table))
        return
    agent = get_agent(args.agent)
    loop = default_loop_config(agent, steps=args.steps, num_envs=args.num_envs, eval_every=args.eval_every,
                               buffer_size=max(args.steps, 10_000))
    cfg = agent.Config(hidden_sizes=(args.hidden, args.hidden), batch_size=args.batch_size)
    trainer = make_train(agent, envs.make(args.env, loop.num_envs), envs.make(args.env, loop.num_eval_envs), loop,
                         cfg)
    chunks = math.ceil(args.steps / trainer.schedule.chunk_env_steps)
    seeds = list(range(args.seeds))

    mesh = sharding.member_mesh() if len(jax.devices()) > 1 else None
    vmapped_chunk, compile_vmapped = compiled(trainer, cfg, args.seeds, mesh)
    together, run_vmapped = train(trainer, vmapped_chunk, cfg, seeds, chunks, mesh)
    single = sharding.member_mesh(jax.devices()[:1])
    single_chunk, compile_one = compiled(trainer, cfg, 1, single)  # compiled once, reused by every seed
    sequential, run_sequential = [], 0.0
    for seed in seeds:
        returns, run_s = train(trainer, single_chunk, cfg, [seed], chunks, single)
        sequential.append(float(returns[0]))
        run_sequential += run_s
    from devtime import emit

    emit({
        "agent": args.agent, "env": args.env, "seeds": args.seeds,
        "env_steps": chunks * trainer.schedule.chunk_env_steps,
        "num_envs": args.num_envs, "hidden": args.hidden, "batch_size": args.batch_size,
        "cpu_devices": len(jax.devices()),
        "device": jax.devices()[0].device_kind,
        "vmapped_run_s": round(run_vmapped, 2), "sequential_run_s": round(run_sequential, 2),
        "ratio_run": round(run_sequential / run_vmapped, 2),
        "vmapped_compile_s": round(compile_vmapped, 2), "sequential_compile_s_once": round(compile_one, 2),
        "ratio_with_compile_per_run": round((run_sequential + args.seeds * compile_one)
                                            / (run_vmapped + compile_vmapped), 2),
        "final_eval_vmapped": [round(float(x), 2) for x in together],
        "final_eval_sequential": [round(x, 2) for x in sequential],
        "max_abs_diff": round(float(np.max(np.abs(np.asarray(together) - np.asarray(sequential)))), 4),
    }, args.out)


if __name__ == "__main__":
    main()
