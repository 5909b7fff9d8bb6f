"""A scripted walk through a scene, as mmWalk's capture recorded one: 20 Hz, keys W/A/S/D
(forward, turn left, back, turn right), 3.0 m/s when moving, 2 degrees of turn per tick; the
traffic moving around the walker; and per frame what a question can be asked about: the
action, the IMU, the corner cases near the walker and the risk they add up to, and the
objects each view shows (from the rendered geom ids) with their distance and clock direction.

Frames: the walker's yaw is in radians, 0 along +x, counter-clockwise; the compass is CARLA's
(radians from north, +y here, clockwise); a clock direction is 12 straight ahead, 3 to the
right.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from envs.mmwalk.scene import CORNER_CASES, ROAD, WEATHERS, Hazard, Scene

TICK = 0.05
SPEED = 3.0
TURN = math.radians(2.0)
REACHED = 0.3  # m from a waypoint
MAX_TICKS = 4000
GRAVITY = 9.81


@dataclass(frozen=True)
class Pose:
    x: float
    y: float
    yaw: float
    keys: str  # the keys held this tick, of "WASD" ("" standing)


def walk(scene: Scene) -> list[Pose]:
    """The scripted walker's poses along ``scene.route``: it turns toward the next waypoint
    (A/D), walking on (W) while the waypoint is within 45 degrees of straight ahead."""
    (x, y), rest = scene.route[0], list(scene.route[1:])
    yaw = math.atan2(rest[0][1] - y, rest[0][0] - x)
    poses = [Pose(x, y, yaw, "")]
    while rest and len(poses) < MAX_TICKS:
        tx, ty = rest[0]
        if math.hypot(tx - x, ty - y) < REACHED:
            rest.pop(0)
            continue
        error = _wrap(math.atan2(ty - y, tx - x) - yaw)
        keys = ""
        if abs(error) < math.radians(45):
            keys += "W"
        if abs(error) > TURN / 2:
            keys += "A" if error > 0 else "D"
            yaw = _wrap(yaw + math.copysign(TURN, error))
        if "W" in keys:
            x, y = x + SPEED * TICK * math.cos(yaw), y + SPEED * TICK * math.sin(yaw)
        poses.append(Pose(x, y, yaw, keys))
    return poses


def _wrap(a: float) -> float:
    return (a + math.pi) % (2 * math.pi) - math.pi


def action_name(keys: str) -> str:
    """mmWalk's E1 action words for the keys held."""
    forward, left, right = "W" in keys, "A" in keys, "D" in keys
    if forward and left:
        return "Forward Turning Left"
    if forward and right:
        return "Forward Turning Right"
    if forward:
        return "Moving Forward"
    if left:
        return "Turning Left"
    if right:
        return "Turning Right"
    return "Stationary"


def action_text(keys: str) -> str:
    """The action file of a frame (mmWalk's: one line per key, 1 held)."""
    return "".join(f"{k}: {int(k in keys)}\n" for k in "WASD")


def imu(poses: list[Pose], i: int) -> dict:
    """Accelerometer (m/s^2, walker frame x forward y left z up, gravity included as an
    accelerometer at rest reads it), gyroscope (rad/s) and compass (rad) at frame ``i``."""

    def velocity(k):
        if k <= 0:
            return np.zeros(2)
        a, b = poses[k - 1], poses[k]
        return np.array([b.x - a.x, b.y - a.y]) / TICK

    p = poses[i]
    acc = (velocity(i) - velocity(i - 1)) / TICK
    c, s = math.cos(p.yaw), math.sin(p.yaw)
    ax, ay = c * acc[0] + s * acc[1], -s * acc[0] + c * acc[1]
    rate = _wrap(p.yaw - poses[i - 1].yaw) / TICK if i > 0 else 0.0
    compass = (math.pi / 2 - p.yaw) % (2 * math.pi)
    return {"accelerometer": (ax, ay, GRAVITY), "gyroscope": (0.0, 0.0, rate), "compass": compass}


def imu_text(record: dict) -> str:
    """The IMU file of a frame, as mmWalk's capture writes it (``capture.py``: an f-string of
    CARLA's Python floats, e.g. ``Accelerometer: (0.0, -0.5, 9.81)``)."""

    def floats(*xs) -> str:
        return ", ".join(str(float(x)) for x in xs)  # np.float64's repr names its type

    return (
        f"Accelerometer: ({floats(*record['accelerometer'])})\n"
        f"Gyroscope: ({floats(*record['gyroscope'])})\n"
        f"Compass: {float(record['compass'])}\n"
    )


class Traffic:
    """The scene's movers over time; a car waits before a crossing while the walker is on
    it, a pedestrian rather than walk into the walker. :meth:`step` advances one tick; :attr:`state` is ``[M, 3]`` (x, y, yaw)."""

    def __init__(self, scene: Scene, poses: list[Pose]):
        self.scene = scene
        self.pos = np.array([m.start for m in scene.movers], float)
        if scene.pedestrian_light == "red":
            self._send_a_car(poses)

    def _send_a_car(self, poses: list[Pose]) -> None:
        """In a dangerous crossing a car comes up the near lane as the walker steps off the
        curb, and stops just short of it."""
        entry = next((i for i, p in enumerate(poses) if abs(p.y) < ROAD + 0.3), None)
        cars = [k for k, m in enumerate(self.scene.movers) if m.kind == "car" and m.speed > 0]
        if entry is None or not cars:
            return
        k = cars[0]
        m = self.scene.movers[k]
        stop = self.scene.crossing[0] - 4.5
        self.pos[k] = stop - m.speed * (entry * TICK + 0.5)

    @property
    def state(self) -> np.ndarray:
        out = np.zeros((len(self.pos), 3))
        for k, m in enumerate(self.scene.movers):
            out[k, m.axis], out[k, 1 - m.axis] = self.pos[k], m.lane
        return out

    def step(self, walker: Pose) -> None:
        crossing = self.scene.crossing
        on_crossing = (
            crossing is not None
            and abs(walker.x - crossing[0]) < 3.0
            and abs(walker.y) < ROAD + 1.0
        )
        for k, m in enumerate(self.scene.movers):
            new = self.pos[k] + m.speed * TICK
            if m.kind == "pedestrian":
                at = (new, m.lane) if m.axis == 0 else (m.lane, new)
                if math.hypot(at[0] - walker.x, at[1] - walker.y) < 1.2:
                    continue  # steps aside for the walker: waits

            if m.kind == "car" and on_crossing and m.yield_at is not None:
                line = m.yield_at - math.copysign(4.5, m.speed)
                if (self.pos[k] - line) * (new - line) <= 0 or new == line:
                    continue  # waits at the line
            span = m.high - m.low
            self.pos[k] = (new - m.low) % span + m.low


def clock(dx: float, dy: float, yaw: float) -> int:
    """The clock direction (1-12, 12 ahead, 3 right) of a world offset from a walker facing
    ``yaw``."""
    clockwise = -_wrap(math.atan2(dy, dx) - yaw)
    hour = round(math.degrees(clockwise) / 30.0) % 12
    return 12 if hour == 0 else int(hour)


def corner_cases(scene: Scene, pose: Pose) -> list[str]:
    """The corner cases the walker is in or walking into (within the hazard's radius, or 6 m
    ahead of it within 60 degrees of straight ahead)."""
    found = []
    for h in scene.hazards:
        d, bearing = _hazard_distance(h, pose)
        if d < h.radius or (d < h.radius + 6.0 and abs(bearing) < math.radians(60)):
            if h.case not in found:
                found.append(h.case)
    return found


def _hazard_distance(h: Hazard, pose: Pose) -> tuple[float, float]:
    a = np.array(h.xy)
    p = np.array([pose.x, pose.y])
    if h.to is None:
        near = a
    else:
        b = np.array(h.to)
        t = np.clip(np.dot(p - a, b - a) / np.dot(b - a, b - a), 0, 1)
        near = a + t * (b - a)
    d = near - p
    return float(np.linalg.norm(d)), _wrap(math.atan2(d[1], d[0]) - pose.yaw)


def risk(weather: str, cases: list[str]) -> dict:
    """mmWalk's risk rule: weather and corner-case weights summed; < 2 low, 2-5 moderate,
    > 5 high."""
    score = WEATHERS[weather] + sum(CORNER_CASES[c] for c in cases)
    level = "Low-risk" if score < 2 else "Moderate risk" if score <= 5 else "High-risk"
    return {"score": score, "level": level}


def visible_objects(
    scene: Scene,
    geom: np.ndarray,
    owner: np.ndarray,
    pose: Pose,
    movers: np.ndarray,
    min_pixels: int,
) -> list[dict]:
    """The things and movers a view shows with at least ``min_pixels`` pixels (``geom`` the
    view's geom-id panorama, ``owner`` geom -> index into things + movers, ``movers [M, 2+]``
    where the movers are), each with its distance and clock direction from the walker,
    nearest first."""
    objects = scene.things + scene.movers
    counts = np.bincount(owner[geom].ravel() + 1, minlength=len(objects) + 1)[1:]
    out = []
    for k in np.flatnonzero(counts >= min_pixels):
        o = objects[k]
        xy = o.xy if k < len(scene.things) else movers[k - len(scene.things)]
        dx, dy = xy[0] - pose.x, xy[1] - pose.y
        out.append(
            {
                "name": o.name,
                "kind": o.kind,
                "landmark": getattr(o, "landmark", None),
                "color": o.color,
                "distance": round(math.hypot(dx, dy), 1),
                "clock": clock(dx, dy, pose.yaw),
                "pixels": int(counts[k]),
            }
        )
    return sorted(out, key=lambda o: o["distance"])
