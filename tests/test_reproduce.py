"""``jaxrl reproduce``: task names against the targets table, the report's numbers, and its errors."""
import json
import os

import numpy as np
import pytest

import envs
from experiments import configs, reproduce
from jaxrl import ConfigError
from tests.helpers import TINY_TABLES


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
    plan = reproduce.make_plan("sac_dmc", tasks, 100_000, 2, ["loop.action_repeat=1"])
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
    assert "--seeds 2 --override loop.action_repeat=1`" in text  # the command as run, its overrides included
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
