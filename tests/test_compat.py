"""Plug-ins written against the README's idioms of 2026-12-05 (tests/compat/, kept unedited) still train: each
through the command line users type, on a tiny budget, with finite losses and its own metrics. A later change to
a built-in state, loss or the loop that breaks one fails here; CHANGELOG.md must then give the one-line fix."""
import json
import os

import pytest

PLUGINS = {"huber_critic": "critic_loss", "mean_target": "critic_loss", "reward_mean": "reward_mean",
           "annealed_noise": "huber_delta", "ensemble_actor": "actor_loss"}


@pytest.mark.slow
@pytest.mark.parametrize("module", sorted(PLUGINS))
def test_a_plugin_written_against_the_readme_of_2026_12_05_still_trains(module, cli, tmp_path):
    run_dir = tmp_path / module
    result = cli("train", "--agent", f"tests.compat.{module}:AGENT", "--env", "toy/Pendulum", "--steps", "400",
                 "--num-envs", "4", "--num-eval-envs", "2", "--eval-every", "200", "--learning-starts", "200",
                 "--buffer-size", "4000", "--run-dir", str(run_dir))
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    assert rows[-1]["env_steps"] == 400
    metric = f"train/{PLUGINS[module]}"
    assert all(isinstance(row[metric], float) and abs(row[metric]) < 1e6 for row in rows if metric in row), rows
    assert any(metric in row for row in rows)
