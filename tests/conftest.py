import os
from types import SimpleNamespace

import jax
import pytest

from envs.rendering import select_gl_backend

# MuJoCo reads MUJOCO_GL once, when first imported: pick the backend as jaxrl does before any test module imports
# mujoco at collection (tests/test_dmc.py does), or the render tests in the same worker meet MuJoCo's default.
select_gl_backend()
# Compilation dominates test time on 2 cores: reuse compiled programs across runs (cache outside the checkout).
jax.config.update("jax_compilation_cache_dir", os.path.expanduser("~/.cache/jaxrl/xla-tests"))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


@pytest.fixture(scope="session")
def repo_root():
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pytest_addoption(parser):
    parser.addoption("--all-robots", action="store_true",
                     help="also train the robots the default suite leaves out (the humanoids T1 and G1)")


# The quick tier (`pytest -m quick -n 2`, a few minutes): the tests of these files that are not marked slow, one or
# more per part of the engine: losses computed by hand (every agent), the replay buffer, networks, optimisers,
# normalisation, n-step returns, the loop on toy envs, one-line errors of the command line and the configs,
# checkpoints and run directories, provenance, plug-in hooks, the docs build and lint. The full suite stays the one
# CI and the README's test command run.
QUICK_FILES = {"test_sac_losses.py", "test_td3.py", "test_tqc.py", "test_dsac_t.py", "test_crossq.py",
               "test_buffer.py", "test_networks.py", "test_optim.py", "test_normalization.py", "test_n_step.py",
               "test_loop.py", "test_validation.py", "test_provenance.py", "test_example_loss.py", "test_docs.py",
               "test_lint.py", "test_contract.py", "test_planning.py", "test_data_parallel.py",
               "test_distributional.py"}
# Single tests of other files: checkpoints (a silent change of values is caught; SAC's whole state round-trips
# bitwise in the harness, with its other checks).
QUICK_TESTS = {"test_rundir.py::test_a_checkpoint_whose_values_changed_silently_is_damaged",
               "test_harness.py::test_every_built_in_agent_passes_the_harness[sac]"}


def pytest_collection_modifyitems(config, items):
    """Slow tests first, the learning runs (the longest, 1-5 min each) before the CLI subprocess runs:
    with two xdist workers the suite ends when its longest tests do, so they must not be the last ones handed
    out. The sort is stable and the same on every worker."""
    # The longest: a learning run, a robot's MJX step compiling, the CLI contract's default-width SAC, the dmc run
    # with videos (four processes and a render).
    first = ("swings_up", "learns_to_balance", "balances_the", "a_robot_trains", "cli_contract", "records_videos")
    items.sort(key=lambda item: (item.get_closest_marker("slow") is None, not any(f in item.name for f in first)))
    for item in items:
        if (item.path.name in QUICK_FILES and item.get_closest_marker("slow") is None
                or f"{item.path.name}::{item.name}" in QUICK_TESTS):
            item.add_marker(pytest.mark.quick)
    if not config.getoption("--all-robots"):
        skip = pytest.mark.skip(reason="a humanoid (T1, G1; 2.5-4.5 min on 2 cores): pytest --all-robots trains it")
        for item in items:
            if item.get_closest_marker("all_robots"):
                item.add_marker(skip)


@pytest.fixture
def cli(capsys):
    """``jaxrl ...`` in this process: for commands that stop before compiling, it saves a Python start and a JAX
    import per call (seconds each on 2 cores). Returns what ``tests.test_cli.jaxrl`` returns."""
    from experiments.cli import main

    def run(*args):
        capsys.readouterr()
        try:
            code = main(list(args))
        except SystemExit as e:  # tyro's usage errors
            code = e.code
        out = capsys.readouterr()
        return SimpleNamespace(returncode=code, stdout=out.out, stderr=out.err)

    return run
