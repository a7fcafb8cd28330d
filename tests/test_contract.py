"""The agent contract beyond losses: agents without target networks, dropout keys in the built-in losses,
optimiser options, target hooks with metrics, a plug-in's own state in ``state.extra``, one-line errors for a
State whose fields clash, and DroQ (experiments/examples/droq.py) on these."""
import dataclasses
import math

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from agents import sac
from jaxrl import ConfigError
from jaxrl.agent import checked_init
from jaxrl.optim import adam
from jaxrl.progress import Progress
from jaxrl.testing import check_agent
from jaxrl.types import Batch, EnvSpec

SPEC = EnvSpec(obs_size=3, action_size=1, decisions_per_episode=100)
SMALL = sac.Config(hidden_sizes=(16, 16), batch_size=4)
BATCH = Batch(obs=jnp.arange(12.0).reshape(4, 3) / 10, action=jnp.array([[0.1], [-0.2], [0.3], [0.9]]),
              reward=jnp.array([1.0, 0.0, -1.0, 0.5]), next_obs=jnp.arange(12.0, 24.0).reshape(4, 3) / 10,
              terminated=jnp.array([0.0, 1.0, 0.0, 0.0]), truncated=jnp.zeros(4), discount=jnp.full((4,), 0.99))


def test_without_target_networks_the_target_reads_the_online_critics_and_no_copy_is_kept():
    cfg = SMALL.replace(target_networks=False)
    state = sac.init(jax.random.key(0), SPEC, cfg)
    assert state.target_critic_params is None
    with_copy = state.replace(target_critic_params=state.critic_params)  # a target equal to the online critics
    key = jax.random.key(1)
    np.testing.assert_array_equal(sac.soft_td_target(state, BATCH, key, cfg),
                                  sac.soft_td_target(with_copy, BATCH, key, cfg))
    new_state, metrics = sac.update(state, BATCH, key, cfg)
    assert new_state.target_critic_params is None and np.isfinite(float(metrics["critic_loss"]))


def test_the_target_of_an_agent_without_targets_carries_no_gradient():
    cfg = SMALL.replace(target_networks=False)
    state = sac.init(jax.random.key(0), SPEC, cfg)
    key = jax.random.key(1)
    target = sac.soft_td_target(state, BATCH, key, cfg)

    def with_constant_target(params):
        q = state.critic.apply(params, BATCH.obs, BATCH.action)[..., 0]
        return jnp.sum(jnp.mean(jnp.square(q - target), axis=-1))

    ours = jax.grad(lambda p: sac.critic_loss(p, state, BATCH, key, cfg)[0])(state.critic_params)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6),
                 ours, jax.grad(with_constant_target)(state.critic_params))


def test_sac_critics_with_dropout_draw_their_masks_from_the_losss_key():
    cfg = SMALL.replace(critic_dropout=0.5)
    state = sac.init(jax.random.key(0), SPEC, cfg)
    first = float(sac.critic_loss(state.critic_params, state, BATCH, jax.random.key(1), cfg)[0])
    again = float(sac.critic_loss(state.critic_params, state, BATCH, jax.random.key(1), cfg)[0])
    other = float(sac.critic_loss(state.critic_params, state, BATCH, jax.random.key(2), cfg)[0])
    assert first == again and first != other
    # inference passes (acting, the Q read-out) drop nothing: the same values whatever the key
    from jaxrl.networks import forward

    def inference(key):
        return forward(state.critic, state.critic_params, BATCH.obs, BATCH.action, key=key)[0]

    np.testing.assert_array_equal(inference(jax.random.key(1)), inference(jax.random.key(2)))
    training = forward(state.critic, state.critic_params, BATCH.obs, BATCH.action, train=True,
                       key=jax.random.key(1))[0]
    assert bool(jnp.any(training != inference(jax.random.key(1))))


def one_adam_step(optimizer, progress=None):
    params = {"w": jnp.array([1.0, -1.0])}
    grads = {"w": jnp.array([0.5, -2.0])}
    updates, _ = optimizer.update(grads, optimizer.init(params), params)
    return np.asarray(optax.apply_updates(params, updates)["w"])


def test_optimiser_options_build_the_optax_chain_they_name():
    lr = 0.1
    np.testing.assert_array_equal(one_adam_step(adam(SMALL, lr)), one_adam_step(optax.adam(lr)))
    first_step = one_adam_step(adam(SMALL.replace(adam_b1=0.5, adam_b2=0.9, adam_eps=1e-3), lr))
    np.testing.assert_array_equal(first_step, one_adam_step(optax.adam(lr, b1=0.5, b2=0.9, eps=1e-3)))
    # decoupled decay: w <- w - lr (adam step + decay w); Adam's first step is lr * g / (|g| + eps) ~ lr sign(g)
    decayed = one_adam_step(adam(SMALL.replace(weight_decay=0.1), lr))
    np.testing.assert_allclose(decayed, [1.0 - lr * (1.0 + 0.1 * 1.0), -1.0 - lr * (-1.0 - 0.1 * 1.0)], rtol=1e-5)
    np.testing.assert_array_equal(one_adam_step(adam(SMALL.replace(weight_decay=0.1), lr, weight_decay=False)),
                                  one_adam_step(optax.adam(lr)))
    clipped = adam(SMALL.replace(max_grad_norm=1.0), lr)
    np.testing.assert_array_equal(one_adam_step(clipped),
                                  one_adam_step(optax.chain(optax.clip_by_global_norm(1.0), optax.adam(lr))))


@pytest.mark.parametrize("schedule,fraction,factor", [("linear", 0.5, 0.5), ("linear", 1.0, 0.0),
                                                      ("cosine", 0.25, 0.5 * (1 + math.cos(math.pi / 4))),
                                                      ("constant", 0.75, 1.0)])
def test_a_learning_rate_schedule_scales_the_step_by_the_runs_progress(schedule, fraction, factor):
    progress = Progress(updates=jnp.int32(int(fraction * 1000)), env_steps=jnp.int32(0),
                        planned_updates=jnp.int32(1000), planned_env_steps=jnp.int32(1000))
    moved = one_adam_step(adam(SMALL.replace(lr_schedule=schedule), 0.1, progress)) - np.array([1.0, -1.0])
    np.testing.assert_allclose(moved, [-0.1 * factor, 0.1 * factor], rtol=1e-4, atol=1e-7)


def test_a_bad_optimiser_option_is_one_line():
    for field, value, fragment in [("adam_b1", 1.0, "adam_b1 must be a number in [0, 1)"),
                                   ("lr_schedule", "step", "lr_schedule must be one of constant, linear, cosine"),
                                   ("max_grad_norm", 0.0, "max_grad_norm must be a finite number > 0")]:
        with pytest.raises(ConfigError, match=fragment.replace("[", r"\[").replace(")", r"\)")):
            sac.check_config(SMALL.replace(**{field: value}))


def test_a_target_hook_may_return_metrics_beside_its_target():
    def counted_target(state, batch, key, cfg):
        target = sac.soft_td_target(state, batch, key, cfg)
        return target, {"target_max": jnp.max(target)}

    state = sac.init(jax.random.key(0), SPEC, SMALL)
    key = jax.random.key(1)
    _, metrics = sac.make_update(target_fn=counted_target)(state, BATCH, key, SMALL)
    _, plain = sac.update(state, BATCH, key, SMALL)
    assert float(metrics["target_max"]) == pytest.approx(float(jnp.max(sac.soft_td_target(
        state, BATCH, jax.random.split(key)[0], SMALL))))
    assert float(metrics["critic_loss"]) == float(plain["critic_loss"])


# ------------------------------------------------------------------------------------------- plug-in states


@flax.struct.dataclass
class ClashingState(sac.State):
    num_updates: jax.Array  # SAC's State has a num_updates too (its delayed-actor counter, added later)


def clashing_init(key, spec, cfg):
    base = sac.init(key, spec, cfg)
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
    return ClashingState(**fields)


def double_init(key, spec, cfg):  # the idiom that broke two plug-ins: a field of its own, now also the base's
    @flax.struct.dataclass
    class OwnCounterState(sac.State):
        my_count: jax.Array

    base = sac.init(key, spec, cfg.replace(policy_delay=2))
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
    return OwnCounterState(**fields, num_updates=jnp.zeros((), jnp.int32), my_count=jnp.zeros(()))


@pytest.mark.parametrize("init,fragment", [
    (clashing_init, "State ClashingState declares field 'num_updates', which its base agents.sac.State also has"),
    (double_init, "init builds its State with field 'num_updates' given twice"),
], ids=["redeclared-field", "field-given-twice"])
def test_a_plugin_state_that_clashes_with_a_built_in_field_is_one_line(init, fragment):
    agent = sac.AGENT._replace(name="clash", init=init)
    with pytest.raises(ConfigError) as e:
        jax.eval_shape(lambda k: checked_init(agent, k, SPEC, SMALL), jax.random.key(0))
    assert fragment in str(e.value) and "\n" not in str(e.value), str(e.value)


def extra_init(key, spec, cfg):
    return sac.init(key, spec, cfg).replace(extra={"reward_mean": jnp.zeros(())})


def extra_update(state, batch, key, cfg):
    state, metrics = sac.update(state, batch, key, cfg)
    mean = 0.99 * state.extra["reward_mean"] + 0.01 * jnp.mean(batch.reward)
    return state.replace(extra={"reward_mean": mean}), {**metrics, "reward_mean": mean}


def test_a_plugins_own_state_in_extra_passes_the_harness():
    agent = sac.AGENT._replace(name="reward_mean_extra", init=extra_init, update=extra_update)
    check_agent(agent, sac.Config(hidden_sizes=(16, 16), batch_size=32), eager=False, skip=("vmap",))


def test_every_built_in_state_has_the_extra_field_and_keeps_it_empty():
    from agents import REGISTERED, get_agent

    for name in REGISTERED:
        fields = {f.name: f for f in dataclasses.fields(get_agent(name).init.__globals__["State"])}
        assert "extra" in fields and fields["extra"].default is None, name


# --------------------------------------------------------------------------------------------------- DroQ


def test_droq_is_sacs_losses_with_dropout_and_layer_norm_critics_at_twenty_updates_per_step():
    from experiments.examples import droq

    cfg = droq.Config()
    assert (cfg.critic_dropout, cfg.critic_layer_norm, cfg.critic_layer_norm_first, cfg.policy_delay,
            cfg.num_critics) == (0.01, True, True, 20, 2)
    assert droq.AGENT.loop_defaults["updates_per_step"] == 20 and droq.AGENT.update is sac.update
    small = droq.Config(hidden_sizes=(16, 16), batch_size=32, critic_dropout=0.5, policy_delay=2)
    state = droq.AGENT.init(jax.random.key(0), SPEC, small)
    layers = state.critic_params["params"]["VmapQNetwork_0"]["MLP_0"]
    assert "LayerNorm_0" in layers and "Dense_2" in layers
    check_agent(droq.AGENT, small, eager=False, skip=("vmap",))


@pytest.mark.slow
def test_droq_trains_on_the_command_line_as_its_docstring_types_it(cli, tmp_path):
    """``jaxrl train --agent experiments.examples.droq:AGENT`` (the docstring's line at a toy budget): its settings
    reach the run (config.json) and its 20 updates per env step run."""
    import json
    import os

    run_dir = tmp_path / "droq"
    result = cli("train", "--agent", "experiments.examples.droq:AGENT", "--env", "toy/Pendulum", "--steps", "300",
                 "--num-envs", "4", "--num-eval-envs", "2", "--eval-every", "100", "--learning-starts", "200",
                 "--buffer-size", "4000", "--droq.hidden-sizes", "16", "16", "--droq.batch-size", "32",
                 "--run-dir", str(run_dir))
    assert result.returncode == 0, result.stderr
    config = json.load(open(os.path.join(run_dir, "config.json")))
    agent_cfg = config["agent_config"]
    assert agent_cfg["critic_dropout"] == 0.01 and agent_cfg["policy_delay"] == 20, agent_cfg
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    # 20 updates per env step after the 200-step warm-up (the first update block may start one 4-env step early)
    assert rows[-1]["env_steps"] == 300 and 20 * 100 <= rows[-1]["updates"] <= 20 * 104, rows[-1]
    assert all(abs(row["train/critic_loss"]) < 1e6 for row in rows if "train/critic_loss" in row)
