"""The harness for new agents (jaxrl.testing): it passes every built-in agent and the examples, and catches broken
agents with a message that names what broke."""
import jax
import jax.numpy as jnp
import pytest

from agents import sac
from jaxrl.testing import AgentCheckError, check_agent
from tests.helpers import doc_python_block
from tests.test_probes import PROBES

SMALL_SAC = sac.Config(hidden_sizes=(16, 16), batch_size=32)


@pytest.mark.parametrize("name", sorted(PROBES))
def test_every_built_in_agent_passes_the_harness(name):
    """At the probes' small settings, without the eager call (10-30 s each: every operation compiled alone; the
    examples' test makes it): purity is checked by two jitted calls and two traces (what catches side effects)."""
    probe = PROBES[name]
    seconds = check_agent(probe.agent, probe.bandit_cfg, eager=False)
    assert set(seconds) == {"setup", "shapes", "compile", "pure", "gradients", "batch", "targets", "statistics",
                            "vmap", "refresh", "checkpoint"}


def test_the_examples_pass_the_harness_and_redq_its_probes():
    from experiments.examples import redq
    from tests.test_probes import NO_TEMPERATURE, critic_means

    guide = "docs/plugins/index.md"
    exec(doc_python_block(guide, "## Checking a new agent before it costs GPU hours"), {})  # sac_huber, eager call
    small = dict(hidden_sizes=(32, 32), batch_size=64, num_critics=4, policy_delay=2)
    seconds = check_agent(redq.AGENT, redq.Config(**small, init_alpha=0.01), probes=True, q_fn=critic_means,
                          truncated_cfg=redq.Config(**small, gamma=0.9, tau=0.05, critic_lr=1e-3, **NO_TEMPERATURE),
                          eager=False)
    assert "probes" in seconds


# ---------------------------------------------------------------------------------------------- broken agents


def nan_when_all_terminated(critic_params, state, batch, key, cfg):
    """Averages the TD error over the non-terminal transitions: 0 / 0 on an all-terminated batch."""
    target = sac.soft_td_target(state, batch, key, cfg)
    q = state.critic.apply(critic_params, batch.obs, batch.action)[..., 0]
    alive = 1.0 - batch.terminated.astype(jnp.float32)
    loss = jnp.sum(jnp.square(q - target) * alive) / jnp.sum(alive)
    return loss, {"critic_loss": loss}


CALLS = []


def counts_its_calls(critic_params, state, batch, key, cfg):
    """A Python side effect: under jit the counter moves once, at tracing, and its value is frozen in."""
    CALLS.append(1)
    loss, aux = sac.critic_loss(critic_params, state, batch, key, cfg)
    return loss * len(CALLS), aux


def ignores_the_batch(critic_params, state, batch, key, cfg):
    """Regresses on a fixed batch (every field 1) instead of the one it is given."""
    return sac.critic_loss(critic_params, state, jax.tree.map(jnp.ones_like, batch), key, cfg)


def grows_a_leaf(state, batch, key, cfg):
    state, metrics = sac.update(state, batch, key, cfg)
    return state.replace(log_alpha=jnp.stack([state.log_alpha, state.log_alpha])), metrics


def frozen_targets(state, batch, key, cfg):
    """Forgets the Polyak step: the target critics stay at their initial values."""
    target = state.target_critic_params
    state, metrics = sac.update(state, batch, key, cfg)
    return state.replace(target_critic_params=target), metrics


def draws_on_the_host(critic_params, state, batch, key, cfg):
    """Host randomness: np.random runs once, at tracing, and its draw is frozen into the program as a constant."""
    import numpy as np

    noise = np.random.normal(size=batch.reward.shape).astype(np.float32)
    return sac.critic_loss(critic_params, state, batch.replace(reward=batch.reward + noise), key, cfg)


def a_text_metric(state, batch, key, cfg):
    state, metrics = sac.update(state, batch, key, cfg)
    return state, {**metrics, "phase": "warm-up"}


def three_values(state, batch, key, cfg):
    state, metrics = sac.update(state, batch, key, cfg)
    return state, metrics, {}


@pytest.mark.parametrize("update,check,fragment", [
    (sac.make_update(critic_loss_fn=nan_when_all_terminated), "gradients",
     "non-finite metrics on an all-terminated batch: actor_loss=nan, critic_loss=nan"),
    (sac.make_update(critic_loss_fn=counts_its_calls), "pure", "two traces of the update give different programs"),
    (sac.make_update(critic_loss_fn=ignores_the_batch), "batch", "moved critic_params identically: its loss ignores"),
    (grows_a_leaf, "shapes", "changes state leaf .log_alpha from float32[] to float32[2]"),
    (frozen_targets, "targets", "target_critic_params never moved over 4 updates with tau=0.005"),
    (sac.make_update(critic_loss_fn=draws_on_the_host), "pure", "host randomness (np.random, random) drawn while"),
    (a_text_metric, "shapes", "returned metric 'phase' as a str: metrics must be scalar arrays"),
    (three_values, "shapes", "update returned a tuple of 3 value(s): it must return (state, metrics)"),
], ids=["nan-when-all-terminated", "side-effect-under-jit", "ignores-the-batch", "leaf-changes-shape",
        "targets-never-move", "host-randomness", "text-metric", "three-values"])
def test_the_harness_catches_broken_agents_with_the_right_message(update, check, fragment):
    with pytest.raises(AgentCheckError) as e:
        check_agent(sac.AGENT._replace(name="broken", update=update), SMALL_SAC)
    assert str(e.value).startswith(f"[{check}]") and fragment in str(e.value), str(e.value)


def test_the_harness_catches_statistics_never_written_back():
    """A CrossQ whose critic loss drops the new batch statistics (the old metrics trick, forgotten)."""
    from agents import crossq
    from jaxrl.optim import NETWORK_STATE

    def forgets_statistics(critic_params, state, batch, key, cfg):
        loss, aux = crossq.critic_loss(critic_params, state, batch, key, cfg)
        return loss, {k: v for k, v in aux.items() if k != NETWORK_STATE}

    broken = crossq.AGENT._replace(name="broken", update=crossq.make_update(critic_loss_fn=forgets_statistics))
    cfg = crossq.Config(actor_hidden_sizes=(16, 16), critic_hidden_sizes=(16, 16), batch_size=32)
    with pytest.raises(AgentCheckError) as e:
        check_agent(broken, cfg, eager=False, skip=("vmap", "checkpoint"))
    assert str(e.value).startswith("[statistics] the batch statistics of critic_params never changed"), str(e.value)


def test_the_harness_refuses_another_agents_config_in_one_line():
    from agents import td3

    with pytest.raises(AgentCheckError) as e:
        check_agent(sac.AGENT, td3.Config(hidden_sizes=(16, 16), batch_size=32))
    assert str(e.value).startswith("[config] the config is a agents.td3.Config, not agent 'sac'"), str(e.value)
