"""Data parallelism inside one run (``loop.env_shards``, ``--shard-envs``): each shard's envs and transitions, the
stratified draw, the placement over devices, and a run on two forced host devices against the same run on one."""
import json
import os
import subprocess
import sys
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents import sac
from jaxrl import ConfigError
from jaxrl import buffer as buffer_lib
from jaxrl.loop import LoopConfig, check_loop_config, draw, split_env_shards
from jaxrl.types import EnvSpec
from tests.helpers import assert_one_line_error, jaxrl

ENVS = 4


def written(rows: int) -> buffer_lib.BufferState:
    """``rows`` batched steps of 4 envs into a 12-row ring: env e at step t observes 100 e + t, acts t, gets t;
    every 5th step is a time limit with final observation -(x + 1)."""
    spec = EnvSpec(1, 1, 5, False)
    state = buffer_lib.init(buffer_lib.layout(12 * ENVS, ENVS, spec))
    for t in range(rows):
        x = jnp.array([[100.0 * e + t] for e in range(ENVS)])
        truncated = jnp.full((ENVS,), t % 5 == 4)
        state = buffer_lib.add(state, x, jnp.full((ENVS, 1), float(t)), jnp.full((ENVS,), float(t)),
                               jnp.zeros((ENVS,), bool), truncated, -(x + 1.0), jnp.full((ENVS,), t % 5))
    return state


def columns(state, first, end):
    """The buffer of envs first..end-1 alone."""
    rows = {name: getattr(state, name)[:, first:end] for name in ("obs", "action", "reward", "terminated",
                                                                   "truncated", "episode_step", "final_slot",
                                                                   "final_obs")}
    return state.replace(**rows, final_count=state.final_count[first:end])


def test_a_shard_is_its_envs_columns_with_the_shared_write_position():
    state = written(15)  # wrapped: rows hold t = 3..14
    shards = split_env_shards(state, 2)
    assert shards.obs.shape == (2, 12, 2, 1) and shards.final_count.shape == (2, 2)
    np.testing.assert_array_equal(shards.obs[1, :, 0], state.obs[:, 2])  # shard 1's first env is env 2
    np.testing.assert_array_equal(shards.final_obs[0, :, 1], state.final_obs[:, 1])
    np.testing.assert_array_equal(shards.final_count, np.asarray(state.final_count).reshape(2, 2))
    assert list(shards.ptr) == [int(state.ptr)] * 2 and list(shards.size) == [int(state.size)] * 2


def test_the_stratified_batch_is_each_shards_own_draw_in_shard_order():
    """With 2 shards a batch of 64 is 32 draws from envs 0-1 (the key folded with 0) then 32 from envs 2-3 (folded
    with 1): each half is exactly the plain sampler's draw on that shard's columns."""
    state, key = written(15), jax.random.PRNGKey(3)
    cfg = sac.Config(batch_size=64)
    program = SimpleNamespace(loop=SimpleNamespace(env_shards=2), agent=sac.AGENT)
    batch = draw(program, None, state, key, cfg)
    assert batch.obs.shape == (64, 1)
    env = np.floor(np.asarray(batch.obs[:, 0]) / 100)
    assert set(env[:32]) <= {0, 1} and set(env[32:]) <= {2, 3} and len(set(env)) == 4
    for d in range(2):
        own = buffer_lib.sample(columns(state, 2 * d, 2 * d + 2), jax.random.fold_in(key, d), 32, 1, cfg.gamma)
        for name in ("obs", "action", "reward", "next_obs", "discount"):
            np.testing.assert_array_equal(getattr(batch, name)[32 * d:32 * (d + 1)], getattr(own, name), name)
    # The next observation of a time-limited step is its true final observation, within the shard.
    t = np.asarray(batch.reward)
    limit = t % 5 == 4
    assert limit.any()
    np.testing.assert_array_equal(np.asarray(batch.next_obs[limit, 0]), -(np.asarray(batch.obs[limit, 0]) + 1))


def test_a_sampler_that_ignores_the_shards_batch_size_is_one_line_at_trace_time():
    fixed = sac.AGENT._replace(sample_batch=lambda buffer, key, cfg: buffer_lib.sample(buffer, key, 7))
    program = SimpleNamespace(loop=SimpleNamespace(env_shards=2), agent=fixed)
    with pytest.raises(ConfigError, match=r"^env_shards=2: sac's sample_batch returned leaves of batch sizes \[7\], "
                                          r"not batch_size / env_shards = 32"):
        draw(program, None, written(8), jax.random.PRNGKey(0), sac.Config(batch_size=64))


def test_shards_that_do_not_divide_the_envs_or_the_batch_are_one_line():
    with pytest.raises(ConfigError, match=r"^env_shards=3 must be a whole number that divides num_envs=4"):
        check_loop_config(LoopConfig(num_envs=4, env_shards=3))
    from envs import make
    from jaxrl.loop import make_train

    env = make("toy/Pendulum", 4)
    loop = LoopConfig(steps=1000, num_envs=4, eval_every=500, env_shards=4, learning_starts=100)
    with pytest.raises(ConfigError, match=r"^env_shards=4 needs a batch_size that it divides .* batch_size is 30$"):
        make_train(sac.AGENT, env, env, loop, sac.Config(batch_size=30))
    from experiments.plugins import symphony

    with pytest.raises(ConfigError, match=r"^env_shards=4: symphony samples with its own state"):
        make_train(symphony.AGENT, env, env, loop, symphony.Config())


def test_env_axes_name_every_per_env_leaf_and_nothing_else():
    from envs import make
    from jaxrl.loop import env_axes, make_train

    env = make("toy/Pendulum", ENVS)
    trainer = make_train(sac.AGENT, env, make("toy/Pendulum", 2), LoopConfig(steps=1000, num_envs=ENVS,
                         eval_every=500, buffer_size=400, scale_rewards=True), sac.Config(hidden_sizes=(4, 4)))
    abstract = jax.eval_shape(lambda: trainer.init(0, 3))
    axes = env_axes(abstract, ENVS)
    assert axes.buffer.obs == 2 and axes.buffer.final_obs == 2 and axes.buffer.final_count == 1
    assert axes.buffer.ptr == -1 and axes.normalizers.returns.discounted_return == 1
    assert set(jax.tree.leaves(axes.env)) == {1} and set(jax.tree.leaves(axes.agent)) == {-1}
    assert set(jax.tree.leaves(axes.hparams)) == {-1} and axes.key == -1 and axes.env_steps == -1
    assert set(jax.tree.leaves(axes.normalizers.obs)) == {-1}


TWO_DEVICES = r"""
import re, sys
import jax, jax.numpy as jnp, numpy as np
import envs
from agents import sac
from jaxrl import checkpoint, sharding
from jaxrl.loop import LoopConfig, env_axes, make_train
from tests.helpers import assert_restored_checkpoint_continues_bitwise

assert len(jax.devices()) == 2
loop = LoopConfig(steps=800, num_envs=4, num_eval_envs=2, eval_every=400, learning_starts=300, buffer_size=4000,
                  env_shards=2)
trainer = make_train(sac.AGENT, envs.make("toy/Pendulum", 4), envs.make("toy/Pendulum", 2), loop,
                     sac.Config(hidden_sizes=(16, 16), batch_size=32))
mesh = sharding.run_mesh(env_shards=2)
one, two = trainer.init(0, 2), trainer.init(0, 2, mesh)
assert two.buffer.obs.sharding.spec[:3] == ("members", None, "envs"), two.buffer.obs.sharding
one, metrics_one = trainer.run_chunk(one)
two, metrics_two = trainer.run_chunk(two)
# The same numbers within float tolerance (100 updates; the reductions over the envs and the batch add in another
# order), the buffer still split after the chunk.
assert "envs" in two.buffer.obs.sharding.spec and "envs" in jax.tree.leaves(two.env)[0].sharding.spec
for a, b in zip(jax.tree.leaves(one.agent), jax.tree.leaves(two.agent)):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=1e-3, atol=1e-4)
np.testing.assert_allclose(metrics_one["eval/return"], metrics_two["eval/return"], rtol=1e-4)
# Each device gathers from its own part of the buffer: the only all-gathers are of one env step's arrays, never of
# the buffer's rows; the gradients are all-reduced.
text = trainer.run_chunk.lower(two).compile().as_text()
gathered = [m.group(1) for m in re.finditer(r"= (\w+\[[\d,]*\])\S* all-gather\(", text)]
sizes = [int(np.prod([int(n) for n in shape.split("[")[1].rstrip("]").split(",") if n])) for shape in gathered]
assert max(sizes, default=0) < 1000, gathered
assert "all-reduce(" in text
# A checkpoint of the split state restores onto the devices and continues bitwise.
abstract = jax.eval_shape(lambda: two)
shardings = sharding.state_shardings(abstract, mesh, env_axes(abstract, 4))
target = jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), abstract, shardings)
checkpoint.save(checkpoint.manager(sys.argv[1]), int(two.env_steps), two)
restored, _ = checkpoint.restore(sys.argv[1], target)
assert restored.buffer.obs.sharding.is_equivalent_to(two.buffer.obs.sharding, 4)
continued, _ = trainer.run_chunk(jax.tree.map(jnp.copy, two))
again, _ = trainer.run_chunk(restored)
for a, b in zip(jax.tree.leaves(continued), jax.tree.leaves(again)):
    np.testing.assert_array_equal(a, b)
print("split == one device")
"""


@pytest.mark.slow
def test_a_run_split_over_two_devices_equals_its_shards_on_one_and_resumes_exactly(tmp_path, repo_root):
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "PYTHONPATH": repo_root}
    result = subprocess.run([sys.executable, "-c", TWO_DEVICES, str(tmp_path / "ckpt")], capture_output=True,
                            text=True, timeout=900, env=env, cwd=repo_root)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "split == one device" in result.stdout
    # The command line: --shard-envs records one shard per device, trains, and resumes split.
    run_dir = str(tmp_path / "run")
    args = ["train", "--env", "toy/Pendulum", "--num-eval-envs", "2", "--eval-every", "200", "--learning-starts",
            "200", "--buffer-size", "4000", "--sac.hidden-sizes", "16", "16", "--sac.batch-size", "32", "--steps",
            "400", "--shard-envs"]
    trained = jaxrl(*args, "--num-envs", "4", "--run-dir", run_dir, env=env)
    assert trained.returncode == 0, trained.stderr[-2000:]
    saved = json.load(open(os.path.join(run_dir, "config.json")))
    assert saved["loop"]["env_shards"] == 2 and saved["resolved"]["devices"] == 2
    # On one device it resumes with the same two shards, drawn the same way (the shards are part of the run).
    resumed = jaxrl("train", "--resume", run_dir, "--steps", "600", env={**env, "XLA_FLAGS": ""})
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "--shard-envs: one device, so its envs stay on one device" in resumed.stderr
    assert json.load(open(os.path.join(run_dir, "summary.json")))["env_steps"] == 600
    uneven = jaxrl(*args, "--num-envs", "3", "--run-dir", str(tmp_path / "uneven"), env=env)
    assert_one_line_error(uneven, "--shard-envs: num_envs=3 cannot be split evenly over the 2 devices")
    assert not os.path.exists(tmp_path / "uneven")


def test_a_sweep_members_id_counts_env_shards_only_away_from_one():
    """Members saved before ``env_shards`` existed keep their ids (and are reused); two shards are another member."""
    from experiments import sweep as sweep_lib

    run, agent_config = {"env": "toy/Pendulum", "seed": 0}, {"actor_lr": 3e-4}
    before = {"steps": 1000, "num_envs": 4}
    assert sweep_lib.member_id("sac", run, {**before, "env_shards": 1}, agent_config) == \
        sweep_lib.member_id("sac", run, before, agent_config)
    assert sweep_lib.member_id("sac", run, {**before, "env_shards": 2}, agent_config) != \
        sweep_lib.member_id("sac", run, before, agent_config)
