"""Which loop settings a new run gets: the env suite's defaults (``envs.SUITE_LOOP_DEFAULTS``), under the agent's
own loop defaults, a named config, sweep tables and flags. No compilation: these resolve configs only."""
from __future__ import annotations

import dataclasses
import json
import re

import pytest

import envs
from experiments import rundir
from experiments.rundir import config_to_dict
from jaxrl.loop import LoopConfig


def test_each_suite_gets_exactly_its_stated_loop_defaults():
    # Pinned: changing a suite's defaults changes every new run on it, so it must be a deliberate edit here too.
    assert {suite: dict(values) for suite, values in envs.SUITE_LOOP_DEFAULTS.items()} == {
        "toy": {}, "brax": {}, "dmc": {"action_repeat": 2, "updates_per_step": 2.0}, "locomotion": {},
        "manipulation": {}}
    assert envs.suite_loop_defaults("dmc/CartpoleSwingup") == {"action_repeat": 2, "updates_per_step": 2.0}
    assert envs.suite_loop_defaults("brax/inverted_pendulum") == {}
    assert envs.suite_loop_defaults("toy/Pendulum") == {}
    assert envs.suite_loop_defaults("locomotion/T1JoystickFlatTerrain") == {}
    assert envs.suite_loop_defaults("nosuchsuite/x") == {}


@pytest.mark.parametrize("env, changed", [
    ("dmc/CartpoleBalance", {"action_repeat": 2, "updates_per_step": 2.0}),
    ("brax/inverted_pendulum", {}), ("toy/Pendulum", {})])
def test_a_new_run_starts_from_its_suites_defaults(env, changed):
    for resolved in (rundir.resolve("sac", tables={"run": {"env": env}}), rundir.resolve("sac", env=env)):
        assert resolved.loop == dataclasses.replace(LoopConfig(), **changed)


def test_the_default_env_gets_its_suites_defaults():
    assert rundir.resolve("sac").run.env.startswith("dmc/")
    assert rundir.resolve("sac").loop.action_repeat == 2


def test_agent_defaults_tables_and_flags_override_the_suite():
    # Agent loop_defaults sit above the suite's: DSAC-T keeps its official schedule (no repeat) on every suite.
    dsac = rundir.resolve("dsac_t", env="dmc/CartpoleBalance").loop
    assert (dsac.num_envs, dsac.updates_per_step, dsac.action_repeat) == (20, 1 / 20, 1)
    tdmpc2 = rundir.resolve("tdmpc2", env="dmc/CartpoleBalance").loop  # its official 1 update per agent step
    assert (tdmpc2.updates_per_step, tdmpc2.action_repeat) == (1.0, 2)
    tables = {"run": {"env": "dmc/CartpoleBalance"}, "loop": {"action_repeat": 1}}
    assert rundir.resolve("sac", tables=tables).loop.action_repeat == 1


def _shown_default(help_text: str, flag: str) -> str:
    """The "(default: X)" tyro prints for ``flag`` (its entry may wrap over lines and box characters)."""
    entry = re.search(rf"{flag} [A-Z]+(.*?)\(default: ([^)]*)\)", help_text, re.DOTALL)
    return entry.group(2)


def test_help_shows_the_suites_value_and_a_flag_overrides_it(cli, monkeypatch, tmp_path):
    shown = cli("train", "--env", "dmc/CartpoleBalance", "--help").stdout
    assert "dmc/: --action-repeat 2, --updates-per-step 2.0" in " ".join(shown.split())
    assert _shown_default(shown, "--action-repeat") == "2"
    assert _shown_default(cli("train", "--env", "brax/inverted_pendulum", "--help").stdout, "--action-repeat") == "1"

    import experiments.train

    loops = []

    def record(agent, run, loop, agent_cfg, **kwargs):
        loops.append(loop)
        raise experiments.train.ConfigError("recorded")

    monkeypatch.setattr(experiments.train, "train", record)
    for flags, action_repeat in (([], 2), (["--action-repeat", "1"], 1), (["--action-repeat", "4"], 4)):
        result = cli("train", "--env", "dmc/CartpoleBalance", "--run-dir", str(tmp_path / "r"), *flags)
        assert result.returncode == 2 and "recorded" in result.stderr
        assert loops.pop().action_repeat == action_repeat


def test_named_configs_and_saved_runs_keep_their_own_loop(tmp_path):
    config = tmp_path / "plain.toml"
    config.write_text('agent = "sac"\n[run]\nenv = "dmc/CartpoleBalance"\n')
    assert rundir.resolve(config=str(config)).loop == LoopConfig()
    # A run saved before (or without) the suite's defaults resumes with the loop its config.json holds.
    saved = {"agent": "sac", "run": {"env": "dmc/CartpoleBalance"}, "loop": config_to_dict(LoopConfig()),
             "agent_config": {}}
    assert rundir.resolve(saved=json.loads(json.dumps(saved)), run_dir=str(tmp_path)).loop.action_repeat == 1
