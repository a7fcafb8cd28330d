"""What users type: the README's commands verbatim from another working directory, every path form, every stop
signal at any moment, out of memory, unwritable places, malformed flags, and run and sweep directories never
mistaken for each other. Every failure is one line (issue 30)."""
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import jax
import pytest

from experiments import rundir
from jaxrl import ConfigError, checkpoint
from tests.helpers import TINY, assert_one_line_error, doc_block, tmpfs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = [*TINY, "--learning-starts", "100"]


def jaxrl_in(cwd, *args, timeout=600):
    """``jaxrl ARGS`` as a user types it, from ``cwd`` (the package importable from anywhere, as installed)."""
    env = {**os.environ, "PYTHONPATH": REPO}
    return subprocess.run([sys.executable, "-m", "experiments.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


def no_traceback(result):
    assert "Traceback" not in result.stderr + result.stdout, result.stderr


@pytest.fixture(scope="module")
def two_seeds(tmp_path_factory):
    """A finished 400-step run of two seeds (relative paths inside a user's working directory)."""
    cwd = tmp_path_factory.mktemp("user")
    result = jaxrl_in(cwd, "train", *RUN, "--steps", "400", "--seeds", "2", "--run-dir", "runs/x")
    assert result.returncode == 0, result.stderr
    return cwd


def copy_run(two_seeds, where):
    shutil.copytree(two_seeds / "runs" / "x", where)
    return str(where)


# ------------------------------------------------------------------------------------------------------ paths


@pytest.mark.slow
def test_the_readmes_commands_run_verbatim_from_a_working_directory(tmp_path):
    lines = doc_block("docs/guide/run-directories.md", "these lines verbatim in a fresh working directory")
    assert [line.split()[1] for line in lines] == ["train", "train", "export", "plot"]
    for line in lines:
        result = jaxrl_in(tmp_path, *line.split()[1:])
        assert result.returncode == 0, f"{line}\n{result.stderr}"
        no_traceback(result)
    summary = json.load(open(tmp_path / "runs" / "quick" / "summary.json"))
    assert summary["resumed_from"] == 1000 and summary["env_steps"] == 2000  # the chunk stays the run's own
    assert os.path.getsize(tmp_path / "runs" / "quick" / "policy.onnx") > 0
    assert "runs/quick: a run directory" in result.stdout  # plot says what it was given


@pytest.mark.slow
def test_every_path_form_works_relative_absolute_trailing_slash_symlinked_and_from_elsewhere(two_seeds, tmp_path):
    (tmp_path / "runs").mkdir()
    copy_run(two_seeds, tmp_path / "runs" / "x")
    os.symlink("runs/x", tmp_path / "link")
    sub = tmp_path / "elsewhere"
    sub.mkdir()
    resumed = jaxrl_in(tmp_path, "train", "--resume", "runs/x/", "--steps", "600")
    assert resumed.returncode == 0, resumed.stderr
    assert json.load(open(tmp_path / "runs" / "x" / "summary.json"))["env_steps"] == 600
    exported = jaxrl_in(sub, "export", "../link", "--member", "1", "--out", "../runs/m1")
    assert exported.returncode == 0, exported.stderr
    printed = re.search(r"jaxrl train --resume (\S+) continues it", exported.stdout).group(1)
    assert printed == "../runs/m1"
    assert json.load(open(tmp_path / "runs" / "m1" / "config.json"))["env_revision"] == 1  # the env it trained
    continued = jaxrl_in(sub, "train", "--resume", printed, "--steps", "800")  # the line export printed, as printed
    assert continued.returncode == 0, continued.stderr
    onnx = jaxrl_in(sub, "export", str(tmp_path / "runs" / "x"), "--onnx", "p.onnx")
    assert onnx.returncode == 0 and os.path.exists(sub / "p.onnx"), onnx.stderr
    # A toy env cannot render, but the checkpoint behind a relative path restores before it says so.
    video = jaxrl_in(sub, "video", "../runs/x")
    assert_one_line_error(video, "toy/Pendulum cannot render a video")


def test_a_seeds_runs_summary_repeats_its_last_metrics_row(two_seeds):
    run_dir = two_seeds / "runs" / "x"
    last = [json.loads(line) for line in open(run_dir / "metrics.jsonl")][-1]
    summary = json.load(open(run_dir / "summary.json"))
    assert summary["final_eval_return"] == last["eval/return"]  # one reduction, not two of the same numbers
    assert summary["final_eval_return_per_seed"] == [last["eval/return/seed0"], last["eval/return/seed1"]]
    # The chunk compiles before the run holds its directory; wall time still counts it.
    assert summary["wall_s"] >= summary["compile_s"] + summary["run_s"] + summary["checkpoint_s"]


# ---------------------------------------------------------------------------------------- runs and sweeps apart


SWEEP = """
agent = "sac"
envs = ["toy/Pendulum"]
[loop]
steps = 400
"""


def test_a_sweep_never_writes_into_a_run_and_a_run_never_into_a_sweep(two_seeds, tmp_path, cli):
    run_dir = copy_run(two_seeds, tmp_path / "run")
    sweep_file = tmp_path / "s.toml"
    sweep_file.write_text(SWEEP)
    before = sorted(os.listdir(run_dir))
    assert_one_line_error(cli("sweep", str(sweep_file), "--out", run_dir), "holds a training run", "--out")
    assert sorted(os.listdir(run_dir)) == before

    out = tmp_path / "sweep_out"
    (out / "members").mkdir(parents=True)
    (out / "plan.json").write_text("{}")
    for flags in ([], ["--overwrite"]):
        assert_one_line_error(cli("train", *RUN, "--run-dir", str(out), *flags), "holds a sweep's outputs")
    assert_one_line_error(cli("train", "--resume", str(out)), "is a sweep's output directory", "groups")
    assert_one_line_error(cli("export", str(out), "--onnx", str(tmp_path / "p.onnx")), "sweep's output directory")
    assert_one_line_error(cli("video", str(out)), "sweep's output directory")
    shutil.copy(os.path.join(run_dir, "config.json"), out / "config.json")  # what an older jaxrl let happen
    assert_one_line_error(cli("plot", str(out), "--out", str(tmp_path / "p.png")), "holds both a run",
                          "config.json", "plan.json")
    assert sorted(os.listdir(out)) == ["config.json", "members", "plan.json"]


def test_a_sweep_field_named_twice_is_an_error_naming_both_spellings(tmp_path, cli):
    sweep_file = tmp_path / "twice.toml"
    sweep_file.write_text(SWEEP + '[grid]\nactor_lr = [1e-3]\n"agent_config.actor_lr" = [3e-4]\n')
    assert_one_line_error(cli("sweep", str(sweep_file), "--out", str(tmp_path / "o")), "named twice", "actor_lr",
                          "agent_config.actor_lr")
    sweep_file.write_text(SWEEP + '[grid]\ntau = [0.01]\n[random]\n"agent_config.tau" = {uniform = [0.001, 0.1]}\n')
    assert_one_line_error(cli("sweep", str(sweep_file), "--dry-run"), "named twice", "[random]")


# ---------------------------------------------------------------------------------------------------- signals


def launch(cwd, *args):
    env = {**os.environ, "PYTHONPATH": REPO}
    return subprocess.Popen([sys.executable, "-m", "experiments.cli", *args], cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["SIGHUP", "SIGQUIT", "SIGUSR1"])
def test_a_closed_terminal_and_every_stop_signal_checkpoint_and_stop_in_one_line(tmp_path, name):
    proc = launch(tmp_path, "train", *RUN, "--steps", "2000000", "--run-dir", "runs/s")
    metrics = tmp_path / "runs" / "s" / "metrics.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and not (metrics.exists() and len(metrics.read_text().splitlines()) >= 2):
        time.sleep(0.05)
    proc.send_signal(getattr(signal, name))
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 128 + getattr(signal, name), stderr
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert "Traceback" not in stderr and lines[-1].startswith(f"jaxrl: stopped by {name} at env step ")
    stopped = int(lines[-1].split("env step ")[1].split()[0])
    assert checkpoint.steps(str(tmp_path / "runs" / "s" / "checkpoints")) == [stopped]
    assert "jaxrl train --resume runs/s" in lines[-1]


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.0, 1.0, 2.5])
def test_ctrl_c_at_any_moment_of_the_start_stops_cleanly(tmp_path, delay):
    """Delays count from the moment jaxrl's handlers exist. Before the run holds its directory a SIGINT ends the
    command with nothing written; later it stops with a
    checkpoint. Never a traceback, never ignored (Python's KeyboardInterrupt used to be swallowed inside JAX's
    garbage-collection callback, and the run trained to the end)."""
    proc = launch(tmp_path, "train", *RUN, "--steps", "2000000", "--run-dir", "runs/c")
    caught = ""
    while not caught and proc.poll() is None:  # jaxrl's handlers exist (SIGHUP caught: only main installs one);
        status = open(f"/proc/{proc.pid}/status").read()  # before, the interpreter is still starting
        caught = int(re.search(r"SigCgt:\s*([0-9a-f]+)", status).group(1), 16) & (1 << (signal.SIGHUP - 1))
        time.sleep(0.01)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    last = stderr.strip().splitlines()[-1]
    run_dir = tmp_path / "runs" / "c"
    if last == "jaxrl: stopped by SIGINT; nothing was written":
        assert not run_dir.exists()
    else:
        assert last.startswith("jaxrl: stopped by SIGINT at env step "), stderr
        assert checkpoint.steps(str(run_dir / "checkpoints"))


# ------------------------------------------------------------------------------------------------ out of memory


def test_a_program_that_does_not_fit_is_one_line_before_any_file(tmp_path, cli, monkeypatch):
    """The evaluation's working memory counts: 10^6 evaluation envs hold 34 MiB of env state, which the shape check
    lets through, but the compiled chunk's temporaries (observations, activations) are ~150 MiB."""
    from jaxrl import buffer

    monkeypatch.setattr(buffer, "available_bytes", lambda device=None: 100 * 2**20)
    run_dir = str(tmp_path / "runs" / "oom")
    result = cli("train", *RUN, "--steps", "400", "--num-eval-envs", "1000000", "--run-dir", run_dir)
    assert_one_line_error(result, "compiled training program needs", "GiB", "num_eval_envs")
    from experiments.train import out_of_memory

    assert "out of memory" in str(out_of_memory(jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED:")))
    assert os.listdir(tmp_path) == []


def test_out_of_memory_while_running_leaves_the_directory_as_it_was(two_seeds, tmp_path, cli, monkeypatch):
    """XLA's RESOURCE_EXHAUSTED at run time (a GPU whose memory another process took): one line, exit 2; a new run
    leaves no directory, a resumed one its config.json as it was (the resume's changes are not recorded)."""
    import jax

    from experiments import train as train_lib

    prepare = train_lib._prepare

    def exhausted(*args):
        prepared = prepare(*args)

        def run_chunk(state):
            raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17.2GiB.")
        return prepared._replace(run_chunk=run_chunk)

    monkeypatch.setattr(train_lib, "_prepare", exhausted)
    new = str(tmp_path / "new")
    assert_one_line_error(cli("train", *RUN, "--steps", "400", "--run-dir", new), "out of memory", "17.2GiB",
                          "buffer_size")
    assert not os.path.exists(new)
    resumed = copy_run(two_seeds, tmp_path / "resumed")
    before = snapshot(resumed)
    result = cli("train", "--resume", resumed, "--steps", "800", "--sac.actor-lr", "1e-3")
    assert_one_line_error(result, "out of memory")
    assert snapshot(resumed) == before


def snapshot(directory):
    """Every file's path and bytes."""
    out = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            out[os.path.relpath(path, directory)] = open(path, "rb").read()
    return out


# ---------------------------------------------------------------------------------------- unwritable and bad paths


@pytest.fixture
def read_only(tmp_path):
    """An 8 MiB tmpfs that the test remounts read-only (needs root and mount rights; CI runs as root)."""
    with tmpfs(tmp_path / "ro", "8m") as mount:
        yield mount


def test_read_only_and_unwritable_places_are_one_line(two_seeds, read_only, cli):
    run_dir = copy_run(two_seeds, read_only / "run")
    subprocess.run(["mount", "-o", "remount,ro", str(read_only)], check=True)
    assert_one_line_error(cli("train", "--resume", run_dir, "--steps", "600"), "cannot be written", "read-only")
    assert_one_line_error(cli("export", run_dir, "--onnx", str(read_only / "p.onnx")), "--onnx", "cannot be written")
    assert_one_line_error(cli("plot", run_dir, "--out", str(read_only / "p.png")), "--out", "cannot be written")
    assert_one_line_error(cli("export", run_dir, "--member", "0", "--out", str(read_only / "m0")), "--out",
                          "cannot be created")
    assert_one_line_error(cli("sweep", "s.toml", "--out", str(read_only / "sweep")), "--out", "cannot be created")


@pytest.mark.parametrize("flags, fragments", [
    (["--run-dir", ""], ["--run-dir ''", "empty"]),
    (["--run-dir", "runs/" + "x" * 300], ["--run-dir", "300 bytes", "allows"]),
    (["--agent", "sac", "--config", "td3_brax"], ["--agent sac", "td3_brax", "'td3'"]),
    (["--action-repeat", "500"], ["action_repeat=500", "200 env steps"]),
    (["--steps", "4e3"], ["--steps", "'4e3'", "INT"]),
    (["--agent", "sac", "--td3.policy-noise", "0.3"], ["--td3.policy-noise", "agent td3", "--sac.*"]),
    (["--sac.hidden-sizes", "16", "x"], ["--sac.hidden-sizes", "INT"]),
    (["--agent"], ["--agent", "expected one argument"]),
])
def test_bad_paths_and_malformed_flags_are_one_line(tmp_path, flags, fragments, cli):
    monkey_cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        result = cli("train", *RUN, *flags)
    finally:
        os.chdir(monkey_cwd)
    assert result.returncode == 2
    assert_one_line_error(result, *fragments)
    assert os.listdir(tmp_path) == []


def test_a_plug_in_agent_may_train_under_a_built_in_agents_config_with_a_note(cli):
    result = cli("train", "--agent", "experiments.examples.sac_huber:AGENT", "--config", "sac_dmc", "--help")
    assert result.returncode == 0 and "--sac-huber.actor-lr" in result.stdout
    assert "plug-in agent experiments.examples.sac_huber:AGENT trains under config sac_dmc's protocol" in \
        result.stderr and "--agent wins" in result.stderr


def test_other_commands_usage_errors_are_one_line(cli):
    assert_one_line_error(cli("sweep"), "jaxrl sweep", "required: file")
    assert_one_line_error(cli("export", "x", "--member", "one"), "--member", "invalid int value")
    assert_one_line_error(cli("plot"), "jaxrl plot", "required")


# ------------------------------------------------------------------------------------------------------ smaller


def test_a_reproduction_task_without_published_numbers_is_said_before_training(capsys):
    from experiments import reproduce

    plan = reproduce.make_plan("sac_dmc", ["toy/Pendulum", "dmc/CartpoleSwingup"], 20000, 1, [])
    assert reproduce.note_unpublished(plan) == ["toy/Pendulum"]
    err = capsys.readouterr().err
    assert "toy/Pendulum has no published sac result" in err and "not one of config sac_dmc's tasks" in err
    assert "CartpoleSwingup" not in err


def test_a_reproduction_whose_steps_end_before_learning_starts_is_refused_before_any_task_trains(tmp_path, cli):
    assert_one_line_error(cli("reproduce", "sac_dmc", "--tasks", "dmc/CartpoleSwingup", "--steps", "400", "--out",
                              str(tmp_path / "r")), "learning_starts=5000", "steps=400")
    assert not os.path.exists(tmp_path / "r")


def test_overwrite_removes_a_killed_runs_temporary_files_too(tmp_path):
    for name in ("config.json", "metrics.csv", "metrics.csv.tmp4242", "summary.json.tmp17", "notes.txt"):
        (tmp_path / name).write_text("x")
    rundir.remove_run_files(str(tmp_path))
    assert os.listdir(tmp_path) == ["notes.txt"]


def test_a_torn_lock_file_is_described_without_question_marks(tmp_path, capsys):
    (tmp_path / "run.lock").write_text('{"pid": 12')  # torn: a kill while the owner wrote it
    rundir.RunLock(str(tmp_path)).acquire().release()
    err = capsys.readouterr().err
    assert "took over the stale lock of another process" in err and "?" not in err


def test_a_short_run_saved_by_an_older_jaxrl_keeps_its_chunk_when_resumed_longer(two_seeds, tmp_path):
    """Runs shorter than eval_every train one chunk of their own steps; before the chunk was written down as
    eval_every, `--resume --steps` longer recomputed it from the new steps (2000 then --steps 4000 ended at 6000)."""
    saved = rundir.load_saved(copy_run(two_seeds, tmp_path / "old"))
    saved["loop"]["eval_every"], saved["resolved"]["chunk_env_steps"] = 10_000, 400
    assert rundir.resolve(saved=saved, run_dir=str(tmp_path / "old")).loop.eval_every == 400


def test_a_run_saved_before_its_env_changed_continues_as_the_env_it_trained(two_seeds, tmp_path, capsys):
    """dmc/FingerSpin follows dm_control since env revision 2; a run saved before (no revision in config.json)
    trained Playground's port, now dmc/FingerSpinPlayground: resume, export and reports read it as that, and
    `reproduce`'s reuse refuses it for the new dmc/FingerSpin instead of continuing it on another env."""
    from experiments.train import continue_or_start

    run_dir = copy_run(two_seeds, tmp_path / "old")
    path = os.path.join(run_dir, "config.json")
    saved = json.load(open(path))
    assert saved["env_revision"] == 1  # toy/Pendulum never changed
    saved["run"]["env"] = "dmc/FingerSpin"
    json.dump({k: v for k, v in saved.items() if k != "env_revision"}, open(path, "w"))
    assert rundir.load_saved(run_dir)["run"]["env"] == "dmc/FingerSpinPlayground"
    assert "trained dmc/FingerSpin before that name changed" in capsys.readouterr().err
    base = rundir.resolve(saved=rundir.load_saved(run_dir), run_dir=run_dir)
    with pytest.raises(ConfigError, match="run.env: 'dmc/FingerSpinPlayground' there, 'dmc/FingerSpin' now"):
        continue_or_start(base.agent, dataclasses.replace(base.run, env="dmc/FingerSpin"), base.loop, base.agent_cfg)
    json.dump({**saved, "env_revision": 2}, open(path, "w"))
    assert rundir.load_saved(run_dir)["run"]["env"] == "dmc/FingerSpin"
