"""dm_control's initial-state distributions for the ``dmc/`` tasks whose MuJoCo Playground port starts elsewhere.

The published DMC numbers were measured on dm_control (``google-deepmind/dm_control``, ``dm_control/suite``).
Playground's ``BallInCup`` and humanoids start every episode from the model's rest pose; dm_control draws the
ball's position, or every joint of the humanoid, at random and rejects any draw in contact::

    penetrating = True
    while penetrating:
      <draw qpos>
      physics.after_reset()                     # mj_forward: collision detection included
      penetrating = physics.data.ncon > 0

A jitted reset cannot loop until it succeeds, so ``collision_free`` draws ``CANDIDATES`` configurations at once,
runs MJX's forward pass on each and keeps the first without contact. The first success of i.i.d. draws has the
distribution of dm_control's loop exactly; only when every candidate is in contact (probability (1 - p)^K for an
acceptance rate p, measured per task at ``CANDIDATES``) does it fall back to the candidate whose deepest contact is
shallowest. The number of candidates is static (one compiled program) and the reset runs only when an episode ends
(``envs.wrappers.VecEnv.step`` skips it otherwise), so the candidates cost one kinematics and collision pass each
per episode. Under a vmap over seeds that skip becomes a select and the reset is computed at every step: that is
why a candidate runs collision detection alone, not MJX's whole forward pass with its constraint solver.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

# Candidates per reset. Measured fractions of draws without contact (4,096 draws each; MJX on
# ``contact_check_model`` and MuJoCo C's mj_forward on Playground's model agreed on every one, as tests/test_dmc.py
# checks): BallInCup 0.826, the finger 0.906, the humanoid 0.735. All 16 touch with probability at most
# 0.265^16 ~ 6e-10 per episode: the fallback is never met in practice.
CANDIDATES = 16

Draw = Callable[[Any, jax.Array, jax.Array], jax.Array]  # (mj_model, key, qpos0) -> qpos


def random_limited_and_rotational_joints(model, key: jax.Array, qpos: jax.Array) -> jax.Array:
    """``dm_control.suite.utils.randomizers.randomize_limited_and_rotational_joints`` as a pure function of a key.

    Per joint of ``model`` (a ``mujoco.MjModel``; its structure is static): a limited hinge or slide uniform in its
    range; an unlimited hinge uniform in [-pi, pi]; a limited ball joint a rotation about a uniformly random axis by
    an angle uniform in [0, range_max]; an unlimited ball joint a uniform unit quaternion (normalised Gaussian); a
    free joint's orientation ``rand(4) / |rand(4)|`` (dm_control's own comment: "this should be random.randn, but
    changing it now could significantly affect benchmark results" -- so every component is positive, as there);
    a free joint's position and an unlimited slide are left as they are."""
    hinge, slide, ball, free = 3, 2, 1, 0  # mjtJoint
    keys = jax.random.split(key, model.njnt)
    for joint in range(model.njnt):
        adr, kind = int(model.jnt_qposadr[joint]), int(model.jnt_type[joint])
        low, high = (float(x) for x in model.jnt_range[joint])
        k = keys[joint]
        if model.jnt_limited[joint]:
            if kind in (hinge, slide):
                qpos = qpos.at[adr].set(jax.random.uniform(k, minval=low, maxval=high))
            elif kind == ball:
                axis_key, angle_key = jax.random.split(k)
                axis = jax.random.normal(axis_key, (3,))
                axis = axis / jnp.linalg.norm(axis)
                angle = jax.random.uniform(angle_key) * high
                quat = jnp.concatenate([jnp.cos(angle / 2)[None], jnp.sin(angle / 2) * axis])  # mju_axisAngle2Quat
                qpos = qpos.at[adr:adr + 4].set(quat)
        elif kind == hinge:
            qpos = qpos.at[adr].set(jax.random.uniform(k, minval=-jnp.pi, maxval=jnp.pi))
        elif kind == ball:
            quat = jax.random.normal(k, (4,))
            qpos = qpos.at[adr:adr + 4].set(quat / jnp.linalg.norm(quat))
        elif kind == free:
            quat = jax.random.uniform(k, (4,))
            qpos = qpos.at[adr + 3:adr + 7].set(quat / jnp.linalg.norm(quat))
    return qpos


def ball_in_cup_position(model, key: jax.Array, qpos: jax.Array) -> jax.Array:
    """dm_control's ``ball_in_cup.BallInCup.initialize_episode``: ball_x ~ U(-.2, .2), ball_z ~ U(.2, .5); the cup
    stays at its rest position."""
    x_key, z_key = jax.random.split(key)
    qpos = qpos.at[int(model.joint("ball_x").qposadr[0])].set(jax.random.uniform(x_key, minval=-0.2, maxval=0.2))
    return qpos.at[int(model.joint("ball_z").qposadr[0])].set(jax.random.uniform(z_key, minval=0.2, maxval=0.5))


def contact_depth(data) -> jax.Array:
    """The deepest contact of a forward-computed MJX ``data`` (> 0: in contact, MuJoCo C would count it in ncon).

    MJX's JAX backend keeps a slot for every geom pair that may collide; a slot is a contact when its distance is
    below the pair's margin (``includemargin`` is margin - gap; every dmc/ model has gap 0)."""
    contact = data._impl.contact  # MJX keeps the contact list on the backend's part of Data
    if contact.dist.size == 0:
        return jnp.zeros(())
    return jnp.max(contact.includemargin - contact.dist)


def remove_contact_budget(model) -> None:
    """Drop the contact budget Playground's XMLs set on MuJoCo model ``model`` for speed, in place:
    ``max_geom_pairs`` culls candidate pairs by bounding-sphere distance before the narrow phase,
    ``max_contact_points`` keeps the deepest few; MuJoCo C (and dm_control) has neither."""
    import mujoco

    for name in ("max_geom_pairs", "max_contact_points"):
        numeric = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_NUMERIC, name)
        if numeric >= 0:
            model.numeric_data[model.numeric_adr[numeric]] = -1  # MJX's "no limit"


def contact_check_model(mj_model):
    """The MJX model collision checks run on: ``mj_model`` without its contact budget, which would pass some
    penetrating draws that MuJoCo counts in ncon (a fraction of a percent of the humanoid's: bench/dmc_draws.py)."""
    import copy

    from mujoco import mjx

    model = copy.deepcopy(mj_model)
    remove_contact_budget(model)
    return mjx.put_model(model, impl="jax")


def collision_free(check, draw: Callable[[jax.Array, jax.Array], jax.Array], key: jax.Array,
                   candidates: int = CANDIDATES) -> jax.Array:
    """The initial qpos ``draw(key, qpos0)`` that dm_control's rejection loop would accept: the first of
    ``candidates`` i.i.d. draws with no contact after a forward pass on MJX model ``check``
    (``contact_check_model``), the one whose deepest contact is shallowest where all touch (module docstring)."""
    from mujoco import mjx

    rest = mjx.make_data(check)

    def candidate(k):
        qpos = draw(k, rest.qpos)
        # Collision detection reads only the geoms' poses: kinematics, not the whole forward pass with its solver.
        return qpos, contact_depth(mjx.collision(check, mjx.kinematics(check, rest.replace(qpos=qpos))))

    qpos, depth = jax.vmap(candidate)(jax.random.split(key, candidates))
    free = depth <= 0
    return qpos[jnp.where(jnp.any(free), jnp.argmax(free), jnp.argmin(depth))]


def walker_observation(env, data, obs: jax.Array) -> jax.Array:
    """dm_control's walker observation: Playground's port puts the torso's upright component (xmat zz) where
    dm_control has the torso's height (``walker.Physics.torso_height``: xpos z; Playground walker.py:134 against
    dm_control walker.py:135). Entry 14 of [orientations (14), height (1), velocity (9)]."""
    return obs.at[14].set(data.xpos[env._torso_id, 2])


# dm_control's simulation options for the tasks whose Playground options change what the task asks (XML <option>
# of dm_control/suite/<domain>.xml; the rest are MuJoCo's defaults: Euler with implicit damping, 100/50 solver
# iterations, no contact budget). The finger: Playground's 0.005 s implicitfast steps, pyramidal cone and 2 solver
# iterations make the spinner harder to spin (bench/dmc_physics.py: under the same random actions, mean |hinge
# velocity| 0.82 against 1.06 rad/s in MuJoCo C with dm_control's options; MJX gives 0.81 and 1.08).
FINGER_OPTIONS = {"timestep": 0.01, "cone": "elliptic", "iterations": 200, "ls_iterations": 50}
PHYSICS_OPTIONS: dict[str, dict[str, Any]] = {
    "FingerSpin": FINGER_OPTIONS, "FingerTurnEasy": FINGER_OPTIONS, "FingerTurnHard": FINGER_OPTIONS,
}


def set_dm_control_options(model, options: dict[str, Any]) -> None:
    """MuJoCo model ``model`` with dm_control's simulation ``options`` (timestep, cone, iterations), Euler with
    implicit damping and no contact budget, in place."""
    import mujoco

    model.opt.timestep = options["timestep"]
    model.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    model.opt.disableflags &= ~int(mujoco.mjtDisableBit.mjDSBL_EULERDAMP)
    model.opt.cone = {"elliptic": mujoco.mjtCone.mjCONE_ELLIPTIC, "pyramidal": mujoco.mjtCone.mjCONE_PYRAMIDAL}[
        options["cone"]]
    model.opt.iterations, model.opt.ls_iterations = options["iterations"], options["ls_iterations"]
    remove_contact_budget(model)


def use_dm_control_physics(env, options: dict[str, Any]) -> None:
    """Give Playground env ``env`` (loaded with ``sim_dt = options["timestep"]``, so that its number of physics
    steps per action is dm_control's) dm_control's simulation options, then rebuild its MJX model. Playground's
    decoration cylinders stay without collisions (they sit inside the capsules they decorate)."""
    from mujoco import mjx

    assert abs(env.sim_dt - options["timestep"]) < 1e-12, "load the env with sim_dt = the timestep"
    set_dm_control_options(env.mj_model, options)
    env._mjx_model = mjx.put_model(env.mj_model, impl=env.mjx_model.impl.value)  # Playground reads it every step


# Playground task -> dm_control's draw of its initial qpos. Tasks not here draw what dm_control draws or start at
# rest in both (docs/dmc_audit.md).
DRAWS: dict[str, Draw] = {
    "BallInCup": ball_in_cup_position,
    # dm_control's finger._set_random_joint_angles: the randomiser with the same rejection (Playground's reset draws
    # the spinner's angle and the proximal joint's from one key, so the first is a function of the second, and
    # keeps about 10 % of starts that interpenetrate).
    "FingerSpin": random_limited_and_rotational_joints,
    "FingerTurnEasy": random_limited_and_rotational_joints,
    "FingerTurnHard": random_limited_and_rotational_joints,
    "HumanoidStand": random_limited_and_rotational_joints,
    "HumanoidWalk": random_limited_and_rotational_joints,
    "HumanoidRun": random_limited_and_rotational_joints,
}
# Playground task -> dm_control's observation, from Playground's (env, data, obs).
OBSERVATIONS: dict[str, Callable[[Any, Any, jax.Array], jax.Array]] = {
    "WalkerStand": walker_observation,
    "WalkerWalk": walker_observation,
    "WalkerRun": walker_observation,
}
# The name Playground's own version of a task changed here keeps: ``dmc/<Task>Playground``.
PLAYGROUND_SUFFIX = "Playground"
CHANGED = tuple(sorted(set(DRAWS) | set(OBSERVATIONS) | set(PHYSICS_OPTIONS)))


# What ``jaxrl envs`` says of each changed task and of Playground's original.
NOTES: dict[str, str] = {
    "BallInCup": "dm_control's reset: the ball at a random collision-free position (x ~ U(-.2, .2), z ~ U(.2, .5))",
    "Humanoid": "dm_control's reset: random root orientation and joint angles, collision-free",
    "Finger": "dm_control's reset (independent random angles, collision-free) and simulation options (0.01 s Euler "
              "steps, elliptic cone, 200 solver iterations)",
    "Walker": "dm_control's observation: the torso's height (Playground's port observes its upright component)",
}
ORIGINAL_NOTES: dict[str, str] = {
    "BallInCup": "Playground's reset: the ball hangs at rest under the cup in every episode",
    "Humanoid": "Playground's reset: standing at rest in the same pose every episode",
    "Finger": "Playground's reset (the spinner's angle tied to the finger's, about 10 % of starts interpenetrating) "
              "and simulation options (the spinner a quarter slower under the same pushes)",
    "Walker": "Playground's observation: the torso's upright component where dm_control has its height",
}


def _family(task: str) -> str:
    return next(family for family in NOTES if task.startswith(family))


def note(task: str) -> str | None:
    """One line for ``jaxrl envs`` on a dmc/ task this module changed or on Playground's original of one."""
    original = playground_original(task)
    if original is not None:
        return f"{ORIGINAL_NOTES[_family(original)]}; not comparable with dm_control's published numbers"
    if task in CHANGED:
        return f"{NOTES[_family(task)]}; Playground's version: dmc/{task}{PLAYGROUND_SUFFIX}"
    return None


# dmc/<Task> of a CHANGED task was Playground's port until it followed dm_control; runs record the revision of the
# env they trained (config.json "env_revision"; runs saved before record none: revision 1) so that a resume, a report
# or a sweep never continues or reuses an old run under the new env's name.
DM_CONTROL_REVISION = 2


def revision(task: str) -> int:
    """The revision of ``dmc/<task>`` this code builds: ``DM_CONTROL_REVISION`` for a changed task, else 1."""
    return DM_CONTROL_REVISION if task in CHANGED else 1


def current_name(task: str, saved_revision: int) -> str:
    """The task a run saved as ``dmc/<task>`` at ``saved_revision`` trained, by today's name: Playground's port of a
    changed task is ``<task>Playground`` now."""
    if task in CHANGED and saved_revision < DM_CONTROL_REVISION:
        return task + PLAYGROUND_SUFFIX
    return task


def playground_original(task: str) -> str | None:
    """``BallInCupPlayground`` -> ``BallInCup`` (Playground's unchanged task); None for any other name."""
    base = task.removesuffix(PLAYGROUND_SUFFIX)
    return base if base != task and base in CHANGED else None


class DmControlTask:
    """Playground env ``env`` with dm_control's initial-state draw and observation where they differ (``DRAWS``,
    ``OBSERVATIONS``); everything else (step, reward, rendering, sizes) is Playground's. Holds no state of its own."""

    def __init__(self, env, task: str):
        self._env, self._draw, self._observe = env, DRAWS.get(task), OBSERVATIONS.get(task)
        self._check = contact_check_model(env.mj_model) if self._draw is not None else None

    def __getattr__(self, name):
        if name == "_env" or name.startswith("__"):  # not set yet (a copy being built): no proxying
            raise AttributeError(name)
        return getattr(self._env, name)

    def _observed(self, state):
        return state if self._observe is None else state.replace(obs=self._observe(self._env, state.data, state.obs))

    def reset(self, key):
        if self._draw is None:
            return self._observed(self._env.reset(key))
        from mujoco import mjx

        env, draw = self._env, self._draw
        draw_key, key = jax.random.split(key)
        state = env.reset(key)
        qpos = collision_free(self._check, lambda k, qpos: draw(env.mj_model, k, qpos), draw_key)
        data = mjx.forward(env.mjx_model, state.data.replace(qpos=qpos))
        # Playground's observation of the drawn state: every dmc/ task computes it from data alone.
        return self._observed(state.replace(data=data, obs=env._get_obs(data, state.info)))

    def step(self, state, action):
        return self._observed(self._env.step(state, action))


# What still differs from dm_control in a dmc/ task after the changes above, from docs/dmc_audit.md.
# NOT_COMPARABLE: differences in what defines the task (model, initial state, observation): a return on it is not
# comparable with a number published on dm_control. PHYSICS: Playground's solver settings for speed (kept: they are
# MJX's cost on an accelerator): the same task, simulated less exactly; a caveat, reported beside every result.
NOT_COMPARABLE: dict[str, str] = {
    "FishSwim": "Playground's fish model differs from dm_control's (its torso_massive geom is a 0.03 sphere, not a "
                "0.004 x 0.12 x 0.06 box: the torso is 3.9x heavier) and the fish starts at z 0, not 0.1",
}
PHYSICS: dict[str, str] = {
    "Acrobot": "Euler instead of RK4 at the same 0.01 s step",
    "BallInCup": "1 constraint-solver iteration (dm_control: 100), damping integrated explicitly",
    "Cartpole": "Euler instead of RK4 at the same 0.01 s step, 1 solver iteration",
    "Cheetah": "4/8 solver iterations (dm_control: 100/50), explicit damping, at most 6 contacts",
    "Finger": "0.005 s implicitfast steps (dm_control: 0.01 s Euler), pyramidal friction cone (elliptic), "
              "2 solver iterations (200), at most 4 contacts from the 2 nearest geom pairs",
    "Fish": "0.002 s physics step (dm_control: 0.004 s), explicit damping",
    "Hopper": "4/10 solver iterations (dm_control: 100/50), explicit damping, at most 6 contacts",
    "Humanoid": "4/8 solver iterations (dm_control: 100/50), explicit damping, at most 8 + 8 contacts",
    "Pendulum": "0.01 s physics step (dm_control: 0.02 s)",
    "PointMass": "1/4 solver iterations (dm_control: 100/50)",
    "Reacher": "four 0.005 s physics steps per action (dm_control: one of 0.02 s), 1 solver iteration",
    "Swimmer": "ten 0.003 s physics steps per action (dm_control: fifteen of 0.002 s), 4/8 solver iterations",
    "Walker": "2/5 solver iterations (dm_control: 100/50), explicit damping, at most 4 contacts",
}
# True of every dmc/ task (MJX against MuJoCo C as dm_control runs it).
PHYSICS_ALL = ("float32 (dm_control: float64); observations and rewards read positions and sensors computed "
               "before the last physics step (dm_control recomputes them after it)")


def not_comparable(task: str) -> str | None:
    """Why a return on dmc/``task`` cannot be set beside a number published on dm_control; None where it can."""
    original = playground_original(task)
    if original is not None:
        return ORIGINAL_NOTES[_family(original)]
    return NOT_COMPARABLE.get(task)


def physics_caveat(task: str) -> str | None:
    """How Playground's simulation of dmc/``task`` differs from dm_control's (None for a name outside dmc/)."""
    if task in PHYSICS_OPTIONS:  # simulated with dm_control's options
        return PHYSICS_ALL
    base = playground_original(task) or task
    family = next((f for f in sorted(PHYSICS, key=len, reverse=True) if base.startswith(f)), None)
    return None if family is None else f"{PHYSICS[family]}; {PHYSICS_ALL}"
