"""Learning quality of every agent's out-of-the-box settings: agents x cheap tasks x seeds, one vmapped program each.

    python bench/defaults.py                                     # every agent and task below, 3 seeds, 20k steps
    python bench/defaults.py --agents sac td3 --tasks brax/inverted_pendulum dmc/CartpoleBalance
    python bench/defaults.py --label norm --override loop.normalize_obs=true   # a candidate default, labelled
    python bench/defaults.py --out bench/results/defaults.jsonl              # append the JSON lines there too
    python bench/defaults.py --label before --without-suite-defaults         # the loop before the suite defaults
    python bench/defaults.py --brax-sac --tasks brax/inverted_pendulum       # Brax's own SAC, same budget
    python bench/defaults.py --table A.jsonl B.jsonl                         # the docs' tables from results
    python bench/defaults.py --means A.jsonl B.jsonl --agents sac td3 --tasks dmc/CartpoleBalance  # label means

What a new user runs: ``jaxrl train --agent A --env E`` with nothing else but the budget (``--steps``,
``--num-envs``) and ``--seeds``, through the same ``experiments.train.train`` as the CLI, so each task gets its
suite's loop defaults (``envs.SUITE_LOOP_DEFAULTS``). SAC, TD3 and DSAC-T run
at their defaults; TQC, SimbaV2 and TD-MPC2 at the reduced widths in ``REDUCED`` (at their defaults an update
costs several times SAC's on a 2-core CPU: docs/benchmarks/speed.md's every-agent table). DSAC-T keeps its
official schedule (``Agent.loop_defaults``: 20 envs, 1 update per
20 env steps, 10k warm-up), so --num-envs does not apply to it.

Prints one JSON line per (agent, task): final and best deterministic eval return per seed (10 eval episodes,
every steps / 10 env steps), the fraction of seeds whose final return reaches the task's ``THRESHOLD``, wall
and compile seconds, and ``provenance`` (``jaxrl.provenance.stamp``: the command, date, commit and environment
block; lines measured before it existed have none).
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
HEADERS = {"brax": "Brax's SAC"}  # a label's column header in --table
REDUCED = {
    "tqc": {"critic_hidden_sizes": (256, 256), "num_critics": 2},
    "simbav2": {"critic_hidden_dim": 128},
    # TD-MPC2 also plans with fewer samples and trains on smaller batches: widths 128 with batch 256 and 128
    # samples x 3 MPPI iterations take hours per task at 20k env steps on a 2-core CPU, these settings about a
    # tenth per update (bench/tdmpc2_cost.py measures both into bench/results/tdmpc2_cost.jsonl).
    "tdmpc2": {"latent_dim": 64, "hidden_dim": 64, "encoder_dim": 64, "batch_size": 64, "num_samples": 64,
               "num_elites": 8, "num_pi_trajs": 4, "iterations": 2},
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


def suite_changes(agent_name: str, task: str) -> dict:
    """{field: (without, with)} for the loop fields the task's suite defaults change for this agent."""
    import envs
    from agents import get_agent
    from jaxrl.loop import default_loop_config

    agent = get_agent(agent_name)
    without, with_suite = default_loop_config(agent), default_loop_config(agent, envs.suite_loop_defaults(task))
    return {f.name: (getattr(without, f.name), getattr(with_suite, f.name)) for f in dataclasses.fields(without)
            if getattr(without, f.name) != getattr(with_suite, f.name)}


def summarise(agent_name: str, task: str, per_seed: list[list[float]]) -> dict:
    """Final and best return per seed, the share of seeds whose final return reaches the task's threshold, and
    the mean curve, from each seed's evaluation returns in order."""
    final = [curve[-1] for curve in per_seed]
    threshold = THRESHOLD.get(task)
    return {"agent": agent_name, "task": task, "seeds": len(per_seed), "final": [round(x, 1) for x in final],
            "best": [round(max(curve), 1) for curve in per_seed], "threshold": threshold,
            "fraction_above": None if threshold is None else sum(x >= threshold for x in final) / len(per_seed),
            "curve_mean": [round(sum(c[i] for c in per_seed) / len(per_seed), 1) for i in range(len(per_seed[0]))]}


def run_one(agent_name: str, task: str, steps: int, num_envs: int, seeds: int, overrides,
            suite_defaults: bool = True) -> dict:
    from experiments import rundir
    from experiments.train import train

    tables = {"run": {"env": task, "seed": 0, "seeds": seeds, "checkpoint_minutes": 0.0,
                      "compilation_cache": "~/.cache/jaxrl/xla"},
              "loop": {"steps": steps, "eval_every": max(1, steps // 10), "num_eval_envs": 10},
              "agent_config": dict(REDUCED.get(agent_name, {}))}
    resolved = rundir.resolve(agent_name)
    if "num_envs" not in resolved.agent.loop_defaults:
        tables["loop"]["num_envs"] = num_envs
    if not suite_defaults:  # what the run got before envs.SUITE_LOOP_DEFAULTS existed
        tables["loop"].update({field: before for field, (before, _) in suite_changes(agent_name, task).items()})
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
    return {**summarise(agent_name, task, per_seed), "steps": summary["env_steps"],
            "num_envs": resolved.loop.num_envs, "wall_s": round(wall, 1),
            "compile_s": round(summary["compile_s"], 1), "run_dir": run_dir}


def run_brax_sac(task: str, steps: int, num_envs: int, seeds: int) -> dict:
    """Brax's own SAC (brax.training.agents.sac) at the same budget, envs, widths, batch, learning rate, warm-up
    and 1 update per transition, with its usual observation normalisation; deterministic evaluation like ours.
    Seeds run one after another (Brax's ``train`` has no seed axis)."""
    import functools

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from sac_vs_brax import brax_environment

    environment, kwargs = brax_environment(task)
    from brax.training.agents.sac import networks as sac_networks
    from brax.training.agents.sac import train as brax_train

    warmup = min(5_000, steps // 10)  # our learning_starts default
    per_seed, t0 = [], time.perf_counter()
    for seed in range(seeds):
        curve = []
        brax_train.train(
            environment=environment, num_timesteps=steps, episode_length=1000, num_envs=num_envs, num_eval_envs=10,
            learning_rate=3e-4, discounting=0.99, seed=seed, batch_size=256, num_evals=11, normalize_observations=True,
            min_replay_size=warmup, max_replay_size=1_000_000, grad_updates_per_step=num_envs,
            deterministic_eval=True, network_factory=functools.partial(sac_networks.make_sac_networks,
                                                                       hidden_layer_sizes=(256, 256)),
            progress_fn=lambda step, metrics, curve=curve: curve.append(float(metrics["eval/episode_reward"])),
            **kwargs)
        per_seed.append(curve[1:])  # curve[0] is the untrained policy
    return {**summarise("brax_sac", task, per_seed), "steps": steps, "num_envs": num_envs,
            "wall_s": round(time.perf_counter() - t0, 1)}


def table(paths: list[str]) -> str:
    """A markdown table of result files: one row per (agent, task), one column per label, each cell the seeds'
    final returns, their mean and the fraction of seeds at or above the task's threshold; † marks a cell whose
    line has no ``provenance`` (measured before results files recorded their stack). A later line of the same
    (agent, task, label) replaces an earlier one: re-measure by appending to the file."""
    results = {}
    for path in paths:
        for line in open(path):
            r = json.loads(line)
            results[(r["agent"], r["task"], r["label"])] = r
    labels = list(dict.fromkeys(label for _, _, label in results))
    header = " | ".join(HEADERS.get(label, label) for label in labels)
    rows = [f"| agent | task | threshold | {header} |", "|---|---|---|" + "---|" * len(labels)]
    order = {name: i for i, name in enumerate(AGENTS + ("brax_sac",))}
    for agent, task in sorted({(a, t) for a, t, _ in results}, key=lambda at: (order.get(at[0], 99),
                                                                                  TASKS.index(at[1]))):
        cells = []
        for label in labels:
            r = results.get((agent, task, label))
            if r is None and label == "after" and agent in AGENTS and not suite_changes(agent, task):
                r = results.get((agent, task, "before"))  # no suite default applies here: the same settings
            cells.append("" if r is None else f"{' / '.join(f'{x:.0f}' for x in r['final'])} "
                         f"(mean {sum(r['final']) / len(r['final']):.0f}, {r['fraction_above']:.0%} ≥)"
                         f"{'' if 'provenance' in r else ' †'}")
        rows.append(f"| {agent} | {task} | {THRESHOLD[task]:g} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


# Column headers of --means: what each label changed (the table of how the dmc/ suite defaults were chosen).
MEANS_HEADERS = {"before": "before (repeat 1, 1 update per decision)",
                 "action_repeat2": "repeat 2, 1 update per decision",
                 "action_repeat2_utd2": "repeat 2, 2 updates per decision (chosen)"}


def means_table(paths: list[str], agents: list[str], tasks: list[str]) -> str:
    """One row per task, one column per label (file order), each cell the agents' mean final returns."""
    results, labels = {}, []
    for path in paths:
        for line in open(path):
            r = json.loads(line)
            results[(r["agent"], r["task"], r["label"])] = r
            labels += [r["label"]] if r["label"] not in labels else []

    def mean(agent, task, label):
        r = results.get((agent, task, label))
        return "n/a" if r is None else f"{sum(r['final']) / len(r['final']):.0f}{'' if 'provenance' in r else '†'}"

    rows = [f"| {' / '.join(a.upper() for a in agents)}, mean final return | "
            + " | ".join(MEANS_HEADERS.get(label, label) for label in labels) + " |", "|---|" + "---|" * len(labels)]
    for task in tasks:
        rows.append(f"| `{task}` | " + " | ".join(" / ".join(mean(a, task, label) for a in agents)
                                               for label in labels) + " |")
    return "\n".join(rows)


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
    parser.add_argument("--without-suite-defaults", action="store_true", help="the loop as it was before the "
                        "per-suite defaults (envs.SUITE_LOOP_DEFAULTS): the 'before' column")
    parser.add_argument("--brax-sac", action="store_true", help="run Brax's own SAC on the non-toy tasks instead")
    parser.add_argument("--table", nargs="+", metavar="JSONL", help="print the markdown table of these result "
                        "files and exit")
    parser.add_argument("--means", nargs="+", metavar="JSONL", help="print a table of mean final returns of "
                        "--agents on --tasks, one column per label of these result files, and exit")
    args = parser.parse_args()
    if args.means:
        print(means_table(args.means, args.agents, args.tasks))
        return
    if args.table:
        print(table(args.table))
        return
    overrides = [parse_override(item) for item in args.override]
    from jaxrl import provenance

    stamp = provenance.stamp()  # every line says what measured it: command, date, commit, environment
    for agent_name in ["brax_sac"] if args.brax_sac else args.agents:
        for task in args.tasks:
            if agent_name == "brax_sac":
                if task.startswith("toy/"):
                    continue
                result = {"label": "brax", "overrides": [],
                          **run_brax_sac(task, args.steps, args.num_envs, args.seeds)}
            else:
                result = {"label": args.label, "overrides": args.override,
                          **run_one(agent_name, task, args.steps, args.num_envs, args.seeds, overrides,
                                   not args.without_suite_defaults)}
            line = json.dumps({**result, "provenance": stamp})
            print(line, flush=True)
            if args.out:
                os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
                with open(args.out, "a") as f:
                    f.write(line + "\n")


if __name__ == "__main__":
    main()
