"""Sweeps: members batched in one vmapped program equal their own runs; grouping; files; export; launchers."""
import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

import envs
from agents import sac, tqc
from experiments import sweep as sweep_lib
from jaxrl import ConfigError
from jaxrl.loop import LoopConfig, make_train

LOOP = LoopConfig(steps=400, num_envs=4, num_eval_envs=2, eval_every=200, learning_starts=200, buffer_size=4000)
SMALL = sac.Config(hidden_sizes=(16, 16), batch_size=32)


@pytest.fixture(scope="module")
def trainer():
    return make_train(sac.AGENT, envs.make("toy/Pendulum", 4), envs.make("toy/Pendulum", 2), LOOP, SMALL)


def run(trainer, seeds, configs, chunks=2):
    state = trainer.init_members(seeds, configs)
    initial = jax.device_get(state.agent.actor_params)
    for _ in range(chunks):
        state, metrics = trainer.run_chunk(state)
    return initial, jax.device_get(state), jax.device_get(metrics)


def test_each_member_of_a_vmapped_program_equals_its_own_run(trainer):
    members = [(0, SMALL.replace(actor_lr=1e-3)), (0, SMALL.replace(actor_lr=1e-12)),
               (1, SMALL.replace(tau=0.05, gamma=0.9))]
    initial, together, metrics = run(trainer, [s for s, _ in members], [c for _, c in members])
    np.testing.assert_allclose(together.hparams.actor_lr, [1e-3, 1e-12, 3e-4], rtol=1e-6)
    for k, (seed, cfg) in enumerate(members):
        _, alone, alone_metrics = run(trainer, [seed], [cfg])
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a[k], b[0], rtol=2e-4, atol=2e-5),
                     together.agent.critic_params, alone.agent.critic_params)
        np.testing.assert_allclose(metrics["eval/return"][k], alone_metrics["eval/return"][0], rtol=1e-3)
    # The swept value is really used: a tiny actor learning rate leaves that member's actor (nearly) untouched ...
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a[1], b[1], rtol=0, atol=1e-8), together.agent.actor_params,
                 initial)
    # ... while the same seed with a larger one moved.
    moved = jax.tree.map(lambda a, b: float(np.abs(a[0] - b[0]).max()), together.agent.actor_params, initial)
    assert max(jax.tree.leaves(moved)) > 1e-4


def test_members_must_share_the_static_fields(trainer):
    with pytest.raises(ConfigError, match=r"member 1 .*hidden_sizes=\(32, 32\) vs \(16, 16\)"):
        trainer.init_members([0, 0], [SMALL, SMALL.replace(hidden_sizes=(32, 32))])
    with pytest.raises(ConfigError, match="target_entropy"):
        trainer.init_members([0, 0], [SMALL, SMALL.replace(target_entropy=-1.0)])


def test_tqc_dropped_atoms_are_a_swept_value():
    cfg = tqc.Config(actor_hidden_sizes=(16, 16), critic_hidden_sizes=(16, 16), num_critics=2, num_quantiles=5,
                     batch_size=32)
    trainer = make_train(tqc.AGENT, envs.make("toy/Pendulum", 4), envs.make("toy/Pendulum", 2), LOOP, cfg)
    state = trainer.init_members([0, 0], [cfg.replace(drop_per_critic=0), cfg.replace(drop_per_critic=4)])
    state, _ = trainer.run_chunk(state)
    state, _ = trainer.run_chunk(state)
    q = jax.device_get(state.agent.critic_params)
    # Same seed, same data until the first update: only d differs, and dropping 4 of 5 atoms per critic lowers
    # the targets, so the critics must have diverged.
    diff = max(float(np.abs(a[0] - a[1]).max()) for a in jax.tree.leaves(q))
    assert diff > 1e-3


# The tiny SAC run of these tests as config-file tables (test_reproduce uses them too).
TINY_TABLES = """
[loop]
steps = 400
num_envs = 4
num_eval_envs = 2
eval_every = 200
learning_starts = 200
buffer_size = 4000
[agent_config]
batch_size = 32
hidden_sizes = [16, 16]
"""
SWEEP = """
agent = "sac"
envs = ["toy/Pendulum"]
seeds = 2
""" + TINY_TABLES + """[grid]
actor_lr = [3e-4, 1e-3]
"agent_config.hidden_sizes" = [[16, 16], [8, 8]]
[random]
samples = 1
tau = {log_uniform = [0.001, 0.01]}
"""


def write(tmp_path, text, name="sweep.toml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_plan_groups_numeric_fields_into_one_program_and_static_ones_apart(tmp_path):
    spec = sweep_lib.load(write(tmp_path, SWEEP))
    assert len(spec.members) == 8  # 2 lr x 2 widths x 1 draw x 2 seeds
    groups = sweep_lib.plan(spec, str(tmp_path / "out"))
    assert [len(g.members) for g in groups] == [4, 4]
    assert {g.agent_cfg.hidden_sizes for g in groups} == {(16, 16), (8, 8)}
    for g in groups:
        assert sorted((m.seed, m.values["actor_lr"]) for m in g.members) == [(0, 3e-4), (0, 1e-3), (1, 3e-4),
                                                                              (1, 1e-3)]
        taus = {m.values["tau"] for m in g.members}
        assert len(taus) == 1 and 0.001 <= taus.pop() <= 0.01


@pytest.mark.parametrize("text, fragment", [
    ("agent = 'sac'\nbogus = 1\n", "unknown key(s) bogus"),
    ("agent = 'sac'\n[grid]\nactor_learning_rate = [1]\n", "'actor_learning_rate' is not a field of Config"),
    ("agent = 'sac'\n[grid]\n'loop.num_env' = [1]\n", "'num_env' is not a field of LoopConfig"),
    ("agent = 'sac'\n[grid]\nactor_lr = 3e-4\n", "need a non-empty list"),
    ("agent = 'sac'\n[random]\ntau = {normal = [0, 1]}\n", "expected one of"),
    ("agent = 'sac'\n[random]\ntau = {log_uniform = [0, 1]}\n", "log_uniform needs low > 0"),
    ("agent = 'sac'\nseeds = 0\n", "seeds = 0"),
    ("agent = 'sac'\n[grid]\n'run.seed' = [1, 2]\n", "set envs and seeds at the top"),
    ("agent = 'nope'\n", "unknown agent 'nope'"),
])
def test_bad_sweep_files_fail_with_one_line(tmp_path, text, fragment):
    with pytest.raises(ConfigError) as e:
        sweep_lib.plan(sweep_lib.load(write(tmp_path, text)), str(tmp_path / "out"))
    assert fragment in str(e.value) and "\n" not in str(e.value)


def jaxrl(*args, env=None):
    return subprocess.run([sys.executable, "-m", "experiments.cli", *args], capture_output=True, text=True,
                          timeout=900, env=env)


@pytest.mark.slow
def test_sweep_command_writes_one_row_per_member_and_exports_a_resumable_member(tmp_path):
    path = write(tmp_path, SWEEP.replace('"agent_config.hidden_sizes" = [[16, 16], [8, 8]]', ""))
    out = str(tmp_path / "out")
    result = jaxrl("sweep", path, "--out", out)
    assert result.returncode == 0, result.stderr
    with open(os.path.join(out, "results.csv")) as f:
        rows = f.read().strip().splitlines()
    assert len(rows) == 1 + 4 and rows[0].startswith("member,group,member_in_group,env,seed,actor_lr,tau,")
    group_dir = os.path.join(out, "groups", "g000-toy-Pendulum")
    summary = json.load(open(os.path.join(group_dir, "summary.json")))
    assert [m["seed"] for m in summary["members"]] == [0, 1, 0, 1] and summary["run_s"] > 0
    member_metrics = open(os.path.join(out, "members", "m003", "metrics.csv")).read().splitlines()
    assert member_metrics[0].startswith("env_steps,updates") and len(member_metrics) == 3
    # Rerunning skips the finished program.
    again = jaxrl("sweep", path, "--out", out)
    assert again.returncode == 0 and "Compil" not in again.stdout

    exported = str(tmp_path / "m3")
    assert jaxrl("export", group_dir, "--member", "3", "--out", exported).returncode == 0
    config = json.load(open(os.path.join(exported, "config.json")))
    assert config["run"]["seed"] == 1 and config["run"]["seeds"] == 1 and "members" not in config
    assert config["agent_config"]["actor_lr"] == pytest.approx(1e-3)
    from experiments.export import load_policy, restore_run

    group = restore_run(group_dir)
    alone = restore_run(exported)
    jax.tree.map(lambda a, b: np.testing.assert_array_equal(a[3], b[0]), group.state.agent, alone.state.agent)
    policy, init_carry = load_policy(exported)
    actions, _ = policy(np.zeros((5, 3), np.float32), init_carry(5), jax.random.PRNGKey(0))
    assert actions.shape == (5, 1) and np.all(np.abs(actions) <= 1)
    bad = jaxrl("export", group_dir, "--member", "4", "--out", str(tmp_path / "m4"))
    assert bad.returncode == 2 and "--member 4 is out of range" in bad.stderr
    # The exported member continues on its own.
    longer = jaxrl("train", "--resume", exported, "--steps", "600")
    assert longer.returncode == 0, longer.stderr
    assert json.load(open(os.path.join(exported, "summary.json")))["env_steps"] == 600


SHARDED_EQUALS_UNSHARDED = """
import jax, numpy as np, envs
from agents import sac
from jaxrl import sharding
from jaxrl.loop import LoopConfig, make_train
assert len(jax.devices()) == 4
loop = LoopConfig(steps=400, num_envs=4, num_eval_envs=2, eval_every=200, learning_starts=200, buffer_size=4000)
cfg = sac.Config(hidden_sizes=(16, 16), batch_size=32)
trainer = make_train(sac.AGENT, envs.make("toy/Pendulum", 4), envs.make("toy/Pendulum", 2), loop, cfg)
members = [0, 1, 2, 3], [cfg.replace(actor_lr=lr) for lr in (1e-4, 3e-4, 1e-3, 3e-3)]
results = []
for mesh in (None, sharding.member_mesh()):
    state = trainer.init_members(*members, mesh=mesh)
    for _ in range(2):
        state, metrics = trainer.run_chunk(state)
    leaf = jax.tree.leaves(state.agent.critic_params)[0]
    shards = {s.data.shape[0] for s in leaf.addressable_shards}
    print("devices", len(leaf.sharding.device_set), "shard rows", shards)
    results.append((jax.device_get(state.agent), jax.device_get(metrics["eval/return"])))
    if mesh is not None:
        assert len(leaf.sharding.device_set) == 4 and shards == {1}, (leaf.sharding, shards)
        assert state.env_steps.sharding.is_fully_replicated
(a, ra), (b, rb) = results
np.testing.assert_allclose(ra, rb, rtol=1e-5)
jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6), a, b)
print("sharded == unsharded", ra, rb)
"""


@pytest.mark.slow
def test_a_sweep_sharded_over_four_devices_equals_the_unsharded_one(tmp_path, repo_root):
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4", "PYTHONPATH": repo_root}
    result = subprocess.run([sys.executable, "-c", SHARDED_EQUALS_UNSHARDED], capture_output=True, text=True,
                            timeout=900, env=env, cwd=repo_root)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "sharded == unsharded" in result.stdout
    # The CLI shards a --seeds run over the devices, checkpoints it and resumes it sharded.
    run_dir = str(tmp_path / "run")
    args = ["train", "--env", "toy/Pendulum", "--num-envs", "4", "--num-eval-envs", "2", "--eval-every", "200",
            "--learning-starts", "200", "--buffer-size", "4000", "--sac.hidden-sizes", "16", "16",
            "--sac.batch-size", "32", "--seeds", "4", "--steps", "400", "--run-dir", run_dir]
    assert jaxrl(*args, env=env).returncode == 0
    assert json.load(open(os.path.join(run_dir, "config.json")))["resolved"]["devices"] == 4
    resumed = jaxrl("train", "--resume", run_dir, "--steps", "600", env=env)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    summary = json.load(open(os.path.join(run_dir, "summary.json")))
    assert summary["env_steps"] == 600 and len(summary["final_eval_return_per_seed"]) == 4


def test_members_that_do_not_divide_the_devices_are_refused_with_one_line():
    from types import SimpleNamespace

    from jaxrl import sharding

    four_devices = SimpleNamespace(devices=np.empty(4))
    sharding.check_divisible(8, four_devices)
    with pytest.raises(ConfigError, match=r"^3 member\(s\) cannot be split evenly over 4 devices.*--no-shard-members"):
        sharding.check_divisible(3, four_devices)


@pytest.mark.slow
@pytest.mark.parametrize("launcher, options", [("slurm", {"cluster": "local", "timeout_min": 20}),
                                               ("ray", {"num_cpus": 1})])
@pytest.mark.slow
def test_launchers_run_each_program_as_a_job_and_collect_the_same_table(tmp_path, launcher, options):
    pytest.importorskip({"slurm": "submitit", "ray": "ray"}[launcher])  # the `launch` extra, installed by `test`
    path = write(tmp_path, SWEEP.replace('"agent_config.hidden_sizes" = [[16, 16], [8, 8]]', "")
                 .replace("seeds = 2", "seeds = 1").replace("steps = 400", "steps = 200"))
    out = str(tmp_path / launcher)
    rows = sweep_lib.run_sweep(path, out, launcher, options, quiet=True)
    assert [r["member"] for r in rows] == [0, 1] and all(np.isfinite(r["final_eval_return"]) for r in rows)
    assert os.path.exists(os.path.join(out, "results.csv"))
    assert json.load(open(os.path.join(out, "groups", "g000-toy-Pendulum", "summary.json")))["env_steps"] == 200


MULTI_PROCESS = """
import sys
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(sys.argv[1], num_processes=2, process_id=int(sys.argv[2]))
from experiments.cli import main
sys.exit(main(["train", "--distributed", *sys.argv[3:]]))
"""


@pytest.mark.slow
def test_two_processes_train_one_sharded_run_through_jax_distributed(tmp_path, repo_root):
    import socket

    with socket.socket() as s:
        s.bind(("localhost", 0))
        address = f"localhost:{s.getsockname()[1]}"
    run_dir = str(tmp_path / "run")
    args = ["--env", "toy/Pendulum", "--num-envs", "4", "--num-eval-envs", "2", "--eval-every", "200",
            "--learning-starts", "200", "--buffer-size", "4000", "--sac.hidden-sizes", "16", "16",
            "--sac.batch-size", "32", "--seeds", "2", "--steps", "400", "--run-dir", run_dir]
    env = {**os.environ, "PYTHONPATH": repo_root}
    procs = [subprocess.Popen([sys.executable, "-c", MULTI_PROCESS, address, str(i), *args], env=env, cwd=repo_root,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    summary = json.load(open(os.path.join(run_dir, "summary.json")))
    assert json.load(open(os.path.join(run_dir, "config.json")))["resolved"]["devices"] == 2
    # Each process trained one member; together they equal the same two seeds on one device.
    single = str(tmp_path / "single")
    assert jaxrl("train", *args[:-2], "--run-dir", single).returncode == 0
    expected = json.load(open(os.path.join(single, "summary.json")))["final_eval_return_per_seed"]
    np.testing.assert_allclose(summary["final_eval_return_per_seed"], expected, rtol=1e-4)
