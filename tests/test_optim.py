import jax.numpy as jnp
import numpy as np
import optax

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
