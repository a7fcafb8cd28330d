"""Where a run's compile time goes: each phase of the training chunk compiled alone, and the whole chunk.

    python bench/compile_time.py                                  # SAC on dmc/CartpoleSwingup, the default run
    python bench/compile_time.py --env dmc/CheetahRun
    python bench/compile_time.py --agent td3 --env brax/inverted_pendulum

The default run's settings (the suite's loop defaults, the agent's config) as ``jaxrl train`` resolves them.
Each phase is one of ``jaxrl.loop``'s functions, jitted on its own with one seed's arguments: ``collect`` (one
batched env step into the buffer), ``learn`` (one block's updates), ``evaluate_policy`` (one evaluation of
num_eval_envs episodes), and ``run_chunk`` (all of them composed: what a run compiles). Prints one JSON line per
phase: trace, lower (to StableHLO) and XLA compile seconds. The persistent compilation cache is not set up here
(``experiments.train.setup_jax`` is not called), so every figure is a cold compile.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax

from experiments import rundir
from experiments.train import make_envs
from jaxrl import loop as loop_lib


def timed_compile(fn, *args) -> dict[str, float]:
    t0 = time.perf_counter()
    traced = jax.jit(fn).trace(*args)
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    lowered.compile()
    t3 = time.perf_counter()
    return {"trace_s": round(t1 - t0, 2), "lower_s": round(t2 - t1, 2), "compile_s": round(t3 - t2, 2),
            "total_s": round(t3 - t0, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agent", default="sac")
    parser.add_argument("--env", default="dmc/CartpoleSwingup")
    args = parser.parse_args()
    resolved = rundir.resolve(args.agent, tables={"run": {"env": args.env}})
    env, eval_env = make_envs(resolved.run, resolved.loop)
    program = loop_lib.describe(resolved.agent, env, eval_env, resolved.loop, resolved.agent_cfg)
    state = loop_lib.init(program, 0, 1)
    one = jax.tree.map(lambda x: x[0] if x.ndim else x, state)  # one seed's leaves; counters stay scalars
    action = jax.numpy.zeros((program.loop.num_envs, program.spec.action_size))
    phases = {
        "collect": (functools.partial(loop_lib.collect, program), one.env, one.buffer, one.normalizers, action,
                    one.hparams),
        "learn": (lambda *a: loop_lib.learn(program, *a, program.schedule.block_updates), one.agent, one.hparams,
                  one.buffer, one.normalizers, one.key),
        "evaluate_policy": (functools.partial(loop_lib.evaluate_policy, program), one.agent, one.hparams,
                            one.normalizers, one.key),
        "run_chunk": (functools.partial(loop_lib.run_chunk, program), state),
    }
    for name, (fn, *fn_args) in phases.items():
        print(json.dumps({"agent": args.agent, "env": args.env, "phase": name, **timed_compile(fn, *fn_args)}),
              flush=True)


if __name__ == "__main__":
    main()
