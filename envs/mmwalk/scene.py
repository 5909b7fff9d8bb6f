"""Procedural street scenes for the walking simulator (mmWalk, KediYing/mmWalk, recorded its
walks in CARLA's towns; these are built per seed and rendered with MuJoCo instead).

A :class:`Scene` is a plain description: static :class:`Thing` s made of box/cylinder/sphere
:class:`Part` s, each with a CARLA semantic tag and a colour name; :class:`Mover` s (cars,
pedestrians) that move on lines; the walker's route (waypoints); the weather; and the corner
cases laid along the route. :meth:`Scene.mjcf` writes it as one MJCF model with a camera rig
per view (walker, guide dog, drone), each rig a mocap body carrying six 90-degree cube
cameras. :func:`build` makes the scene of a scenario category from a seed.

World frame: x east, y north, z up, metres. Every scene has a main street along x (road
``|y| < 3.5``, sidewalks ``3.5 < |y| < 7.5`` with 0.15 m curbs, building rows beyond); the
category's place (bus stop, corner, crossing, gas station, parking lot, plaza) is near x = 10
to 35 on the north side, and the walk starts on the north sidewalk to its west.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from envs.mmwalk.tags import TAG

CATEGORIES = ("Busstop", "Corner", "Cross", "Gasstation", "Mixed", "Parking", "Plaza")
WEATHERS = {"sunny": 0, "rainy": 1, "foggy": 2, "cloudy": 1, "night": 2}
"""Weather preset -> the risk it adds (mmWalk's risk rule)."""
CORNER_CASES = {
    "entrance locating": 1,
    "dead end": 1,
    "narrow path": 2,
    "barriers": 3,
    "cross the road": 3,
    "high obstacles": 3,
    "uneven road": 4,
    "cross the road in danger": 5,
}
"""Corner case -> risk weight (mmWalk)."""
LANDMARKS = (
    "traffic lights",
    "bus stop",
    "entrance/exit",
    "stairs",
    "square",
    "pedestrian crossing",
    "garbage bin",
    "big dumpster",
    "gate",
    "bench",
    "motorcycle/bicycle",
    "poles",
    "postbox",
    "map board",
    "high-voltage box",
    "manhole cover",
    "roadside stall",
    "ATM",
)
COLORS = {
    "red": (0.75, 0.1, 0.1),
    "orange": (0.95, 0.45, 0.05),
    "yellow": (0.9, 0.8, 0.1),
    "green": (0.15, 0.55, 0.2),
    "blue": (0.15, 0.3, 0.75),
    "white": (0.92, 0.92, 0.92),
    "gray": (0.5, 0.5, 0.52),
    "black": (0.08, 0.08, 0.08),
    "brown": (0.45, 0.3, 0.15),
    "beige": (0.82, 0.74, 0.58),
}
STREET = 70.0  # the main street runs over |x| < STREET
ROAD, WALK = 3.5, 7.5  # road and sidewalk edges (|y|)
CURB = 0.15
WALKER_Y = 5.5  # the north sidewalk's middle


@dataclass(frozen=True)
class Part:
    """One geom: ``shape`` box (half sizes), cylinder (radius, half height) or sphere
    (radius); ``pos`` its centre; ``yaw`` about z."""

    shape: str
    pos: tuple[float, float, float]
    size: tuple[float, ...]
    tag: str
    color: str
    yaw: float = 0.0


@dataclass
class Thing:
    """A named object of the scene. ``landmark``: one of :data:`LANDMARKS` or None;
    ``xy``: where the metadata says it is."""

    name: str
    kind: str
    parts: list[Part]
    xy: tuple[float, float]
    landmark: str | None = None
    color: str = ""


@dataclass
class Mover:
    """A car or pedestrian moving along x or y (``axis``) at ``speed`` (m/s, signed) between
    ``low`` and ``high`` (it wraps), its other coordinate fixed at ``lane``. ``parts`` are
    relative to its body. A car yields ``yield_at`` (the coordinate it stops before while
    the walker is on the crossing there)."""

    name: str
    kind: str
    parts: list[Part]
    axis: int
    lane: float
    start: float
    speed: float
    low: float
    high: float
    yield_at: float | None = None
    color: str = ""


@dataclass(frozen=True)
class Hazard:
    """A corner case at ``xy`` (within ``radius`` of it, or of the segment to ``to``)."""

    case: str
    xy: tuple[float, float]
    radius: float
    to: tuple[float, float] | None = None


@dataclass
class Scene:
    category: str
    seed: int
    weather: str
    things: list[Thing] = field(default_factory=list)
    movers: list[Mover] = field(default_factory=list)
    hazards: list[Hazard] = field(default_factory=list)
    route: list[tuple[float, float]] = field(default_factory=list)
    crossing: tuple[float, float] | None = None  # (x of the crosswalk, half width) if any
    pedestrian_light: str = ""  # "green" or "red" where there is a crossing

    # -- building ----------------------------------------------------------------------------

    def add(self, kind: str, parts: list[Part], xy=None, landmark=None, color="") -> Thing:
        xy = xy if xy is not None else parts[0].pos[:2]
        name = f"{len(self.things)}_{kind.replace(' ', '_').replace('/', '_')}"
        thing = Thing(name, kind, parts, (float(xy[0]), float(xy[1])), landmark, color)
        self.things.append(thing)
        return thing

    def landmarks(self) -> list[Thing]:
        return [t for t in self.things if t.landmark]

    # -- MJCF --------------------------------------------------------------------------------

    def mjcf(self, face: int = 400) -> str:
        """The scene as an MJCF model whose offscreen buffer fits ``face``-pixel cube faces."""
        look = WEATHER_LOOK[self.weather]
        geoms = [_geom(p, f"{t.name}/{k}") for t in self.things for k, p in enumerate(t.parts)]
        bodies = []
        for m in self.movers:
            inner = "".join(_geom(p, f"{m.name}/{k}", group=1) for k, p in enumerate(m.parts))
            bodies.append(f'<body name="{m.name}" mocap="true">{inner}</body>')
        for view in VIEWS:
            cams = "".join(
                f'<camera name="{view}_{f}" xyaxes="{_xyaxes(f)}" fovy="90"/>' for f in FACES
            )
            bodies.append(f'<body name="rig_{view}" mocap="true" pos="0 0 -50">{cams}</body>')
        fog = look["fog"]
        return f"""<mujoco model="mmwalk_{self.category}_{self.seed}">
<statistic extent="100" center="0 0 0"/>
<visual>
  <global offwidth="{face}" offheight="{face}" fovy="90"/>
  <quality shadowsize="0" offsamples="0" numslices="12" numstacks="6" numquads="1"/>
  <headlight ambient="{_v(look["ambient"])}" diffuse="{_v(look["headlight"])}" specular="0 0 0"/>
  <map znear="0.0005" zfar="3" fogstart="{fog[0]}" fogend="{fog[1]}"/>
  <rgba fog="{_v(look["fog_rgb"])} 1"/>
</visual>
<asset>
  <texture type="skybox" builtin="gradient" rgb1="{_v(look["sky_top"])}" rgb2="{_v(look["sky_low"])}" width="32" height="32"/>
</asset>
<worldbody>
  <light directional="true" pos="0 0 100" dir="{_v(look["sun_dir"])}" diffuse="{_v(look["sun"])}" castshadow="false"/>
  <geom name="terrain" type="box" size="200 200 0.01" pos="0 0 -0.03" rgba="{_v(_shade(COLORS["green"], look["shade"]))} 1" contype="0" conaffinity="0"/>
  {"".join(geoms)}
  {"".join(bodies)}
</worldbody>
</mujoco>"""


VIEWS = ("walker", "dog", "drone")
FACES = ("front", "right", "back", "left", "up", "down")
FACE_AXES = {  # camera (right, up); it looks along right x up (MuJoCo cameras look down -z)
    "front": ((0, -1, 0), (0, 0, 1)),
    "right": ((-1, 0, 0), (0, 0, 1)),
    "back": ((0, 1, 0), (0, 0, 1)),
    "left": ((1, 0, 0), (0, 0, 1)),
    "up": ((0, -1, 0), (-1, 0, 0)),
    "down": ((0, -1, 0), (1, 0, 0)),
}
"""Each cube face's right and up axes in the rig's frame (x forward, y left, z up)."""

WEATHER_LOOK = {
    "sunny": dict(
        ambient=(0.35,) * 3,
        headlight=(0.35,) * 3,
        sun=(0.6,) * 3,
        sun_dir=(0.3, 0.2, -1),
        sky_top=(0.35, 0.55, 0.9),
        sky_low=(0.75, 0.85, 0.95),
        fog=(300, 400),
        fog_rgb=(0.8, 0.8, 0.8),
        shade=1.0,
    ),
    "cloudy": dict(
        ambient=(0.4,) * 3,
        headlight=(0.3,) * 3,
        sun=(0.3,) * 3,
        sun_dir=(0, 0, -1),
        sky_top=(0.55, 0.57, 0.6),
        sky_low=(0.75, 0.76, 0.78),
        fog=(300, 400),
        fog_rgb=(0.7, 0.7, 0.7),
        shade=0.85,
    ),
    "rainy": dict(
        ambient=(0.3,) * 3,
        headlight=(0.25,) * 3,
        sun=(0.2,) * 3,
        sun_dir=(0, 0, -1),
        sky_top=(0.3, 0.32, 0.35),
        sky_low=(0.45, 0.47, 0.5),
        fog=(40, 160),
        fog_rgb=(0.45, 0.47, 0.5),
        shade=0.6,
    ),
    "foggy": dict(
        ambient=(0.45,) * 3,
        headlight=(0.25,) * 3,
        sun=(0.2,) * 3,
        sun_dir=(0, 0, -1),
        sky_top=(0.78, 0.78, 0.8),
        sky_low=(0.8, 0.8, 0.82),
        fog=(2, 35),
        fog_rgb=(0.8, 0.8, 0.82),
        shade=0.9,
    ),
    "night": dict(
        ambient=(0.08,) * 3,
        headlight=(0.12,) * 3,
        sun=(0.05, 0.05, 0.08),
        sun_dir=(0, 0, -1),
        sky_top=(0.01, 0.01, 0.04),
        sky_low=(0.05, 0.05, 0.1),
        fog=(300, 400),
        fog_rgb=(0.05, 0.05, 0.1),
        shade=0.35,
    ),
}


def _v(x) -> str:
    return " ".join(f"{float(a):.4g}" for a in x)


def _shade(rgb, k: float):
    return tuple(min(1.0, c * k) for c in rgb)


def _xyaxes(face: str) -> str:
    right, up = FACE_AXES[face]
    return _v(right + up)


def _geom(p: Part, name: str, group: int = 0) -> str:
    kind = "box" if p.shape == "box" else p.shape
    rgb = COLORS[p.color]
    euler = f' euler="0 0 {math.degrees(p.yaw):.3f}"' if p.yaw else ""
    return (
        f'<geom name="{name}" type="{kind}" pos="{_v(p.pos)}" size="{_v(p.size)}"{euler} '
        f'rgba="{_v(rgb)} 1" group="{group}" contype="0" conaffinity="0"/>'
    )


# -- parts -----------------------------------------------------------------------------------


def box(x, y, z0, hx, hy, hz, tag, color, yaw=0.0) -> Part:
    """A box standing on height ``z0`` (half sizes ``hx, hy, hz``)."""
    return Part("box", (x, y, z0 + hz), (hx, hy, hz), tag, color, yaw)


def cylinder(x, y, z0, r, hz, tag, color) -> Part:
    return Part("cylinder", (x, y, z0 + hz), (r, hz), tag, color)


def sphere(x, y, z, r, tag, color) -> Part:
    return Part("sphere", (x, y, z), (r,), tag, color)


def _check_tags(parts: list[Part]) -> None:
    for p in parts:
        if p.tag not in TAG:
            raise ValueError(f"unknown semantic tag {p.tag!r}")


# -- objects ---------------------------------------------------------------------------------


def car(x, y, yaw, color) -> list[Part]:
    """A car centred at ``(x, y)`` heading ``yaw`` (body-relative parts when x = y = 0)."""
    c, s = math.cos(yaw), math.sin(yaw)

    def at(dx, dy):
        return x + c * dx - s * dy, y + s * dx + c * dy

    parts = [box(*at(0, 0), 0.3, 2.2, 0.9, 0.4, "car", color, yaw)]
    parts.append(box(*at(-0.2, 0), 1.1, 1.2, 0.8, 0.35, "car", "black", yaw))
    for dx in (-1.4, 1.4):
        for dy in (-0.85, 0.85):
            parts.append(sphere(*at(dx, dy), 0.3, 0.3, "car", "black"))
    return parts


def pedestrian(color) -> list[Part]:
    return [
        cylinder(0, 0, 0.0, 0.18, 0.42, "pedestrian", "black"),
        cylinder(0, 0, 0.84, 0.22, 0.3, "pedestrian", color),
        sphere(0, 0, 1.6, 0.12, "pedestrian", "beige"),
    ]


LANDMARK_BUILDERS = {}


def _landmark(kind):
    def register(fn):
        LANDMARK_BUILDERS[kind] = fn
        return fn

    return register


@_landmark("traffic lights")
def _traffic_light(x, y, color):
    return [
        cylinder(x, y, 0.15, 0.06, 1.5, "pole", "gray"),
        box(x, y, 3.1, 0.15, 0.15, 0.35, "traffic_light", "black"),
        sphere(x, y, 3.65, 0.11, "traffic_light", color),
    ]


@_landmark("bench")
def _bench(x, y, color):
    return [
        box(x, y, 0.15, 0.9, 0.25, 0.04, "static", color),
        box(x, y + 0.22, 0.23, 0.9, 0.03, 0.25, "static", color),
        box(x - 0.8, y, 0.15, 0.04, 0.22, 0.2, "static", "gray"),
        box(x + 0.8, y, 0.15, 0.04, 0.22, 0.2, "static", "gray"),
    ]


@_landmark("garbage bin")
def _bin(x, y, color):
    return [cylinder(x, y, 0.15, 0.3, 0.45, "static", color)]


@_landmark("big dumpster")
def _dumpster(x, y, color):
    return [box(x, y, 0.15, 1.0, 0.7, 0.7, "static", color)]


@_landmark("poles")
def _pole(x, y, color):
    return [
        cylinder(x, y, 0.15, 0.08, 3.0, "pole", color),
        box(x, y - 0.4, 6.0, 0.15, 0.5, 0.06, "pole", color),
    ]


@_landmark("postbox")
def _postbox(x, y, color):
    return [box(x, y, 0.15, 0.3, 0.3, 0.6, "static", color)]


@_landmark("map board")
def _map_board(x, y, color):
    return [
        cylinder(x - 0.6, y, 0.15, 0.05, 0.9, "traffic_sign", "gray"),
        cylinder(x + 0.6, y, 0.15, 0.05, 0.9, "traffic_sign", "gray"),
        box(x, y, 1.0, 0.7, 0.05, 0.6, "traffic_sign", color),
    ]


@_landmark("high-voltage box")
def _voltage_box(x, y, color):
    return [box(x, y, 0.15, 0.6, 0.35, 0.75, "static", color)]


@_landmark("manhole cover")
def _manhole(x, y, color):
    return [cylinder(x, y, 0.15, 0.35, 0.008, "other", color)]


@_landmark("roadside stall")
def _stall(x, y, color):
    return [
        box(x, y, 0.15, 1.2, 0.6, 0.5, "static", "brown"),
        box(x, y, 2.2, 1.4, 0.9, 0.05, "static", color),
        cylinder(x - 1.2, y - 0.7, 0.15, 0.04, 1.0, "static", "gray"),
        cylinder(x + 1.2, y - 0.7, 0.15, 0.04, 1.0, "static", "gray"),
    ]


@_landmark("ATM")
def _atm(x, y, color):
    return [box(x, y, 0.15, 0.4, 0.3, 0.85, "static", color)]


@_landmark("motorcycle/bicycle")
def _bicycle(x, y, color):
    return [
        Part("cylinder", (x - 0.55, y, 0.5), (0.35, 0.03), "bicycle", "black", 0.0),
        Part("cylinder", (x + 0.55, y, 0.5), (0.35, 0.03), "bicycle", "black", 0.0),
        box(x, y, 0.6, 0.55, 0.04, 0.15, "bicycle", color),
    ]


@_landmark("gate")
def _gate(x, y, color):
    return [
        box(x - 2.0, y, 0.0, 0.2, 0.2, 1.2, "fence", "gray"),
        box(x + 2.0, y, 0.0, 0.2, 0.2, 1.2, "fence", "gray"),
        box(x, y, 0.4, 1.8, 0.04, 0.6, "fence", color),
    ]


def _bicycles_pitch(parts):  # wheels stand upright (cylinders' axes along y)
    return [
        Part(p.shape, p.pos, p.size, p.tag, p.color, p.yaw)
        if p.shape != "cylinder"
        else Part("box", p.pos, (p.size[0], 0.03, p.size[0]), p.tag, p.color)
        for p in parts
    ]


# -- the scene builders ----------------------------------------------------------------------


class _Builder:
    def __init__(self, category: str, seed: int, weather: str | None):
        self.rng = np.random.default_rng(seed)
        w = weather or self.rng.choice(list(WEATHERS))
        self.scene = Scene(category, seed, str(w))
        self.open_north: list[tuple[float, float]] = []  # x ranges without buildings
        self.cross_street: float | None = None  # x of the west edge of a north side street

    def color(self, choices=None) -> str:
        return str(self.rng.choice(choices or list(COLORS)))

    def landmark(self, kind: str, x: float, y: float, color: str | None = None) -> Thing:
        color = color or self.color(["red", "green", "blue", "gray", "orange", "yellow"])
        parts = LANDMARK_BUILDERS[kind](x, y, color)
        if kind == "motorcycle/bicycle":
            parts = _bicycles_pitch(parts)
        return self.scene.add(kind, parts, (x, y), kind, color)

    # the street, buildings, trees, traffic
    def street(self) -> None:
        s, L = self.scene, STREET
        s.add("road", [box(0, 0, -0.1, L, ROAD, 0.1, "road", "gray")])
        s.add(
            "road line",
            [box(x, 0, 0.0, 1.5, 0.08, 0.005, "road_line", "white") for x in np.arange(-L, L, 6)],
        )
        for side in (1, -1):
            pieces = [(-L, L)]
            if side == 1 and self.cross_street is not None:
                a = self.cross_street
                pieces = [(-L, a + 4.0), (a + 11.0, L)]
            for lo, hi in pieces:
                s.add(
                    "sidewalk",
                    [
                        box(
                            (lo + hi) / 2,
                            side * (ROAD + WALK) / 2,
                            0.0,
                            (hi - lo) / 2,
                            2.0,
                            CURB / 2,
                            "sidewalk",
                            "beige",
                        )
                    ],
                )

    def buildings(self) -> None:
        for side in (1, -1):
            x = -STREET
            while x < STREET:
                width = float(self.rng.uniform(8, 16))
                blocked = side == 1 and any(
                    lo - 1 < x + width and x < hi + 1 for lo, hi in self.open_north
                )
                if blocked:
                    x += 2.0
                    continue
                self.building(x + width / 2, side, width)
                x += width + float(self.rng.uniform(0.0, 3.0))

    def building(self, cx: float, side: int, width: float) -> None:
        rng, s = self.rng, self.scene
        height = float(rng.uniform(6, 24))
        depth = 10.0
        y = side * (WALK + 0.5 + depth / 2)
        color = self.color(["beige", "gray", "brown", "white", "red"])
        parts = [box(cx, y, 0.0, width / 2, depth / 2, height / 2, "building", color)]
        face = side * (WALK + 0.5)
        for fx in np.arange(cx - width / 2 + 1.5, cx + width / 2 - 1.0, 2.5):
            for fz in np.arange(3.0, height - 1.0, 3.0):
                parts.append(box(fx, face - side * 0.03, fz, 0.6, 0.05, 0.6, "building", "black"))
        s.add("building", parts, (cx, y), color=color)
        if rng.random() < 0.5:
            self.entrance(
                cx + float(rng.uniform(-width / 4, width / 4)),
                face,
                side,
                stairs=rng.random() < 0.3,
            )

    def entrance(self, x: float, face: float, side: int, stairs: bool = False) -> Thing:
        s = self.scene
        door = self.color(["brown", "black", "blue", "gray"])
        thing = s.add(
            "entrance",
            [box(x, face - side * 0.06, 0.0, 0.7, 0.08, 1.15, "building", door)],
            (x, face),
            "entrance/exit",
            door,
        )
        if stairs:
            steps = [
                box(
                    x,
                    face - side * (0.25 + 0.3 * k),
                    0.0,
                    1.0,
                    0.15,
                    0.08 * (3 - k),
                    "ground",
                    "gray",
                )
                for k in range(3)
            ]
            s.add("stairs", steps, (x, face - side * 0.5), "stairs", "gray")
        return thing

    def trees(self) -> None:
        for side in (1, -1):
            for x in np.arange(-STREET + 4, STREET, 12.0) + float(self.rng.uniform(0, 6)):
                if side == 1 and any(lo - 2 < x < hi + 2 for lo, hi in self.open_north):
                    continue
                y = side * (ROAD + 0.6)
                if route_distance(self.scene.route, (x, y)) < 2.5:
                    continue
                self.scene.add(
                    "tree",
                    [
                        cylinder(x, y, 0.15, 0.12, 1.4, "vegetation", "brown"),
                        sphere(x, y, 3.6, 1.3, "vegetation", "green"),
                    ],
                )

    def traffic(self, yield_at: float | None = None) -> None:
        s, rng = self.scene, self.rng
        for k in range(int(rng.integers(3, 7))):
            lane = -1.75 if k % 2 == 0 else 1.75
            speed = float(rng.uniform(6, 10)) * (1 if lane < 0 else -1)
            color = self.color(["red", "blue", "white", "black", "gray", "yellow"])
            s.movers.append(
                Mover(
                    f"car{k}",
                    "car",
                    car(0, 0, 0.0 if speed > 0 else math.pi, color),
                    0,
                    lane,
                    float(rng.uniform(-STREET, STREET)),
                    speed,
                    -STREET,
                    STREET,
                    yield_at,
                    color,
                )
            )
        for k in range(int(rng.integers(2, 6))):
            side = 1 if k % 2 == 0 else -1
            lane = side * float(rng.choice([4.2, 6.8]))
            color = self.color(["red", "blue", "white", "black", "green", "yellow"])
            s.movers.append(
                Mover(
                    f"person{k}",
                    "pedestrian",
                    pedestrian(color),
                    0,
                    lane,
                    float(rng.uniform(-40, 40)),
                    float(rng.choice([-1, 1]) * rng.uniform(1.0, 1.6)),
                    -STREET,
                    STREET,
                    None,
                    color,
                )
            )

    def street_furniture(self, avoid: list[tuple[float, float]]) -> None:
        """Landmarks along the sidewalks' outer edges (away from the walking line)."""
        kinds = [
            "garbage bin",
            "poles",
            "postbox",
            "manhole cover",
            "high-voltage box",
            "motorcycle/bicycle",
            "big dumpster",
            "ATM",
            "bench",
            "map board",
            "roadside stall",
        ]
        for side in (1, -1):
            for x in np.arange(-40.0, 45.0, 7.0):
                x += float(self.rng.uniform(-2, 2))
                if side == 1 and any(lo - 3 < x < hi + 3 for lo, hi in self.open_north):
                    continue
                if any(math.hypot(x - ax, side * 7.0 - ay) < 4 for ax, ay in avoid):
                    continue
                if self.rng.random() < 0.45:
                    continue
                kind = str(self.rng.choice(kinds))
                y = side * (ROAD + 0.5 if kind in ("poles", "manhole cover") else WALK - 0.6)
                if kind == "manhole cover":
                    y = side * (ROAD + 1.2)
                if route_distance(self.scene.route, (x, y)) < 1.2:
                    continue  # where the walk crosses the sidewalk
                self.landmark(kind, x, y)

    # the categories' places
    def bus_stop(self, x: float) -> None:
        s, y = self.scene, WALK - 0.5
        parts = [
            box(x, y, CURB + 2.4, 2.2, 0.9, 0.06, "static", "gray"),
            box(x, y + 0.8, CURB, 2.0, 0.04, 1.2, "static", "blue"),
            cylinder(x - 2.0, y - 0.8, CURB, 0.05, 1.2, "static", "gray"),
            cylinder(x + 2.0, y - 0.8, CURB, 0.05, 1.2, "static", "gray"),
            cylinder(x + 2.6, ROAD + 0.4, CURB, 0.05, 1.3, "traffic_sign", "gray"),
            box(x + 2.6, ROAD + 0.4, CURB + 2.4, 0.3, 0.03, 0.3, "traffic_sign", "yellow"),
        ]
        s.add("bus stop", parts, (x, y), "bus stop", "blue")
        self.landmark("bench", x, y + 0.4)
        self.landmark("map board", x - 3.2, WALK - 0.4)
        if self.rng.random() < 0.7:
            s.add(
                "bus",
                [
                    box(x + 1, 1.75, 0.3, 5.5, 1.25, 1.4, "bus", "yellow"),
                    box(x + 1, 1.75 - 1.26, 1.6, 4.8, 0.02, 0.5, "bus", "black"),
                ],
                (x + 1, 1.75),
                color="yellow",
            )

    def crosswalk(self, x: float, danger: bool) -> None:
        s = self.scene
        stripes = [
            box(x, y, 0.0, 1.5, 0.25, 0.006, "road_line", "white")
            for y in np.arange(-ROAD + 0.4, ROAD, 0.9)
        ]
        s.add("crosswalk", stripes, (x, 0.0), "pedestrian crossing", "white")
        s.crossing = (x, 1.5)
        s.pedestrian_light = "red" if danger else "green"
        for side in (1, -1):
            self.landmark(
                "traffic lights", x + side * 2.2, side * (ROAD + 0.35), s.pedestrian_light
            )

    def gas_station(self, x0: float) -> list[tuple[float, float]]:
        s, rng = self.scene, self.rng
        self.open_north.append((x0, x0 + 28))
        s.add("forecourt", [box(x0 + 14, 21, -0.1, 14, 13, 0.11, "ground", "gray")])
        pillars = [
            cylinder(x0 + 14 + dx, 16 + dy, 0.0, 0.25, 2.25, "static", "white")
            for dx in (-4.5, 4.5)
            for dy in (-3, 3)
        ]
        s.add(
            "gas station",
            [box(x0 + 14, 16, 4.5, 6, 4.2, 0.3, "static", "red"), *pillars],
            (x0 + 14, 16),
            color="red",
        )
        for dx in (-2.5, 2.5):
            s.add("fuel pump", [box(x0 + 14 + dx, 16, 0.0, 0.4, 0.25, 0.8, "static", "white")])
        s.add("car", car(x0 + 11.5, 13.5, 0.0, self.color(["blue", "white", "black"])))
        s.add("shop", [box(x0 + 14, 31, 0.0, 8, 3, 2.0, "building", "white")], (x0 + 14, 31))
        door = self.entrance(x0 + 14, 28.0, 1)
        self.landmark("ATM", x0 + 17, 27.6)
        self.landmark("garbage bin", x0 + 10, 27.5)
        _ = rng
        return [(x0 - 2, WALKER_Y), (x0 + 6, 12.0), (door.xy[0], door.xy[1] - 1.2)]

    def parking(self, x0: float) -> list[tuple[float, float]]:
        s = self.scene
        self.open_north.append((x0, x0 + 30))
        s.add("parking lot", [box(x0 + 15, 22, -0.1, 15, 14, 0.11, "ground", "gray")])
        lines = []
        for row_y in (14.0, 30.0):
            for k in range(11):
                lines.append(
                    box(x0 + 2 + 2.6 * k, row_y, 0.01, 0.05, 2.4, 0.005, "road_line", "white")
                )
                if self.rng.random() < 0.65 and k < 10:
                    s.add(
                        "car",
                        car(
                            x0 + 3.3 + 2.6 * k,
                            row_y,
                            math.pi / 2,
                            self.color(["red", "blue", "white", "black", "gray"]),
                        ),
                    )
        s.add("parking lines", lines)
        s.add("fence", [box(x0 + 15, 36.2, 0.0, 15, 0.05, 0.9, "fence", "gray")], (x0 + 15, 36.2))
        self.landmark("gate", x0 + 4, 8.2)
        self.landmark("big dumpster", x0 + 27, 34.5)
        aisle = x0 + 16.0
        end = (aisle, 35.0)
        s.hazards.append(Hazard("dead end", (aisle, 36.2), 6.0))
        return [(x0 + 4, WALKER_Y), (x0 + 4, 10.0), (aisle, 11.0), end]

    def plaza(self, x0: float) -> list[tuple[float, float]]:
        s, rng = self.scene, self.rng
        self.open_north.append((x0, x0 + 30))
        s.add(
            "plaza",
            [box(x0 + 15, 22, 0.0, 15, 14, 0.04, "sidewalk", "white")],
            (x0 + 15, 22),
            "square",
            "white",
        )
        s.add(
            "fountain",
            [
                cylinder(x0 + 15, 24, 0.0, 3.0, 0.35, "static", "gray"),
                cylinder(x0 + 15, 24, 0.0, 2.7, 0.38, "water", "blue"),
                cylinder(x0 + 15, 24, 0.0, 0.3, 1.3, "static", "gray"),
            ],
            (x0 + 15, 24),
            color="gray",
        )
        for k in range(4):
            self.landmark("bench", x0 + 4 + 7 * k, 33.5)
        self.landmark("garbage bin", x0 + 8, 18)
        self.landmark("roadside stall", x0 + 25, 14)
        for k in range(int(rng.integers(3, 6))):
            color = self.color(["red", "blue", "white", "black", "green"])
            s.movers.append(
                Mover(
                    f"stroller{k}",
                    "pedestrian",
                    pedestrian(color),
                    1,
                    x0 + float(rng.uniform(3, 27)),
                    float(rng.uniform(10, 34)),
                    float(rng.choice([-1, 1]) * rng.uniform(0.8, 1.4)),
                    9.0,
                    35.0,
                    None,
                    color,
                )
            )
        return [(x0 + 2, WALKER_Y), (x0 + 6, 10.5), (x0 + 24, 30.0)]

    def corner(self, x0: float) -> list[tuple[float, float]]:
        """A side street going north at x in [x0 + 4, x0 + 11]; the walk turns into it."""
        s = self.scene
        self.cross_street = x0
        self.open_north.append((x0 - 1, x0 + 15))
        s.add("side road", [box(x0 + 7.5, 40, -0.1, 3.5, 36.5, 0.1, "road", "gray")])
        for wx in (x0 + 2.0, x0 + 13.0):
            s.add("sidewalk", [box(wx, 40, 0.0, 2.0, 36.5, CURB / 2, "sidewalk", "beige")])
        for by in np.arange(9.0, 70.0, 14.0):
            for bx in (x0 - 5.5, x0 + 20.5):
                h = float(self.rng.uniform(6, 20))
                color = self.color(["beige", "gray", "brown", "white"])
                s.add(
                    "building",
                    [box(bx, by + 6, 0.0, 5.0, 6.5, h / 2, "building", color)],
                    (bx, by + 6),
                    color=color,
                )
        self.landmark("poles", x0 + 3.6, 8.0)
        self.landmark("traffic lights", x0 + 3.6, ROAD + 0.35, "green")
        return [(x0 + 2.0, WALKER_Y), (x0 + 2.0, 40.0)]


def route_distance(route, xy) -> float:
    """How far ``xy`` is from the walker's route (a polyline)."""
    p = np.asarray(xy, float)
    best = math.inf
    for a, b in zip(route[:-1], route[1:], strict=False):
        a, b = np.asarray(a, float), np.asarray(b, float)
        t = np.clip(np.dot(p - a, b - a) / max(np.dot(b - a, b - a), 1e-9), 0, 1)
        best = min(best, float(np.linalg.norm(a + t * (b - a) - p)))
    return best


def _corner_cases(b: _Builder, route: list[tuple[float, float]], count: int) -> None:
    """Lays ``count`` of the obstacle corner cases (narrow path, barriers, high obstacles,
    uneven road) at points along the route, beside or on the walking line."""
    s, rng = b.scene, b.rng
    pts = np.array(route, float)
    seg = np.diff(pts, axis=0)
    lengths = np.linalg.norm(seg, axis=1)
    cases = rng.choice(
        ["narrow path", "barriers", "high obstacles", "uneven road"], count, replace=False
    )
    total = lengths.sum()
    for k, case in enumerate(cases):
        at = total * (k + 1) / (count + 1) + float(rng.uniform(-2, 2))
        i = int(np.searchsorted(np.cumsum(lengths), at))
        i = min(i, len(seg) - 1)
        frac = (at - np.cumsum(lengths)[i] + lengths[i]) / max(lengths[i], 1e-9)
        x, y = pts[i] + seg[i] * np.clip(frac, 0, 1)
        d = seg[i] / max(lengths[i], 1e-9)
        n = np.array([-d[1], d[0]])  # left of the walking direction
        yaw = math.atan2(d[1], d[0])
        z0 = CURB if abs(y) > ROAD else 0.0
        if case == "narrow path":
            parts = []
            for side in (1, -1):
                cx, cy = np.array([x, y]) + side * n * 0.9
                parts.append(box(cx, cy, z0, 2.5, 0.35, 0.45, "static", "green", yaw))
            s.add("planters", parts, (x, y), color="green")
        elif case == "barriers":
            cx, cy = np.array([x, y]) + n * 0.9
            parts = [box(cx, cy, z0 + 0.2, 1.0, 0.06, 0.25, "static", "orange", yaw)]
            parts += [
                box(*(np.array([cx, cy]) + d * e), z0, 0.05, 0.25, 0.2, "static", "white", yaw)
                for e in (-0.9, 0.9)
            ]
            s.add("barrier", parts, (cx, cy), color="orange")
        elif case == "high obstacles":
            cx, cy = np.array([x, y]) + n * 0.45
            parts = [
                box(cx, cy, z0 + 1.7, 0.6, 0.5, 0.15, "static", "yellow", yaw),
                cylinder(*(np.array([cx, cy]) + n * 0.6), z0, 0.05, 0.92, "pole", "gray"),
            ]
            s.add("overhanging sign", parts, (cx, cy), color="yellow")
        else:
            parts = [
                box(
                    *(np.array([x, y]) + d * e + n * rng.uniform(-0.5, 0.5)),
                    z0,
                    0.35,
                    0.3,
                    float(rng.uniform(0.02, 0.05)),
                    "sidewalk",
                    "gray",
                    yaw,
                )
                for e in (-1.2, -0.3, 0.6, 1.4)
            ]
            s.add("uneven slabs", parts, (x, y), color="gray")
        s.hazards.append(Hazard(str(case), (float(x), float(y)), 3.0))


def build(
    category: str, seed: int, weather: str | None = None, corner_cases: int | None = None
) -> Scene:
    """The scene of scenario ``category`` (:data:`CATEGORIES`) for ``seed``; ``weather`` one of
    :data:`WEATHERS` (default: drawn from the seed)."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown scenario category {category!r}; one of {', '.join(CATEGORIES)}")
    if weather is not None and weather not in WEATHERS:
        raise ValueError(f"unknown weather {weather!r}; one of {', '.join(WEATHERS)}")
    b = _Builder(category, seed, weather)
    s, rng = b.scene, b.rng
    start = (float(rng.uniform(-22, -14)), WALKER_Y)
    yield_at = None
    if category == "Busstop":
        x = float(rng.uniform(8, 14))
        b.bus_stop(x)
        route = [start, (x - 2.5, WALKER_Y), (x + 20, WALKER_Y)]
    elif category == "Corner":
        route = [start, *b.corner(float(rng.uniform(10, 16)))]
    elif category == "Cross":
        x = float(rng.uniform(6, 12))
        danger = bool(rng.random() < 0.5)
        b.crosswalk(x, danger)
        yield_at = x
        route = [start, (x, WALKER_Y), (x, -WALKER_Y), (x + 18, -WALKER_Y)]
    elif category == "Gasstation":
        route = [start, *b.gas_station(float(rng.uniform(8, 12)))]
        s.hazards.append(Hazard("entrance locating", route[-1], 5.0))
    elif category == "Parking":
        route = [start, *b.parking(float(rng.uniform(6, 10)))]
    elif category == "Plaza":
        route = [start, *b.plaza(float(rng.uniform(6, 10)))]
    else:  # Mixed: a bus stop, a crossing and an entrance on the far side
        bx = float(rng.uniform(-8, -4))
        b.bus_stop(bx)
        x = float(rng.uniform(10, 14))
        danger = bool(rng.random() < 0.5)
        b.crosswalk(x, danger)
        yield_at = x
        door = b.entrance(x + 16, -(WALK + 0.5), -1)
        route = [
            start,
            (x, WALKER_Y),
            (x, -WALKER_Y),
            (x + 16, -WALKER_Y),
            (x + 16, door.xy[1] + 1.0),
        ]
        s.hazards.append(Hazard("entrance locating", (x + 16, door.xy[1] + 1.0), 5.0))
    if s.crossing is not None:
        case = "cross the road in danger" if s.pedestrian_light == "red" else "cross the road"
        cx = s.crossing[0]
        s.hazards.append(Hazard(case, (cx, ROAD + 1.0), 2.0, (cx, -ROAD - 1.0)))
    s.route = [(float(x), float(y)) for x, y in route]
    b.street()
    b.buildings()
    b.trees()
    b.traffic(yield_at)
    b.street_furniture(avoid=[(x, y) for x, y in s.route])
    n = int(rng.integers(1, 3)) if corner_cases is None else corner_cases
    _corner_cases(b, s.route, n)
    for t in s.things:
        _check_tags(t.parts)
    return s
