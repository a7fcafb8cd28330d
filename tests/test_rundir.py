"""Run directories keep results safe: no run written over another, locks, resume rules, signals, damaged
checkpoints, torn files, full or read-only disks (experiments/rundir.py, jaxrl/checkpoint.py, experiments/train.py)."""
import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import rundir
from jaxrl import ConfigError, checkpoint, files
from tests.helpers import TINY, assert_one_line_error, jaxrl, saved_state, tmpfs

# Explicit warm-up so the run's length can change without changing when learning starts.
RUN = [*TINY, "--learning-starts", "100"]


def snapshot(directory):
    """Every file's bytes and modification time: "nothing changed" means this is equal before and after."""
    out = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
                out[os.path.relpath(path, directory)] = (digest, os.stat(path).st_mtime_ns)
    return out


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished 400-step run with checkpoints at 200 and 400; tests work on copies."""
    run_dir = str(tmp_path_factory.mktemp("finished") / "run")
    result = jaxrl("train", *RUN, "--steps", "400", "--checkpoint-every", "200", "--run-dir", run_dir)
    assert result.returncode == 0, result.stderr
    return run_dir


def copy_of(finished, tmp_path, name="run"):
    target = str(tmp_path / name)
    shutil.copytree(finished, target)
    return target


def rows(run_dir):
    return [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]


# ------------------------------------------------------------------------------------- new runs, names, lock


def test_a_new_run_refuses_a_directory_that_holds_a_run_and_changes_nothing(finished, tmp_path, cli):
    run_dir = copy_of(finished, tmp_path)
    before = snapshot(run_dir)
    result = cli("train", *RUN, "--steps", "400", "--run-dir", run_dir)
    assert_one_line_error(result, run_dir, "already holds a run", f"--resume {run_dir}", "--run-dir", "--overwrite")
    assert snapshot(run_dir) == before
    for partial in ("checkpoints", "metrics.jsonl", "summary.json"):  # any one of a run's files is enough
        other = copy_of(finished, tmp_path, f"only-{partial}")
        for name in rundir.RUN_FILES:
            if name != partial and os.path.exists(os.path.join(other, name)):
                shutil.rmtree(os.path.join(other, name)) if os.path.isdir(os.path.join(other, name)) else \
                    os.unlink(os.path.join(other, name))
        assert_one_line_error(cli("train", *RUN, "--steps", "400", "--run-dir", other), "already holds a run")


@pytest.mark.slow
def test_overwrite_removes_the_old_run_completely(finished, tmp_path):
    run_dir = copy_of(finished, tmp_path)
    (tmp_path / "run" / "notes.txt").write_text("mine")
    result = jaxrl("train", *RUN, "--steps", "200", "--eval-every", "100", "--overwrite", "--run-dir", run_dir)
    assert result.returncode == 0, result.stderr
    assert os.listdir(os.path.join(run_dir, "checkpoints")) == ["200"]  # the old 400 is gone, not mixed in
    assert [r["env_steps"] for r in rows(run_dir)] == [100, 200]
    assert json.load(open(os.path.join(run_dir, "config.json")))["loop"]["steps"] == 200
    assert (tmp_path / "run" / "notes.txt").read_text() == "mine"  # only the run's own files are removed


def test_default_run_names_are_unique_within_a_second(tmp_path, monkeypatch):
    monkeypatch.setattr(time, "strftime", lambda fmt: "20261201-120000")
    names = [rundir.default_run_dir("sac", "toy/Pendulum", parent=str(tmp_path)) for _ in range(50)]
    assert len(set(names)) == 50 and all(os.path.isdir(n) for n in names)
    # A suffix another launch already took is never reused (mkdir is the atomic claim).
    draws = iter(["aaaaaa", "aaaaaa", "bbbbbb"])
    monkeypatch.setattr(rundir.secrets, "token_hex", lambda n: next(draws))
    first = rundir.default_run_dir("sac", "toy/Pendulum", parent=str(tmp_path / "x"))
    second = rundir.default_run_dir("sac", "toy/Pendulum", parent=str(tmp_path / "x"))
    assert first.endswith("-aaaaaa") and second.endswith("-bbbbbb")


HOLD_LOCK = """
import sys, time
from experiments.rundir import RunLock
RunLock(sys.argv[1]).acquire()
print("locked", flush=True)
time.sleep(300)
"""


def test_a_directory_in_use_is_refused_and_a_dead_owners_lock_is_taken_over(finished, tmp_path, capsys, cli):
    run_dir = copy_of(finished, tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, run_dir], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert_one_line_error(cli("train", "--resume", run_dir, "--steps", "600"), run_dir,
                              f"in use by pid {holder.pid} on host")
        fresh = str(tmp_path / "fresh")
        os.makedirs(fresh)
        other = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, fresh], stdout=subprocess.PIPE, text=True)
        assert other.stdout.readline().strip() == "locked"
        assert_one_line_error(cli("train", *RUN, "--steps", "400", "--run-dir", fresh), f"pid {other.pid}")
        other.kill()
        other.wait()
    finally:
        holder.kill()
        holder.wait()
    # SIGKILL left run.lock naming a dead pid; the kernel released its lock, so it is stale.
    assert str(holder.pid) in open(os.path.join(run_dir, rundir.LOCK_FILE)).read()
    with rundir.RunLock(run_dir):
        assert f"took over the stale lock of pid {holder.pid}" in capsys.readouterr().err
    assert not os.path.exists(os.path.join(run_dir, rundir.LOCK_FILE))


# ----------------------------------------------------------------------------------------------- resume rules


@pytest.mark.parametrize("flags, fragment", [
    (["--env", "toy/PointMass"], "env"),
    (["--sac.hidden-sizes", "8", "8"], "hidden_sizes"),
    (["--num-envs", "2"], "num_envs"),
    (["--seeds", "2"], "seeds"),
    (["--agent", "td3"], "agent"),
    (["--sac.init-alpha", "0.5"], "init_alpha"),  # numeric, but only init reads it: refused, not ignored
    (["--steps", "200"], "fewer than the 400 env steps"),
])
def test_a_refused_resume_changes_nothing(finished, tmp_path, flags, fragment, cli):
    run_dir = copy_of(finished, tmp_path)
    before = snapshot(run_dir)
    assert_one_line_error(cli("train", "--resume", run_dir, *flags), fragment)
    assert snapshot(run_dir) == before


def test_resuming_a_finished_run_says_so_and_changes_nothing(finished, tmp_path, cli):
    run_dir = copy_of(finished, tmp_path)
    before = snapshot(run_dir)
    result = cli("train", "--resume", run_dir)
    assert result.returncode == 0, result.stderr
    assert f"run {run_dir} is finished (400 env steps)" in result.stderr
    assert snapshot(run_dir) == before


def with_environment(run_dir, change):
    """Edit the stack a saved run recorded: ``change(block)`` returns the new block (None: remove it)."""
    path = os.path.join(run_dir, "config.json")
    config = json.load(open(path))
    block = change(config.get("environment"))
    config.pop("environment", None)
    files.write_json(path, {**config, **({"environment": block} if block is not None else {})})


def older_jax(block):
    return {**block, "packages": {**block["packages"], "jax": "0.0.1"}}


def test_a_run_records_its_stack_and_a_resume_under_another_says_so_or_refuses(finished, tmp_path, cli, repo_root):
    from jaxrl import provenance

    block = json.load(open(os.path.join(finished, "config.json")))["environment"]
    assert block["packages"] == provenance.package_versions() and block["lock"]["differs"] == {}
    head = subprocess.run(["git", "-C", repo_root, "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert block["git"]["commit"] == head.strip() and block["devices"] == {"backend": "cpu", "kind": "cpu",
                                                                           "count": 1, "processes": 1}
    assert block["python"] and block["cpu"]["model"] and "XLA_FLAGS" in provenance.NUMERICS_VARIABLES
    run_dir = copy_of(finished, tmp_path)
    with_environment(run_dir, older_jax)
    before = snapshot(run_dir)
    result = cli("train", "--resume", run_dir)
    assert result.returncode == 0, result.stderr
    assert (f"{run_dir} trained under another stack (jax 0.0.1 -> {block['packages']['jax']}): it continues, but "
            "not bitwise") in result.stderr
    assert_one_line_error(cli("train", "--resume", run_dir, "--same-stack"), "--same-stack",
                          f"jax 0.0.1 -> {block['packages']['jax']}")
    assert snapshot(run_dir) == before
    # A run made before runs recorded their stack: nothing to compare, said in one line; --same-stack refuses.
    with_environment(run_dir, lambda _: None)
    before = snapshot(run_dir)
    result = cli("train", "--resume", run_dir)
    assert result.returncode == 0 and "no environment recorded" in result.stderr, result.stderr
    assert_one_line_error(cli("train", "--resume", run_dir, "--same-stack"), "no environment recorded")
    assert snapshot(run_dir) == before
    assert_one_line_error(cli("train", *RUN, "--same-stack"), "--same-stack applies to --resume")


def test_a_resume_after_the_plug_in_code_changed_says_so_or_refuses(finished, tmp_path, cli):
    """The stack check covers a plug-in's own code (config.json's environment.agent_code): here a run whose recorded
    plug-in hash differs from what the agent runs now (a built-in: none)."""
    run_dir = copy_of(finished, tmp_path)
    code = {"module": "myagent", "modules": ["myagent", "myhelper"], "sha256": "0123456789abcdef"}
    with_environment(run_dir, lambda block: {**block, "agent_code": code})
    before = snapshot(run_dir)
    result = cli("train", "--resume", run_dir)
    assert result.returncode == 0, result.stderr
    assert ("trained under another stack (plug-in code myagent 0123456789abcdef (2 module(s)) -> not recorded): it "
            "continues, but not bitwise") in result.stderr
    assert_one_line_error(cli("train", "--resume", run_dir, "--same-stack"), "--same-stack", "plug-in code myagent")
    assert snapshot(run_dir) == before


@pytest.mark.slow
def test_a_changed_learning_rate_applies_from_the_resumed_step_and_is_recorded(finished, tmp_path):
    run_dir = copy_of(finished, tmp_path)
    assert_one_line_error(jaxrl("train", "--resume", run_dir, "--sac.critic-lr", "-1"), "critic_lr", "-1")
    with_environment(run_dir, older_jax)  # and continued under another stack than it started with
    result = jaxrl("train", "--resume", run_dir, "--steps", "600", "--sac.critic-lr", "1e-4")
    assert result.returncode == 0, result.stderr
    assert "trained under another stack (jax 0.0.1 -> " in result.stderr
    config = json.load(open(os.path.join(run_dir, "config.json")))
    # The stack it started under stays; the resume's is recorded from the env step it applied.
    (resumed,) = config["resumed_under"]
    assert config["environment"]["packages"]["jax"] == "0.0.1" and resumed["env_step"] == 400
    assert resumed["environment"]["packages"]["jax"] == jax.__version__
    assert config["agent_config"]["critic_lr"] == 1e-4
    assert config["changes"] == [{"env_step": 400, "fields": {"agent_config.critic_lr": [3e-4, 1e-4],
                                                               "loop.steps": [400, 600]}}]
    np.testing.assert_allclose(saved_state(run_dir, 600)[".hparams.critic_lr"], [1e-4])  # in the trained state
    np.testing.assert_allclose(saved_state(run_dir, 400)[".hparams.critic_lr"], [3e-4])
    by_step = {r["env_steps"]: r for r in rows(run_dir)}
    assert "hparams/critic_lr" not in by_step[400] and by_step[600]["hparams/critic_lr"] == pytest.approx(1e-4)
    # A plain resume afterwards keeps the changed value and logs it.
    again = jaxrl("train", "--resume", run_dir, "--steps", "800")
    assert again.returncode == 0, again.stderr
    assert rows(run_dir)[-1]["hparams/critic_lr"] == pytest.approx(1e-4)
    config = json.load(open(os.path.join(run_dir, "config.json")))
    assert len(config["changes"]) == 2  # the second: steps only
    # Under the stack it last trained under: no note, nothing appended.
    assert "another stack" not in again.stderr and len(config["resumed_under"]) == 1


@pytest.mark.slow
def test_a_torn_last_metrics_line_is_dropped_on_resume(finished, tmp_path):
    run_dir = copy_of(finished, tmp_path)
    # A crash between the metrics write of env step 400 and its checkpoint, in the middle of the line.
    shutil.rmtree(os.path.join(run_dir, "checkpoints", "400"))
    os.unlink(os.path.join(run_dir, "summary.json"))
    with open(os.path.join(run_dir, "metrics.jsonl"), "a") as f:
        f.write('{"env_steps": 60')
    result = jaxrl("train", "--resume", run_dir)
    assert result.returncode == 0, result.stderr
    assert "dropped line 3" in result.stderr and "Traceback" not in result.stderr
    assert [r["env_steps"] for r in rows(run_dir)] == [200, 400]
    assert json.load(open(os.path.join(run_dir, "summary.json")))["resumed_from"] == 200


def test_json_writes_are_atomic(tmp_path, monkeypatch):
    path = str(tmp_path / "config.json")
    files.write_json(path, {"a": 1})

    def crash(src, dst):
        raise OSError("simulated crash before the rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        files.write_json(path, {"a": 2})
    assert json.load(open(path)) == {"a": 1} and os.listdir(tmp_path) == ["config.json"]


# ------------------------------------------------------------------------------------------------ signals


@pytest.mark.slow
def test_sigterm_stops_at_a_chunk_boundary_with_a_checkpoint_and_resumes_bitwise(tmp_path):
    run_dir, reference = str(tmp_path / "run"), str(tmp_path / "reference")
    proc = subprocess.Popen([sys.executable, "-m", "experiments.cli", "train", *RUN, "--steps", "2000000",
                             "--run-dir", run_dir], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while time.time() < deadline and not (os.path.exists(os.path.join(run_dir, "metrics.jsonl"))
                                          and len(rows(run_dir)) >= 2):
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    seen = []
    while not any("SIGTERM received" in line for line in seen):  # (two pending signals run in number order)
        seen.append(proc.stderr.readline())
        assert seen[-1], "the run ended without noting SIGTERM"
    # A scheduler's warning (SLURM sends SIGTERM, then SIGUSR2) waits for the checkpoint instead of cutting it; a
    # second SIGINT would end the process at once (tests/test_stops.py).
    proc.send_signal(signal.SIGUSR2)
    _, rest = proc.communicate(timeout=300)
    stderr = "".join(seen) + rest
    assert "SIGUSR2 received: already stopping; waiting for the checkpoint" in stderr
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    last = [line for line in stderr.strip().splitlines() if line.strip()][-1]
    assert last.startswith("jaxrl: stopped by SIGTERM at env step ") and f"jaxrl train --resume {run_dir}" in last
    stopped = int(last.split("env step ")[1].split()[0])
    assert checkpoint.steps(os.path.join(run_dir, "checkpoints")) == [stopped]
    assert rows(run_dir)[-1]["env_steps"] == stopped and not os.path.exists(os.path.join(run_dir, "run.lock"))

    end = stopped + 400
    assert jaxrl("train", "--resume", run_dir, "--steps", str(end)).returncode == 0
    assert jaxrl("train", *RUN, "--steps", str(end), "--run-dir", reference).returncode == 0
    a, b = saved_state(reference, end), saved_state(run_dir, end)
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert [r["env_steps"] for r in rows(run_dir)] == list(range(200, end + 1, 200))


@pytest.mark.slow
def test_checkpoint_minutes_bounds_the_work_a_kill_can_lose(tmp_path):
    run_dir = str(tmp_path / "run")
    result = jaxrl("train", *RUN, "--steps", "600", "--checkpoint-minutes", "1e-9", "--keep-checkpoints", "5",
                   "--run-dir", run_dir)
    assert result.returncode == 0, result.stderr
    assert checkpoint.steps(os.path.join(run_dir, "checkpoints")) == [600, 400, 200]  # every chunk


# ---------------------------------------------------------------------------------------- checkpoint integrity


def small_state():
    return {"params": jnp.arange(12.0).reshape(3, 4), "step": jnp.int32(7), "empty": jnp.zeros((0, 3))}


def test_a_checkpoint_whose_values_changed_silently_is_damaged(tmp_path):
    directory = str(tmp_path / "ckpt")
    mngr = checkpoint.manager(directory, keep=3)
    checkpoint.save(mngr, 1, small_state())
    checkpoint.save(mngr, 2, jax.tree.map(lambda x: x + 1, small_state()))
    abstract = jax.eval_shape(small_state)
    state, step = checkpoint.restore(directory, abstract)
    assert step == 2 and float(state["params"][0, 0]) == 1.0
    # Flip bytes in the largest array file of step 2: its checksum no longer matches the manifest.
    data_file = largest_array_file(directory, 2, under="")
    flip(data_file)
    damaged = []
    state, step = checkpoint.restore(directory, abstract, on_damaged=lambda s, why: damaged.append((s, why)))
    assert step == 1 and damaged == [(2, f"checksum mismatch in {os.path.relpath(data_file, directory + '/2')}")]
    assert checkpoint.latest_intact_step(directory) == 1
    with pytest.raises(ConfigError, match="env step 2 is damaged .checksum mismatch"):
        checkpoint.restore(directory, abstract, step=2)
    os.unlink(os.path.join(directory, "1", checkpoint.MANIFEST))  # killed between orbax's commit and the manifest
    with pytest.raises(ConfigError, match="env step 2 is damaged .* the 1 older one"):
        checkpoint.restore(directory, abstract)


def test_an_intact_checkpoint_of_another_layout_is_refused_in_one_line_and_kept(tmp_path):
    """A checkpoint written with other shapes (an older jaxrl's buffer layout, say) is not damaged: its files
    verify. Resuming it must say so, keep it where it is, and not fall back to an older checkpoint."""
    directory = str(tmp_path / "ckpt")
    mngr = checkpoint.manager(directory, keep=3)
    checkpoint.save(mngr, 1, small_state())
    checkpoint.save(mngr, 2, small_state())
    other = jax.eval_shape(lambda: {**small_state(), "params": jnp.zeros((3, 5))})
    with pytest.raises(ConfigError, match=r"env step 2 .*another layout .\['params'\] is stored as float32\[3, 4\] "
                       r"where this run builds float32\[3, 5\]") as e:
        checkpoint.restore(directory, other, on_damaged=lambda s, why: pytest.fail("not damaged"))
    assert "\n" not in str(e.value) and "damaged" not in str(e.value)
    assert checkpoint.steps(directory) == [2, 1]


def largest_array_file(run_dir, step, under="checkpoints"):
    top = os.path.join(run_dir, under, str(step), "state")
    files = [os.path.join(root, name) for root, _, names in os.walk(top) for name in names]
    return max(files, key=os.path.getsize)


def flip(path):
    data = bytearray(open(path, "rb").read())
    for i in range(len(data) // 3, len(data) // 3 + 16):
        data[i] ^= 0xFF
    open(path, "wb").write(bytes(data))


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["flip", "truncate", "empty"])
def test_a_damaged_newest_checkpoint_falls_back_to_the_newest_intact_one(finished, tmp_path, damage):
    run_dir = copy_of(finished, tmp_path)
    path = largest_array_file(run_dir, 400)
    if damage == "flip":
        flip(path)
    else:
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2 if damage == "truncate" else 0)
    result = jaxrl("train", "--resume", run_dir, "--steps", "600")
    assert result.returncode == 0, result.stderr
    notes = [line for line in result.stderr.splitlines() if "damaged" in line]
    assert len(notes) == 1 and "env step 400" in notes[0] and "resuming from env step 200" in notes[0]
    assert json.load(open(os.path.join(run_dir, "summary.json")))["resumed_from"] == 200
    assert os.path.isdir(os.path.join(run_dir, "damaged_checkpoints", "400"))  # kept aside, not deleted
    assert [r["env_steps"] for r in rows(run_dir)] == [200, 400, 600]


@pytest.mark.slow
def test_no_intact_checkpoint_is_one_line_naming_the_damaged_step(finished, tmp_path, cli):
    run_dir = copy_of(finished, tmp_path)
    for step in (200, 400):
        flip(largest_array_file(run_dir, step))
    before = snapshot(run_dir)
    assert_one_line_error(cli("train", "--resume", run_dir, "--steps", "600"), "no intact checkpoint",
                          "env step 400 is damaged")
    assert snapshot(run_dir) == before


# ------------------------------------------------------------------------------------- full and read-only disks


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs (needs root and mount rights; CI runs as root)."""
    with tmpfs(tmp_path / "disk", "2m") as mount:
        yield mount


def fill(directory):
    """Fill the disk; if the run has filled it already (its checkpoints alone can), there is nothing to add."""
    try:
        with open(os.path.join(directory, "filler"), "wb") as f:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
    except OSError:
        pass


@pytest.mark.slow
def test_a_disk_that_fills_mid_run_fails_in_one_line_and_keeps_the_checkpoints(small_disk):
    from experiments.export import restore_run

    run_dir = str(small_disk / "run")
    proc = subprocess.Popen([sys.executable, "-m", "experiments.cli", "train", *RUN, "--steps", "2000000",
                             "--checkpoint-every", "200", "--keep-checkpoints", "2", "--run-dir", run_dir],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ckpt_dir = os.path.join(run_dir, "checkpoints")
    deadline = time.time() + 300
    while time.time() < deadline and not checkpoint.steps(ckpt_dir):
        time.sleep(0.02)
    fill(str(small_disk))
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 4, stderr
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert "Traceback" not in stderr and lines[-1].startswith("jaxrl: error: cannot write ")
    assert run_dir in lines[-1] and "MiB needed" in lines[-1]
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(str(small_disk), "filler"))
    newest = checkpoint.steps(ckpt_dir)[0]
    assert restore_run(run_dir).step == newest  # verifies: earlier checkpoints are intact
    assert not [n for n in os.listdir(ckpt_dir) if "tmp" in n]  # no half-written checkpoint left behind


def test_writes_to_a_read_only_disk_raise_one_line_errors(small_disk):
    from jaxrl.logging import RunLogger

    mngr = checkpoint.manager(str(small_disk / "ckpt"), keep=2)
    checkpoint.save(mngr, 1, small_state())
    logger = RunLogger(str(small_disk / "run"))
    logger.close()
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    try:
        with pytest.raises(files.WriteError, match=r"cannot write .*ckpt/2: Read-only file system .*MiB needed"):
            checkpoint.save(mngr, 2, small_state())
        logger = RunLogger.__new__(RunLogger)
        logger.__dict__.update(run_dir=str(small_disk / "run"), member_label="seed", write=True, rows=[],
                               jsonl_path=str(small_disk / "run" / "metrics.jsonl"),
                               csv_path=str(small_disk / "run" / "metrics.csv"), tb=None)
        with pytest.raises(files.WriteError, match="metrics.jsonl: Read-only file system"):
            logger._write(logger.jsonl_path, "{}\n", atomic=False)
        with pytest.raises(files.WriteError, match="metrics.csv: Read-only file system"):
            logger._write(logger.csv_path, "a\n", atomic=True)
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(small_disk)], check=True)
    assert checkpoint.restore(str(small_disk / "ckpt"), jax.eval_shape(small_state))[1] == 1


def test_a_run_dir_on_a_full_disk_or_unwritable_is_refused_before_compiling(small_disk, tmp_path, cli):
    fill(str(small_disk))
    assert_one_line_error(cli("train", *RUN, "--steps", "400", "--run-dir", str(small_disk / "run")), "MiB free",
                          "needs")
    os.unlink(os.path.join(str(small_disk), "filler"))
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    assert_one_line_error(cli("train", *RUN, "--steps", "400", "--run-dir", str(small_disk / "run")),
                          "cannot be created or written")
    subprocess.run(["mount", "-o", "remount,rw", str(small_disk)], check=True)
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert_one_line_error(cli("train", *RUN, "--steps", "400", "--run-dir", str(a_file)), "is a file")


# ----------------------------------------------------------------------------------------------- bad input


def test_bad_values_in_saved_and_config_files_are_one_line(finished, tmp_path, cli):
    run_dir = copy_of(finished, tmp_path)
    path = os.path.join(run_dir, "config.json")
    config = json.load(open(path))
    config["loop"]["num_envs"] = "4"
    json.dump(config, open(path, "w"))
    assert_one_line_error(cli("train", "--resume", run_dir), "num_envs", "'4'", "int")
    bad = tmp_path / "bad.toml"
    bad.write_text('agent = "sac"\n[agent_config]\nactor_lr = "fast"\n')
    assert_one_line_error(cli("train", "--config", str(bad)), "actor_lr", "'fast'", "float")


@pytest.mark.parametrize("flags, fragments", [
    (["--num-eval-envs", "1000000000"], ["evaluation envs", "GiB", "num_eval_envs"]),
    (["--playground-impl", "warp", "--env", "dmc/CartpoleSwingup"], ["warp", "--playground-impl jax"]),
    (["--seed", "-1"], ["seed", "-1"]),
    (["--learning-starts", "400", "--steps", "400"], ["learning_starts=400", "steps=400"]),
    (["--updates-per-step", "inf"], ["updates_per_step", "inf"]),
    (["--sac.gamma", "1.5"], ["gamma", "1.5"]),
    (["--sac.hidden-sizes", "16", "0"], ["hidden_sizes"]),
])
def test_bad_run_values_are_one_line_before_compiling(tmp_path, flags, fragments, cli):
    result = cli("train", *RUN, "--steps", "400", "--run-dir", str(tmp_path / "run"), *flags)
    assert_one_line_error(result, *fragments)
    assert not os.path.exists(tmp_path / "run")


@pytest.mark.parametrize("flags, flag", [(["--steps", "abc"], "--steps"), (["--stepz", "5"], "--stepz")])
def test_usage_errors_name_the_flag_in_one_line(flags, flag, cli):
    result = cli("train", *flags)
    assert result.returncode == 2 and not result.stdout
    assert_one_line_error(result, flag)


def test_sweeps_and_reproduce_reuse_their_own_run_and_refuse_one_of_other_settings(finished, tmp_path):
    from experiments.train import continue_or_start

    run_dir = copy_of(finished, tmp_path)
    before = snapshot(run_dir)
    same = rundir.resolve(saved=rundir.load_saved(run_dir), run_dir=run_dir)
    summary, _ = continue_or_start(same.agent, same.run, same.loop, same.agent_cfg, quiet=True)
    assert summary == json.load(open(os.path.join(run_dir, "summary.json"))) and snapshot(run_dir) == before
    with pytest.raises(ConfigError, match=r"holds a run with other settings \(agent_config.actor_lr: 0.0003 there"):
        continue_or_start(same.agent, same.run, same.loop, same.agent_cfg.replace(actor_lr=1e-3), quiet=True)
    with pytest.raises(ConfigError, match="other settings .loop.num_envs"):
        continue_or_start(same.agent, same.run, dataclasses.replace(same.loop, num_envs=2), same.agent_cfg)
    assert snapshot(run_dir) == before


def test_a_new_run_never_lands_among_other_files(tmp_path, cli, monkeypatch):
    """Before: `--run-dir .` in a project (or a home directory) trained there, its files among the user's."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\n")
    (project / "notes.txt").write_text("x\n")
    monkeypatch.chdir(project)
    before = snapshot(str(project))
    assert_one_line_error(cli("train", *RUN, "--run-dir", "."), "--run-dir . is a directory of other files (2: "
                          "notes.txt, pyproject.toml), not a run", "new or empty directory")
    assert snapshot(str(project)) == before
    rundir.check_new(str(tmp_path / "empty"), overwrite=False)  # new: fine
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "run.lock").write_text("")  # what a run killed before writing anything leaves
    rundir.check_new(str(tmp_path / "empty"), overwrite=False)
