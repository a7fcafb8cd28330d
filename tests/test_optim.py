import jax.numpy as jnp
import numpy as np
import optax
import pytest

import envs
from agents import get_agent
from jaxrl.loop import LoopConfig, describe
from jaxrl.optim import grad_norm_metrics, gradient_step


def half_squared_distance(params, target):
    loss = 0.5 * jnp.sum((params["w"] - target) ** 2)
    return loss, {"loss": loss}


def test_gradient_step_takes_one_optimizer_step_and_reports_the_gradient_norm():
    # grad of 0.5 |w - 0|^2 at w = (3, 4) is (3, 4): norm 5; SGD with lr 0.1 moves w to (2.7, 3.6).
    params = {"w": jnp.array([3.0, 4.0])}
    sgd = optax.sgd(0.1)
    step = gradient_step(half_squared_distance, params, sgd.init(params), sgd, jnp.zeros(2))
    np.testing.assert_allclose(step.params["w"], [2.7, 3.6], rtol=1e-6)
    np.testing.assert_allclose(step.grad_norm, 5.0, rtol=1e-6)
    np.testing.assert_allclose(step.aux["loss"], 12.5, rtol=1e-6)


def test_the_norm_is_of_the_raw_gradient_before_clipping():
    params = {"w": jnp.array([3.0, 4.0])}
    clipped = optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(1.0))
    step = gradient_step(half_squared_distance, params, clipped.init(params), clipped, jnp.zeros(2))
    np.testing.assert_allclose(step.grad_norm, 5.0, rtol=1e-6)
    np.testing.assert_allclose(step.params["w"], [3.0 - 0.6, 4.0 - 0.8], rtol=1e-6)  # moved by the unit vector
    assert set(grad_norm_metrics(critic=step, actor=step)) == {"grad_norm/critic", "grad_norm/actor"}


NETWORKS = {"sac": {"actor", "critic", "alpha"}, "td3": {"actor", "critic"}, "tqc": {"actor", "critic", "alpha"},
            "dsac_t": {"actor", "critic", "alpha"}, "simbav2": {"actor", "critic", "alpha"},
            "tdmpc2": {"model", "policy"}, "fasttd3": {"actor", "critic"}, "fastsac": {"actor", "critic", "alpha"}}


@pytest.mark.parametrize("name", NETWORKS)
def test_every_agent_logs_the_gradient_norm_of_each_network_it_trains(name):
    """Read from the program's metric shapes (jax.eval_shape of one learning phase): nothing compiles."""
    loop = LoopConfig(steps=100, num_envs=2, num_eval_envs=1, eval_every=100, learning_starts=10, buffer_size=1000)
    agent = get_agent(name)
    program = describe(agent, envs.make("toy/Pendulum", 2), envs.make("toy/Pendulum", 1), loop,
                       agent.Config().replace(batch_size=64))
    logged = {metric.removeprefix("grad_norm/") for metric in program.metric_shapes if metric.startswith("grad_norm/")}
    assert logged == NETWORKS[name]
