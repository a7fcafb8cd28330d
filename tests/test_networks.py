import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.stats import norm

from jaxrl.networks import CriticEnsemble, sample_tanh_gaussian, tanh_gaussian_log_prob, tanh_log_det_jacobian


def test_tanh_log_det_jacobian_matches_direct_formula():
    u = jnp.array([-3.0, -0.5, 0.0, 0.7, 2.5])
    np.testing.assert_allclose(tanh_log_det_jacobian(u), np.log(1 - np.tanh(np.asarray(u, np.float64)) ** 2), rtol=1e-5)
    # Stable where the direct form underflows: log(1 - tanh(20)^2) = log(4) - 40 + O(e^-40).
    np.testing.assert_allclose(tanh_log_det_jacobian(jnp.array(20.0)), math.log(4.0) - 40.0, rtol=1e-6)


def test_tanh_gaussian_log_prob_is_change_of_variables():
    mean = jnp.array([[0.3, -1.0]])
    log_std = jnp.array([[-0.5, 0.2]])
    u = jnp.array([[0.1, -2.0]])
    a = np.tanh(np.asarray(u, np.float64))
    # density of a = tanh(u): p_u(u) / |da/du| with da/du = 1 - a^2
    reference = np.sum(norm.logpdf(np.asarray(u), np.asarray(mean), np.exp(np.asarray(log_std))) - np.log(1 - a**2))
    np.testing.assert_allclose(tanh_gaussian_log_prob(u, mean, log_std)[0], reference, rtol=1e-5)


def test_tanh_gaussian_density_integrates_to_one():
    # 1-D: integrate exp(log pi(a)) over a in (-1, 1) numerically.
    a = np.linspace(-1 + 1e-6, 1 - 1e-6, 200_001)
    u = jnp.arctanh(jnp.asarray(a))[:, None]
    density = np.exp(np.asarray(tanh_gaussian_log_prob(u, jnp.array([[0.4]]), jnp.array([[-0.3]]))))
    assert abs(np.trapezoid(density, a) - 1.0) < 1e-3


def test_sample_tanh_gaussian_reparameterised_and_bounded():
    key = jax.random.PRNGKey(0)
    mean, log_std = jnp.zeros((1000, 3)), jnp.full((1000, 3), 1.0)
    a, logp = sample_tanh_gaussian(key, mean, log_std)
    assert a.shape == (1000, 3) and logp.shape == (1000,)
    assert jnp.all(jnp.abs(a) <= 1.0)
    u = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape)
    np.testing.assert_allclose(a, jnp.tanh(u), rtol=1e-6)
    np.testing.assert_allclose(logp, tanh_gaussian_log_prob(u, mean, log_std), rtol=1e-5)


def test_critic_ensemble_members_are_independent():
    net = CriticEnsemble((8, 8), num_critics=3)
    params = net.init(jax.random.PRNGKey(0), jnp.zeros((1, 2)), jnp.zeros((1, 1)))
    q = net.apply(params, jnp.ones((5, 2)), jnp.ones((5, 1)))
    assert q.shape == (3, 5, 1)
    assert not np.allclose(q[0], q[1]) and not np.allclose(q[1], q[2])
