import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.normalization import (
    init_normalizers,
    init_stats,
    normalize,
    normalize_obs,
    update_obs_stats,
    update_stats,
)


def test_running_stats_merge_batches_exactly():
    data = np.array([[1.0, 10.0], [3.0, 10.0], [5.0, 13.0], [7.0, 7.0], [9.0, 10.0]], np.float32)
    stats = init_stats(2)
    stats = update_stats(stats, jnp.asarray(data[:2]))
    stats = update_stats(stats, jnp.asarray(data[2:]))
    np.testing.assert_allclose(stats.mean, [5.0, 10.0], rtol=1e-6)
    np.testing.assert_allclose(stats.var, [8.0, 3.6], rtol=1e-6)  # population variance of all five rows
    assert float(stats.count) == 5.0
    np.testing.assert_allclose(normalize(stats, jnp.array([[9.0, 10.0]])), [[2.0 / np.sqrt(2.0), 0.0]], rtol=1e-5)


def test_float32_running_statistics_match_float64_over_a_million_samples():
    # Worst case for float32: one sample per update, a large offset and a small spread.
    n = 1_000_000
    rng = np.random.default_rng(0)
    data = (1000.0 + 0.5 * rng.standard_normal(n) + 0.1 * np.sin(np.arange(n) / 5000.0)).astype(np.float32)

    @jax.jit
    def run(x):
        return jax.lax.scan(lambda s, v: (update_stats(s, v[None, None]), None), init_stats(1), x)[0]

    stats = run(jnp.asarray(data))
    exact = data.astype(np.float64)
    assert int(stats.count) == n
    # A plain float32 Welford update is off by 0.016 in the mean here (3 % of the std).
    assert abs(float(stats.mean[0]) - exact.mean()) < 1e-3 * exact.std()
    np.testing.assert_allclose(stats.var[0], exact.var(), rtol=1e-3)


def test_structured_observations_are_normalised_part_by_part():
    key_a, key_b = jax.random.split(jax.random.PRNGKey(0))
    obs = {"state": 3.0 + jax.random.normal(key_a, (64, 2)),
           "privileged_state": -5.0 + 10 * jax.random.normal(key_b, (64, 3))}
    stats = update_obs_stats(init_normalizers({"state": 2, "privileged_state": 3}, 4).obs, obs)
    for part, size in (("state", 2), ("privileged_state", 3)):
        alone = update_stats(init_stats(size), obs[part])
        np.testing.assert_array_equal(stats[part].mean, alone.mean)
        np.testing.assert_array_equal(stats[part].var, alone.var)
    normalised = normalize_obs(stats, obs)
    for part in obs:
        np.testing.assert_allclose(jnp.mean(normalised[part], axis=0), 0.0, atol=1e-5)
        np.testing.assert_allclose(jnp.std(normalised[part], axis=0), 1.0, atol=1e-3)
