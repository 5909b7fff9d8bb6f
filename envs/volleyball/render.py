"""Frames of a volleyball world from MuJoCo's offscreen renderer (EGL where there is no
display), with shadows and anti-aliasing off for speed, and the step, score and touches
written on top."""

from __future__ import annotations

import os

import numpy as np

SIZE = (480, 320)  # width, height
_renderers: dict[int, object] = {}


def _renderer(core):
    import mujoco

    r = _renderers.get(id(core))
    if r is None:
        model = core.worlds.model
        model.vis.quality.offsamples = 0
        model.vis.global_.offwidth = max(model.vis.global_.offwidth, SIZE[0])
        model.vis.global_.offheight = max(model.vis.global_.offheight, SIZE[1])
        try:
            r = mujoco.Renderer(model, SIZE[1], SIZE[0])
        except mujoco.FatalError as e:
            raise RuntimeError(
                f"MuJoCo cannot render here ({e}); MUJOCO_GL is "
                f"{os.environ.get('MUJOCO_GL')!r}: set MUJOCO_GL=egl (no display) or glfw "
                "before anything imports mujoco"
            ) from None
        _renderers[id(core)] = r
        r._data = mujoco.MjData(model)
    return r


def frame(core, i: int = 0) -> np.ndarray:
    """World ``i`` of a volleyball core as an RGB ``[H, W, 3]`` uint8 image."""
    import mujoco

    r = _renderer(core)
    w = core.worlds
    mujoco.mj_setState(w.model, r._data, w.state[i], mujoco.mjtState.mjSTATE_FULLPHYSICS)
    mujoco.mj_forward(w.model, r._data)
    r.update_scene(r._data, camera="court")
    img = r.render().copy()
    return _overlay(img, _caption(core, i))


def _caption(core, i: int) -> str:
    parts = [f"t {core.t[i] * 0.02:5.2f} s"]
    for name in ("hits", "success_hits", "bumps", "targets_reached"):
        value = getattr(core, name, None)
        if isinstance(value, np.ndarray) and value.shape[:1] == (core.num_envs,):
            parts.append(f"{name.replace('_', ' ')} {int(value[i])}")
    if hasattr(core, "score"):
        parts.append(f"score {core.score[i, 0]}-{core.score[i, 1]}")
    return "   ".join(parts)


def _overlay(img: np.ndarray, text: str) -> np.ndarray:
    from PIL import Image, ImageDraw

    im = Image.fromarray(img)
    draw = ImageDraw.Draw(im)
    draw.rectangle([0, 0, im.width, 16], fill=(0, 0, 0))
    draw.text((6, 2), text, fill=(255, 255, 255))
    return np.asarray(im)


def close(core) -> None:
    r = _renderers.pop(id(core), None)
    if r is not None:
        r.close()
