"""Stop signals end short commands at once and a training run on the second one (experiments/signals.py).

Each test runs ``jaxrl`` in a subprocess whose command is patched (``DRIVER``) to receive the signal exactly where
the issue saw it go wrong: inside an asyncio callback of the checkpoint read, inside a finaliser, right after a
figure's file was written, during a chunk that takes long.
"""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from jaxrl import checkpoint
from tests.helpers import TINY

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = [*TINY, "--learning-starts", "100"]
# ``jaxrl ARGS`` with PATCH applied after the imports it needs and before the command runs.
DRIVER = """
import os, signal, sys, time
sys.argv = ["jaxrl", *{args!r}]
{patch}
from experiments.cli import entry
sys.exit(entry())
"""


def launch(cwd, patch, *args):
    code = DRIVER.format(args=list(args), patch=textwrap.dedent(patch))
    return subprocess.Popen([sys.executable, "-c", code], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": REPO})


def finish(proc, timeout):
    """(stdout, stderr) once the process ended, within ``timeout`` seconds (it is killed otherwise: the test fails)."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"still running {timeout} s after the stop signal; stderr:\n{err[-3000:]}")


def assert_stopped(proc, out, err, signum):
    assert proc.returncode == 128 + signum, err
    assert out == "", out  # no result line
    assert "Traceback" not in err and "Exception" not in err, err
    assert [line for line in err.splitlines() if line.strip()] == [
        f"jaxrl: stopped by {signal.Signals(signum).name} before the command finished; no file is left half-written"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A finished 400-step run of two seeds."""
    cwd = tmp_path_factory.mktemp("stops")
    result = subprocess.run([sys.executable, "-m", "experiments.cli", "train", *RUN, "--steps", "400", "--seeds", "2",
                             "--run-dir", "run"], cwd=cwd, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "PYTHONPATH": REPO})
    assert result.returncode == 0, result.stderr
    return str(cwd / "run")


def test_export_onnx_stops_at_once_on_a_signal_inside_the_checkpoint_reads_asyncio_callback(run_dir, tmp_path):
    """An exception raised by a signal handler inside an asyncio callback is logged and dropped by the event loop,
    and the future the callback was to complete never is: the command waited forever."""
    patch = """
    import asyncio
    from jaxrl import checkpoint

    def restore(*args, **kwargs):
        async def read():
            loop = asyncio.get_running_loop()
            done = loop.create_future()

            def callback():  # as orbax's read completes a future from a callback
                os.kill(os.getpid(), signal.SIGINT)
                done.set_result(None)
            loop.call_soon(callback)
            await done
            await asyncio.sleep(600)  # the read goes on: only the stop ends the process in time
        asyncio.run(read())
        raise SystemExit(3)
    checkpoint.restore = restore
    """
    onnx = tmp_path / "out" / "policy.onnx"
    proc = launch(tmp_path, patch, "export", run_dir, "--onnx", str(onnx))
    out, err = finish(proc, timeout=180)  # start-up included, on a loaded 2-core machine
    assert_stopped(proc, out, err, signal.SIGINT)
    assert not (tmp_path / "out").exists()


def test_export_member_stopped_mid_write_prints_no_success_and_leaves_no_partial_run(run_dir, tmp_path):
    """A stop raised inside a finaliser (JAX's garbage-collection callback) was swallowed: the export went on and
    printed its success line, then "stopped". Here the signal comes while the checkpoint is being written, after
    config.json."""
    patch = """
    from jaxrl import checkpoint
    save = checkpoint.save

    class Finaliser:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGINT)

    def slow_save(*args, **kwargs):
        Finaliser()  # collected at once: the signal's handler runs inside __del__
        time.sleep(20)  # a large state takes a while to write
        save(*args, **kwargs)
    checkpoint.save = slow_save
    """
    out_dir = tmp_path / "new" / "member1"
    proc = launch(tmp_path, patch, "export", run_dir, "--member", "1", "--out", str(out_dir))
    out, err = finish(proc, timeout=15 + 60)
    assert_stopped(proc, out, err, signal.SIGINT)
    assert not (tmp_path / "new").exists()


def test_plot_stopped_as_its_figure_is_written_leaves_no_figure(run_dir, tmp_path):
    """The figure is written to a temporary name and renamed: a stop before the rename leaves nothing under
    --out (the plot used to be written in place and finished before the stop was honoured)."""
    patch = """
    import matplotlib.figure
    savefig = matplotlib.figure.Figure.savefig

    def slow_savefig(self, *args, **kwargs):
        savefig(self, *args, **kwargs)
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(600)  # what follows the write (the rename) has not happened yet: only the stop ends it in time
    matplotlib.figure.Figure.savefig = slow_savefig
    """
    figure = tmp_path / "figs" / "curves.png"
    proc = launch(tmp_path, patch, "plot", run_dir, "--out", str(figure))
    out, err = finish(proc, timeout=180)  # start-up included, on a loaded 2-core machine
    assert not (tmp_path / "figs").exists()
    assert_stopped(proc, out, err, signal.SIGHUP)


def two_sigints(proc, marker, timeout: float):
    """Once ``marker`` exists, SIGINT; once the run notes it, SIGINT again: (the lines up to that note, the whole
    stderr, seconds from the second signal to the end)."""
    try:
        deadline = time.time() + 300
        while not marker.exists():
            assert proc.poll() is None and time.time() < deadline, proc.communicate()[1][-3000:]
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        seen = []
        while not any("SIGINT received" in line for line in seen):
            seen.append(proc.stderr.readline())
            assert seen[-1], "the run ended without noting the first SIGINT"
        proc.send_signal(signal.SIGINT)
        t0 = time.time()
        _, rest = finish(proc, timeout=timeout)
        return seen, "".join(seen) + rest, time.time() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.mark.slow
def test_a_second_ctrl_c_during_a_long_chunk_ends_training_at_once_and_the_named_checkpoint_resumes(tmp_path):
    """The first SIGINT asks for a checkpoint after the chunk; the second ends the process at once, naming the
    last checkpoint (intact) and the resume command, which continues from it."""
    marker = tmp_path / "long_chunk"
    patch = f"""
    from experiments import train
    prepare = train._prepare

    def with_a_long_third_chunk(*args):
        prepared = prepare(*args)
        calls = []

        def run_chunk(state):
            calls.append(1)
            result = prepared.run_chunk(state)
            if len(calls) == 3:
                open({str(marker)!r}, "w").close()
                time.sleep(600)  # a chunk of hours
            return result
        return prepared._replace(run_chunk=run_chunk)
    train._prepare = with_a_long_third_chunk
    """
    proc = launch(tmp_path, patch, "train", *RUN, "--steps", "2000000", "--checkpoint-every", "200",
                  "--run-dir", "runs/d")
    seen, stderr, took = two_sigints(proc, marker, timeout=30)
    assert took < 10
    assert proc.returncode == 130, stderr
    assert "another stop signal ends the process at once" in seen[-1]  # the first signal says so
    assert "Traceback" not in stderr, stderr
    run_dir = tmp_path / "runs" / "d"
    assert checkpoint.steps(str(run_dir / "checkpoints")) == [400, 200]
    last = [line for line in stderr.splitlines() if line.strip()][-1]
    assert last == ("jaxrl: stopped at once by SIGINT (a second stop signal); the last checkpoint, at env step 400 in "
                    "runs/d/checkpoints, is intact; continue with: jaxrl train --resume runs/d"), stderr
    assert not [name for name in os.listdir(run_dir) if ".tmp" in name]

    resumed = subprocess.run([sys.executable, "-m", "experiments.cli", "train", "--resume", "runs/d", "--steps", "600"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=600,
                             env={**os.environ, "PYTHONPATH": REPO})
    assert resumed.returncode == 0, resumed.stderr
    summary = json.load(open(run_dir / "summary.json"))
    assert summary["resumed_from"] == 400 and summary["env_steps"] == 600


@pytest.mark.slow
def test_a_second_stop_during_a_checkpoints_write_ends_training_once_the_write_is_complete(tmp_path):
    """Cutting the write would leave a step without its manifest (and with keep_checkpoints = 1, orbax has deleted
    the older one by then): the process ends the moment the write is complete, naming that checkpoint."""
    marker = tmp_path / "writing"
    patch = f"""
    from jaxrl import checkpoint
    save = checkpoint.save

    def slow_save(manager, step, state):
        if step == 600:
            open({str(marker)!r}, "w").close()
            time.sleep(10)  # a large state takes a while to write
        save(manager, step, state)
    checkpoint.save = slow_save
    """
    proc = launch(tmp_path, patch, "train", *RUN, "--steps", "2000000", "--checkpoint-every", "200",
                  "--keep-checkpoints", "1", "--run-dir", "runs/w")
    seen, stderr, _ = two_sigints(proc, marker, timeout=60)
    assert proc.returncode == 130, stderr
    assert "SIGINT received again: ending the moment the checkpoint being written is complete" in stderr
    last = [line for line in stderr.splitlines() if line.strip()][-1]
    assert last.startswith("jaxrl: stopped at once by SIGINT (a second stop signal); the last checkpoint, at env "
                           "step 600 in runs/w/checkpoints, is intact"), stderr
    assert checkpoint.latest_intact_step(str(tmp_path / "runs" / "w" / "checkpoints")) == 600


def test_output_names_and_places_the_checks_cannot_foresee_are_one_line(cli, tmp_path):
    """Before: `plot --out x.xyz` (or notes.py) drew the figure and then failed with matplotlib's traceback; a
    write into /proc ended in a FileNotFoundError traceback."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from experiments import plot
    from jaxrl import ConfigError

    for name in ("x.xyz", "notes.py"):
        result = cli("plot", str(tmp_path / "no-run-needed"), "--out", str(tmp_path / name))
        assert result.returncode == 2 and "is not a format this command writes" in result.stderr, result.stderr
        assert ".png" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    result = cli("video", str(tmp_path / "no-run"), "--out", str(tmp_path / "x.gif"))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    fig = plt.figure()
    with pytest.raises(ConfigError, match=r"^--out /proc/jaxrl-test\.png cannot be written \("):
        plot.save_figure(fig, "/proc/jaxrl-test.png")
    plt.close(fig)
    assert not [n for n in os.listdir(tmp_path) if n.startswith(("x.", "notes."))]
