"""``jaxrl reproduce``: task names against the targets table, the report's numbers, and its errors."""
import dataclasses
import json
import os

import numpy as np
import pytest

import envs
from experiments import configs, reproduce
from jaxrl import ConfigError
from tests.helpers import TINY_TABLES, assert_one_line_error


def test_every_published_dmc_task_that_playground_has_maps_to_its_env():
    playground = {name for name in envs.list_envs() if name.startswith("dmc/")}
    assert reproduce.dmc_task_name("dmc/CheetahRun") == "cheetah-run"
    assert reproduce.dmc_task_name("dmc/BallInCup") == "cup-catch"
    assert reproduce.dmc_task_name("dmc/PendulumSwingup") == "pendulum-swingup"
    assert reproduce.dmc_task_name("brax/ant") is None
    published = {t for rows in (reproduce.load_targets(reproduce.TARGETS, a) for a in ("sac", "simbav2", "tdmpc2"))
                 for t in rows}
    mapped = {reproduce.dmc_task_name(name) for name in playground}
    # Every published task is either found in Playground or one Playground does not register.
    assert published - mapped <= {"dog-run", "quadruped-run"}, published - mapped
    assert len(published & mapped) >= 14


def test_every_reproduce_config_names_known_tasks_and_has_published_rows_for_dmc():
    with_table = [n for n in configs.list_configs() if configs.load(n)["reproduce"]]
    assert {"sac_dmc", "simbav2_dmc", "tdmpc2_dmc", "td3_brax", "tqc_brax", "dsac_t_brax"} <= set(with_table)
    for name in with_table:
        plan = reproduce.make_plan(name, None, None, None, [])
        if plan.tasks[0].startswith("dmc/"):
            targets = reproduce.load_targets(reproduce.TARGETS, plan.algorithm)
            assert all(reproduce.dmc_task_name(t) in targets for t in plan.tasks), name


def test_the_playground_configs_carry_each_tasks_official_values_and_their_targets_exist():
    from experiments import rundir

    go1 = rundir.resolve(config="fasttd3_playground", env="locomotion/Go1JoystickFlatTerrain")
    t1 = rundir.resolve(config="fasttd3_playground", env="locomotion/T1JoystickFlatTerrain")
    leap = rundir.resolve(config="fasttd3_playground", env="manipulation/LeapCubeReorient")
    assert (go1.agent_cfg.std_min, go1.agent_cfg.std_max, go1.agent_cfg.policy_noise) == (0.2, 0.8, 0.2)
    assert go1.loop.updates_per_step * go1.loop.num_envs == 8 and t1.loop.updates_per_step * t1.loop.num_envs == 2
    assert (t1.agent_cfg.std_min, t1.agent_cfg.gamma, t1.agent_cfg.v_max, t1.loop.steps) == (0.001, 0.97, 10.0,
                                                                                             102_400_000)
    assert (leap.agent_cfg.n_step, leap.agent_cfg.use_cdq, leap.agent_cfg.gamma, leap.agent_cfg.v_max) == (
        3, False, 0.99, 50.0)
    # FastTD3 switches the humanoids' pushes off and leaves Go1's (off) and domain randomisation (off) alone.
    assert (t1.run.push_randomization, go1.run.push_randomization, leap.run.push_randomization) == (False, None, None)
    assert not (t1.run.domain_randomization or go1.run.domain_randomization)
    # Flags (here a sweep's or --override's tables) still win over a task's own values.
    flagged = rundir.resolve(config="fasttd3_playground", env="locomotion/Go1Getup",
                             tables={"agent_config": {"std_min": 0.3}})
    assert (flagged.agent_cfg.std_min, flagged.agent_cfg.std_max) == (0.3, 0.8)
    for name in ("fasttd3_playground", "fastsac_playground"):
        plan = reproduce.make_plan(name, None, None, None, [])
        for task in configs.load(name)["tasks"]:  # every task table names real fields of real envs
            assert task in envs.list_envs(), task
            plan.configs_for(task)
    targets = reproduce.load_targets(reproduce.TARGETS, "fasttd3")
    plan = reproduce.make_plan("fasttd3_playground", None, None, None, [])
    assert all({r["env_steps"] for r in targets[t]} == {46_080_000, 51_200_000} for t in plan.tasks)


def test_a_task_table_with_an_unknown_field_fails_when_that_task_runs(tmp_path):
    from experiments import rundir

    path = tmp_path / "tasks.toml"
    path.write_text('agent = "sac"\n[tasks."toy/Pendulum".agent_config]\nactor_learning_rate = 1e-3\n')
    rundir.resolve(config=str(path), env="toy/Bandit")  # another task: the table does not apply
    with pytest.raises(ConfigError, match="actor_learning_rate"):
        rundir.resolve(config=str(path), env="toy/Pendulum")
    path.write_text('agent = "sac"\n[tasks."toy/Pendulum".run]\nseed = 3\n')
    assert rundir.resolve(config=str(path), env="toy/Pendulum").run.seed == 3
    assert rundir.resolve(config=str(path), env="toy/Bandit").run.seed == 0
    path.write_text('agent = "sac"\n[tasks."toy/Pendulum".run]\nenv = "toy/Bandit"\n')
    with pytest.raises(ConfigError, match="env cannot be set there"):
        configs.load(str(path))
    path.write_text('agent = "sac"\n[tasks."toy/Pendulum".logging]\nx = 1\n')
    with pytest.raises(ConfigError, match="unknown table.*logging"):
        configs.load(str(path))


CONFIG = """
description = "tiny SAC on the toy pendulum"
agent = "sac"
""" + TINY_TABLES + """[reproduce]
algorithm = "fake"
tasks = ["toy/Pendulum"]
seeds = 2
max_return = 1000
"""
TARGETS = """algorithm,suite,task,env_steps,mean_return,std_over_seeds,seeds,source
fake,toy,toy/Pendulum,400,-1000,100,5,made up for the test
fake,toy,toy/Pendulum,10000,-200,10,5,a step the run never reaches
other,toy,toy/Pendulum,400,0,1,5,another algorithm
"""


def test_report_puts_our_seeds_next_to_the_published_point(tmp_path):
    (tmp_path / "tiny.toml").write_text(CONFIG)
    (tmp_path / "targets.csv").write_text(TARGETS)
    out = str(tmp_path / "out")
    path = reproduce.reproduce(str(tmp_path / "tiny.toml"), out, quiet=True, targets_path=str(tmp_path / "targets.csv"))
    with open(os.path.join(out, "runs", "toy-Pendulum", "metrics.jsonl")) as f:
        last = [json.loads(line) for line in f][-1]
    ours = np.array([last["eval/return/seed0"], last["eval/return/seed1"]])
    report = json.load(open(os.path.join(out, "report.json")))
    (row,) = report["rows"]
    assert row["env_steps"] == 400 and row["seeds"] == 2 and row["returns"] == ours.tolist()
    np.testing.assert_allclose([row["mean"], row["std"]], [ours.mean(), ours.std(ddof=1)], rtol=1e-9)
    np.testing.assert_allclose(row["z"], (ours.mean() + 1000) / 100, rtol=1e-9)
    agg = report["aggregate"]
    np.testing.assert_allclose(agg["mean"], ours.mean() / 1000, rtol=1e-6)
    assert agg["mean_ci"][0] <= agg["mean"] <= agg["mean_ci"][1] and agg["iqm_ci"][0] <= agg["iqm"] <= agg["iqm_ci"][1]
    np.testing.assert_allclose(agg["published_mean_of_task_means"], -1.0)
    text = open(path).read()
    assert f"| toy/Pendulum | 400 | {ours.mean():.0f} ± {ours.std(ddof=1):.0f} (2) | -1000 ± 100 (5) |" in text
    for png in ("aggregate.png", "curve_toy-Pendulum.png"):
        assert os.path.getsize(os.path.join(out, png)) > 1000 and f"]({png})" in text
    # What produced it: the run's recorded stack, printed whole.
    from jaxrl import provenance

    block = json.load(open(os.path.join(out, "runs", "toy-Pendulum", "config.json")))["environment"]
    assert report["environments"] == {"toy/Pendulum": block}
    # ... and the command that trains the same runs, as the report prints it: the results file a figure cites.
    assert report["command"].startswith("jaxrl reproduce ") and report["command"].endswith(
        "tiny.toml --tasks toy/Pendulum --steps 400 --seeds 2") and f"Command: `{report['command']}`." in text
    assert report["written"].endswith(" UTC")
    assert f"## Environment\n\nEvery run trained under:\n\n```\n{provenance.format_block(block)}\n```" in text
    # A rerun reuses the finished run and rewrites the same report.
    assert reproduce.reproduce(str(tmp_path / "tiny.toml"), out, quiet=True,
                               targets_path=str(tmp_path / "targets.csv")) == path
    assert json.load(open(os.path.join(out, "report.json")))["rows"] == report["rows"]


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(config="sac_dmc", tasks=["dmc/Nope"]), "unknown task 'dmc/Nope'"),
    (dict(config="sac_dmc", seeds=0), "--seeds must be a positive integer"),
    (dict(config="sac_dmc", overrides=["loop.num_env=2"]), "unknown field(s) num_env"),
    (dict(config="sac_dmc", overrides=["num_envs=2"]), "expected run.FIELD=VALUE"),
])
def test_bad_reproduce_arguments_fail_with_one_line(kwargs, fragment):
    args = dict(tasks=None, steps=None, seeds=None, overrides=[])
    args.update(kwargs)
    with pytest.raises(ConfigError) as e:
        reproduce.make_plan(args.pop("config"), **{k: args[k] for k in ("tasks", "steps", "seeds", "overrides")})
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_a_config_without_a_reproduce_table_is_refused(tmp_path):
    (tmp_path / "plain.toml").write_text(CONFIG.split("[reproduce]")[0])
    with pytest.raises(ConfigError, match="has no \\[reproduce\\] table.*sac_dmc"):
        reproduce.make_plan(str(tmp_path / "plain.toml"), None, None, None, [])


def test_report_marks_tasks_that_are_not_comparable(tmp_path, capsys):
    """A task whose env differs from the benchmark's (Playground's fish model) and one without a published row are
    reported alone, never beside a number; a comparable task keeps its published column (fabricated runs: the report
    reads only metrics.jsonl)."""
    tasks = ["dmc/CheetahRun", "dmc/FishSwim", "dmc/AcrobotSwingupSparse", "dmc/BallInCupPlayground", "dmc/BallInCup"]
    plan = reproduce.make_plan("sac_dmc", tasks, 100_000, 2, ["loop.action_repeat=2"])
    assert reproduce.note_unpublished(plan) == tasks[1:4]
    err = capsys.readouterr().err
    assert "dmc/FishSwim is not comparable with published sac results: the env differs" in err
    assert "dmc/BallInCupPlayground is not comparable" in err and "hangs at rest" in err
    assert "dmc/AcrobotSwingupSparse has no published sac result" in err
    (tmp_path / "targets.csv").write_text(
        "algorithm,suite,task,env_steps,mean_return,std_over_seeds,seeds,source\n"
        "sac,dmc,cheetah-run,100000,300,50,3,test\n"
        "sac,dmc,fish-swim,100000,400,40,3,test\n"
        "sac,dmc,cup-catch,100000,900,10,3,test\n")
    for task, values in zip(tasks, ([350, 250], [100, 200], [10, 20], [0, 0], [0, 0]), strict=True):
        run_dir = tmp_path / "out" / "runs" / task.replace("/", "-")
        run_dir.mkdir(parents=True)
        row = {"env_steps": 100_000, "eval/return": float(np.mean(values)),
               "eval/return/seed0": values[0], "eval/return/seed1": values[1]}
        (run_dir / "metrics.jsonl").write_text(json.dumps(row) + "\n")
    # A dmc/BallInCup run saved before the task followed dm_control (its config.json records no env revision) trained
    # Playground's port: it is reported as that, never beside cup-catch's 900.
    (tmp_path / "out" / "runs" / "dmc-BallInCup" / "config.json").write_text(json.dumps(
        {"agent": "sac", "run": {"env": "dmc/BallInCup"}, "loop": {}, "agent_config": {}}))
    path = reproduce.write_report(plan, str(tmp_path / "out"), str(tmp_path / "targets.csv"))
    assert "trained dmc/BallInCup before that name changed" in capsys.readouterr().err
    rows = {r["task"]: r for r in json.load(open(tmp_path / "out" / "report.json"))["rows"]}
    assert "hangs at rest" in rows["dmc/BallInCup"]["not_comparable"] and "z" not in rows["dmc/BallInCup"]
    assert rows["dmc/CheetahRun"]["not_comparable"] is None and rows["dmc/CheetahRun"]["z"] == 0.0
    assert rows["dmc/FishSwim"]["not_comparable"].startswith("the env differs from the benchmark's: Playground's fish")
    assert "published_mean" not in rows["dmc/FishSwim"] and "z" not in rows["dmc/FishSwim"]  # its row 400 unused
    assert rows["dmc/AcrobotSwingupSparse"]["not_comparable"] == "no published sac result for acrobot-swingup-sparse"
    assert "hangs at rest" in rows["dmc/BallInCupPlayground"]["not_comparable"]
    text = open(path).read()
    assert "--seeds 2 --override loop.action_repeat=2`" in text  # the command as run, its overrides included
    assert "| dmc/CheetahRun | 100,000 | 300 ± 71 (2) | 300 ± 50 (3) | 0.00 |" in text
    assert "| dmc/FishSwim | 100,000 | 150 ± 71 (2) | not comparable: the env differs" in text
    assert "| dmc/AcrobotSwingupSparse | 100,000 | 15 ± 7 (2) | not comparable: no published sac result" in text
    assert "- dmc/CheetahRun: 4/8 solver iterations (dm_control: 100/50)" in text  # the simulation caveats
    assert "No published aggregate beside ours" in text
    assert ("including those not comparable: dmc/AcrobotSwingupSparse, dmc/BallInCup, dmc/BallInCupPlayground, "
            "dmc/FishSwim") in text
    # dmc/FingerSpin simulates with dm_control's options: only the caveat every MJX task has.
    assert envs.physics_caveat("dmc/FingerSpin").startswith("float32")
    assert envs.physics_caveat("dmc/FingerSpinPlayground").startswith("0.005 s implicitfast steps")


def test_a_plugin_trains_under_a_protocol_and_is_reported_beside_its_agents_published_numbers(tmp_path, capsys):
    """`jaxrl reproduce sac_dmc --agent experiments.examples.redq:AGENT`: the protocol's tables apply to the plug-in
    (a note says so), the report names it and sets it beside the published sac rows (fabricated runs)."""
    plan = reproduce.make_plan("sac_dmc", ["dmc/CheetahRun"], 100_000, 2, [],
                               agent="experiments.examples.redq:AGENT")
    assert plan.agent.name == "redq" and plan.algorithm == "sac" and plan.agent_cfg.batch_size == 512
    assert plan.configs_for("dmc/CheetahRun")[2].num_critics == 10  # the plug-in's own Config, the protocol's values
    assert "plug-in agent experiments.examples.redq:AGENT trains under config sac_dmc" in capsys.readouterr().err
    (tmp_path / "targets.csv").write_text("algorithm,suite,task,env_steps,mean_return,std_over_seeds,seeds,source\n"
                                          "sac,dmc,cheetah-run,100000,300,50,3,test\n")
    run_dir = tmp_path / "out" / "runs" / "dmc-CheetahRun"
    run_dir.mkdir(parents=True)
    row = {"env_steps": 100_000, "eval/return": 300.0, "eval/return/seed0": 350.0, "eval/return/seed1": 250.0}
    (run_dir / "metrics.jsonl").write_text(json.dumps(row) + "\n")
    text = open(reproduce.write_report(plan, str(tmp_path / "out"), str(tmp_path / "targets.csv"))).read()
    assert "# Reproduction report: `sac_dmc` (redq)" in text and "--agent experiments.examples.redq:AGENT`" in text
    assert "**Agent**: `experiments.examples.redq:AGENT` trained under this protocol" in text
    assert "| dmc/CheetahRun | 100,000 | 300 ± 71 (2) | 300 ± 50 (3) | 0.00 |" in text
    assert "- dmc/CheetahRun: no environment recorded" in text  # fabricated: no config.json


# ------------------------------------------------------------------- a report states only what ran (issue 45, 3)


def _fabricate_run(out, plan, task, returns, env_steps=None):
    """A finished run of ``plan``'s settings for ``task`` as training leaves it for the report: config.json (the
    resolved configs, as train writes them) and one evaluation row per seed."""
    from experiments import rundir
    from jaxrl.loop import written_down

    run, loop, agent_cfg = plan.configs_for(task)
    run_dir = os.path.join(out, "runs", task.replace("/", "-"))
    os.makedirs(run_dir)
    saved = {"agent": plan.agent_name or plan.agent.name, "env_revision": envs.env_revision(task),
             "run": rundir.config_to_dict(dataclasses.replace(run, run_dir=run_dir)),
             "loop": rundir.config_to_dict(written_down(loop)), "agent_config": rundir.config_to_dict(agent_cfg)}
    with open(os.path.join(run_dir, "config.json"), "w") as f:
        json.dump(saved, f)
    row = {"env_steps": env_steps or loop.steps, "eval/return": float(np.mean(returns)),
           **{f"eval/return/seed{k}": r for k, r in enumerate(returns)}}
    with open(os.path.join(run_dir, "metrics.jsonl"), "w") as f:
        f.write(json.dumps(row) + "\n")
    return run_dir


def _trains_the_same(command, run_dirs):
    """The report's command, given to `jaxrl reproduce`, asks for exactly the runs' settings: the same tasks, steps,
    seeds and every loop and agent field (run fields that change no result aside)."""
    import argparse
    import shlex

    from experiments import rundir
    from jaxrl.loop import written_down

    words = shlex.split(command)
    assert words[:2] == ["jaxrl", "reproduce"], command
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    parser.add_argument("--tasks", nargs="+")
    parser.add_argument("--steps", type=int)
    parser.add_argument("--seeds", type=int)
    parser.add_argument("--override", action="append", default=[])
    parser.add_argument("--agent")
    args = parser.parse_args(words[2:])
    plan = reproduce.make_plan(args.config, args.tasks, args.steps, args.seeds, args.override, args.agent)
    assert [os.path.basename(d) for d in run_dirs] == [t.replace("/", "-") for t in plan.tasks], command
    for task, run_dir in zip(plan.tasks, run_dirs, strict=True):
        saved = rundir.resolve(saved=rundir.load_saved(run_dir), run_dir=run_dir)
        run, loop, agent_cfg = plan.configs_for(task)
        differences = {name: change for name, change
                       in rundir.differences(saved, run, written_down(loop), agent_cfg).items()
                       if not name.startswith("run.") or name[4:] in rundir.RUN_FIXED}
        assert differences == {}, (command, differences)


SEVEN = ["loop.learning_starts=1000", "loop.eval_every=1000", "loop.num_eval_envs=2", "loop.buffer_size=3000",
         "loop.action_repeat=2", "agent_config.batch_size=64", "agent_config.hidden_sizes=[32, 32]"]


def test_report_only_states_the_command_and_settings_the_runs_trained_with(tmp_path, cli):
    """`jaxrl reproduce sac_dmc --tasks dmc/CheetahRun --steps 3000 --seeds 2` with seven overrides, then
    `--report-only` without them: the command is the runs' (not 1,000,000 x 3 without overrides), the protocol's
    prose (batch 512, 2x1024, no action repeat) is followed by what these runs changed, no template text remains."""
    out = str(tmp_path / "out")
    trained = reproduce.make_plan("sac_dmc", ["dmc/CheetahRun"], 3000, 2, SEVEN)
    run_dir = _fabricate_run(out, trained, "dmc/CheetahRun", [300.0, 200.0])
    result = cli("reproduce", "sac_dmc", "--report-only", "--out", out)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("report.md (1 task(s): dmc/CheetahRun)")
    report = json.load(open(os.path.join(out, "report.json")))
    text = open(os.path.join(out, "report.md")).read()
    command = report["command"]
    assert command.startswith("jaxrl reproduce sac_dmc --tasks dmc/CheetahRun --steps 3000 --seeds 2 --override ")
    assert command.count("--override ") == 7 and f"Command: `{command}`." in text
    assert report["commands"] == {"dmc/CheetahRun": command} and report["tasks"] == ["dmc/CheetahRun"]
    _trains_the_same(command, [run_dir])
    assert "--steps 1000000" not in text and "--seeds 3" not in text
    changed = text.split("**Changed from the protocol**")[1].split("\n")[0]
    for change in ("loop.steps 1000000 -> 3000", "seeds 3 -> 2", "agent_config.batch_size 512 -> 64",
                   "agent_config.hidden_sizes [1024, 1024] -> [32, 32]", "loop.action_repeat 1 -> 2",
                   "loop.learning_starts 5000 -> 1000", "loop.eval_every 100000 -> 1000"):
        assert change in changed, changed
    assert "(action repeat 2 included)" in text and "action repeat 1 included" not in text
    assert "{" not in text and "}" not in text  # no unformatted template text


def test_report_only_covers_every_run_there_and_says_which(tmp_path, cli):
    """`--tasks toy/PointMass` trained (steps, seeds and overrides of its own), then `--report-only` without --tasks:
    the config's task (toy/Pendulum) has no run, the report covers toy/PointMass and says so; a run of toy/Pendulum of
    other settings added, the report covers both, each with the command that trains it."""
    (tmp_path / "tiny.toml").write_text(CONFIG)
    (tmp_path / "targets.csv").write_text(TARGETS)
    tiny, targets, out = str(tmp_path / "tiny.toml"), str(tmp_path / "targets.csv"), str(tmp_path / "out")
    overrides = ["agent_config.batch_size=16", "agent_config.hidden_sizes=[8, 8]", "loop.action_repeat=2"]
    reproduce.reproduce(tiny, out, tasks=["toy/PointMass"], steps=600, seeds=1, overrides=overrides, quiet=True,
                        targets_path=targets)
    result = cli("reproduce", tiny, "--report-only", "--out", out, "--targets", targets)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("(1 task(s): toy/PointMass)")
    report = json.load(open(os.path.join(out, "report.json")))
    text = open(os.path.join(out, "report.md")).read()
    point_mass = report["command"]
    assert report["tasks"] == ["toy/PointMass"] and [r["task"] for r in report["rows"]] == ["toy/PointMass"]
    assert point_mass.endswith("tiny.toml --tasks toy/PointMass --steps 600 --seeds 1 --override loop.action_repeat=2 "
                           "--override 'agent_config.hidden_sizes=[8, 8]' --override agent_config.batch_size=16")
    _trains_the_same(point_mass, [os.path.join(out, "runs", "toy-PointMass")])
    assert "that has evaluated: toy/PointMass. No run of toy/Pendulum." in text
    assert "agent_config.batch_size 32 -> 16" in text and "(action repeat 2 included)" in text
    # A run of the config's own task, of other settings: each task its own command, never one for both.
    _fabricate_run(out, reproduce.make_plan(tiny, ["toy/Pendulum"], 400, 2, []), "toy/Pendulum", [-900.0, -1100.0],
                   400)
    assert cli("reproduce", tiny, "--report-only", "--out", out, "--targets", targets).returncode == 0
    report = json.load(open(os.path.join(out, "report.json")))
    text = open(os.path.join(out, "report.md")).read()
    pendulum = report["commands"]["toy/Pendulum"]
    assert report["tasks"] == ["toy/Pendulum", "toy/PointMass"]
    assert pendulum.endswith("tiny.toml --tasks toy/Pendulum --steps 400 --seeds 2")
    assert report["commands"]["toy/PointMass"] == point_mass and report["command"] == f"{pendulum} && {point_mass}"
    assert f"- toy/Pendulum: `{pendulum}`" in text and f"- toy/PointMass: `{point_mass}`" in text
    assert "Command: `" not in text
    assert "toy/Pendulum: none; toy/PointMass: loop.steps 400 -> 600, seeds 2 -> 1" in text  # each task's changes
    assert "each run's action repeat included: toy/Pendulum: 1; toy/PointMass: 2" in text
    assert "{" not in text and "}" not in text


REFUSED = {
    "an agent value its check refuses": (["--override", "agent_config.batch_size=0"], "batch_size"),
    "a value only one task's table makes invalid": (["--tasks", "toy/Pendulum", "toy/Bandit"], "gamma"),
    "a later task's directory holding other settings": (["--tasks", "toy/Pendulum", "toy/PointMass"],
                                                        "holds a run with other settings"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_a_refused_reproduction_prints_no_plan_and_writes_nothing(case, tmp_path, cli):
    """Every task's configs and run directory are checked before the plan is printed and the output directory made:
    a refused command leaves no empty directory and trains no task before the refused one."""
    flags, fragment = REFUSED[case]
    (tmp_path / "tiny.toml").write_text(CONFIG + '[tasks."toy/Bandit".agent_config]\ngamma = 1.5\n')
    out = tmp_path / "out"
    if "directory" in case:  # a run of other settings (2 envs) where toy/PointMass would go
        run_dir = out / "runs" / "toy-PointMass"
        run_dir.mkdir(parents=True)
        (run_dir / "config.json").write_text(json.dumps({"agent": "sac", "run": {"env": "toy/PointMass", "seeds": 2},
                                                         "loop": {"num_envs": 2}, "agent_config": {}}))
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    result = cli("reproduce", str(tmp_path / "tiny.toml"), *flags, "--out", str(out))
    assert_one_line_error(result, fragment)
    assert result.stdout == ""
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before
