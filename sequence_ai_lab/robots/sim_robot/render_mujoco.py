"""MuJoCo's own renderer for a view of the physics world (`render: mujoco`).

Headless through EGL (`MUJOCO_GL=egl`, set by sim_robot before MuJoCo is imported). An OpenGL
context belongs to the thread that made it: create, use and close one of these on one thread.
"""

from __future__ import annotations

import mujoco
import numpy as np


class MujocoView:
    """Renders one named camera of `model` at 1/scale of the image size, then upscales."""

    def __init__(self, model: mujoco.MjModel, view: str, width: int, height: int, scale: int):
        small_w, small_h = max(16, width // scale), max(9, height // scale)
        self.view = view
        self._renderer = mujoco.Renderer(model, small_h, small_w)
        self._data = mujoco.MjData(model)
        # Robosuite's sites (the grasp marker, its axes) are for debugging, not for cameras.
        self._options = mujoco.MjvOption()
        self._options.sitegroup[:] = 0
        self._small = np.zeros((small_h, small_w, 3), dtype=np.uint8)
        self._rows = (np.arange(height) * small_h // height).astype(np.intp)
        self._column_repeats = np.bincount(
            (np.arange(width) * small_w // width).astype(np.intp), minlength=small_w
        )

    def render(self, qpos: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Draw the world in state `qpos` (the physics' full qpos) into `out` (rgb8)."""
        self._data.qpos[:] = qpos
        mujoco.mj_kinematics(self._renderer.model, self._data)
        mujoco.mj_camlight(self._renderer.model, self._data)
        self._renderer.update_scene(self._data, camera=self.view, scene_option=self._options)
        self._renderer.render(out=self._small)
        wide = np.repeat(self._small, self._column_repeats, axis=1)
        np.take(wide.reshape(len(wide), -1), self._rows, axis=0, out=out.reshape(len(out), -1))
        return out

    def close(self) -> None:
        self._renderer.close()
