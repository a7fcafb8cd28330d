"""The ``jaxrl`` command: ``jaxrl train ...``, ``jaxrl envs``, ``jaxrl agents``.

Every field of the run, loop and agent configs is a flag: run and loop fields at top level
(``--steps``, ``--num-envs``, ...), agent fields under the agent's name (``--sac.actor-lr 1e-3``).
``jaxrl train --help`` (after ``--agent NAME``) lists them with their defaults.

The command modules (this one, ``rundir``, ``export``, ``reproduce``) import JAX, the envs and the agents inside
the functions that use them: importing ``envs`` costs 1.3 s here, importing this module 0.05 s, so usage errors
and ``jaxrl configs`` answer without importing JAX.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import os
import re
import sys
from typing import Annotated

USAGE = """usage: jaxrl {train,sweep,export,reproduce,plot,video,envs,agents,configs,info} ...

  jaxrl train [--agent sac] [--resume RUN_DIR] [flags]   train (jaxrl train --help lists every flag)
  jaxrl train --config NAME_OR_TOML [flags]              train from a paper config (jaxrl configs lists them)
  jaxrl sweep SWEEP.toml [--out DIR] [--launcher local|slurm|ray] [--launcher-option NAME=VALUE ...]
                                                         a grid / random search (experiments/sweep.py)
  jaxrl export RUN_DIR --member K --out DIR              one member of a multi-member run, standalone
  jaxrl export RUN_DIR --onnx F.onnx [--member K] [--step K]
                                                         the deterministic actor as an ONNX graph
  jaxrl reproduce CONFIG [--tasks ...] [--steps N] [--seeds K] [--out DIR]
                                                         a paper protocol over tasks, report vs published
  jaxrl plot RUN_OR_SWEEP_DIR... [--metric eval/return] [--by FIELD] [--x env_steps|wall_s] [--out F.png] [--pbt]
                                                         learning curves on one figure, 95 % bootstrap bands
  jaxrl video RUN_DIR [--step K] [--episodes N] [--out F.mp4]
                                                         render a checkpoint's policy (MP4)
  jaxrl envs                                             list env names
  jaxrl agents                                           list agent names
  jaxrl configs                                          list named configs (experiments/configs/*.toml)
  jaxrl info [--json]                                    this install's stack, checkout and machine (for bug
                                                         reports; every run's config.json records the same)
"""


def _error(message: str, code: int = 2) -> int:
    print(f"jaxrl: error: {message}", file=sys.stderr)
    return code


class UsageError(Exception):
    """A malformed command line: one ``jaxrl: error:`` line, exit 2 (the full usage stays behind --help)."""


class _Parser(argparse.ArgumentParser):
    """argparse with exact flag names (no abbreviations: tyro takes none either) and usage errors as one line."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def error(self, message):
        raise UsageError(f"{self.prog}: {message}; {self.prog} --help lists the flags")


def _tyro_error(text: str, prog: str) -> str:
    """One line from tyro's boxed usage error: its first section (which names the flag and the value) and, for a
    bad value, the flag's expected form from the box's help section (``--steps INT``)."""
    body, expected, section = [], None, 0
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "╭╰":  # the box's title and bottom edges
            continue
        line = line.strip("│").strip()
        if line and set(line) <= {"─"}:
            section += 1
        elif section == 0 and line:
            body.append(line)
        elif line.startswith("--") and expected is None:
            expected = line
    message = " ".join(body).replace("Error parsing ", "").replace("Unrecognized options:", "unrecognized flag(s):")
    return (f"{prog}: {message or 'malformed command line'}" + (f" (expected {expected})" if expected else "")
            + f"; {prog} --help lists the flags")


def _failure(e: BaseException, rerun: str = "") -> int:
    """The exit code and one line of a command that did not finish: 2 bad input (out of memory included), 3
    non-finite loss, 4 a write failed, 128 + N stopped by signal N (after its checkpoint, or before anything was
    written). ``rerun``: what continues a command of several runs (a sweep, a reproduction) after a stop."""
    from experiments.signals import REQUESTS, Stopped, name
    from experiments.train import Interrupted, NonFiniteError
    from jaxrl.files import WriteError

    if isinstance(e, Interrupted):
        REQUESTS.last_line(f"jaxrl: {e}" + (f" (or rerun {rerun})" if rerun else ""))
        return 128 + e.signum
    if isinstance(e, Stopped):
        text = f"stopped by {name(e.signum)} before its next run wrote anything; rerun {rerun}" if rerun else e
        REQUESTS.last_line(f"jaxrl: {text}")
        return 128 + e.signum
    return _error(str(e), code=3 if isinstance(e, NonFiniteError) else 4 if isinstance(e, WriteError) else 2)


def _suite_defaults_text() -> str:
    from envs import SUITE_LOOP_DEFAULTS

    return "; ".join(f"{suite}/: " + (", ".join(f"--{k.replace('_', '-')} {v}" for k, v in values.items()) or "none")
                     for suite, values in SUITE_LOOP_DEFAULTS.items())


def _resolve_train(argv: list[str]):
    """(the pre-parsed --agent/--resume/--config, the remaining flags, the resolved base configs) of
    ``jaxrl train``; ConfigError for a bad combination."""
    from experiments import rundir
    from jaxrl import ConfigError

    pre = _Parser(prog="jaxrl train", add_help=False)
    pre.add_argument("--agent", default=None)
    pre.add_argument("--resume", default=None)
    pre.add_argument("--config", default=None)
    pre.add_argument("--same-stack", action="store_true")
    known, rest = pre.parse_known_args(argv)
    if known.agent is not None and not known.agent.strip():
        from agents import get_agent

        get_agent(known.agent)  # one line: an empty name is not "the default agent"
    # --env picks the suite's loop defaults, which --help shows as defaults; tyro still parses it from ``rest``.
    env_flag = _Parser(prog="jaxrl train", add_help=False)
    env_flag.add_argument("--env", default=None)
    env = env_flag.parse_known_args(rest)[0].env
    if known.same_stack and not known.resume:
        raise ConfigError("--same-stack applies to --resume RUN_DIR only (it refuses a run recorded under another "
                          "stack)")
    if known.resume and known.config:
        raise ConfigError("--config cannot be combined with --resume (a resumed run keeps its own config)")
    saved = rundir.load_saved(known.resume) if known.resume else None
    return known, rest, rundir.resolve(known.agent, known.config, saved, known.resume, env=env)


def _train_flags(base, rest: list[str]):
    """(run, loop, agent config): the base configs with the command-line flags applied (tyro; --help here)."""
    import tyro

    from experiments.rundir import RunConfig
    from jaxrl.loop import LoopConfig

    name = base.agent.name
    Args = dataclasses.make_dataclass("TrainArgs", [
        ("run", Annotated[RunConfig, tyro.conf.OmitArgPrefixes]),
        ("loop", Annotated[LoopConfig, tyro.conf.OmitArgPrefixes]),
        # An agent's switches take a value (``--dsac-t.grad-scale False``), as in its config files and sweeps.
        ("agent_config", Annotated[base.agent.Config, tyro.conf.arg(name=flag_prefix(name)),
                                   tyro.conf.FlagConversionOff]),
    ])
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            args = tyro.cli(Args, args=rest, default=Args(base.run, base.loop, base.agent_cfg), prog="jaxrl train",
                            description=_train_description(name))
    except SystemExit as e:
        if e.code in (0, None):  # --help
            raise
        raise UsageError(_tyro_error(captured.getvalue(), "jaxrl train") + _other_agent_hint(rest, name)) from None
    sys.stderr.write(captured.getvalue())
    return args.run, args.loop, args.agent_config


def flag_prefix(agent_name: str) -> str:
    """The prefix of an agent's flags (``--<prefix>.<field>``): its name, with each run of characters other than
    letters, digits, ``_`` and ``-`` (a plug-in named after its import path has ``.`` and ``:``) as one ``-``."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", agent_name).strip("-") or "agent"


def _other_agent_hint(flags: list[str], name: str) -> str:
    """For ``--agent sac --td3.policy-noise 0.3``: which agent that flag belongs to."""
    from agents import list_agents

    own = flag_prefix(name).replace("_", "-")
    for flag in flags:
        option = flag.partition("=")[0]
        prefix = option[2:].partition(".")[0] if option.startswith("--") and "." in option else None
        if prefix and prefix not in (own, name) and prefix.replace("-", "_") in list_agents():
            return (f" ({option} is a flag of agent {prefix.replace('-', '_')}; this run trains "
                    f"{name}, whose flags are --{own}.*)")
    return ""


def _train_description(name: str) -> str:
    return (f"Train {name}. Agent flags: --{flag_prefix(name).replace('_', '-')}.*; --agent NAME picks another "
            "agent, --resume RUN_DIR continues a run (numeric agent fields and --steps may change there; fields the "
            "checkpoint fixes may not; a run recorded under other package versions, another commit or machine "
            "continues with a note naming what differs, --same-stack refuses it instead). Exit codes: 0 done (or "
            "already finished), 2 bad input (out of memory included), 3 non-finite loss, 4 a write failed (disk "
            "full or read-only), 128+N stopped by signal N (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2: "
            "with a checkpoint after the current chunk, or before the run wrote anything; a second stop signal "
            "ends it at once, its last checkpoint intact). Without --config, a suite's loop defaults apply "
            "under the agent's and the flags: "
            f"{_suite_defaults_text()}; the defaults shown are those of --env's suite.")


def _train(argv: list[str]) -> int:
    from experiments import rundir
    from experiments.signals import REQUESTS, Stopped
    from experiments.train import Interrupted, NonFiniteError, train
    from jaxrl import ConfigError
    from jaxrl.files import WriteError

    try:
        known, rest, base = _resolve_train(argv)
        from agents import display_name

        agent, name = base.agent, display_name(base.agent)
        run, loop, agent_cfg = _train_flags(base, rest)
        REQUESTS.check()
        if known.resume:
            rundir.check_is_run(known.resume, "--resume")
        if known.resume and os.path.abspath(run.run_dir) != os.path.abspath(known.resume):
            raise ConfigError(f"--run-dir {run.run_dir} differs from --resume {known.resume}; a resumed run stays "
                              "in place")
        if known.resume and run.overwrite:
            raise ConfigError("--overwrite cannot be combined with --resume (it would delete the run to resume)")
        if run.run_dir is not None:
            rundir.check_path(run.run_dir, "--run-dir")
    except (ConfigError, Stopped) as e:
        return _failure(e)
    # Directories this command creates are removed again if the run ends having written nothing into them.
    created = rundir.missing_dirs(run.run_dir if run.run_dir is not None else "runs")
    try:
        # A second stop signal ends the process at once: directories it had not written into yet go too.
        with REQUESTS.on_stop(lambda: rundir.remove_if_empty(created)):
            if run.run_dir is None:
                run = dataclasses.replace(run, run_dir=rundir.default_run_dir(name, run.env))
                created.insert(0, os.path.abspath(run.run_dir))
            summary, _ = train(agent, run, loop, agent_cfg, resume=known.resume is not None, members=base.members,
                               pbt=base.pbt, same_stack=known.same_stack)
    except (ConfigError, NonFiniteError, WriteError, Interrupted, Stopped) as e:
        rundir.remove_if_empty(created)
        return _failure(e)
    print(f"final eval return {summary['final_eval_return']:.2f} after {summary['env_steps']} env steps "
          f"({(summary.get('env_steps_per_s') or 0):.0f} env steps/s, compile {(summary.get('compile_s') or 0):.1f} s);"
          f" outputs in {run.run_dir}")
    return 0


def _sweep(argv: list[str]) -> int:
    from experiments import launch, sweep
    from experiments.signals import Stopped
    from experiments.train import Interrupted, NonFiniteError
    from jaxrl import ConfigError
    from jaxrl.files import WriteError

    parser = _Parser(prog="jaxrl sweep", description=sweep.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", help="sweep file (TOML)")
    parser.add_argument("--out", default=None, help="output directory (default sweeps/<file name>); rerunning "
                        "any sweep file into it reuses finished members (OUT/members/<id>) and resumes interrupted "
                        "programs")
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
            _result(sweep.describe(sweep.load(args.file), out))
            return 0
        rows = sweep.run_sweep(args.file, out, args.launcher, options)
    except (ConfigError, NonFiniteError, WriteError, Interrupted, Stopped) as e:
        return _failure(e, RERUN["sweep"])
    print(f"{len(rows)} member(s); results in {os.path.join(out, 'results.csv')}")
    return 0


def _export(argv: list[str]) -> int:
    from experiments import rundir
    from experiments.export import export_member, export_onnx
    from jaxrl import ConfigError

    parser = _Parser(prog="jaxrl export", description="Write one member of a multi-member run "
                                     "(sweep group or --seeds run) as a standalone, resumable run directory "
                                     "(--member K --out DIR), or a run's deterministic actor as an ONNX graph "
                                     "(--onnx F.onnx: obs [B, n] -> action [B, m], observation normalisation "
                                     "folded in; needs jaxrl[onnx]).")
    parser.add_argument("run_dir")
    parser.add_argument("--member", type=int, default=None, help="member index (column suffix memberK / seedK); "
                        "with --onnx, default 0")
    parser.add_argument("--out", default=None, help="new run directory")
    parser.add_argument("--onnx", default=None, metavar="F.onnx", help="write the actor as an ONNX graph here")
    parser.add_argument("--step", type=int, default=None, help="with --onnx: the checkpoint's env step (default: "
                        "the newest)")
    args = parser.parse_args(argv)
    try:
        if (args.onnx is None) == (args.out is None):
            raise ConfigError("give one of --out DIR (a member as a run directory) or --onnx F.onnx (the actor)")
        if args.onnx is not None:
            rundir.check_output_file(args.onnx, "--onnx")
            info = export_onnx(args.run_dir, args.onnx, args.member or 0, args.step)
            _result(f"{info['agent']} actor of the run directory {args.run_dir} at env step {info['env_steps']} "
                    f"written to {info['path']}: obs [B, {info['obs_size']}] -> action [B, {info['action_size']}]; "
                    f"onnxruntime's actions differ from the jitted policy's by at most {info['max_abs_diff']:.1e} "
                    f"on {info['check_samples']} random observations")
            return 0
        if args.member is None:
            raise ConfigError("--out needs --member K (the member to write)")
        out = export_member(args.run_dir, args.member, args.out)
    except ConfigError as e:
        return _error(str(e))
    _result(f"member {args.member} of the run directory {args.run_dir} written to {out} (jaxrl train --resume {out} "
            "continues it)")
    return 0


def _reproduce(argv: list[str]) -> int:
    import json

    from experiments import reproduce
    from experiments.signals import Stopped
    from experiments.train import Interrupted, NonFiniteError
    from jaxrl import ConfigError
    from jaxrl.files import WriteError

    parser = _Parser(prog="jaxrl reproduce", description=reproduce.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", help="a named config with a [reproduce] table (jaxrl configs) or a .toml path")
    parser.add_argument("--tasks", nargs="+", default=None, help="env names (default: the config's tasks)")
    parser.add_argument("--steps", type=int, default=None, help="env steps per run (default: the config's)")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per task (default: the config's)")
    parser.add_argument("--out", default=None, help="output directory (default reproduce/<config>)")
    parser.add_argument("--override", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="change one config field, e.g. loop.num_envs=16 or agent_config.actor_lr=1e-3")
    parser.add_argument("--targets", default=reproduce.TARGETS, help="published results: a CSV, or a directory of them")
    parser.add_argument("--report-only", action="store_true", help="write the report from the runs already there")
    parser.add_argument("--agent", default=None, help="train this agent (a plug-in module:ATTR) under the protocol in "
                        "place of the config's; the report sets it beside the config's published numbers")
    args = parser.parse_args(argv)
    out = args.out or os.path.join("reproduce", os.path.splitext(os.path.basename(args.config))[0])
    try:
        if args.report_only:
            plan = reproduce.make_plan(args.config, args.tasks, args.steps, args.seeds, args.override, args.agent)
            if args.tasks or args.steps is not None or args.seeds is not None or args.override:
                from experiments.rundir import note

                note("--report-only reports every run under the output directory as it ran (its config.json): "
                     "--tasks, --steps, --seeds and --override do not change what it states")
            path = reproduce.write_report(plan, out, args.targets)
        else:
            path = reproduce.reproduce(args.config, out, args.tasks, args.steps, args.seeds, args.override,
                                       targets_path=args.targets, agent=args.agent)
    except (ConfigError, NonFiniteError, WriteError, Interrupted, Stopped) as e:
        return _failure(e, "the reproduction: finished tasks are reused")
    with open(os.path.join(os.path.dirname(path), "report.json")) as f:
        covered = json.load(f)["tasks"]
    _result(f"report: {path} ({len(covered)} task(s): {', '.join(covered)})")
    return 0


def _video(argv: list[str]) -> int:
    from experiments.video import __doc__ as doc
    from experiments.video import render_checkpoint
    from jaxrl import ConfigError

    parser = _Parser(prog="jaxrl video", description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir")
    parser.add_argument("--step", type=int, default=None, help="the checkpoint's env step (default: the newest)")
    parser.add_argument("--episodes", type=int, default=1, help="deterministic episodes, back to back (default 1)")
    parser.add_argument("--member", type=int, default=0, help="member of a --seeds run or sweep program (default 0)")
    parser.add_argument("--out", default=None, help="the MP4 (default RUN_DIR/videos/checkpoint_<step>.mp4)")
    parser.add_argument("--width", type=int, default=None, help="pixels (default: the run's video_width)")
    parser.add_argument("--height", type=int, default=None, help="pixels (default: the run's video_height)")
    args = parser.parse_args(argv)
    try:
        info = render_checkpoint(args.run_dir, args.out, args.step, args.episodes, args.member, args.width,
                                 args.height)
    except ConfigError as e:
        return _error(str(e))
    _result(f"video {info['path']}: env step {info['env_steps']}, {info['frames']} frames ({info['width']}x"
            f"{info['height']}), returns {', '.join(f'{r:.1f}' for r in info['returns'])}; rollout "
            f"{info['rollout_s']:.1f} s (compile included), render {info['render_s']:.1f} s, encode "
            f"{info['encode_s']:.1f} s")
    return 0


def _plot(argv: list[str]) -> int:
    from experiments import plot, rundir
    from jaxrl import ConfigError

    parser = _Parser(prog="jaxrl plot", description=plot.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dirs", nargs="+", metavar="RUN_OR_SWEEP_DIR")
    parser.add_argument("--metric", default="eval/return", help="a logged column (default eval/return)")
    parser.add_argument("--by", default=None, metavar="FIELD", help="group members by this config field's value")
    parser.add_argument("--x", default="env_steps", dest="x_axis", help=f"one of {', '.join(plot.X_AXES)}")
    parser.add_argument("--out", default="plot.png", help="the PNG to write (default plot.png)")
    parser.add_argument("--pbt", action="store_true",
                        help="population-based training: each population's best and median return and its explored "
                             "fields per member over env steps (one PNG per population: --out, then --out's name "
                             "with -2, -3, ...)")
    args = parser.parse_args(argv)
    if args.pbt:
        return _plot_populations(args.dirs, args.out)
    try:
        rundir.check_output_file(args.out, "--out", plot.figure_formats())
        path, curves = plot.plot_runs(args.dirs, args.out, args.metric, args.by, args.x_axis)
    except ConfigError as e:
        return _error(str(e))
    lines = []
    for directory in args.dirs:
        what = {"run": "a run directory", "sweep": "a sweep's output directory"}.get(rundir.kind(directory), "?")
        lines.append(f"{directory}: {what}")
    for c in curves:
        if c.members:
            at = f"{int(c.x[-1]):,} env steps" if args.x_axis == "env_steps" else f"{c.x[-1]:.1f} s"
            lines.append(f"{c.label}: {c.members} member(s), {args.metric} {c.mean[-1]:.4g} at {at}"
                         + (f" (95 % CI {c.low[-1]:.4g} to {c.high[-1]:.4g})" if c.members > 1 else ""))
    _result("\n".join([*lines, f"plot: {path}"]))
    return 0


def _plot_populations(dirs: list[str], out: str) -> int:
    import numpy as np

    from experiments import plot, rundir
    from jaxrl import ConfigError

    try:
        rundir.check_output_file(out, "--out", plot.figure_formats())
        programs = [program for d in dirs for program in plot.pbt_programs(d)]
        stem, ext = os.path.splitext(out)
        for i, program in enumerate(programs):
            path, population = plot.plot_population(program, out if i == 0 else f"{stem}-{i + 1}{ext}")
            final = population.returns[-1]
            _result(f"{program}: {final.size} members, {len(population.x)} evaluations; at {int(population.x[-1]):,} "
                    f"env steps best {np.nanmax(final):.4g} (member {int(np.nanargmax(final))}), median "
                    f"{np.nanmedian(final):.4g}; {int(population.copied.sum())} copies\nplot: {path}",
                    last=i + 1 == len(programs))
    except ConfigError as e:
        return _error(str(e))
    return 0


def _info(argv: list[str]) -> int:
    import json

    from jaxrl import provenance

    parser = _Parser(prog="jaxrl info", description="The stack, checkout, machine and numerics settings of this "
                     "install: what every run records in its config.json (environment). Paste it into bug reports.")
    parser.add_argument("--json", action="store_true", help="the block as JSON")
    args = parser.parse_args(argv)
    block = provenance.environment()
    _result(json.dumps(block, indent=2) if args.json else provenance.format_block(block))
    return 0


# Commands that hold a run: a stop signal waits for a point where stopping loses nothing (experiments/signals.py).
RUN_COMMANDS = ("train", "sweep", "reproduce")
# What continues a command of several runs after a stop.
RERUN = {"sweep": "the sweep: finished members are reused", "reproduce": "the reproduction: finished tasks are reused"}


def holds_runs(argv: list[str]) -> bool:
    """Whether the command line trains (a stop then waits for a checkpoint); every other command is short and a
    stop signal ends it at once: ``sweep --dry-run``, ``reproduce --report-only`` and ``--help`` included."""
    if not argv or argv[0] not in RUN_COMMANDS or {"-h", "--help"} & set(argv[1:]):
        return False
    return not (argv[0] == "sweep" and "--dry-run" in argv or argv[0] == "reproduce" and "--report-only" in argv)


def main(argv: list[str] | None = None, keep_handlers: bool = False) -> int:
    """``jaxrl ...``: the exit code. Stop signals are handled from the first line on (experiments/signals.py);
    usage errors, bad input and stops are one line each."""
    from experiments.signals import REQUESTS, Stopped

    argv = list(sys.argv[1:] if argv is None else argv)
    with REQUESTS.listening(immediate=not holds_runs(argv), restore=not keep_handlers):
        REQUESTS.rerun = RERUN.get(argv[0], "") if argv else ""
        try:
            code = _dispatch(argv)
        except Stopped as e:
            code = _failure(e)
        except UsageError as e:
            code = _error(str(e))
        REQUESTS.finish()  # a short command's stop that no result line met ends it here, in its own line
        return code


def _result(text: str, last: bool = True) -> None:
    """A command's result on stdout; after a stop signal, the stop's one line instead (experiments/signals.py)."""
    from experiments.signals import REQUESTS

    REQUESTS.result(text, last)


def _dispatch(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        _result(USAGE)
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
    if command == "plot":
        return _plot(rest)
    if command == "video":
        return _video(rest)
    if command == "envs":
        import envs

        _result("\n".join(name if (note := envs.env_note(name)) is None else f"{name}  # {note}"
                           for name in envs.list_envs()))
        return 0
    if command == "agents":
        from agents import list_agents

        _result("\n".join(list_agents()))
        return 0
    if command == "info":
        return _info(rest)
    if command == "configs":
        from experiments import configs

        _result("\n".join(configs.list_configs()))
        return 0
    return _error(f"unknown command {command!r}; valid: train, sweep, export, reproduce, plot, video, "
                  "envs, agents, configs, info")


def entry() -> int:
    """The ``jaxrl`` console script: ``main`` keeping its signal handlers until the process ends."""
    return main(keep_handlers=True)


if __name__ == "__main__":
    sys.exit(entry())
