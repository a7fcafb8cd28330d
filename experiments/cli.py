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

USAGE = """usage: jaxrl {train,envs,agents} ...

  jaxrl train [--agent sac] [--resume RUN_DIR] [flags]   train (jaxrl train --help lists every flag)
  jaxrl train --config NAME_OR_TOML [flags]              train from a paper config (jaxrl configs lists them)
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
    try:
        summary, _ = train(agent, run, loop, agent_cfg, resume=known.resume is not None)
    except ConfigError as e:
        return _error(str(e))
    except NonFiniteError as e:
        return _error(str(e), code=3)
    print(f"final eval return {summary['final_eval_return']:.2f} after {summary['env_steps']} env steps "
          f"({summary['env_steps_per_s']:.0f} env steps/s, compile {summary['compile_s']:.1f} s); "
          f"outputs in {run.run_dir}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "train":
        return _train(rest)
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
    return _error(f"unknown command {command!r}; valid: train, envs, agents, configs")


if __name__ == "__main__":
    sys.exit(main())
