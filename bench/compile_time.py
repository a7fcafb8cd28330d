"""Where a run's compile time goes: each phase of the training chunk compiled alone, and the whole chunk.

    python bench/compile_time.py                                  # SAC on dmc/CartpoleSwingup, the default run
    python bench/compile_time.py --env dmc/CheetahRun
    python bench/compile_time.py --agent td3 --env brax/inverted_pendulum
    python bench/compile_time.py --agents sac td3 tqc --out bench/results/compile_time.jsonl  # lines + provenance
    python bench/compile_time.py --table bench/results/compile_time.jsonl                 # the docs' table

The default run's settings (the suite's loop defaults, the agent's config) as ``jaxrl train`` resolves them.
Each phase is one of ``jaxrl.loop``'s functions, jitted on its own with one seed's arguments: ``collect`` (one
batched env step into the buffer), ``learn`` (one block's updates), ``evaluate_policy`` (one evaluation of
num_eval_envs episodes), ``run_chunk`` (all of them composed), ``initial_state`` (a fresh run's first state: env
resets, network initialisation, the empty buffer), and ``start``: what a fresh ``jaxrl train`` compiles before its
first step, ``initial_state`` and ``run_chunk`` traced, lowered and compiled together by ``jaxrl.loop.compile_start``
(their XLA compiles in two threads), in wall seconds. Prints one JSON line per phase: trace, lower (to StableHLO)
and XLA compile seconds (``start``: the total). The persistent compilation cache is not set up here
(``experiments.train.setup_jax`` is not called), so every figure is a cold compile. With ``--out`` each line
is also appended to a results file with ``provenance`` (the command, date, commit and environment block).
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax
from devtime import emit

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


PHASES = ("collect", "learn", "evaluate_policy", "run_chunk", "initial_state", "start")


def table(path: str) -> str:
    """The docs' table of a results file: per (agent, env), each phase's trace / lower / XLA compile seconds."""
    rows = [json.loads(line) for line in open(path)]
    runs = list(dict.fromkeys((r["agent"], r["env"]) for r in rows))
    lines = ["| agent | env | " + " | ".join(f"`{p}`" for p in PHASES) + " |", "|---|---|" + "---|" * len(PHASES)]
    for agent, env in runs:
        phase = {r["phase"]: r for r in rows if (r["agent"], r["env"]) == (agent, env)}
        cells = ["" if p not in phase else f"{phase[p]['total_s']:.1f}" if phase[p].get("trace_s") is None else
                 f"{phase[p]['trace_s']:.1f} / {phase[p]['lower_s']:.1f} / {phase[p]['compile_s']:.1f}"
                 for p in PHASES]
        lines.append(f"| {agent} | `{env}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def phases_of(agent: str, env_name: str) -> dict:
    resolved = rundir.resolve(agent, tables={"run": {"env": env_name}})
    env, eval_env = make_envs(resolved.run, resolved.loop)
    program = loop_lib.describe(resolved.agent, env, eval_env, resolved.loop, resolved.agent_cfg)
    state = loop_lib.init(program, 0, 1)
    one = jax.tree.map(lambda x: x[0] if x.ndim else x, state)  # one seed's leaves; counters stay scalars
    action = jax.numpy.zeros((program.loop.num_envs, program.spec.action_size))
    return {
        "collect": (functools.partial(loop_lib.collect, program), one.env, one.buffer, one.normalizers, action,
                    one.hparams),
        "learn": (lambda *a: loop_lib.learn(program, *a, program.schedule.block_updates), one.agent, one.hparams,
                  one.buffer, one.normalizers, one.key),
        "evaluate_policy": (functools.partial(loop_lib.evaluate_policy, program), one.agent, one.hparams,
                            one.normalizers, one.key),
        "run_chunk": (functools.partial(loop_lib.run_chunk, program), state),
        "initial_state": (program.initial_state, *loop_lib.initial_state_program(program, [0], [program.agent_cfg])[1]),
    }


def timed_start(agent: str, env_name: str) -> dict[str, float]:
    """Wall seconds of ``compile_start`` on a program traced afresh (a new ``make_train``: nothing cached)."""
    resolved = rundir.resolve(agent, tables={"run": {"env": env_name}})
    env, eval_env = make_envs(resolved.run, resolved.loop)
    trainer = loop_lib.make_train(resolved.agent, env, eval_env, resolved.loop, resolved.agent_cfg)
    t0 = time.perf_counter()
    initial_state, _ = loop_lib.compile_start(trainer, [0], [resolved.agent_cfg])
    jax.block_until_ready(initial_state())
    return {"trace_s": None, "lower_s": None, "compile_s": None, "total_s": round(time.perf_counter() - t0, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", "--agent", nargs="+", default=["sac"])
    parser.add_argument("--env", default="dmc/CartpoleSwingup")
    parser.add_argument("--out", default=None, help="also append the JSON lines (with provenance) to this file")
    parser.add_argument("--table", default=None, metavar="JSONL", help="print the docs' table of a results file")
    args = parser.parse_args()
    if args.table:
        print(table(args.table))
        return
    for agent in args.agents:
        device = jax.devices()[0].device_kind
        jax.clear_caches()  # each figure traces afresh: no phase reuses another's traces of the env functions
        emit({"agent": agent, "env": args.env, "phase": "start", "device": device, **timed_start(agent, args.env)},
             args.out)
        for name, (fn, *fn_args) in phases_of(agent, args.env).items():
            jax.clear_caches()
            emit({"agent": agent, "env": args.env, "phase": name, "device": device, **timed_compile(fn, *fn_args)},
                 args.out)

if __name__ == "__main__":
    main()
