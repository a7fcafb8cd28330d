"""The ``jaxrl`` command: ``jaxrl train ...``, ``jaxrl envs``, ``jaxrl agents``.

Every field of the run, loop and agent configs is a flag: run and loop fields at top level
(``--steps``, ``--num-envs``, ...), agent fields under the agent's name (``--sac.actor-lr 1e-3``).
``jaxrl train --help`` (after ``--agent NAME``) lists them with their defaults.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from typing import Annotated

USAGE = """usage: jaxrl {train,sweep,export,envs,agents,configs} ...

  jaxrl train [--agent sac] [--resume RUN_DIR] [flags]   train (jaxrl train --help lists every flag)
  jaxrl train --config NAME_OR_TOML [flags]              train from a paper config (jaxrl configs lists them)
  jaxrl sweep SWEEP.toml [--out DIR] [--launcher local|slurm|ray] [--launcher-option NAME=VALUE ...]
                                                         a grid / random search (experiments/sweep.py)
  jaxrl export RUN_DIR --member K --out DIR              one member of a multi-member run, standalone
  jaxrl reproduce CONFIG [--tasks ...] [--steps N] [--seeds K] [--out DIR]
                                                         a paper protocol over tasks, report vs published
  jaxrl envs                                             list env names
  jaxrl agents                                           list agent names
  jaxrl configs                                          list named configs (experiments/configs/*.toml)
"""


def _error(message: str, code: int = 2) -> int:
    print(f"jaxrl: error: {message}", file=sys.stderr)
    return code


def _train(argv: list[str]) -> int:
    import tyro

    from agents import get_agent
    from experiments import configs
    from experiments.train import NonFiniteError, RunConfig, config_from_dict, load_run_config, train
    from jaxrl import ConfigError
    from jaxrl.loop import LoopConfig, default_loop_config

    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--agent", default=None)
    pre.add_argument("--resume", default=None)
    pre.add_argument("--config", default=None)
    known, rest = pre.parse_known_args(argv)
    try:
        if known.resume and known.config:
            raise ConfigError("--config cannot be combined with --resume (a resumed run keeps its own config)")
        saved = load_run_config(known.resume) if known.resume else None
        if known.config:
            saved = configs.load(known.config)
        agent_name = known.agent or (saved and saved["agent"]) or "sac"
        if known.resume and known.agent and known.agent != saved["agent"]:
            raise ConfigError(f"--agent {known.agent} does not match the resumed run's agent {saved['agent']!r}")
        agent = get_agent(agent_name)
        if known.resume:
            run = config_from_dict(RunConfig, {**saved["run"], "run_dir": known.resume})
            loop = config_from_dict(LoopConfig, saved["loop"])
            agent_cfg = config_from_dict(agent.Config, saved["agent_config"])
        elif known.config:
            for cls, section in ((RunConfig, "run"), (LoopConfig, "loop"), (agent.Config, "agent_config")):
                configs.check_fields(cls, saved[section], f"config {known.config} [{section}]")
            run = config_from_dict(RunConfig, saved["run"])
            loop = dataclasses.replace(default_loop_config(agent), **saved["loop"])
            agent_cfg = config_from_dict(agent.Config, saved["agent_config"])
        else:
            run, loop, agent_cfg = RunConfig(), default_loop_config(agent), agent.Config()
    except ConfigError as e:
        return _error(str(e))

    name = agent.name
    Args = dataclasses.make_dataclass("TrainArgs", [
        ("run", Annotated[RunConfig, tyro.conf.OmitArgPrefixes]),
        ("loop", Annotated[LoopConfig, tyro.conf.OmitArgPrefixes]),
        (name, Annotated[agent.Config, tyro.conf.arg(name=name)]),
    ])
    args = tyro.cli(Args, args=rest, default=Args(run, loop, agent_cfg), prog="jaxrl train",
                    description=f"Train {name}. Agent flags: --{name.replace('_', '-')}.*; --agent NAME picks another agent, "
                                "--resume RUN_DIR continues a run.")
    run, loop, agent_cfg = args.run, args.loop, getattr(args, name)
    if known.resume and os.path.abspath(run.run_dir) != os.path.abspath(known.resume):
        return _error(f"--run-dir {run.run_dir} differs from --resume {known.resume}; a resumed run stays in place")
    if run.run_dir is None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        run = dataclasses.replace(run, run_dir=os.path.join("runs", f"{name}-{run.env.replace('/', '-')}-{stamp}"))
    members = None
    if saved and saved.get("members"):  # a sweep group resumes with its own members
        members = [(m["seed"], config_from_dict(agent.Config, m["agent_config"])) for m in saved["members"]]
    try:
        summary, _ = train(agent, run, loop, agent_cfg, resume=known.resume is not None, members=members)
    except ConfigError as e:
        return _error(str(e))
    except NonFiniteError as e:
        return _error(str(e), code=3)
    print(f"final eval return {summary['final_eval_return']:.2f} after {summary['env_steps']} env steps "
          f"({summary['env_steps_per_s']:.0f} env steps/s, compile {summary['compile_s']:.1f} s); "
          f"outputs in {run.run_dir}")
    return 0


def _sweep(argv: list[str]) -> int:
    from experiments import launch, sweep
    from jaxrl import ConfigError

    parser = argparse.ArgumentParser(prog="jaxrl sweep", description=sweep.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", help="sweep file (TOML)")
    parser.add_argument("--out", default=None, help="output directory (default sweeps/<file name>); rerunning "
                        "into it skips finished programs and resumes interrupted ones")
    parser.add_argument("--launcher", default="local", help=f"one of {', '.join(launch.LAUNCHERS)}")
    parser.add_argument("--launcher-option", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--dry-run", action="store_true", help="print the programs and members, run nothing")
    args = parser.parse_args(argv)
    out = args.out or os.path.join("sweeps", os.path.splitext(os.path.basename(args.file))[0])
    try:
        options = launch.parse_options(args.launcher_option)
        if args.launcher not in launch.LAUNCHERS:
            raise ConfigError(f"--launcher {args.launcher!r} is not one of: {', '.join(launch.LAUNCHERS)}")
        if args.dry_run:
            spec = sweep.load(args.file)
            for group in sweep.plan(spec, out):
                print(f"{group.name}: {len(group.members)} member(s) in one program")
                for m in group.members:
                    print(f"  m{m.index:03d} seed {m.seed} {m.values}")
            return 0
        rows = sweep.run_sweep(args.file, out, args.launcher, options)
    except ConfigError as e:
        return _error(str(e))
    print(f"{len(rows)} member(s); results in {os.path.join(out, 'results.csv')}")
    return 0


def _export(argv: list[str]) -> int:
    from experiments.export import export_member
    from jaxrl import ConfigError

    parser = argparse.ArgumentParser(prog="jaxrl export", description="Write one member of a multi-member run "
                                     "(sweep group or --seeds run) as a standalone, resumable run directory.")
    parser.add_argument("run_dir")
    parser.add_argument("--member", type=int, required=True, help="member index (column suffix memberK / seedK)")
    parser.add_argument("--out", required=True, help="new run directory")
    args = parser.parse_args(argv)
    try:
        out = export_member(args.run_dir, args.member, args.out)
    except ConfigError as e:
        return _error(str(e))
    print(f"member {args.member} of {args.run_dir} written to {out} (jaxrl train --resume {out} continues it)")
    return 0


def _reproduce(argv: list[str]) -> int:
    from experiments import reproduce
    from jaxrl import ConfigError

    parser = argparse.ArgumentParser(prog="jaxrl reproduce", description=reproduce.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", help="a named config with a [reproduce] table (jaxrl configs) or a .toml path")
    parser.add_argument("--tasks", nargs="+", default=None, help="env names (default: the config's tasks)")
    parser.add_argument("--steps", type=int, default=None, help="env steps per run (default: the config's)")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per task (default: the config's)")
    parser.add_argument("--out", default=None, help="output directory (default reproduce/<config>)")
    parser.add_argument("--override", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="change one config field, e.g. loop.num_envs=16 or agent_config.actor_lr=1e-3")
    parser.add_argument("--targets", default=reproduce.TARGETS, help="published results table (CSV)")
    parser.add_argument("--report-only", action="store_true", help="write the report from the runs already there")
    args = parser.parse_args(argv)
    out = args.out or os.path.join("reproduce", os.path.splitext(os.path.basename(args.config))[0])
    try:
        if args.report_only:
            plan = reproduce.make_plan(args.config, args.tasks, args.steps, args.seeds, args.override)
            path = reproduce.write_report(plan, out, args.targets)
        else:
            path = reproduce.reproduce(args.config, out, args.tasks, args.steps, args.seeds, args.override,
                                       targets_path=args.targets)
    except ConfigError as e:
        return _error(str(e))
    print(f"report: {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "train":
        return _train(rest)
    if command == "sweep":
        return _sweep(rest)
    if command == "export":
        return _export(rest)
    if command == "reproduce":
        return _reproduce(rest)
    if command == "envs":
        import envs

        print("\n".join(envs.list_envs()))
        return 0
    if command == "agents":
        from agents import list_agents

        print("\n".join(list_agents()))
        return 0
    if command == "configs":
        from experiments import configs

        print("\n".join(configs.list_configs()))
        return 0
    return _error(f"unknown command {command!r}; valid: train, sweep, export, reproduce, envs, agents, configs")


if __name__ == "__main__":
    sys.exit(main())
