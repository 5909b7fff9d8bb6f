"""Volleyball scenes: the court, the net and the ball (``assets/court.xml``) with N drones
(``assets/iris.xml``) attached, composed with ``mujoco.MjSpec`` and compiled once per layout.

Contact groups (``contype``/``conaffinity`` bits): static geoms 1, the ball 2, drones 4;
everything touches everything, except the net, which is drawn only (VolleyBots has no net
body: its net rules are boxes around the plane x = 0). A contact sensor per drone says whether the ball
touches it (VolleyBots' cooperative and single tasks count a hit on contact).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

ASSETS = Path(__file__).parent / "assets"
NET_HEIGHT = 2.43
NET_BAND = 0.93  # the net's band below its top (its lower edge is 1.5 m above the floor)


@dataclass(frozen=True)
class Layout:
    """What a scene holds.

    Attributes:
        drones: number of drones (named ``drone0/``, ``drone1/``, ...).
        court: (length along x, width along y) in m; the net is at x = 0.
        ball: whether the scene has a ball.
        net: whether the scene has a net.
    """

    drones: int
    court: tuple[float, float] = (18.0, 9.0)
    ball: bool = True
    net: bool = True


def _spec(layout: Layout) -> mujoco.MjSpec:
    spec = mujoco.MjSpec.from_file(str(ASSETS / "court.xml"))
    length, width = layout.court
    spec.geom("court").size = [length / 2, width / 2, 0.001]
    if layout.net:
        spec.geom("net").size = [0.01, width / 2 + 0.2, NET_BAND / 2]
        spec.geom("net").pos = [0, 0, NET_HEIGHT - NET_BAND / 2]
        for name, side in (("post_left", 1), ("post_right", -1)):
            spec.geom(name).pos = [0, side * (width / 2 + 0.25), NET_HEIGHT / 2]
    else:
        for name in ("net", "post_left", "post_right"):
            spec.delete(spec.geom(name))
    if not layout.ball:
        spec.delete(spec.body("ball"))
    for i in range(layout.drones):
        drone = mujoco.MjSpec.from_file(str(ASSETS / "iris.xml"))
        frame = spec.worldbody.add_frame()
        spec.attach(drone, prefix=f"drone{i}/", frame=frame)
        if layout.ball:
            contact = spec.add_sensor(
                name=f"drone{i}/ball_contact",
                type=mujoco.mjtSensor.mjSENS_CONTACT,
                objtype=mujoco.mjtObj.mjOBJ_BODY,
                objname=f"drone{i}/drone",
                reftype=mujoco.mjtObj.mjOBJ_GEOM,
                refname="ball",
            )
            contact.intprm[:3] = [1, 0, 1]  # data "found", no reduction, one contact
    _add_camera(spec, length, width)
    return spec


def _add_camera(spec: mujoco.MjSpec, length: float, width: float) -> None:
    """A camera beside the court and a little to the near side of the net (so the net shows
    as a band), looking down at its middle, far enough back to see both ends."""
    eye = np.array([0.2 * length, -(width / 2 + 0.35 * length + 1.0), 0.7 * length + 3.0])
    target = np.array([0.0, 0.0, 1.5])
    z = eye - target
    z /= np.linalg.norm(z)
    x = np.cross([0.0, 0.0, 1.0], z)
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    spec.worldbody.add_camera(name="court", pos=eye, xyaxes=[*x, *y], fovy=45)


@functools.cache
def model(layout: Layout) -> mujoco.MjModel:
    """The compiled scene (one per layout and process; treat it as read-only)."""
    return _spec(layout).compile()


def xml(layout: Layout) -> str:
    """The scene as one MJCF document (for viewers and the tests)."""
    spec = _spec(layout)
    spec.compile()
    return spec.to_xml()
