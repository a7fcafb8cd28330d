import jax
import numpy as np

from agents import sac
from experiments.examples.sac_huber import AGENT, huber_critic_loss
from tests.helpers import BATCH, KEY, make_state


def test_huber_loss_is_half_mse_for_small_errors_and_linear_for_large():
    state = make_state(target_scale=0.5)
    target = np.asarray(sac.soft_td_target(state, BATCH, KEY, sac.Config(gamma=0.9)))
    q = np.asarray(state.critic.apply(state.critic_params, BATCH.obs, BATCH.action)[..., 0])
    err = np.abs(q - target)
    expected = np.where(err <= 1, 0.5 * err**2, err - 0.5).mean(axis=1).sum()
    loss, _ = huber_critic_loss(state.critic_params, state, BATCH, KEY, sac.Config(gamma=0.9))
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
    assert AGENT.name == "sac_huber" and AGENT.update is not sac.update
    # the plugged-in update optimises it: its reported critic loss is the Huber loss on the critic's key
    _, metrics = jax.jit(AGENT.update, static_argnums=3)(state, BATCH, KEY, sac.Config(gamma=0.9))
    critic_key = jax.random.split(KEY)[0]
    loss, _ = huber_critic_loss(state.critic_params, state, BATCH, critic_key, sac.Config(gamma=0.9))
    np.testing.assert_allclose(metrics["critic_loss"], loss, rtol=1e-6)
