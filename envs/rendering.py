"""MuJoCo's OpenGL backend for rendering videos on a machine without a display.

MuJoCo reads ``MUJOCO_GL`` once, when it is imported, so ``envs.make_raw`` picks the backend before Brax or
Playground imports it:
``MUJOCO_GL`` as set by the user, else EGL (GPU drivers, or Mesa's software renderer on a CPU machine), else
OSMesa, whichever library is installed. Simulation never needs either; only ``--video-every`` and ``jaxrl video``
do, and they check that a frame renders before a run compiles (``check_renderer``).
"""
from __future__ import annotations

import ctypes.util
import os

from jaxrl import ConfigError

BACKEND_LIBRARIES = (("egl", "EGL"), ("osmesa", "OSMesa"))
NO_GL = ("rendering needs an OpenGL library for MuJoCo's renderer and none is installed: on Debian/Ubuntu "
         "`apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri` (EGL) or `apt-get install libosmesa6` (OSMesa)")


def select_gl_backend() -> str | None:
    """Set ``MUJOCO_GL`` (unless already set) to the first backend whose library is installed; returns it (None: no
    headless backend found, MuJoCo keeps its default)."""
    if os.environ.get("MUJOCO_GL"):
        return os.environ["MUJOCO_GL"]
    for backend, library in BACKEND_LIBRARIES:
        if ctypes.util.find_library(library):
            os.environ["MUJOCO_GL"] = backend
            return backend
    return None


def check_renderer(width: int, height: int) -> None:
    """Render one frame of an empty scene at this size; ConfigError (one line) naming what to install otherwise."""
    for name, value in (("video_width", width), ("video_height", height)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 16 or value % 2:
            raise ConfigError(f"{name} must be an even number of pixels >= 16 (H.264 needs even sizes), got {value!r}")
    backend = os.environ.get("MUJOCO_GL")
    if backend is None:
        raise ConfigError(NO_GL)
    import mujoco

    try:
        model = mujoco.MjModel.from_xml_string(
            f'<mujoco><visual><global offwidth="{width}" offheight="{height}"/></visual></mujoco>')
        with mujoco.Renderer(model, height=height, width=width) as renderer:
            renderer.update_scene(mujoco.MjData(model))
            renderer.render()
    except Exception as e:  # noqa: BLE001 - PyOpenGL and MuJoCo raise many kinds; each means "cannot render"
        raise ConfigError(f"MuJoCo cannot render with MUJOCO_GL={backend} ({type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else 'no message'}); {NO_GL.split(': ', 1)[1]}, or set "
                          "MUJOCO_GL to a backend that works here") from None
