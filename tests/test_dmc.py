"""dmc/ tasks follow dm_control where Playground's port differs (envs/dmc.py, docs/dmc_audit.md).

The references here are dm_control's own rules run on the host: its rejection loop (draw, ``mj_forward``, retry
while ``ncon > 0``) with MuJoCo C on the same model, and its randomiser's draws in NumPy."""
import types
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import envs
from envs import dmc


def _raw_resets(name, n, seed=0):
    """(qpos [n, nq], obs [n, obs], the Playground env) of ``n`` resets of ``dmc/<name>`` through jaxrl's env."""
    raw = envs.make_raw(name)
    states, obs = jax.jit(jax.vmap(raw.reset))(jax.random.split(jax.random.PRNGKey(seed), n))
    return np.asarray(states.data.qpos, np.float64), np.asarray(obs), states


def _playground(task):
    from mujoco_playground import dm_control_suite

    return dm_control_suite.load(task, config_overrides={"impl": "jax"})


def _ncon(model, qpos):
    data = mujoco.MjData(model)
    out = []
    for q in qpos:
        data.qpos[:] = q
        data.qvel[:] = 0
        mujoco.mj_forward(model, data)
        out.append(data.ncon)
    return np.array(out)


def _rejection_loop(model, draw, n, seed):
    """dm_control's ``while penetrating`` loop on the host (MuJoCo C), ``n`` accepted draws."""
    rng, data, accepted = np.random.RandomState(seed), mujoco.MjData(model), []
    while len(accepted) < n:
        mujoco.mj_resetData(model, data)
        data.qpos[:] = draw(model, rng, data.qpos.copy())
        mujoco.mj_forward(model, data)
        if data.ncon == 0:
            accepted.append(data.qpos.copy())
    return np.array(accepted)


def _assert_same_moments(ours, reference, columns):
    """Per column, means within 4 standard errors of the difference and standard deviations within 20 %."""
    for c in columns:
        a, b = ours[:, c], reference[:, c]
        se = np.sqrt(a.var() / len(a) + b.var() / len(b))
        assert abs(a.mean() - b.mean()) < 4 * se + 1e-9, (c, a.mean(), b.mean(), se)
        assert abs(a.std() - b.std()) < 0.2 * b.std() + 1e-9, (c, a.std(), b.std())


def _dm_control_ball(model, rng, qpos):
    qpos[model.joint("ball_x").qposadr[0]] = rng.uniform(-.2, .2)
    qpos[model.joint("ball_z").qposadr[0]] = rng.uniform(.2, .5)
    return qpos


def _dm_control_joints(model, rng, qpos):
    """dm_control.suite.utils.randomizers.randomize_limited_and_rotational_joints for the humanoid's and the finger's
    joints (hinges, limited or not, and one free joint)."""
    for j in range(model.njnt):
        adr, low, high = model.jnt_qposadr[j], *model.jnt_range[j]
        if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
            quat = rng.rand(4)
            qpos[adr + 3:adr + 7] = quat / np.linalg.norm(quat)
        elif model.jnt_limited[j]:
            qpos[adr] = rng.uniform(low, high)
        else:
            qpos[adr] = rng.uniform(-np.pi, np.pi)
    return qpos


def test_ball_in_cup_draws_dm_controls_collision_free_ball_positions():
    qpos, obs, _ = _raw_resets("dmc/BallInCup", 512)
    model = _playground("BallInCup").mj_model
    x, z = model.joint("ball_x").qposadr[0], model.joint("ball_z").qposadr[0]
    assert (np.abs(qpos[:, x]) <= 0.2).all() and ((qpos[:, z] >= 0.2) & (qpos[:, z] <= 0.5)).all()
    np.testing.assert_array_equal(qpos[:, [model.joint("cup_x").qposadr[0], model.joint("cup_z").qposadr[0]]], 0)
    assert (_ncon(model, qpos) == 0).all()  # MuJoCo C's contact count, dm_control's test
    np.testing.assert_allclose(obs[:, :4], qpos, atol=1e-6)  # the observation is of the drawn state
    assert len(np.unique(qpos[:, [x, z]], axis=0)) == 512  # every reset draws anew
    _assert_same_moments(qpos, _rejection_loop(model, _dm_control_ball, 2048, seed=0), [x, z])


def test_ball_in_cup_playground_keeps_playgrounds_rest_start():
    qpos, _, _ = _raw_resets("dmc/BallInCupPlayground", 4)
    np.testing.assert_array_equal(qpos, 0)  # the ball hangs at rest under the cup in every episode


def test_humanoid_draws_dm_controls_random_collision_free_configuration():
    qpos, obs, _ = _raw_resets("dmc/HumanoidWalk", 128, seed=1)
    model = _playground("HumanoidWalk").mj_model
    np.testing.assert_allclose(qpos[:, :3], np.tile([0.0, 0.0, 1.5], (128, 1)))  # the root's position is kept
    quat = qpos[:, 3:7]
    np.testing.assert_allclose(np.linalg.norm(quat, axis=1), 1, atol=1e-6)
    assert (quat >= 0).all()  # rand(4) normalised, as dm_control draws it (not uniform on the sphere)
    hinges = [j for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
    assert len(hinges) == 21 and all(model.jnt_limited[j] for j in hinges)
    columns = [int(model.jnt_qposadr[j]) for j in hinges]
    low, high = model.jnt_range[hinges].T
    assert ((qpos[:, columns] >= low - 1e-6) & (qpos[:, columns] <= high + 1e-6)).all()
    assert (_ncon(model, qpos) == 0).all()
    assert obs.shape == (128, 67) and np.isfinite(obs).all()
    _assert_same_moments(qpos, _rejection_loop(model, _dm_control_joints, 1024, seed=1), [3, 4, 5, 6] + columns)


@pytest.mark.parametrize("task", ["BallInCup", "HumanoidWalk"])
def test_the_jitted_contact_check_agrees_with_mujocos_ncon_both_ways(task):
    """Raw draws, before any rejection: MJX's verdict on the check model against MuJoCo C's ncon on Playground's
    model, draw by draw (an accepted draw MuJoCo rejects, or the reverse, would bias the distribution)."""
    from mujoco import mjx

    model = _playground(task).mj_model
    check = dmc.contact_check_model(model)
    rest = mjx.make_data(check)

    @jax.jit
    @jax.vmap
    def draw(key):
        qpos = dmc.DRAWS[task](model, key, rest.qpos)
        return qpos, dmc.contact_depth(mjx.collision(check, mjx.kinematics(check, rest.replace(qpos=qpos))))

    qpos, depth = draw(jax.random.split(jax.random.PRNGKey(5), 256))
    touching = _ncon(model, np.asarray(qpos, np.float64)) > 0
    assert 0.05 < touching.mean() < 0.5  # both verdicts occur
    np.testing.assert_array_equal(np.asarray(depth) > 0, touching)


def test_finger_draws_independent_collision_free_angles():
    qpos, _, _ = _raw_resets("dmc/FingerSpin", 512, seed=2)
    model = _playground("FingerSpin").mj_model
    low, high = model.jnt_range[:2].T
    assert ((qpos[:, :2] >= low) & (qpos[:, :2] <= high)).all() and (np.abs(qpos[:, 2]) <= np.pi).all()
    assert (_ncon(model, qpos) == 0).all()
    assert abs(np.corrcoef(qpos[:, 0], qpos[:, 2])[0, 1]) < 0.15  # Playground's reset makes these one draw
    _assert_same_moments(qpos, _rejection_loop(model, _dm_control_joints, 2048, seed=2), [0, 1, 2])


def test_fallback_takes_the_shallowest_candidate_when_every_draw_touches():
    model = _playground("BallInCup").mj_model
    check = dmc.contact_check_model(model)
    ball_z = model.joint("ball_z").qposadr[0]
    # Every candidate drops the ball through the floor at a depth set by the key; the shallowest is kept.
    depths = jax.random.uniform(jax.random.PRNGKey(3), (8,), minval=0.05, maxval=0.15)

    def draw(key, qpos):
        index = jax.random.randint(key, (), 0, 8)
        return qpos.at[ball_z].set(-0.3 - depths[index])  # the ball rests 0.2 above the floor: this is below it

    qpos = jax.jit(lambda key: dmc.collision_free(check, draw, key, candidates=8))(jax.random.PRNGKey(0))
    candidates = jax.vmap(lambda k: draw(k, jnp.zeros(model.nq)))(jax.random.split(jax.random.PRNGKey(0), 8))
    assert qpos[ball_z] == candidates[:, ball_z].max()


def test_walker_observes_the_torso_height_as_dm_control_does():
    _, obs, states = _raw_resets("dmc/WalkerWalk", 2)
    walker = _playground("WalkerWalk")
    torso = walker.mj_model.body("torso").id
    np.testing.assert_allclose(obs[:, 14], np.asarray(states.data.xpos[:, torso, 2]), rtol=1e-6)
    _, original, states = _raw_resets("dmc/WalkerWalkPlayground", 2)
    np.testing.assert_allclose(original[:, 14], np.asarray(states.data.xmat[:, torso, 2, 2]), rtol=1e-6)


def test_the_dm_control_observation_is_applied_after_every_step():
    class Walker:  # a stand-in for Playground's walker: its step observes the action
        _torso_id = 1

        def step(self, state, action):
            return state.replace(obs=action)

    @flax.struct.dataclass
    class State:
        obs: jax.Array
        data: Any

    data = types.SimpleNamespace(xpos=jnp.array([[0.0, 0.0, 0.0], [0.0, 0.0, 1.25]]))
    out = dmc.DmControlTask(Walker(), "WalkerWalk").step(State(jnp.zeros(24), data), jnp.arange(24.0))
    np.testing.assert_array_equal(out.obs, jnp.arange(24.0).at[14].set(1.25))  # the torso's height, as dm_control


def test_unchanged_tasks_are_playgrounds_own():
    raw = envs.make_raw("dmc/CartpoleSwingup")
    # Jitted: MJX's reset run op by op compiles each op on first use (~20 s on 2 cores, against ~6 s as one program).
    state, obs = jax.jit(raw.reset)(jax.random.PRNGKey(4))
    original = jax.jit(_playground("CartpoleSwingup").reset)(jax.random.PRNGKey(4))
    np.testing.assert_array_equal(obs, original.obs)
    np.testing.assert_array_equal(state.data.qpos, original.data.qpos)


def test_envs_lists_both_versions_and_says_which_is_which(capsys):
    from experiments.cli import main

    assert main(["envs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "dmc/CartpoleSwingup" in lines
    ball = next(line for line in lines if line.startswith("dmc/BallInCup "))
    assert "dm_control" in ball and "dmc/BallInCupPlayground" in ball
    original = next(line for line in lines if line.startswith("dmc/BallInCupPlayground "))
    assert "Playground" in original and "rest" in original
    for task in dmc.CHANGED:
        assert any(line.startswith(f"dmc/{task}Playground ") for line in lines), task


def test_the_finger_simulates_with_dm_controls_options(monkeypatch):
    from mujoco_playground import dm_control_suite

    env = dm_control_suite.load("FingerSpin", config_overrides={"impl": "jax", "sim_dt": 0.01})
    dmc.use_dm_control_physics(env, dmc.FINGER_OPTIONS)
    assert env.mj_model.opt.timestep == 0.01 and env.n_substeps == 2
    opt = env.mj_model.opt
    assert (opt.integrator, opt.cone) == (mujoco.mjtIntegrator.mjINT_EULER, mujoco.mjtCone.mjCONE_ELLIPTIC)
    assert (opt.iterations, opt.ls_iterations) == (200, 50)
    assert not opt.disableflags & mujoco.mjtDisableBit.mjDSBL_EULERDAMP  # damping integrated implicitly
    assert list(env.mj_model.numeric_data) == [-1, -1]  # no contact budget
    assert env.mjx_model.opt.iterations == 200 and env.mjx_model.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
    # The registry applies them to dmc/FingerSpin, loaded with a 0.01 s physics step (two per action), and not to
    # Playground's original.
    calls = []
    monkeypatch.setattr(dmc, "use_dm_control_physics", lambda env, options: calls.append((env.sim_dt, env.n_substeps)))
    envs.make_raw("dmc/FingerSpin")
    envs.make_raw("dmc/FingerSpinPlayground")
    assert calls == [(0.01, 2)]
