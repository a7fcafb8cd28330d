"""n-step transitions: the buffer's sums, bootstrap observations and discounts against a step-by-step reference,
and the shared TD target that consumes them."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents import sac
from jaxrl import ConfigError
from jaxrl import buffer as B
from jaxrl.loop import LoopConfig
from jaxrl.losses import td_target
from tests.helpers import BATCH, PARTS, fill, train


def reference(t, env, n, gamma, newest, ends):
    """Walk the steps from global step t of ``env`` one by one: (reward sum, discount, terminated, truncated, the
    bootstrap observation as a function of a part). ``ends`` maps an episode's last step to "terminated" /
    "truncated"; the newest row (``newest``) has no successor yet, so no window reaches it."""
    total, last = 0.0, None
    for k in range(n):
        step = t + k
        if step >= newest:
            break
        total += gamma**k * step  # fill() writes reward = t
        last = step
        if step in ends:
            break
    m = last - t + 1
    end = ends.get(last)

    def next_obs(part):  # fill()'s final observations are -(part + 1)
        return -(part(np.array([100.0 * env + last])) + 1) if end else part(np.array([100.0 * env + last + 1]))

    return total, gamma**m, end == "terminated", end == "truncated", next_obs


def check_against_reference(state, n, gamma, newest, ends, structured, key=0):
    batch = B.sample(state, jax.random.PRNGKey(key), 1024, n_step=n, gamma=gamma)
    x = np.asarray((batch.obs["state"] if structured else batch.obs)[:, 0])
    env = np.floor(x / 100.0)
    t = (x - 100 * env).astype(int)
    expected = [reference(ti, ei, n, gamma, newest, ends) for ti, ei in zip(t, env, strict=True)]
    total, discount, terminated, truncated, next_obs = zip(*expected, strict=True)
    np.testing.assert_allclose(batch.reward, total, rtol=1e-6)
    np.testing.assert_allclose(batch.discount, discount, rtol=1e-6)
    np.testing.assert_array_equal(batch.terminated, terminated)
    np.testing.assert_array_equal(batch.truncated, truncated)
    parts = PARTS if structured else {None: PARTS["state"]}
    for name, part in parts.items():
        got = batch.next_obs[name] if structured else batch.next_obs
        np.testing.assert_allclose(got, np.stack([np.asarray(f(part)) for f in next_obs]))
        np.testing.assert_allclose(batch.obs[name] if structured else batch.obs, part(x[:, None]))
    return t, np.array(discount)


@pytest.mark.parametrize("structured", [False, True])
def test_n_step_sums_inside_an_episode_and_stop_before_the_write_head(structured):
    state = fill(capacity=2 * 20, steps=20, episode_length=1000, structured=structured)  # t = 0..19, newest 19
    t, discount = check_against_reference(state, n=3, gamma=0.5, newest=19, ends={}, structured=structured)
    assert set(discount[t <= 16]) == {0.125} and set(discount[t == 17]) == {0.25} and set(discount[t == 18]) == {0.5}


@pytest.mark.parametrize("structured", [False, True])
def test_a_termination_ends_the_sum_without_bootstrap_and_a_truncation_bootstraps_from_the_final_obs(structured):
    # episodes: t = 0-4 (truncated at 4), 5-7 (terminated at 7), 8-12 (truncated), 13-17 (truncated), 18-19
    state = fill(capacity=2 * 40, steps=20, episode_length=5, can_terminate=True, terminate_at=(7,),
                 structured=structured)
    ends = {4: "truncated", 7: "terminated", 12: "truncated", 17: "truncated"}
    t, _ = check_against_reference(state, n=3, gamma=0.9, newest=19, ends=ends, structured=structured)
    assert {3, 4, 6, 7, 16} <= set(t)  # windows that stop at each kind of end are among those checked


@pytest.mark.parametrize("structured", [False, True])
def test_n_step_windows_wrap_around_the_ring(structured):
    state = fill(capacity=2 * 10, steps=27, episode_length=4, structured=structured)  # rows hold t = 17..26
    ends = {t: "truncated" for t in range(3, 27, 4)}
    t, _ = check_against_reference(state, n=4, gamma=0.7, newest=26, ends=ends, structured=structured)
    assert t.min() == 17 and t.max() == 25


def test_one_step_sampling_is_the_plain_transition_with_discount_gamma():
    state = fill(capacity=2 * 40, steps=20, episode_length=5, can_terminate=True, terminate_at=(7,))
    batch = B.sample(state, jax.random.PRNGKey(4), 512, n_step=1, gamma=0.99)
    obs = np.asarray(batch.obs[:, 0])
    np.testing.assert_array_equal(batch.reward, obs - 100 * np.floor(obs / 100))  # reward = t, untouched
    np.testing.assert_array_equal(batch.discount, np.float32(0.99))


def test_td_target_uses_the_batch_discount_and_broadcasts_over_atoms():
    batch = BATCH.replace(discount=jnp.array([0.81, 0.9]))  # a 2-step and a 1-step transition; the second ends
    np.testing.assert_allclose(td_target(batch, jnp.array([10.0, 10.0])), [1.0 + 8.1, -1.0], rtol=1e-6)
    atoms = jnp.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    np.testing.assert_allclose(td_target(batch, atoms), [[1.81, 2.62, 3.43], [-1.0, -1.0, -1.0]], rtol=1e-6)


@pytest.mark.parametrize("n_step", [0, -1])
def test_n_step_must_be_a_positive_integer(n_step):
    with pytest.raises(ConfigError, match="n_step"):
        sac.AGENT.check_config(sac.Config(n_step=n_step))


def test_sac_with_3_step_targets_learns_the_truncated_probe_value():
    """toy/ConstantTruncated (reward 1, time limit every 10 steps, gamma 0.9): Q = 10 whatever n is, if the
    windows stop at time limits and bootstrap from the true final observation with gamma^m."""
    loop = LoopConfig(steps=4000, num_envs=8, num_eval_envs=2, eval_every=1000, learning_starts=500, buffer_size=4000)
    cfg = sac.Config(hidden_sizes=(32, 32), batch_size=64, gamma=0.9, tau=0.05, critic_lr=1e-3, init_alpha=1e-6,
                     alpha_lr=1e-12, n_step=3)
    state, _ = train("toy/ConstantTruncated", loop, cfg)
    agent = jax.tree.map(lambda x: x[0], state.agent)
    q = agent.critic.apply(agent.critic_params, jnp.ones((3, 1)), jnp.array([[-0.5], [0.0], [0.5]]))[..., 0]
    np.testing.assert_allclose(q, 10.0, atol=0.7)
