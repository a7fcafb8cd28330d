import jax.numpy as jnp
import numpy as np

from jaxrl.normalization import init_stats, normalize, update_stats


def test_running_stats_merge_batches_exactly():
    data = np.array([[1.0, 10.0], [3.0, 10.0], [5.0, 13.0], [7.0, 7.0], [9.0, 10.0]], np.float32)
    stats = init_stats(2)
    stats = update_stats(stats, jnp.asarray(data[:2]))
    stats = update_stats(stats, jnp.asarray(data[2:]))
    np.testing.assert_allclose(stats.mean, [5.0, 10.0], rtol=1e-6)
    np.testing.assert_allclose(stats.var, [8.0, 3.6], rtol=1e-6)  # population variance of all five rows
    assert float(stats.count) == 5.0
    np.testing.assert_allclose(normalize(stats, jnp.array([[9.0, 10.0]])), [[2.0 / np.sqrt(2.0), 0.0]], rtol=1e-5)
