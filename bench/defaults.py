"""Learning quality of every agent's out-of-the-box settings: agents x cheap tasks x seeds, one vmapped program each.

    python bench/defaults.py                                     # every agent and task below, 3 seeds, 20k steps
    python bench/defaults.py --agents sac td3 --tasks brax/inverted_pendulum dmc/CartpoleBalance
    python bench/defaults.py --label norm --override loop.normalize_obs=true   # a candidate default, labelled
    python bench/defaults.py --out bench/results/defaults.jsonl              # append the JSON lines there too

What a new user runs: ``jaxrl train --agent A --env E`` with nothing else but the budget (``--steps``,
``--num-envs``) and ``--seeds``, through the same ``experiments.train.train`` as the CLI. SAC, TD3 and DSAC-T run
at their defaults; TQC, SimbaV2 and TD-MPC2 at the reduced widths in ``REDUCED`` (their defaults cost 15-110 ms
per update on a 2-core CPU). DSAC-T keeps its official schedule (``Agent.loop_defaults``: 20 envs, 1 update per
20 env steps, 10k warm-up), so --num-envs does not apply to it.

Prints one JSON line per (agent, task): final and best deterministic eval return per seed (10 eval episodes,
every steps / 10 env steps), the fraction of seeds whose final return reaches the task's ``THRESHOLD``, wall
and compile seconds.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TASKS = ("toy/Pendulum", "brax/inverted_pendulum", "brax/inverted_double_pendulum", "dmc/CartpoleBalance",
         "dmc/PendulumSwingup", "dmc/CartpoleSwingup")
# A final return at or above this counts as "learned": about 90 % of what a solved policy scores on the
# balance tasks (max 1000 per episode), a clearly working swing-up elsewhere.
THRESHOLD = {"toy/Pendulum": -400.0, "brax/inverted_pendulum": 900.0, "brax/inverted_double_pendulum": 8000.0,
             "dmc/CartpoleBalance": 900.0, "dmc/PendulumSwingup": 600.0, "dmc/CartpoleSwingup": 600.0}
AGENTS = ("sac", "td3", "dsac_t", "tqc", "simbav2", "tdmpc2")
REDUCED = {
    "tqc": {"critic_hidden_sizes": (256, 256), "num_critics": 2},
    "simbav2": {"critic_hidden_dim": 128},
    "tdmpc2": {"latent_dim": 128, "hidden_dim": 128, "encoder_dim": 128, "num_samples": 128, "num_elites": 16,
               "num_pi_trajs": 8, "iterations": 3},
}


def parse_override(item: str) -> tuple[str, str, object]:
    import tomllib

    name, sep, value = item.partition("=")
    section, _, field = name.rpartition(".")
    if not sep or section not in ("run", "loop", "agent_config"):
        raise SystemExit(f"--override {item!r}: expected loop.FIELD=VALUE, run.FIELD=VALUE or agent_config.FIELD=VALUE")
    try:
        parsed = tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        parsed = value
    return section, field, parsed


def run_one(agent_name: str, task: str, steps: int, num_envs: int, seeds: int, overrides) -> dict:
    from experiments import rundir
    from experiments.train import train

    tables = {"run": {"env": task, "seed": 0, "seeds": seeds, "checkpoint_minutes": 0.0,
                      "compilation_cache": "~/.cache/jaxrl/xla"},
              "loop": {"steps": steps, "eval_every": max(1, steps // 10), "num_eval_envs": 10},
              "agent_config": dict(REDUCED.get(agent_name, {}))}
    resolved = rundir.resolve(agent_name)
    if "num_envs" not in resolved.agent.loop_defaults:
        tables["loop"]["num_envs"] = num_envs
    for section, field, value in overrides:
        tables[section][field] = value
    resolved = rundir.resolve(agent_name, tables=tables, where="bench/defaults.py")
    run_dir = tempfile.mkdtemp(prefix=f"defaults-{agent_name}-{task.replace('/', '-')}-")
    run = dataclasses.replace(resolved.run, run_dir=run_dir, overwrite=True)
    t0 = time.perf_counter()
    summary, _ = train(resolved.agent, run, resolved.loop, resolved.agent_cfg, quiet=True)
    wall = time.perf_counter() - t0
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    per_seed = [[r.get(f"eval/return/seed{k}", r["eval/return"]) for r in rows] for k in range(seeds)]
    final = [curve[-1] for curve in per_seed]
    threshold = THRESHOLD.get(task)
    return {"agent": agent_name, "task": task, "steps": summary["env_steps"], "num_envs": resolved.loop.num_envs,
            "seeds": seeds, "final": [round(x, 1) for x in final],
            "best": [round(max(curve), 1) for curve in per_seed],
            "threshold": threshold,
            "fraction_above": None if threshold is None else sum(x >= threshold for x in final) / seeds,
            "curve_mean": [round(sum(c[i] for c in per_seed) / seeds, 1) for i in range(len(rows))],
            "wall_s": round(wall, 1), "compile_s": round(summary["compile_s"], 1), "run_dir": run_dir}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", nargs="+", default=list(AGENTS))
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--label", default="defaults", help="names this set of settings in the output")
    parser.add_argument("--override", action="append", default=[], metavar="SECTION.FIELD=VALUE")
    parser.add_argument("--out", default=None, help="also append the JSON lines to this file")
    args = parser.parse_args()
    overrides = [parse_override(item) for item in args.override]
    for agent_name in args.agents:
        for task in args.tasks:
            result = {"label": args.label, "overrides": args.override,
                      **run_one(agent_name, task, args.steps, args.num_envs, args.seeds, overrides)}
            line = json.dumps(result)
            print(line, flush=True)
            if args.out:
                os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
                with open(args.out, "a") as f:
                    f.write(line + "\n")


if __name__ == "__main__":
    main()
