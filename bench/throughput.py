"""Training throughput of every agent at 1, 128 and 1024 envs: one compiled training chunk, timed after compile.

    python bench/throughput.py                                   # every agent, dmc/CheetahRun, 1 128 1024 envs
    python bench/throughput.py --agents sac tdmpc2 --num-envs 16 --env toy/Pendulum
    python bench/throughput.py --updates-per-step 1              # one ratio for every agent instead of its own

Each (agent, num_envs) is the run ``jaxrl train --agent A --env ENV --num-envs N`` resolves (the suite's loop
defaults < the agent's defaults and config; default widths), with what a throughput figure must not include
switched off: no pretraining burst (TD-MPC2's ``pretrain_updates``), learning from the third batched step on
(``learning_starts`` 0), one evaluation env. An update-to-data ratio that is not a whole number or a whole
fraction of updates per batched step at N envs (DSAC-T's 1/20 per env step at 128 envs is 6.4 per batched step)
is rounded to the nearest one that is, and the row says which ratio ran.

The timed program is the training part of the engine's chunk (``jaxrl.loop.block`` scanned: act, step the envs,
write the buffer, update), without its closing evaluation. A chunk has at least ``--target-iters`` batched steps
(default 256 / N, at least 1), in whole blocks. It is compiled ahead of time (the compile time is reported
apart: trace, lower and XLA compile of the initial state and of the chunk, the two XLA compiles in parallel
threads), run until learning has happened in all its blocks (warm-up), then run again until ``--min-seconds`` have
passed (at most ``--max-repeats`` times). Prints one JSON line per setting: env steps/s and updates/s of training,
milliseconds per batched step, the ratio and batch size, compile and warm-up seconds.

Several processes may run at once (bench/gpu_suite.sh): the compiles overlap, and everything that runs on the
device holds ``bench/devtime.py: device_lock``. With ``--queue FILE`` a process takes its settings one at a time
from the top of FILE (lines ``AGENT NUM_ENVS``, shared by the processes, popped under a lock) instead of
``--agents`` x ``--num-envs``, so the first lines are measured first whatever each costs. With
``$JAXRL_BENCH_DEADLINE`` set, a setting taken with less than ``--min-seconds-left`` (or than 1.2 x the previous
setting's time in this process) to go prints a line with ``"skipped"`` instead.
"""
from __future__ import annotations

import argparse
import dataclasses
import fcntl
import functools
import math
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax
import jax.numpy as jnp

from bench.devtime import compile_ahead, device_lock, emit, out_of_time, seconds_left
from jaxrl import loop as loop_lib

AGENTS = ("sac", "td3", "dsac_t", "tqc", "simbav2", "tdmpc2", "fasttd3", "fastsac")


def valid_ratio(updates_per_step: float, num_envs: int) -> float:
    """The nearest updates-per-transition ratio whose updates per batched step of ``num_envs`` envs are a whole
    number or one over a whole number (what ``jaxrl.loop`` accepts)."""
    per_batched_step = updates_per_step * num_envs
    if per_batched_step >= 1:
        return max(1, round(per_batched_step)) / num_envs
    return 1 / (max(1, round(1 / per_batched_step)) * num_envs)


def resolve(agent_name: str, env_name: str, num_envs: int, updates_per_step: float | None):
    from experiments import rundir

    base = rundir.resolve(agent_name, tables={"run": {"env": env_name}}, env=env_name)
    ratio = base.loop.updates_per_step if updates_per_step is None else updates_per_step
    loop = dataclasses.replace(base.loop, num_envs=num_envs, num_eval_envs=1, learning_starts=0, pretrain_updates=0,
                               updates_per_step=valid_ratio(ratio, num_envs), steps=2**30, eval_every=2**29)
    return base, loop, ratio


def measure(agent_name: str, env_name: str, num_envs: int, args) -> dict:
    from experiments.train import make_envs

    t_setup = time.perf_counter()
    base, loop, asked_ratio = resolve(agent_name, env_name, num_envs, args.updates_per_step)
    env, eval_env = make_envs(base.run, loop)
    program = loop_lib.describe(base.agent, env, eval_env, loop, base.agent_cfg)
    schedule = program.schedule
    target_iters = args.target_iters or max(1, math.ceil(256 / num_envs))
    blocks = max(1, math.ceil(target_iters / schedule.block_iters))
    names = program.metric_names

    def chunk(state):  # jaxrl.loop.run_chunk without its evaluation
        zeros = jnp.zeros((1,), jnp.float32)
        sums = loop_lib.ChunkSums({n: zeros for n in names}, jnp.zeros((), jnp.float32),
                                  loop_lib.Episodes(zeros, zeros), {n: jnp.full((1,), -1, jnp.int32) for n in names})
        (state, sums), _ = jax.lax.scan(functools.partial(loop_lib.block, program), (state, sums), None,
                                        length=blocks)
        return state, sums.learning_blocks

    base.agent.check_config(base.agent_cfg)
    keys = jnp.stack([jax.random.PRNGKey(0)])
    hparams = loop_lib.stack_configs([base.agent_cfg], base.agent_cfg)
    state_shape = jax.eval_shape(program.initial_state, keys, hparams)
    setup_s = time.perf_counter() - t_setup
    t0 = time.perf_counter()
    (init_c, init_compile), (chunk_c, chunk_compile) = compile_ahead((program.initial_state, (keys, hparams)),
                                                                     (chunk, (state_shape,), 0))
    compile_wall = time.perf_counter() - t0
    with device_lock() as waited:
        t0 = time.perf_counter()
        state = jax.block_until_ready(init_c(keys, hparams))
        warmups = 0
        while True:  # until a whole chunk has learned in every block
            state, learned = jax.block_until_ready(chunk_c(state))
            warmups += 1
            if int(learned) == blocks or warmups >= 3:
                break
        warmup_s = time.perf_counter() - t0
        times = []
        while not times or (sum(times) < args.min_seconds and len(times) < args.max_repeats):
            t0 = time.perf_counter()
            state, learned = jax.block_until_ready(chunk_c(state))
            times.append(time.perf_counter() - t0)
        del state
    chunk_s = sum(times) / len(times)
    iters = blocks * schedule.block_iters
    env_steps = iters * schedule.env_steps_per_iter
    updates = blocks * schedule.block_updates
    cfg = base.agent_cfg
    return {"bench": "throughput", "agent": agent_name, "env": env_name, "num_envs": num_envs,
            "device": jax.devices()[0].platform, "device_kind": jax.devices()[0].device_kind,
            "batch_size": getattr(cfg, "batch_size", None), "action_repeat": loop.action_repeat,
            "updates_per_step": loop.updates_per_step, "updates_per_step_asked": asked_ratio,
            "updates_per_batched_step": schedule.block_updates / schedule.block_iters,
            "chunk_batched_steps": iters, "chunk_env_steps": env_steps, "chunk_updates": updates,
            "learning_blocks": int(learned), "blocks": blocks, "repeats": len(times),
            "train_env_steps_per_s": round(env_steps / chunk_s, 1), "updates_per_s": round(updates / chunk_s, 1),
            "ms_per_batched_step": round(1000 * chunk_s / iters, 3),
            "compile_s": {"init": round(sum(init_compile), 1), "chunk": round(sum(chunk_compile), 1)},
            "compile_parts_s": {"init": init_compile, "chunk": chunk_compile}, "compile_wall_s": round(compile_wall, 1),
            "setup_s": round(setup_s, 1), "warmup_s": round(warmup_s, 2), "warmup_chunks": warmups,
            "lock_wait_s": round(waited, 1)}


def pop_task(path: str) -> tuple[str, int] | None:
    """The first ``AGENT NUM_ENVS`` line of the queue file, removed from it (None when it is empty)."""
    with open(path, "r+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        lines = [line for line in f.read().splitlines() if line.strip()]
        if not lines:
            return None
        f.seek(0)
        f.truncate()
        f.write("".join(line + "\n" for line in lines[1:]))
        agent, num_envs = lines[0].split()
        return agent, int(num_envs)


def tasks(args):
    if args.queue is None:
        yield from ((agent, num_envs) for agent in args.agents for num_envs in args.num_envs)
        return
    while (task := pop_task(args.queue)) is not None:
        yield task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", nargs="+", default=list(AGENTS))
    parser.add_argument("--env", default="dmc/CheetahRun")
    parser.add_argument("--num-envs", nargs="+", type=int, default=[1024, 128, 1])
    parser.add_argument("--updates-per-step", type=float, default=None,
                        help="updates per env step (transition) for every agent; default: each agent's own")
    parser.add_argument("--target-iters", type=int, default=None, help="batched steps per timed chunk, at least "
                        "(rounded up to whole blocks); default: 256 / num_envs, at least 1")
    parser.add_argument("--min-seconds", type=float, default=1.0, help="time chunks until this much has passed")
    parser.add_argument("--max-repeats", type=int, default=5)
    parser.add_argument("--queue", default=None, help="take 'AGENT NUM_ENVS' lines from the top of this file "
                        "(shared with other processes) instead of --agents x --num-envs")
    parser.add_argument("--min-seconds-left", type=float, default=0.0,
                        help="with $JAXRL_BENCH_DEADLINE: skip a setting taken with less time than this left")
    parser.add_argument("--out", default=None, help="also append the JSON lines to this file")
    args = parser.parse_args()
    last_s = 0.0
    for agent_name, num_envs in tasks(args):
        where = {"bench": "throughput", "agent": agent_name, "env": args.env, "num_envs": num_envs}
        if out_of_time(max(args.min_seconds_left, 1.2 * last_s)):
            took = f" (the previous setting here took {last_s:.0f} s)" if last_s else ""
            emit({**where, "skipped": f"time budget: {seconds_left():.0f} s left when taken{took}"}, args.out)
            continue
        t0 = time.perf_counter()
        try:
            row = measure(agent_name, args.env, num_envs, args)
        except Exception as e:  # noqa: BLE001 - one failed setting is a line, the others still run
            traceback.print_exc()
            row = {**where, "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]}
        last_s = time.perf_counter() - t0
        emit({**row, "wall_s": round(last_s, 1)}, args.out)


if __name__ == "__main__":
    main()
