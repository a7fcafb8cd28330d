"""The command line end to end: bad input, NaN guard, kill-and-resume, the CLI contract, a plugged-in loss."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.helpers import TINY, assert_one_line_error, jaxrl, saved_state, tiny, wandb_offline_runs

AGENTS = ["sac", "td3", "tqc", "dsac_t", "simbav2", "tdmpc2", "fasttd3", "fastsac", "crossq"]
# The subprocess runs (a NaN stop, a SIGKILL and resume) for one agent of each kind of training state: plain (SAC),
# observation and return statistics with a decaying lr (SimbaV2), a planner's acting carry and pretraining updates
# (TD-MPC2), C51 critics with n-step returns over many envs (FastSAC), batch statistics without targets (CrossQ).
# TD3, TQC, DSAC-T and FastTD3 hold no other kind; every agent's state round-trips a checkpoint bitwise in process
# (tests/test_harness.py, check_agent's "checkpoint"), and ran these two tests until 2026-12-05 (suite time, issue 49).
CLI_AGENTS = ["sac", "simbav2", "tdmpc2", "fastsac", "crossq"]
# A NaN stop is the loop's check of every metric whatever produced it: the agents whose blown-up learning rate has
# its own flag (SimbaV2's lr-init, TD-MPC2's lr) and SAC's critic-lr. FastSAC and CrossQ (critic-lr, as SAC) ran it
# until 2026-12-08 (suite time: 44 and 52 s here of a 105-minute suite).
NAN_AGENTS = ["sac", "simbav2", "tdmpc2"]
NAN_LR = {"simbav2": "lr-init", "tdmpc2": "lr"}  # the learning rate the NaN test blows up (1e30: finite, so accepted)


@pytest.mark.parametrize("args, fragments", [
    (["--env", "toy/Nope"], ["toy/Nope", "toy/Pendulum"]),
    (["--env", "mujoco/Ant"], ["mujoco/Ant", "brax/, dmc/, locomotion/, manipulation/, toy/", "jaxrl envs"]),
    (["--agent", "nope"], ["'nope'", "sac"]),
    (["--num-envs", "0"], ["num_envs", "0"]),
    (["--steps", "-5"], ["steps", "-5"]),
    (["--seeds", "0"], ["seeds", "0"]),
    (["--buffer-size", "1000", "--sac.batch-size", "5000"], ["batch_size=5000", "1000 transitions"]),
    (["--buffer-size", "2000000000"], ["GiB", "available", "buffer_size"]),
    (["--buffer-size", "100000000000"], ["buffer_size must be a positive integer <= 2147483647", "100000000000"]),
    (["--updates-per-step", "0.3"], ["updates_per_step=0.3", "whole number"]),
    (["--resume", "/nonexistent/run"], ["/nonexistent/run", "config.json"]),
    (["--warmup", "sometimes"], ["warmup='sometimes'", "uniform, policy"]),
    (["--config", "nope_protocol"], ["'nope_protocol'", "simbav2_dmc"]),
    (["--config", "simbav2_dmc", "--resume", "/tmp/x"], ["--config", "--resume"]),
    (["--video-every", "200"], ["toy/Pendulum cannot render a video", "dmc/"]),
    (["--video-every", "-1"], ["video_every must be an integer >= 0", "-1"]),
    (["--env", "dmc/CartpoleBalance", "--video-every", "200", "--video-width", "321"], ["video_width", "321"]),
])
def test_bad_input_fails_with_one_line(args, fragments, cli):
    assert_one_line_error(cli("train", *TINY, *args), *fragments)


def test_every_malformed_or_broken_agent_is_one_line(cli, tmp_path, monkeypatch):
    """Before: tracebacks for ':', '../x:Y', a plug-in with a syntax error or raising at import; an empty name
    accepted; a file path refused without the form to give."""
    monkeypatch.chdir(tmp_path)
    name = f"broken_plugins_{os.getpid()}"
    (tmp_path / f"{name}_syntax.py").write_text("def f(:\n")
    (tmp_path / f"{name}_raises.py").write_text("\n\nraise RuntimeError('no GPU here')\n")
    (tmp_path / f"{name}_unnamed.py").write_text("from agents import sac\nAGENT = sac.AGENT._replace(name=' ')\n")
    (tmp_path / "sub").mkdir()
    for agent, fragments in [
        ("", ["agent name '' is empty", "sac"]),
        (":", ["agent ':' is not of the form 'module.path:ATTRIBUTE'"]),
        (":AGENT", ["is not of the form"]), ("mod:", ["is not of the form"]), ("a b:c", ["is not of the form"]),
        ("mod:AGENT:x", ["is not of the form"]), ("1mod:X", ["is not of the form"]),
        ("../x:Y", ["names a file; give its import path instead: x:Y with PYTHONPATH="]),
        ("sub/my_agent.py:AGENT", ["names a file; give its import path instead: sub.my_agent:AGENT"]),
        (f"{name}_syntax:AGENT", [f"importing {name}_syntax raised SyntaxError: invalid syntax ({name}_syntax.py, "
                                  "line 1)"]),
        (f"{name}_raises:AGENT", [f"raised RuntimeError: no GPU here ({name}_raises.py, line 3)"]),
        (f"{name}_unnamed:AGENT", ["has an empty name (' ')"]),
    ]:
        assert_one_line_error(cli("train", *TINY, "--agent", agent), *fragments)


def test_a_plug_in_named_like_a_built_in_is_recorded_by_its_import_path(tmp_path, monkeypatch):
    """Before: summary.json said "sac" for a plug-in whose Agent was named "sac"."""
    from agents import display_name, get_agent, sac

    monkeypatch.syspath_prepend(str(tmp_path))
    name = f"named_like_sac_{os.getpid()}"
    (tmp_path / f"{name}.py").write_text("from agents import sac\nAGENT = sac.AGENT._replace(update=sac.update)\n")
    impostor = get_agent(f"{name}:AGENT")
    assert impostor.name == "sac" and impostor is not sac.AGENT
    assert display_name(impostor) == f"{name}:AGENT" and display_name(sac.AGENT) == "sac"
    from experiments import rundir

    monkeypatch.chdir(tmp_path)
    assert os.path.basename(rundir.default_run_dir(display_name(impostor), "toy/Pendulum")).startswith(
        f"{name}-AGENT-toy-Pendulum-")


@pytest.mark.slow
def test_missing_and_corrupt_checkpoints(tmp_path):
    run_dir = str(tmp_path / "run")
    assert jaxrl("train", *TINY, "--steps", "200", "--learning-starts", "100", "--run-dir", run_dir).returncode == 0
    ckpt = tmp_path / "run" / "checkpoints"
    step_dir = ckpt / "200"
    for path in step_dir.rglob("*"):
        if path.is_file() and path.stat().st_size > 0:
            path.write_bytes(b"\x00garbage" * 4)
    assert_one_line_error(jaxrl("train", "--resume", run_dir), "no intact checkpoint", "env step 200 is damaged")
    for path in sorted(ckpt.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    assert_one_line_error(jaxrl("train", "--resume", run_dir), "no checkpoint")


@pytest.mark.slow
@pytest.mark.parametrize("agent", NAN_AGENTS)
def test_nan_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path, agent):
    run_dir = str(tmp_path / "nan")
    # --updates-per-step 1: several updates in the first learning block, so the NaN shows at env step 300.
    result = jaxrl("train", *tiny(agent), "--steps", "1000", "--learning-starts", "300", "--checkpoint-every",
                   "200", "--updates-per-step", "1", f"--{agent}.{NAN_LR.get(agent, 'critic-lr')}", "1e30",
                   "--run-dir", run_dir)
    assert result.returncode == 3
    assert_one_line_error(result, "non-finite", "_loss at env step 300", "env step 200")
    assert sorted(os.listdir(os.path.join(run_dir, "checkpoints"))) == ["200"]


# (total env steps, checkpoint every): the planner makes TD-MPC2's tiny run ~10x slower per step. The kill lands
# mid-run, right after the first checkpoint (200 env steps into learning), with a checkpoint's worth still to run.
KILL_RUN = {"tdmpc2": (800, 400)}


@pytest.mark.slow
@pytest.mark.parametrize("agent", CLI_AGENTS)
def test_killed_run_resumes_to_the_same_parameters(tmp_path, agent):
    steps, every = KILL_RUN.get(agent, (3000, 1000))
    args = [*tiny(agent), "--steps", str(steps), "--checkpoint-every", str(every), "--seeds", "2"]
    full, killed = str(tmp_path / "full"), str(tmp_path / "killed")
    assert jaxrl("train", *args, "--run-dir", full).returncode == 0

    proc = subprocess.Popen([sys.executable, "-m", "experiments.cli", "train", *args, "--run-dir", killed],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckpt_dir = os.path.join(killed, "checkpoints")
    deadline = time.time() + 300
    # A checkpoint is complete once its manifest is written (jaxrl.checkpoint).
    while time.time() < deadline and not os.path.exists(os.path.join(ckpt_dir, str(every), "jaxrl_manifest.json")):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not os.path.exists(os.path.join(killed, "summary.json")), "the run finished before it was killed"

    resumed = jaxrl("train", "--resume", killed)
    assert resumed.returncode == 0, resumed.stderr
    summary = json.load(open(os.path.join(killed, "summary.json")))
    assert summary["resumed_from"] >= every and summary["env_steps"] == steps
    a, b = saved_state(full, steps), saved_state(killed, steps)
    assert a.keys() == b.keys() and any(k.startswith(".agent.") and "params" in k for k in a)
    for key in a:  # parameters, optimizer states, buffer, env states, RNG: bitwise on CPU
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    rows = [json.loads(line) for line in open(os.path.join(killed, "metrics.jsonl"))]
    assert [r["env_steps"] for r in rows] == list(range(200, steps + 1, 200))  # no chunk lost or repeated
    if agent == "tdmpc2":  # the one agent with a carry: no obs -> action graph, refused in one line
        from experiments.cli import main

        assert main(["export", killed, "--onnx", str(tmp_path / "p.onnx")]) == 2
        assert not os.path.exists(tmp_path / "p.onnx")


@pytest.mark.slow
def test_cli_contract(repo_root):
    script = os.path.join(repo_root, "..", "shared", "checks", "cli-contract")
    if not os.path.exists(script):
        pytest.skip(f"{script} is not beside this checkout (the developers' contract check)")
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    result = subprocess.run(["bash", script], cwd=repo_root, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0 and "cli-contract: ok" in result.stdout, result.stdout + result.stderr


def test_listing_commands(cli):
    agents = cli("agents")
    assert agents.returncode == 0 and set(AGENTS) <= set(agents.stdout.split())
    names = cli("envs").stdout.split()
    assert {"dmc/CartpoleSwingup", "brax/halfcheetah", "toy/Pendulum"} <= set(names)


def test_named_config_sets_the_protocol_and_flags_override_it(tmp_path):
    assert "simbav2_dmc" in jaxrl("configs").stdout.split()
    run_dir = str(tmp_path / "cfg")
    result = jaxrl("train", "--config", "simbav2_dmc", "--env", "toy/Pendulum", "--steps", "400",
                   "--learning-starts", "200", "--eval-every", "200", "--num-eval-envs", "2", "--buffer-size", "2000",
                   "--simbav2.actor-hidden-dim", "16", "--simbav2.critic-hidden-dim", "16",
                   "--simbav2.batch-size", "32", "--run-dir", run_dir)
    assert result.returncode == 0, result.stderr
    config = json.load(open(os.path.join(run_dir, "config.json")))
    assert config["agent"] == "simbav2"
    assert config["loop"]["action_repeat"] == 2 and config["loop"]["updates_per_step"] == 2.0  # from the file
    assert config["loop"]["scale_rewards"] and config["agent_config"]["lr_decay_updates"] == 1_000_000
    assert config["loop"]["steps"] == 400 and config["agent_config"]["critic_hidden_dim"] == 16  # flags win

    bad = tmp_path / "bad.toml"
    bad.write_text('agent = "sac"\n[loop]\nnum_env = 4\n')
    assert_one_line_error(jaxrl("train", "--config", str(bad)), "num_env", "LoopConfig", "num_envs")


def test_plugged_in_loss_trains_from_the_cli(tmp_path):
    """The README's worked example: a Huber critic loss in a user file, trained through `jaxrl train`."""
    run_dir = str(tmp_path / "huber")
    args = [a.replace("--sac.", "--sac-huber.") for a in tiny()[2:]]
    result = jaxrl("train", "--agent", "experiments.examples.sac_huber:AGENT", *args, "--steps", "400",
                   "--run-dir", run_dir, "--deterministic")
    assert result.returncode == 0, result.stderr
    summary = json.load(open(os.path.join(run_dir, "summary.json")))
    assert summary["agent"] == "sac_huber" and summary["updates"] > 0
    config = json.load(open(os.path.join(run_dir, "config.json")))
    assert config["agent_config"]["hidden_sizes"] == [16, 16]
    # The plug-in's own code is part of what produced the run (a resume after an edit says so).
    from jaxrl import provenance

    code = config["environment"]["agent_code"]
    assert code["modules"] == ["experiments.examples.sac_huber"]
    assert code == provenance.plugin_code("experiments.examples.sac_huber:AGENT")
    for name in ("metrics.csv", "metrics.jsonl", "learning_curve.png", "tensorboard"):
        assert os.path.exists(os.path.join(run_dir, name))


@pytest.mark.slow
def test_dmc_run_checkpoints_resumes_and_records_videos_that_change_nothing(tmp_path, cli, monkeypatch):
    """MJX states hold zero-size arrays, which orbax refuses; the whole state must still round-trip. Videos (every
    100 env steps and the final policy; into TensorBoard and offline W&B too) are rollouts of their own: the state
    equals that of the same run without them, and ``jaxrl video`` renders a checkpoint's episode exactly again.
    The agent is a plug-in (``module:ATTR``, SAC with a Huber critic loss): its resume and ``jaxrl video`` find it
    through the import path its run recorded, as they find a registered agent by name."""
    from envs.rendering import NO_GL, select_gl_backend
    from jaxrl.video import read_mp4
    from tests.helpers import tensorboard_events

    if select_gl_backend() is None:
        pytest.skip(NO_GL)  # .ci/run installs the libraries, so CI always runs this test

    run_dir, plain = str(tmp_path / "dmc"), str(tmp_path / "plain")
    # 50 env steps at the dmc/ suite's action repeat 2: 25 decisions, 26 frames (the reset state and each decision).
    args = ["--env", "dmc/CartpoleSwingup", "--num-envs", "2", "--num-eval-envs", "1", "--episode-length", "50",
            "--eval-every", "100", "--learning-starts", "50", "--agent", "experiments.examples.sac_huber:AGENT",
            "--sac-huber.hidden-sizes", "16", "16", "--sac-huber.batch-size", "16", "--buffer-size", "1000",
            "--checkpoint-every", "100"]
    # In this process (the cli fixture): four commands, each a Python start and a JAX/MJX import saved.
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    first = cli("train", *args, "--run-dir", run_dir, "--steps", "100", "--video-every", "100", "--video-width",
                "64", "--video-height", "48", "--wandb")
    assert first.returncode == 0, first.stderr
    assert "video " in first.stdout and "26 frames (64x48)" in first.stdout
    resumed = cli("train", "--resume", run_dir, "--steps", "200")
    assert resumed.returncode == 0, resumed.stderr
    summary = json.load(open(os.path.join(run_dir, "summary.json")))
    assert summary["resumed_from"] == 100 and summary["env_steps"] == 200
    assert np.isfinite(summary["final_eval_return"]) and summary["agent"] == "sac_huber"
    assert json.load(open(os.path.join(run_dir, "config.json")))["agent"] == "experiments.examples.sac_huber:AGENT"
    assert sorted(os.listdir(os.path.join(run_dir, "videos"))) == ["env_step_100.mp4", "env_step_200.mp4"]
    for name in ("env_step_100.mp4", "env_step_200.mp4"):
        frames, fps = read_mp4(os.path.join(run_dir, "videos", name))
        assert len(frames) == 26 and frames[0].shape == (48, 64, 3) and fps == 50.0  # 1 / (0.01 s x 2)
        assert np.std(frames[0]) > 5  # a drawn scene, not a blank frame
    gifs = [(e.step, v.image) for e in tensorboard_events(run_dir) for v in e.summary.value if v.tag == "eval/video"]
    assert [step for step, _ in gifs] == [100, 200]
    assert all(image.encoded_image_string[:6] == b"GIF89a" and image.width == 64 for _, image in gifs)
    logged = [(r["_step"], r["eval/video/path"]) for run in wandb_offline_runs(run_dir) for r in run["history"]
              if "eval/video/path" in r]  # a wandb.Video: its file, type, size and hash
    assert [step for step, _ in logged] == [100, 200] and all(path.endswith(".mp4") for _, path in logged)

    assert cli("train", *args, "--run-dir", plain, "--steps", "200").returncode == 0
    a, b = saved_state(run_dir, 200), saved_state(plain, 200)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)

    # The newest checkpoint's first episode is the final video's episode: the same frames, encoded to the same bytes.
    again = cli("video", run_dir, "--out", str(tmp_path / "again.mp4"))
    assert again.returncode == 0 and "env step 200, 26 frames" in again.stdout, again.stderr
    assert open(tmp_path / "again.mp4", "rb").read() == open(os.path.join(run_dir, "videos", "env_step_200.mp4"),
                                                              "rb").read()
    from experiments.video import render_checkpoint

    two = render_checkpoint(run_dir, str(tmp_path / "two.mp4"), step=100, episodes=2)
    assert two["frames"] == 52 and len(read_mp4(str(tmp_path / "two.mp4"))[0]) == 52


@pytest.mark.slow
def test_wandb_offline_run_holds_the_metrics_and_config_and_a_resume_continues_its_id(tmp_path):
    pytest.importorskip("wandb")
    run_dir = str(tmp_path / "run")
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}

    def train(*args):
        result = subprocess.run([sys.executable, "-m", "experiments.cli", "train", *args], capture_output=True,
                                text=True, timeout=600, env=env)
        assert result.returncode == 0, result.stderr

    train(*TINY, "--steps", "400", "--run-dir", run_dir, "--wandb", "--wandb-group", "g1", "--wandb-tags", "a", "b")
    train("--resume", run_dir, "--steps", "600")
    run_id = json.load(open(os.path.join(run_dir, "wandb_run.json")))["id"]
    first, resumed = wandb_offline_runs(run_dir)
    assert first["id"] == resumed["id"] == run_id  # `wandb sync` uploads both into one W&B run
    assert first["group"] == "g1" and first["tags"] == ["a", "b"]
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    logged = {r["_step"]: r for run in (first, resumed) for r in run["history"] if "eval/return" in r}
    assert sorted(logged) == [200, 400, 600]  # each chunk once: the resume starts after the last logged row
    for row in rows:
        for name in ("eval/return", "train/critic_loss", "train/alpha", "env_steps_per_s"):
            if name in row and np.isfinite(row[name]):
                assert logged[row["env_steps"]][name] == pytest.approx(row[name], rel=1e-6), name
    config = json.load(open(os.path.join(run_dir, "config.json")))
    for run, steps in ((first, 400), (resumed, 600)):  # config.json as it was when each process started
        assert run["config"]["agent"] == "sac" and run["config"]["loop"] == {**config["loop"], "steps": steps}
        assert run["config"]["agent_config"] == config["agent_config"] and run["config"]["run"]["wandb"]
    summary = json.load(open(os.path.join(run_dir, "summary.json")))
    assert resumed["summary"]["final_eval_return"] == pytest.approx(summary["final_eval_return"])
    assert resumed["summary"]["env_steps"] == 600


def test_a_resumed_wandb_run_skips_the_rows_it_sent_before_a_kill(tmp_path, monkeypatch):
    """A run killed after its checkpoint recomputes the rows since then on resume: W&B gets each env step once."""
    pytest.importorskip("wandb")
    from jaxrl.logging import WandbRun

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    first = WandbRun(str(tmp_path), {"a": 1}, "p")
    for step in (100, 200, 300):  # 300 came after the last checkpoint (200), then the process was killed
        first.log({"eval/return": float(step)}, step)
    first.run.finish()
    resumed = WandbRun(str(tmp_path), {"a": 1}, "p")
    for step in (300, 400):  # recomputed from the checkpoint at 200
        resumed.log({"eval/return": float(step)}, step)
    resumed.finish({"final_eval_return": 400.0})
    runs = wandb_offline_runs(str(tmp_path))
    assert [r["id"] for r in runs] == [first.id, first.id]
    assert [[h["_step"] for h in r["history"]] for r in runs] == [[100, 200, 300], [400]]
    assert runs[1]["summary"]["final_eval_return"] == 400.0 and runs[1]["config"]["a"] == 1
