"""Two VMAS scenarios in vectorised NumPy: Dispersion (specialisation) and Navigation (one
shared goal: synchronisation; a goal each, or half the team per goal, with collisions and
lidar as VMAS defines them), the tasks HyperMARL (Tessera et al., NeurIPS 2025) separates
shared from specialised policies with.

Both follow proroklab/VectorizedMultiAgentSimulator (``vmas/scenarios/dispersion.py`` and
``navigation.py``) on VMAS's holonomic point-mass physics (``vmas/simulator/core.py``): the
force is the action (mass 1), the velocity is damped by ``1 - drag`` (drag 0.25) once per
step, then ``v += F dt'`` and ``p += v dt'`` for each of ``substeps`` substeps of
``dt' = 0.1 / substeps``; positions are clamped to the world's half-width where it has one.
Discrete actions are VMAS's default ``Discrete(9)``: ``a = 3 * ax + ay`` with each of ``ax, ay``
in {0: stay, 1: -1, 2: +1}; continuous actions are the force, ``Box(-1, 1, (2,))`` (clipped).

:class:`VMASEnv` is the PettingZoo face of one world (B = 1) of a core.
"""

from __future__ import annotations

import abc
import dataclasses
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from envs.mpe.batched import ParticleWorlds
from envs.vector import CoreEnv, VectorStep, single_group

DT = 0.1
DRAG = 0.25
AXIS = np.array([0.0, -1.0, 1.0])  # VMAS's discrete action per axis: stay, decrement, increment
DISCRETE_FORCE = np.stack([np.repeat(AXIS, 3), np.tile(AXIS, 3)], axis=-1)  # [9, 2]


@dataclass
class DispersionOptions:
    """VMAS Dispersion's arguments (defaults as ``dispersion.py``; ``max_steps`` as DiCo)."""

    n_agents: int = 4
    n_food: int | None = None
    """Food items (default: one per agent)."""
    share_reward: bool = False
    """Every agent gets +1 per food eaten this step (else each eater gets 1/eaters)."""
    penalise_by_time: bool = False
    """A step reward of 0 becomes -0.01."""
    food_radius: float = 0.05
    pos_range: float = 1.0
    """Half-width of the square world; food spawns uniformly inside it."""
    max_steps: int = 100
    continuous_actions: bool = False

    def __post_init__(self):
        self.n_food = self.n_agents if self.n_food is None else self.n_food
        _check_counts(self, n_agents=1, n_food=1, max_steps=1)
        _check_positive(self, "food_radius", "pos_range")


@dataclass
class NavigationOptions:
    """VMAS Navigation's arguments (``navigation.py``'s ``make_world`` kwargs). Defaults: every
    agent going to one shared goal without collisions (``mpe/navigation-v0``);
    :class:`VMASNavigationOptions` has VMAS's own (one goal each, collisions and lidar)."""

    n_agents: int = 4
    agents_with_same_goal: int | None = None
    """The first this many agents share goal 0, the others have their own (None: all
    agents). VMAS allows more than 1 only without collisions."""
    split_goals: bool = False
    """Two goals, each shared by half the team (needs an even team and
    ``agents_with_same_goal = n_agents / 2``)."""
    collisions: bool = False
    """Agents collide (VMAS's contact forces), are penalised for touching, and see a 12-ray
    lidar of the other agents."""
    observe_all_goals: bool = False
    """Observe every agent's goal relative to oneself (else one's own)."""
    lidar_range: float = 0.35
    agent_collision_penalty: float = -1.0
    """Added to both agents of a pair closer than 0.005 between their surfaces."""
    shared_rew: bool = True
    """Every agent gets the sum of all agents' progress (else its own)."""
    pos_shaping_factor: float = 1.0
    final_reward: float = 0.01
    """Added for every agent on the steps where all agents are on their goals."""
    world_spawning: float = 1.0
    """Agents and goals spawn in [-w, w]^2; the world itself is unbounded."""
    max_steps: int = 100
    continuous_actions: bool = False

    def __post_init__(self):
        _check_counts(self, n_agents=1, max_steps=1)
        _check_positive(self, "world_spawning", "lidar_range")
        n, same = self.n_agents, self.agents_with_same_goal
        self.agents_with_same_goal = n if same is None else same
        same = self.agents_with_same_goal
        if isinstance(same, bool) or not isinstance(same, int) or not 1 <= same <= n:
            raise ValueError(f"agents_with_same_goal must be an integer in 1..{n}, got {same!r}")
        if same > 1 and self.collisions:  # navigation.py: an assert
            raise ValueError("agents that share a goal cannot collide: collisions=false")
        if self.split_goals and (n % 2 or same != n // 2):
            raise ValueError(
                "split_goals needs an even n_agents and agents_with_same_goal = n_agents / 2, "
                f"got {n} and {same}"
            )
        for key in ("agent_collision_penalty", "pos_shaping_factor", "final_reward"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int | float) or not np.isfinite(v):
                raise ValueError(f"{key} must be a finite number, got {v!r}")


@dataclass
class VMASNavigationOptions(NavigationOptions):
    """VMAS Navigation with VMAS's defaults: a goal per agent, collisions and lidar."""

    agents_with_same_goal: int | None = 1
    collisions: bool = True


MAX_COUNT = 100
"""The most agents or food items (as MPE's ``envs.mpe.MAX_ENTITIES``: pairs grow with the
square of the count)."""


def _check_counts(options, **least: int) -> None:
    for key, low in least.items():
        v = getattr(options, key)
        most = 1_000_000 if key == "max_steps" else MAX_COUNT
        if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= most:
            raise ValueError(f"{key} must be an integer in {low}..{most}, got {v!r}")


def _check_positive(options, *keys: str) -> None:
    for key in keys:
        v = getattr(options, key)
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v < np.inf:
            raise ValueError(f"{key} must be a positive number, got {v!r}")


class PointMassBatch(ParticleWorlds):
    """B VMAS worlds of N holonomic point masses (one agent group); a scenario subclass adds
    its entities, rewards and observations.

    Args:
        num_envs: B. seed: world i is first reset with ``seed + i``.
        auto_reset: reset a world inside ``step`` when its episode ends (the training
            sampler's contract); off for the PettingZoo face, which resets on demand.
    """

    OPTIONS: type = DispersionOptions
    SUBSTEPS = 1
    AGENT_RADIUS = 0.035
    BOUND: float | None = None  # half-width positions are clamped to (None: unbounded)

    def __init__(self, num_envs: int, seed: int | None = None, auto_reset: bool = True, **options):
        self.options = o = self.OPTIONS(**options)
        self.num_envs, self.n, self.auto_reset = num_envs, o.n_agents, auto_reset
        self.continuous = o.continuous_actions
        self.agents = tuple(f"agent_{i}" for i in range(self.n))
        obs_dim = self.obs_dim()
        self.state_space = gym.spaces.Box(-np.inf, np.inf, (self.n * obs_dim,), np.float32)
        self.groups = single_group(
            self.agents,
            gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32),
            gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
            if self.continuous
            else gym.spaces.Discrete(9),
        )
        self._seed = seed
        self._rngs: list[np.random.Generator] = []
        self.pos = np.zeros((num_envs, self.n, 2))
        self.vel = np.zeros((num_envs, self.n, 2))
        self.steps = np.zeros(num_envs, dtype=np.int64)

    # -- what a scenario defines ----------------------------------------------------------------

    @abc.abstractmethod
    def obs_dim(self) -> int:
        """The length of one agent's observation."""

    @abc.abstractmethod
    def _spawn(self, i: int, rng: np.random.Generator) -> None:
        """Places world ``i``'s agents and entities for a new episode."""

    @abc.abstractmethod
    def _rewards_and_done(self) -> tuple[np.ndarray, np.ndarray]:
        """``[B, N]`` rewards of the step just taken and ``[B]`` terminated."""

    @abc.abstractmethod
    def _observe(self) -> np.ndarray:
        """``[B, N, obs_dim]`` float32 observations of every world."""

    # -- the shared machinery -------------------------------------------------------------------

    def _reset_worlds(self, idx) -> None:
        for i in idx:
            self._spawn(i, self._rngs[i])
        self.vel[idx] = 0.0
        self.steps[idx] = 0

    def forces(self, actions) -> np.ndarray:
        """``[B, N, 2]`` forces of a step's actions."""
        if self.continuous:
            return np.clip(np.asarray(actions, np.float64).reshape(self.num_envs, self.n, 2), -1, 1)
        a = np.asarray(actions, dtype=np.int64).reshape(self.num_envs, self.n)
        if a.min(initial=0) < 0 or a.max(initial=0) > 8:
            raise ValueError(f"discrete actions are 0..8, got {a.min()}..{a.max()}")
        return DISCRETE_FORCE[a]

    def environment_force(self) -> np.ndarray | float:
        """Forces between entities at the current positions (none by default)."""
        return 0.0

    def _integrate(self, force: np.ndarray) -> None:
        sub_dt = DT / self.SUBSTEPS
        self.vel *= 1 - DRAG  # once per step, at the first substep (VMAS World._integrate_state)
        for _ in range(self.SUBSTEPS):  # each substep: action + contact forces, then integrate
            self.vel += (force + self.environment_force()) * sub_dt
            self.pos += self.vel * sub_dt
            if self.BOUND is not None:
                np.clip(self.pos, -self.BOUND, self.BOUND, out=self.pos)

    def step(self, actions: dict[str, np.ndarray]) -> VectorStep:
        self._integrate(self.forces(actions["agent"]))
        rewards, terminated = self._rewards_and_done()
        self.steps += 1
        obs = self._observe()
        truncated = ~terminated & (self.steps >= self.options.max_steps)
        final_obs, ended = obs, terminated | truncated
        if self.auto_reset and ended.any():
            final_obs = obs.copy()
            self._reset_worlds(np.flatnonzero(ended))
            obs = self._observe()
        B = self.num_envs
        return VectorStep(
            {"agent": obs},
            obs.reshape(B, -1),
            {},
            rewards.astype(np.float32),
            terminated,
            truncated,
            {"agent": final_obs},
            final_obs.reshape(B, -1),
        )


class DispersionBatch(PointMassBatch):
    """VMAS Dispersion: agents start together at the origin, food lies uniformly in the world;
    a food is eaten when an agent's centre comes within 0.035 + food radius of it. The
    episode ends when all food is eaten (or after ``max_steps``).

    Observation (4 + 3F): own position, own velocity, then per food its position relative to
    the agent and whether it is eaten. Reward (individual): each agent on an uneaten food gets
    ``1 / (agents on it)``; with ``share_reward`` every agent gets +1 per food eaten this step.
    """

    OPTIONS = DispersionOptions

    def __init__(self, num_envs: int, seed: int | None = None, auto_reset: bool = True, **options):
        super().__init__(num_envs, seed, auto_reset, **options)
        self.BOUND = self.options.pos_range
        self.food = np.zeros((num_envs, self.options.n_food, 2))
        self.eaten = np.zeros((num_envs, self.options.n_food), bool)

    def obs_dim(self) -> int:
        return 4 + 3 * self.options.n_food

    def _spawn(self, i, rng) -> None:
        r = self.options.pos_range
        self.pos[i] = 0.0
        self.food[i] = rng.uniform(-r, r, (self.options.n_food, 2))
        self.eaten[i] = False

    def on_food(self) -> np.ndarray:
        """``[B, N, F]``: agent i's centre is within reach of food f."""
        d = np.linalg.norm(self.pos[:, :, None] - self.food[:, None], axis=-1)
        return d < self.AGENT_RADIUS + self.options.food_radius

    def _rewards_and_done(self):
        on = self.on_food()
        count = on.sum(axis=1)  # [B, F] agents on each food
        fresh = ~self.eaten  # food not eaten before this step
        if self.options.share_reward:
            just = (count > 0) & fresh
            rewards = np.repeat(just.sum(axis=1, keepdims=True), self.n, axis=1).astype(float)
        else:
            share = np.where(count > 0, 1.0 / np.maximum(count, 1), 0.0)  # [B, F]
            rewards = np.einsum("bnf,bf->bn", on & fresh[:, None], share)
        if self.options.penalise_by_time:
            rewards[rewards == 0] = -0.01
        self.eaten |= count > 0
        return rewards, self.eaten.all(axis=1)

    def _observe(self) -> np.ndarray:
        B, N, F = self.num_envs, self.n, self.options.n_food
        rel = self.food[:, None] - self.pos[:, :, None]  # [B, N, F, 2]
        eaten = np.broadcast_to(self.eaten[:, None, :, None], (B, N, F, 1))
        per_food = np.concatenate([rel, eaten], axis=-1).reshape(B, N, 3 * F)
        return np.concatenate([self.pos, self.vel, per_food], axis=-1).astype(np.float32)


class NavigationBatch(PointMassBatch):
    """VMAS Navigation (``vmas/scenarios/navigation.py``): agents (radius 0.1) and one goal per
    agent spawn at random at least 0.25 apart (VMAS's ``min_distance_between_entities``; the
    agents first, then the goals); the first ``agents_with_same_goal`` agents share goal 0
    (``split_goals``: agent i has goal ``i // agents_with_same_goal``). Every step each agent
    is rewarded for its progress towards its goal (with ``shared_rew`` the sum of all agents'),
    plus ``final_reward`` when all are on their goals (closer than 0.05), plus
    ``agent_collision_penalty`` per other agent it touches (surfaces within 0.005) where
    agents collide; the episode ends when every agent is within its radius of its goal.

    Observation: own position, own velocity, own position minus its goal's (or minus every
    agent's goal with ``observe_all_goals``), then with collisions a 12-ray lidar of the
    other agents (``lidar_range`` minus the distance each ray travels). Collisions push
    touching agents apart with VMAS's contact force, every substep.
    """

    OPTIONS = NavigationOptions
    SUBSTEPS = 2
    AGENT_RADIUS = 0.1
    GOAL_RADIUS = 0.05  # a Landmark's default Sphere
    MIN_SPAWN_DISTANCE = 2 * AGENT_RADIUS + 0.05
    MIN_COLLISION_DISTANCE = 0.005
    LIDAR_RAYS = 12
    COLLISION_FORCE = 500.0  # vmas/simulator/core.py World defaults
    CONTACT_MARGIN = 1e-3

    def __init__(self, num_envs: int, seed: int | None = None, auto_reset: bool = True, **options):
        super().__init__(num_envs, seed, auto_reset, **options)
        o = self.options
        self.goal = np.zeros((num_envs, self.n, 2))  # each agent's goal
        self.shaping = np.zeros((num_envs, self.n))
        i = np.arange(self.n)
        same = o.agents_with_same_goal
        self.goal_index = i // same if o.split_goals else np.where(i < same, 0, i)
        angles = np.linspace(0, 2 * np.pi, self.LIDAR_RAYS + 1)[: self.LIDAR_RAYS]
        self.rays = np.stack([np.cos(angles), np.sin(angles)], axis=-1)  # [R, 2]
        self.others = ~np.eye(self.n, dtype=bool)

    def obs_dim(self) -> int:
        o = self.options
        goals = 2 * (self.n if o.observe_all_goals else 1)
        return 4 + goals + (self.LIDAR_RAYS if o.collisions else 0)

    def _spawn(self, i, rng) -> None:
        w = self.options.world_spawning
        placed: list[np.ndarray] = []
        for _ in range(2 * self.n):  # the agents, then a goal each (VMAS: rejection sampling)
            while True:
                p = rng.uniform(-w, w, 2)
                if all(np.linalg.norm(p - q) >= self.MIN_SPAWN_DISTANCE for q in placed):
                    break
            placed.append(p)
        self.pos[i] = placed[: self.n]
        self.goal[i] = np.asarray(placed[self.n :])[self.goal_index]
        self.shaping[i] = self._distance()[i] * self.options.pos_shaping_factor

    def _distance(self) -> np.ndarray:
        return np.linalg.norm(self.pos - self.goal, axis=-1)

    def _centre_distances(self) -> np.ndarray:
        """``[B, N, N]`` distances between the agents' centres."""
        return np.linalg.norm(self.pos[:, :, None] - self.pos[:, None], axis=-1)

    def environment_force(self) -> np.ndarray:
        """``[B, N, 2]``: VMAS's contact forces between touching spheres
        (``World._get_constraint_forces``): ``c * penetration`` along the line of centres,
        penetration a softplus of the overlap with margin k, zero once apart."""
        if not self.options.collisions:
            return 0.0
        delta = self.pos[:, :, None] - self.pos[:, None]  # [B, N, N, 2]: i pushed away from j
        dist = np.linalg.norm(delta, axis=-1)
        dist_min, k = 2 * self.AGENT_RADIUS, self.CONTACT_MARGIN
        penetration = np.logaddexp(0.0, (dist_min - dist) / k) * k
        active = self.others & (dist >= 1e-6) & (dist <= dist_min)
        scale = np.where(active, self.COLLISION_FORCE * penetration / np.maximum(dist, 1e-8), 0)
        return (delta * scale[..., None]).sum(axis=2)

    def _rewards_and_done(self):
        o = self.options
        dist = self._distance()
        shaping = dist * o.pos_shaping_factor
        progress = self.shaping - shaping  # [B, N]
        self.shaping = shaping
        if o.shared_rew:
            progress = np.repeat(progress.sum(axis=1, keepdims=True), self.n, axis=1)
        all_on_goal = (dist < self.GOAL_RADIUS).all(axis=1)
        rewards = progress + np.where(all_on_goal, o.final_reward, 0.0)[:, None]
        if o.collisions:
            gap = self._centre_distances() - 2 * self.AGENT_RADIUS
            touching = self.others & (gap <= self.MIN_COLLISION_DISTANCE)
            rewards = rewards + o.agent_collision_penalty * touching.sum(axis=2)
        return rewards, (dist < self.AGENT_RADIUS).all(axis=1)

    def lidar(self) -> np.ndarray:
        """``[B, N, R]``: how far each agent's rays travel before hitting another agent
        (``lidar_range`` where none is hit; VMAS's ``_cast_ray_to_sphere``: the projection of
        the other centre on the ray, minus the half chord)."""
        u = self.pos[:, None] - self.pos[:, :, None]  # [B, i, j, 2]: j relative to i
        t = u @ self.rays.T  # [B, i, j, R] along each ray
        d2 = (u * u).sum(-1)[..., None] - t**2
        r2 = self.AGENT_RADIUS**2
        hit = (d2 < r2) & (t > 0) & self.others[None, :, :, None]
        travel = np.where(hit, np.abs(t) - np.sqrt(np.where(r2 - d2 > 0, r2 - d2, 1e-8)), np.inf)
        return np.minimum(travel.min(axis=2), self.options.lidar_range)

    def _observe(self) -> np.ndarray:
        o = self.options
        if o.observe_all_goals:  # own position minus every agent's goal, in agent order
            rel = (self.pos[:, :, None] - self.goal[:, None]).reshape(self.num_envs, self.n, -1)
        else:
            rel = self.pos - self.goal
        parts = [self.pos, self.vel, rel]
        if o.collisions:
            parts.append(o.lidar_range - self.lidar())
        return np.concatenate(parts, axis=-1).astype(np.float32)


class VMASEnv(CoreEnv):
    """The PettingZoo face of one world of a :class:`PointMassBatch` core (a subclass sets
    ``core_class`` and ``options``)."""

    core_class: type = DispersionBatch
    options: type = DispersionOptions
    metadata = {"name": "vmas", "render_modes": ["rgb_array"], "is_parallelizable": True}

    def render(self, size: int = 256) -> np.ndarray:
        """The world from above: agents as blue discs, food or goal as green ones (eaten food
        grey); the view spans [-1.5, 1.5]^2."""
        from PIL import Image, ImageDraw

        img = Image.new("RGB", (size, size), (245, 245, 240))
        draw = ImageDraw.Draw(img)
        scale = size / 3.0

        def disc(p, r, fill):
            x, y = (p[0] + 1.5) * scale, (1.5 - p[1]) * scale
            draw.ellipse([x - r * scale, y - r * scale, x + r * scale, y + r * scale], fill=fill)

        core = self.core
        if isinstance(core, DispersionBatch):
            for f, eaten in zip(core.food[0], core.eaten[0], strict=True):
                disc(f, core.options.food_radius, (170, 170, 170) if eaten else (40, 170, 60))
        else:
            for goal in np.unique(core.goal[0], axis=0):
                disc(goal, core.GOAL_RADIUS, (40, 170, 60))
        for p in core.pos[0]:
            disc(p, core.AGENT_RADIUS, (50, 90, 200))
        return np.asarray(img)


class DispersionEnv(VMASEnv):
    """VMAS Dispersion (see :class:`DispersionBatch`)."""

    core_class, options = DispersionBatch, DispersionOptions
    metadata = {**VMASEnv.metadata, "name": "dispersion"}


class NavigationEnv(VMASEnv):
    """VMAS Navigation with one shared goal (see :class:`NavigationBatch`)."""

    core_class, options = NavigationBatch, NavigationOptions
    metadata = {**VMASEnv.metadata, "name": "navigation"}


class VMASNavigationBatch(NavigationBatch):
    """VMAS Navigation with VMAS's defaults (:class:`VMASNavigationOptions`)."""

    OPTIONS = VMASNavigationOptions


class VMASNavigationEnv(VMASEnv):
    """VMAS Navigation with VMAS's defaults (see :class:`NavigationBatch`)."""

    core_class, options = VMASNavigationBatch, VMASNavigationOptions
    metadata = {**VMASEnv.metadata, "name": "vmas_navigation"}


def validator(options: type):
    """A registry ``validate`` that builds ``options`` from an env config (its ValueError
    names the bad value)."""

    def validate(cfg: dict) -> None:
        fields = {f.name for f in dataclasses.fields(options)}
        options(**{k: v for k, v in cfg.items() if k in fields})

    return validate
