"""``mmwalk/navigate-v0``: walking assistance as a control task. A walker in one of the
simulator's street scenes must reach its category's destination (the end of the route: the
bus stop, the far side of the crossing, the shop door, ...) safely, seeing only camera frames.

- Observation: the front face (90 degrees) of each chosen view, ``size x size``, channels per
  modality: RGB 3, depth 1 (decimetres, 0-25.5 m), semantic 1 (CARLA id x 8); uint8 all the
  way to the learner. Global state (for a centralised critic): pose, heading, progress.
- Actions (mmWalk's words): 0 Moving Forward, 1 Turning Left, 2 Turning Right, 3 Forward
  Turning Left, 4 Forward Turning Right; each held ``action_repeat`` ticks of 0.05 s (3.0 m/s,
  2 degrees per tick).
- Reward terms: ``progress`` (+1 per metre along the route toward the goal), ``goal`` (+10
  within 1 m of it, ending the episode), and the hazards: ``bump`` (-0.5: a step blocked by
  an obstacle at knee or head height), ``road`` (-0.3 a step on the road off the crosswalk),
  ``red`` (-0.5 a step on the crosswalk against a red light), ``car`` (-1 a step within 2.5 m
  of a car). Facts: ``success``, ``bumps``, ``road_steps``.
- Episodes start at a random point on the first half of the route, facing along it within 30
  degrees; ``scenes`` distinct scenes (seeds ``scene_seed`` + k, categories in turn) are built
  once and drawn per episode.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from envs.mmwalk import render
from envs.mmwalk.scene import CATEGORIES, ROAD, Scene, build
from envs.mmwalk.tags import TAG
from envs.mmwalk.walk import SPEED, TICK, TURN, Pose, Traffic
from envs.vector import AgentGroup, CoreEnv, VectorEnv, VectorStep

ACTIONS = (
    "Moving Forward",
    "Turning Left",
    "Turning Right",
    "Forward Turning Left",
    "Forward Turning Right",
)
_FORWARD = np.array([1, 0, 0, 1, 1], bool)
_TURN = np.array([0, 1, -1, 1, -1], float)
CHANNELS = {"rgb": 3, "depth": 1, "semantic": 1}
GOAL_RADIUS = 1.0
CAR_RADIUS = 2.5


@dataclass(frozen=True)
class NavigateOptions:
    views: tuple[str, ...] = ("walker",)
    modalities: tuple[str, ...] = ("rgb",)
    size: int = 84
    scenes: int = 4
    scene_seed: int = 0
    max_steps: int = 150
    action_repeat: int = 5
    camera_origin: str = "actor"  # render.CAMERA_ORIGINS: mmWalk's heights, or from the ground

    def __post_init__(self):
        object.__setattr__(self, "views", tuple(self.views))
        object.__setattr__(self, "modalities", tuple(self.modalities))
        render.check_camera_origin(self.camera_origin)
        bad = [v for v in self.views if v not in render.VIEW_FACES]
        if bad or not self.views:
            raise ValueError(f"views {bad or '()'}: choose from {', '.join(render.VIEW_FACES)}")
        bad = [m for m in self.modalities if m not in CHANNELS]
        if bad or not self.modalities:
            raise ValueError(f"modalities {bad or '()'}: choose from {', '.join(CHANNELS)}")
        if not 16 <= self.size <= 512:
            raise ValueError(f"size must be in [16, 512], got {self.size}")
        # each scene keeps its own renderer in memory
        for name, most in (("scenes", 256), ("max_steps", 1_000_000), ("action_repeat", 100)):
            if not 1 <= getattr(self, name) <= most:
                raise ValueError(f"{name} must be in 1..{most}, got {getattr(self, name)}")


class _Place:
    """One scene with its renderer, route geometry and what the rules look up."""

    def __init__(self, scene: Scene, size: int, camera_origin: str):
        self.scene = scene
        self.pano = render.Panoramas(scene, (4 * size, 2 * size), size, camera_origin)
        pts = np.array(scene.route, float)
        self.points = pts
        self.seg = np.diff(pts, axis=0)
        self.lengths = np.linalg.norm(self.seg, axis=1)
        self.start_of = np.concatenate([[0.0], np.cumsum(self.lengths)])
        self.length = float(self.start_of[-1])

    def along(self, x: float, y: float) -> tuple[float, float]:
        """The route coordinate (metres from its start) of the nearest route point, and the
        distance to it."""
        p = np.array([x, y])
        t = np.clip(
            np.einsum("sk,sk->s", p - self.points[:-1], self.seg)
            / np.maximum(self.lengths**2, 1e-9),
            0,
            1,
        )
        near = self.points[:-1] + t[:, None] * self.seg
        d = np.linalg.norm(near - p, axis=1)
        k = int(d.argmin())
        return float(self.start_of[k] + t[k] * self.lengths[k]), float(d[k])

    def at(self, s: float) -> tuple[float, float, float]:
        """The route point ``s`` metres from its start and the route's heading there."""
        k = int(np.clip(np.searchsorted(self.start_of, s, side="right") - 1, 0, len(self.seg) - 1))
        f = (s - self.start_of[k]) / max(self.lengths[k], 1e-9)
        x, y = self.points[k] + f * self.seg[k]
        return float(x), float(y), math.atan2(self.seg[k][1], self.seg[k][0])

    def blocked(self, x: float, y: float, yaw: float, reach: float) -> bool:
        """Whether a static obstacle stands within ``reach`` ahead at knee or head height."""
        import mujoco

        ground = self.pano.ground((x, y))
        direction = np.array([math.cos(yaw), math.sin(yaw), 0.0])
        geom = np.array([-1], np.int32)
        for height in (0.45, 1.7):
            d = mujoco.mj_ray(
                self.pano.model,
                self.pano.data,
                np.array([x, y, ground + height]),
                direction,
                render.STATIC_GROUP,
                1,
                -1,
                geom,
            )
            if 0 <= d < reach:
                return True
        return False

    def under(self, x: float, y: float) -> int:
        """The CARLA class of the surface under ``(x, y)``."""
        import mujoco

        geom = np.array([-1], np.int32)
        d = mujoco.mj_ray(
            self.pano.model,
            self.pano.data,
            np.array([x, y, 1.0]),
            np.array([0.0, 0.0, -1.0]),
            render.STATIC_GROUP,
            1,
            -1,
            geom,
        )
        return int(self.pano.tag[geom[0]]) if d >= 0 else TAG["terrain"]


class NavigateBatch(VectorEnv):
    """B walkers, each in one of ``scenes`` street scenes."""

    OPTIONS = NavigateOptions
    FACTS = ("success", "bumps", "road_steps")

    def __init__(self, num_envs: int, seed: int | None = None, auto_reset: bool = True, **options):
        self.options = o = NavigateOptions(**options)
        self.num_envs, self._seed, self.auto_reset = num_envs, seed, auto_reset
        self.agents = ("walker",)
        channels = len(o.views) * sum(CHANNELS[m] for m in o.modalities)
        obs_space = gym.spaces.Box(0, 255, (o.size, o.size, channels), np.uint8)
        self.groups = {
            "walker": AgentGroup(
                "walker", ("walker",), (0,), obs_space, gym.spaces.Discrete(len(ACTIONS))
            )
        }
        self.state_space = gym.spaces.Box(-np.inf, np.inf, (6,), np.float32)
        self.rng = np.random.default_rng(seed)
        self._places: dict[int, _Place] = {}
        self.place_of = np.zeros(num_envs, int)
        self.pose = np.zeros((num_envs, 3))  # x, y, yaw
        self.progress = np.zeros(num_envs)
        self.t = np.zeros(num_envs, int)
        self.traffic: list[Traffic | None] = [None] * num_envs
        self.bumps = np.zeros(num_envs)
        self.road_steps = np.zeros(num_envs)
        self.reward_terms: dict[str, np.ndarray] = {}

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_places"] = {}  # MuJoCo models and renderers are rebuilt on first use
        return state

    def place(self, k: int) -> _Place:
        if k not in self._places:
            o = self.options
            scene = build(CATEGORIES[k % len(CATEGORIES)], o.scene_seed + k)
            self._places[k] = _Place(scene, o.size, o.camera_origin)
        return self._places[k]

    def close(self) -> None:
        for p in self._places.values():
            p.pano.close()
        self._places = {}

    # -- episodes ----------------------------------------------------------------------------

    def _spawn(self, envs: np.ndarray) -> None:
        for i in envs:
            k = int(self.rng.integers(self.options.scenes))
            place = self.place(k)
            s = float(self.rng.uniform(0, 0.5 * place.length))
            x, y, heading = place.at(s)
            yaw = heading + float(self.rng.uniform(-math.radians(30), math.radians(30)))
            self.place_of[i], self.pose[i] = k, (x, y, yaw)
            self.progress[i] = place.along(x, y)[0]
            self.t[i] = 0
            self.bumps[i] = self.road_steps[i] = 0
            traffic = Traffic(place.scene, [])
            for _ in range(int(self.rng.integers(200))):  # the traffic already under way
                traffic.step(Pose(x, y, yaw, ""))
            self.traffic[i] = traffic

    def _observe(self) -> np.ndarray:
        o = self.options
        out = np.zeros((self.num_envs, 1, *self.groups["walker"].observation_space.shape), np.uint8)
        for i in range(self.num_envs):
            place = self.place(int(self.place_of[i]))
            x, y, yaw = self.pose[i]
            place.pano.place((x, y), yaw, self.traffic[i].state)
            c = 0
            for view in o.views:
                for m in o.modalities:
                    face = place.pano.faces(view, m, ("front",))[0]
                    if m == "rgb":
                        out[i, 0, ..., c : c + 3] = face
                    elif m == "depth":
                        out[i, 0, ..., c] = np.clip(face * 10.0, 0, 255).astype(np.uint8)
                    else:
                        out[i, 0, ..., c] = place.pano.tag[face] * 8
                    c += CHANNELS[m]
        return out

    def _state(self) -> np.ndarray:
        lengths = np.array([self.place(int(k)).length for k in self.place_of])
        x, y, yaw = self.pose.T
        return np.stack(
            [
                x / 50,
                y / 50,
                np.cos(yaw),
                np.sin(yaw),
                self.progress / lengths,
                self.t / self.options.max_steps,
            ],
            -1,
        ).astype(np.float32)

    def reset(self, seed: int | None = None) -> VectorStep:
        seed = self._seed if seed is None else seed
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self._spawn(np.arange(self.num_envs))
        obs = {"walker": self._observe()}
        state = self._state()
        zeros, no = np.zeros((self.num_envs, 1), np.float32), np.zeros(self.num_envs, bool)
        return VectorStep(obs, state, {}, zeros, no, no.copy(), obs, state)

    def step(self, actions: dict[str, np.ndarray]) -> VectorStep:
        act = np.asarray(actions["walker"]).reshape(self.num_envs).astype(int)
        if np.any((act < 0) | (act >= len(ACTIONS))):
            raise ValueError(f"actions must be in [0, {len(ACTIONS) - 1}], got {act}")
        B, o = self.num_envs, self.options
        terms = {k: np.zeros((B, 1)) for k in ("progress", "goal", "bump", "road", "red", "car")}
        terminated = np.zeros(B, bool)
        for i in range(B):
            place = self.place(int(self.place_of[i]))
            x, y, yaw = self.pose[i]
            blocked = False
            for _ in range(o.action_repeat):
                yaw += _TURN[act[i]] * TURN
                if _FORWARD[act[i]]:
                    if place.blocked(x, y, yaw, SPEED * TICK + 0.3):
                        blocked = True
                    else:
                        x, y = x + SPEED * TICK * math.cos(yaw), y + SPEED * TICK * math.sin(yaw)
                self.traffic[i].step(Pose(x, y, yaw, ""))
            self.pose[i] = (x, y, (yaw + math.pi) % (2 * math.pi) - math.pi)
            s, _ = place.along(x, y)
            terms["progress"][i] = s - self.progress[i]
            self.progress[i] = s
            end = place.points[-1]
            if math.hypot(x - end[0], y - end[1]) < GOAL_RADIUS:
                terms["goal"][i], terminated[i] = 10.0, True
            terms["bump"][i] = -0.5 * blocked
            self.bumps[i] += blocked
            crossing = place.scene.crossing
            on_crosswalk = (
                crossing is not None and abs(x - crossing[0]) < crossing[1] and abs(y) < ROAD
            )
            if place.under(x, y) == TAG["road"] and not on_crosswalk:
                terms["road"][i] = -0.3
                self.road_steps[i] += 1
            if on_crosswalk and place.scene.pedestrian_light == "red":
                terms["red"][i] = -0.5
            cars = [k for k, m in enumerate(place.scene.movers) if m.kind == "car"]
            if cars:
                where = self.traffic[i].state[cars, :2]
                if np.min(np.hypot(where[:, 0] - x, where[:, 1] - y)) < CAR_RADIUS:
                    terms["car"][i] = -1.0
        self.t += 1
        self.reward_terms = terms
        rewards = sum(terms.values(), np.zeros((B, 1))).astype(np.float32)
        truncated = ~terminated & (self.t >= o.max_steps)
        ended = terminated | truncated
        info = None
        if ended.any():
            info = {
                "success": terminated.astype(np.float64),
                "bumps": self.bumps.copy(),
                "road_steps": self.road_steps.copy(),
            }
        obs = {"walker": self._observe()}
        state = self._state()
        final_obs, final_state = obs, state
        if ended.any() and self.auto_reset:
            final_obs, final_state = {"walker": obs["walker"].copy()}, state.copy()
            self._spawn(np.flatnonzero(ended))
            obs, state = {"walker": self._observe()}, self._state()
        return VectorStep(
            obs, state, {}, rewards, terminated, truncated, final_obs, final_state, info
        )


class NavigateEnv(CoreEnv):
    """One walker of :class:`NavigateBatch`; ``render()`` is its walker panorama."""

    core_class = NavigateBatch
    options = NavigateOptions
    metadata = {**CoreEnv.metadata, "name": "mmwalk_navigate", "render_fps": 4}

    def state(self) -> np.ndarray:
        return self.core._state()[0]

    def render(self):
        place = self.core.place(int(self.core.place_of[0]))
        x, y, yaw = self.core.pose[0]
        place.pano.place((x, y), yaw, self.core.traffic[0].state)
        return place.pano.view("walker", ("rgb",))["rgb"]

    def close(self):
        self.core.close()
