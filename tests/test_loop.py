import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from agents import sac
from jaxrl import ConfigError
from jaxrl.loop import LoopConfig, make_schedule, make_train

CFG = LoopConfig(steps=800, num_envs=4, num_eval_envs=2, eval_every=200, learning_starts=200, buffer_size=2000)
AGENT_CFG = sac.Config(hidden_sizes=(16, 16), batch_size=32)


def trainer_for(cfg=CFG, env_name="toy/Pendulum"):
    env = envs.make(env_name, cfg.num_envs)
    eval_env = envs.make(env_name, cfg.num_eval_envs)
    return make_train(sac.AGENT, env, eval_env, cfg, AGENT_CFG)


@pytest.fixture(scope="module")
def trainer():
    return trainer_for()


@pytest.fixture(scope="module")
def three_chunks(trainer):
    """Seeds 0..2 vmapped, three chunks; plus the metrics of each chunk."""
    state = trainer.init(0, 3)
    metrics = []
    for _ in range(3):
        state, m = trainer.run_chunk(state)
        metrics.append(jax.device_get(m))
    return state, metrics


def test_fractional_update_schedules():
    s = make_schedule(dataclasses.replace(CFG, num_envs=1, updates_per_step=1 / 16))
    assert (s.block_iters, s.block_updates) == (16, 1)
    s = make_schedule(dataclasses.replace(CFG, num_envs=16, updates_per_step=0.5))
    assert (s.block_iters, s.block_updates) == (1, 8)
    with pytest.raises(ConfigError, match="whole number"):
        make_schedule(dataclasses.replace(CFG, num_envs=3, updates_per_step=0.5))
    s = make_schedule(dataclasses.replace(CFG, num_envs=4, updates_per_step=1 / 8, eval_every=100))
    assert s.chunk_env_steps == 104  # rounded up to whole blocks of 2 iterations x 4 envs


def test_a_run_shorter_than_eval_every_trains_its_own_steps_not_a_whole_chunk():
    s = make_schedule(dataclasses.replace(CFG, steps=2000, num_envs=2, eval_every=10_000))
    assert s.chunk_env_steps == 2000
    s = make_schedule(dataclasses.replace(CFG, steps=2000, num_envs=4, updates_per_step=1 / 8, eval_every=10_000))
    assert s.chunk_env_steps == 2000  # 250 blocks of 2 iterations x 4 envs
    s = make_schedule(dataclasses.replace(CFG, steps=30_000, num_envs=2, eval_every=10_000))
    assert s.chunk_env_steps == 10_000


def test_counters_random_warmup_and_update_count(three_chunks):
    state, metrics = three_chunks
    assert [int(m["env_steps"]) for m in metrics] == [200, 400, 600]
    # Updates start once learning_starts env steps are in the buffer (the chunk's last batched step), then
    # one per transition: 4 per batched step of 4 envs.
    assert [int(m["updates"]) for m in metrics] == [4, 204, 404]
    assert np.all(metrics[1]["train/critic_loss"] > 0.0)
    assert int(state.buffer.size[0]) == 150  # 600 env steps / 4 envs rows
    assert state.key.shape == (3, 2)


def test_second_chunk_does_not_recompile(trainer, three_chunks):
    assert trainer.run_chunk._cache_size() == 1


def test_chunk_makes_no_host_transfer(trainer, three_chunks):
    state = trainer.init(5, 1)
    state, _ = trainer.run_chunk(state)  # compiled for one seed (outside the guard)
    with jax.transfer_guard("disallow"):
        state, metrics = trainer.run_chunk(state)
    jax.block_until_ready(metrics)


def test_state_is_donated(trainer):
    state = trainer.init(1, 1)
    buffer_obs = state.buffer.obs
    trainer.run_chunk(state)
    assert buffer_obs.is_deleted()


def test_seed_k_of_vmapped_run_matches_single_run(trainer, three_chunks):
    state3, metrics3 = three_chunks
    single = trainer.init(2, 1)
    for _ in range(3):
        single, m = trainer.run_chunk(single)
    leaves3 = jax.tree.leaves(state3.agent.actor_params)
    leaves1 = jax.tree.leaves(single.agent.actor_params)
    for a, b in zip(leaves3, leaves1, strict=True):
        np.testing.assert_allclose(a[2], b[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(metrics3[-1]["eval/return"][2], m["eval/return"][0], rtol=1e-4)
    # Warm-up actions are drawn from the same keys: identical bit for bit.
    np.testing.assert_array_equal(state3.buffer.action[2][:50], single.buffer.action[0][:50])


def test_compile_start_gives_init_members_state_and_the_same_chunk(trainer):
    """``compile_start`` (what a fresh ``jaxrl train`` compiles: the initial state and the chunk together) makes the
    state ``init_members`` makes, and its compiled chunk computes what ``run_chunk`` computes, bit for bit."""
    from jaxrl.loop import compile_start

    configs = [AGENT_CFG, dataclasses.replace(AGENT_CFG, actor_lr=1e-3)]
    initial_state, run_chunk = compile_start(trainer, [3, 5], configs)
    state, reference = initial_state(), trainer.init_members([3, 5], configs)
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(reference), strict=True):
        np.testing.assert_array_equal(a, b)
    (state, metrics), (reference, expected) = run_chunk(state), trainer.run_chunk(reference)
    for a, b in zip(jax.tree.leaves((state, metrics)), jax.tree.leaves((reference, expected)), strict=True):
        np.testing.assert_array_equal(a, b)


def test_seeds_are_independent(three_chunks):
    state, metrics = three_chunks
    w = jax.tree.leaves(state.agent.actor_params)[0]
    assert not np.allclose(w[0], w[1])
    assert len(set(np.round(metrics[-1]["eval/return"], 3))) == 3


def test_batch_larger_than_buffer_is_rejected():
    with pytest.raises(ConfigError, match="batch_size=32 must be between 1 and the buffer's 24"):
        trainer_for(dataclasses.replace(CFG, buffer_size=24))


def counting_agent():
    """SAC whose per-env carry counts the decisions taken in the current episode (reset by the loop)."""

    def act(state, obs, key, cfg, deterministic=False, carry=()):
        action, _ = sac.act(state, obs, key, cfg, deterministic)
        return action, carry + 1

    return sac.AGENT._replace(act=act, init_carry=lambda n, spec, cfg: jnp.zeros((n,), jnp.int32))


def test_carry_is_reset_at_each_episode_start_and_survives_in_between():
    cfg = dataclasses.replace(CFG, steps=200, eval_every=52, learning_starts=0)  # 13 decisions: mid-episode
    env = envs.make("toy/ConstantTruncated", cfg.num_envs)  # truncated every 10 decisions
    trainer = make_train(counting_agent(), env, envs.make("toy/ConstantTruncated", 2), cfg, AGENT_CFG)
    state, metrics = trainer.run_chunk(trainer.init(0))
    # 13 decisions: 10 in the first episode, then the carry restarted and counted 3 more (= episode_step).
    np.testing.assert_array_equal(state.carry[0], [3, 3, 3, 3])
    np.testing.assert_array_equal(state.env.episode_step[0], [3, 3, 3, 3])
    assert np.isfinite(metrics["eval/return"]).all()  # evaluation threads the carry too


def test_pretrain_updates_run_once_when_learning_starts():
    cfg = dataclasses.replace(CFG, pretrain_updates=7)
    trainer = trainer_for(cfg)
    state, _ = trainer.run_chunk(trainer.init(0))  # 200 env steps = 50 blocks of 4 envs x 1 update each
    # learning starts at 200 env steps: the last block pretrains 7 updates and then does its own 4.
    assert int(state.updates) == 7 + 4
    state, _ = trainer.run_chunk(state)
    assert int(state.updates) == 7 + 4 + 200
