import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from jaxrl import ConfigError


def run(env, steps, action=None):
    state = jax.jit(env.reset)(jax.random.PRNGKey(0))  # an MJX reset op by op takes ~3x its compilation
    step = jax.jit(env.step)
    outs = []
    a = jnp.zeros((env.num_envs, env.spec.action_size)) if action is None else action
    for _ in range(steps):
        state, out = step(state, a)
        outs.append(out)
    return state, jax.tree.map(lambda *x: np.stack(x), *outs)


def test_truncation_is_not_termination_and_episodes_auto_reset():
    env = envs.make("toy/ConstantTruncated", 3)
    state, out = run(env, 25)
    assert not out.terminated.any()
    np.testing.assert_array_equal(out.truncated[:, 0], [(t + 1) % 10 == 0 for t in range(25)])
    np.testing.assert_allclose(out.episode_return[9], 10.0)  # ten rewards of 1
    np.testing.assert_array_equal(out.episode_length[9], 10)
    np.testing.assert_array_equal(state.episode_step, 5)


def test_termination_sets_terminated_only():
    env = envs.make("toy/Bandit", 2)
    _, out = run(env, 3, jnp.full((2, 1), 0.5))
    assert out.terminated.all() and not out.truncated.any()
    np.testing.assert_allclose(out.reward, 1.0)


def test_final_obs_is_the_pre_reset_observation():
    env = envs.make("toy/PointMass", 2)
    state = env.reset(jax.random.PRNGKey(1))
    step = jax.jit(env.step)
    for _ in range(49):
        state, out = step(state, jnp.ones((2, 2)))
    before = state.obs
    state, out = step(state, jnp.ones((2, 2)))
    assert out.truncated.all()
    np.testing.assert_allclose(out.final_obs, jnp.clip(before + 0.1, -2, 2), rtol=1e-6)
    assert not np.allclose(out.obs, out.final_obs)  # the next obs to act on is a fresh episode's
    np.testing.assert_array_equal(state.episode_step, 0)


def test_one_trace_of_the_env_functions_serves_every_batch_and_the_numbers_are_unchanged():
    """A VecEnv traces its raw ``reset`` and ``step`` once per single-env argument shapes: the initial reset of the
    training batch, the evaluation batch (the same raw env, other size) and the auto-reset inside ``step`` reuse the
    trace (an MJX reset takes seconds to trace). The states are the plain calls' bit for bit."""
    import dataclasses

    raw = envs.make("toy/ConstantTruncated", 1).raw
    traced = {"reset": 0, "step": 0}

    def counted(name, fn):
        def call(*args):
            traced[name] += 1  # runs only while JAX traces
            return fn(*args)
        return call

    counting = dataclasses.replace(raw, reset=counted("reset", raw.reset), step=counted("step", raw.step))
    train_env = envs.VecEnv(counting, 3, action_repeat=2)
    eval_env = dataclasses.replace(train_env, num_envs=1)
    state, out = run(train_env, 12)
    run(eval_env, 3)
    assert traced == {"reset": 1, "step": 1}, traced
    plain = envs.VecEnv(dataclasses.replace(raw, reset=lambda k: raw.reset(k), step=lambda *a: raw.step(*a)), 3, 2)
    plain_state, plain_out = run(plain, 12)
    for a, b in zip(jax.tree.leaves((state, out)), jax.tree.leaves((plain_state, plain_out)), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_run_evaluates_on_its_training_envs_model_at_its_own_batch_size():
    """Without domain randomisation the evaluation batch is the training batch's raw env at ``num_eval_envs``: one
    model loaded, its functions traced once for both."""
    from experiments.rundir import RunConfig
    from experiments.train import make_envs
    from jaxrl.loop import LoopConfig

    train_env, eval_env = make_envs(RunConfig(env="toy/Pendulum"), LoopConfig(num_envs=4, num_eval_envs=2,
                                                                              action_repeat=2))
    assert eval_env.raw is train_env.raw
    assert (train_env.num_envs, eval_env.num_envs, eval_env.action_repeat) == (4, 2, 2)


def test_mjx_is_imported_without_warp_on_the_cpu_and_warp_stays_importable():
    """On a CPU-only JAX, making an MJX env does not import NVIDIA Warp (~4.5 s of every start here), prints
    nothing, and leaves ``import warp`` working for the user's own code afterwards."""
    import subprocess
    import sys

    code = ("import sys, envs; envs.make('dmc/CartpoleSwingup', 1); assert 'warp' not in sys.modules, 'warp'; "
            "import mujoco.mjx.warp as w; assert not w.WARP_INSTALLED; import importlib.util; "
            "print('warp importable' if importlib.util.find_spec('warp') else 'no warp here')")
    env = {k: v for k, v in os.environ.items() if k != "JAXRL_IMPORT_WARP"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() in ("warp importable", "no warp here"), out.stdout  # MJX's "Failed to import" swallowed


def test_action_repeat_sums_rewards_and_counts_env_steps():
    env1 = envs.make("toy/ConstantTruncated", 1, episode_length=20)
    env4 = envs.make("toy/ConstantTruncated", 1, action_repeat=4, episode_length=20)
    assert env4.decisions_per_episode == 5
    _, out = run(env4, 5)
    np.testing.assert_allclose(out.reward, 4.0)
    np.testing.assert_array_equal(out.truncated[:, 0], [False] * 4 + [True])
    np.testing.assert_array_equal(out.episode_length[-1], 20)
    _, out1 = run(env1, 20)
    np.testing.assert_allclose(out.episode_return[-1], out1.episode_return[-1])


def test_unknown_names_fail_with_one_line():
    with pytest.raises(ConfigError) as e:
        envs.make("gym/HalfCheetah", 1)
    message = str(e.value)
    assert "brax/, dmc/, locomotion/, manipulation/, toy/" in message and "jaxrl envs" in message
    assert "\n" not in message
    with pytest.raises(ConfigError, match="valid: dmc/AcrobotSwingup"):
        envs.make("dmc/CartpoleSwingUp", 1)
    with pytest.raises(ConfigError, match="brax/ant"):
        envs.make("brax/cheetah", 1)
    with pytest.raises(ConfigError, match="num_envs must be a positive"):
        envs.make("toy/Pendulum", 0)


def test_listing_covers_every_prefix():
    names = envs.list_envs()
    assert "dmc/CartpoleSwingup" in names and "brax/halfcheetah" in names and "toy/Pendulum" in names
    assert sum(n.startswith("dmc/") for n in names) == 25 + 10  # and Playground's originals of 10 changed tasks
    assert sum(n.startswith("locomotion/") for n in names) == 19
    assert sum(n.startswith("manipulation/") for n in names) == 10
    assert "locomotion/T1JoystickFlatTerrain" in names and "manipulation/LeapCubeReorient" in names


@pytest.mark.parametrize("name, parts", [
    ("locomotion/Go1JoystickFlatTerrain", {"state", "privileged_state"}),
    ("manipulation/PandaPickCube", set()),
])
def test_playground_robots_load_from_the_packaged_models_with_their_observation_parts(name, parts):
    raw = envs.make_raw(name)  # loads the MJX model from the link directory; compiles nothing
    assert {part for part, _ in raw.obs_parts} == parts
    assert raw.can_terminate and raw.episode_length > 0
    assert raw.obs_size > 0
    if parts:
        assert raw.obs_size == sum(size for _, size in raw.obs_parts)


@pytest.mark.slow
def test_dmc_cartpole_steps_batched_with_mjx():
    env = envs.make("dmc/CartpoleSwingup", 2)
    assert env.spec.obs_size == 5 and env.spec.action_size == 1 and env.decisions_per_episode == 1000
    assert not env.spec.can_terminate
    state, out = run(env, 3, jnp.ones((2, 1)))
    assert out.obs.shape == (3, 2, 5) and np.isfinite(out.reward).all()
    assert not out.done.any()


def test_structured_observations_step_reset_and_keep_their_final_parts():
    env = envs.make("toy/PrivilegedBandit", 64)
    assert env.spec.obs_parts == (("state", 1), ("privileged_state", 1))
    state = env.reset(jax.random.PRNGKey(0))
    assert set(state.obs) == {"state", "privileged_state"} and state.obs["privileged_state"].dtype == jnp.float32
    target = state.obs["privileged_state"][:, 0]
    new_state, out = env.step(state, jnp.broadcast_to(target[:, None], (64, 1)))  # the best action everywhere
    np.testing.assert_allclose(out.reward, 1.0)
    assert bool(out.terminated.all())
    np.testing.assert_array_equal(out.final_obs["privileged_state"][:, 0], target)  # the ended episode's c
    drawn = np.asarray(new_state.obs["privileged_state"][:, 0])
    assert set(drawn) == {-0.5, 0.5} and (drawn != np.asarray(target)).any()  # fresh episodes drew new targets


def test_missing_robot_models_fail_with_the_pip_command(monkeypatch):
    from envs import menagerie

    monkeypatch.setattr(menagerie, "PACKAGES", ("envpool_assets_not_installed",))
    with pytest.raises(ConfigError, match=r"envpool-assets-not-installed is missing\): pip install 'jaxrl\[robots\]'"):
        menagerie.robot_dirs()


def test_the_menagerie_link_directory_is_built_once_and_reused(tmp_path):
    from envs import menagerie

    robots = {}
    for name in ("unitree_go1", "booster_t1"):
        (tmp_path / "pkg" / name).mkdir(parents=True)
        (tmp_path / "pkg" / name / "scene.xml").write_text("<mujoco/>")
        robots[name] = str(tmp_path / "pkg" / name)
    first = menagerie.link_directory(robots, str(tmp_path / "cache"))
    assert sorted(os.listdir(first)) == ["booster_t1", "unitree_go1"]
    assert open(os.path.join(first, "unitree_go1", "scene.xml")).read() == "<mujoco/>"
    assert menagerie.link_directory(robots, str(tmp_path / "cache")) == first
    assert os.listdir(tmp_path / "cache") == [os.path.basename(first)]  # no staging copies left behind


def test_a_brax_env_renders_its_states_and_a_toy_env_has_no_renderer():
    """Brax's PipelineEnv draws pipeline states (Playground's own States are drawn in the dmc video test)."""
    from envs.rendering import NO_GL, select_gl_backend

    raw = envs.make_raw("brax/inverted_pendulum")
    if select_gl_backend() is None:
        pytest.skip(NO_GL)  # .ci/run installs the libraries, so CI always runs this test
    state, _ = raw.reset(jax.random.PRNGKey(0))
    states = [state, raw.step(state, jnp.ones(raw.action_size))[0]]
    frames = raw.render(states, 64, 48)
    assert len(frames) == 2 and frames[0].shape == (48, 64, 3) and frames[0].dtype == np.uint8
    assert frames[0].std() > 1 and raw.control_dt == pytest.approx(0.04)
    assert envs.make_raw("toy/Pendulum").render is None


def test_a_shifted_pendulum_scales_gravity_and_torque_as_gyms_equations():
    """theta_dot' = theta_dot + (3 g / (2 l) sin theta + 3 / (m l^2) u) dt, u = 2 a, dt = 0.05 (Gym's Pendulum-v1);
    the defaults are the registered toy/Pendulum."""
    from envs.toy import pendulum

    state = jnp.array([jnp.pi / 2, 0.0])  # horizontal, at rest: sin theta = 1
    for gravity, mass, length in [(10.0, 1.0, 1.0), (15.0, 2.0, 1.5)]:
        new_state, *_ = pendulum(gravity, mass, length).step(state, jnp.array([1.0]))
        expected = (3 * gravity / (2 * length) + 3 / (mass * length**2) * 2.0) * 0.05
        assert float(new_state[1]) == pytest.approx(expected, rel=1e-6)
