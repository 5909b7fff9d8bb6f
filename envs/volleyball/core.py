"""The batched core every volleyball task shares: B worlds of one scene, the drones' actions
(rotor commands or CTBR through a rate controller), the observation pieces, the episode clock
and bookkeeping, and the reward terms kept apart so that ``info`` can report each one.

A task subclasses :class:`VolleyballBatch` and defines the scene (``layout``), its agents,
``_spawn`` (initial state of the worlds being reset), ``_observe`` and ``_rules`` (the rewards
by term, the end of the episode and its facts). Everything runs on ``[B, ...]`` arrays.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from envs.vector import AgentGroup, VectorEnv, VectorStep, role
from envs.volleyball.physics import KF, MASS, Worlds, quat_axes
from envs.volleyball.scene import Layout

ACTION_MODES = ("rotor", "ctbr")
ROTOR_XY = np.array([[0.22, -0.13], [-0.2, 0.13], [0.22, 0.13], [-0.2, -0.13]]) - [0.01, 0.0]
ROTOR_DIR = np.array([1.0, 1.0, -1.0, -1.0])
KM_OVER_KF = 0.016
INERTIA = np.array([0.0347563, 0.0458929, 0.0806492])
MAX_RATE = np.array([np.pi, np.pi, np.pi / 2])  # body rates at CTBR action +-1, rad/s
RATE_GAIN = np.array([12.0, 12.0, 6.0])  # rate controller: angular acceleration per rad/s


@dataclass
class VolleyballOptions:
    """Options every volleyball task takes.

    Attributes:
        action_mode: ``rotor`` (4 rotor commands in [-1, 1], VolleyBots' default) or ``ctbr``
            (collective thrust and body rates in [-1, 1], tracked by a rate controller).
        max_steps: episode length in 0.02 s steps (None: the task's own).
        substeps: MuJoCo steps per 0.02 s step.
        drag: linear drag coefficient (VolleyBots' iris.yaml gives 0.2 but its drones start
            with 0 unless randomised, so 0 is the default).
        downwash: whether drones push down on drones below them (kz = 0.3).
        nthread: MuJoCo rollout threads (0: in the calling thread).
    """

    action_mode: str = "rotor"
    max_steps: int | None = None
    substeps: int = 4
    drag: float = 0.0
    downwash: bool = True
    nthread: int = 0

    def __post_init__(self):
        if self.action_mode not in ACTION_MODES:
            raise ValueError(f"action_mode must be one of {ACTION_MODES}, got {self.action_mode!r}")
        bounds = (("max_steps", 1, 1_000_000), ("substeps", 1, 100), ("nthread", 0, 256))
        for name, least, most in bounds:
            value = getattr(self, name)
            if value is None and name == "max_steps":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
                raise ValueError(f"{name} must be an integer in {least}..{most}, got {value!r}")
        if self.drag < 0:
            raise ValueError(f"drag must be >= 0, got {self.drag!r}")


def _allocation() -> np.ndarray:
    """Rotor thrusts -> (collective thrust, body torques x, y, z)."""
    x, y = ROTOR_XY.T
    return np.stack([np.ones(4), y, -x, -KM_OVER_KF * ROTOR_DIR])


MIXER = np.linalg.inv(_allocation())


def quat_fix(q: np.ndarray) -> np.ndarray:
    """The same rotation with w >= 0 (a quaternion and its negative are one rotation)."""
    return np.where(q[..., :1] < 0, -q, q)


def mirror_quat(q: np.ndarray) -> np.ndarray:
    """q_z(pi) * q: the orientation seen from the other side of the net (x and y negated)."""
    w, x, y, z = np.moveaxis(q, -1, 0)
    return quat_fix(np.stack([-z, -y, x, w], -1))


def random_quat(rng: np.random.Generator, low: np.ndarray, high: np.ndarray, n) -> np.ndarray:
    """Quaternions of roll, pitch, yaw drawn uniformly in ``[low, high]`` (ZYX), ``[*n, 4]``."""
    r, p, y = np.moveaxis(rng.uniform(low, high, (*n, 3)), -1, 0)
    cr, sr, cp, sp, cy, sy = (f(a / 2) for a in (r, p, y) for f in (np.cos, np.sin))
    return np.stack(
        [
            cr * cp * cy + sr * sp * sy,
            sr * cp * cy - cr * sp * sy,
            cr * sp * cy + sr * cp * sy,
            cr * cp * sy - sr * sp * cy,
        ],
        -1,
    )


class VolleyballBatch(VectorEnv):
    """B worlds of one volleyball task (a subclass sets the class attributes below).

    Class attributes:
        OPTIONS: the task's options dataclass (a :class:`VolleyballOptions`).
        MAX_STEPS: the task's episode length.
        AGENTS: agent names (``drone_0`` ...; ``near_0`` ... / ``far_0`` ... in matches).
        OBS_DIM: observation length per drone.
    """

    OPTIONS: type = VolleyballOptions
    MAX_STEPS: int = 500
    AGENTS: tuple[str, ...] = ("drone_0",)
    OBS_DIM: int = 0

    def __init__(self, num_envs: int, seed: int | None = None, auto_reset: bool = True, **options):
        self.options = o = self.OPTIONS(**options)
        self.num_envs, self._seed, self.auto_reset = num_envs, seed, auto_reset
        self.max_steps = o.max_steps or self.MAX_STEPS
        self.agents = self.AGENTS
        self.n = len(self.agents)
        self.worlds = Worlds(self.layout(), num_envs, o.nthread, o.substeps, o.drag, o.downwash)
        obs_space = gym.spaces.Box(-np.inf, np.inf, (self.OBS_DIM,), np.float32)
        act_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.groups: dict[str, AgentGroup] = {}
        for i, agent in enumerate(self.agents):
            name = role(agent)
            g = self.groups.get(name)
            members = (g.agents if g else ()) + (agent,)
            index = (g.index if g else ()) + (i,)
            self.groups[name] = AgentGroup(name, members, index, obs_space, act_space)
        self.state_space = gym.spaces.Box(-np.inf, np.inf, (self.n * self.OBS_DIM,), np.float32)
        self.t = np.zeros(num_envs, int)
        self.returns = np.zeros((num_envs, self.n))
        self.term_sums: dict[str, np.ndarray] = {}
        self.rng = np.random.default_rng(seed)
        self.reward_terms: dict[str, np.ndarray] = {}

    # -- what a task defines -----------------------------------------------------------------

    @abc.abstractmethod
    def layout(self) -> Layout:
        """The scene."""

    @abc.abstractmethod
    def _spawn(self, envs: np.ndarray) -> None:
        """Puts worlds ``envs`` at the start of an episode (``self.worlds.reset`` and the
        task's own state)."""

    @abc.abstractmethod
    def _observe(self) -> np.ndarray:
        """float32 ``[B, N, OBS_DIM]`` observations of every world."""

    @abc.abstractmethod
    def _rules(self) -> tuple[dict[str, np.ndarray], np.ndarray, dict[str, np.ndarray]]:
        """After a physics step: the reward terms ``name -> [B, N]`` (signed, summed into the
        reward), ``terminated [B]`` and the task's episode facts ``name -> [B]`` (reported
        when an episode ends)."""

    # -- shared observation pieces -----------------------------------------------------------

    def drone_state(self, mirror: np.ndarray | None = None) -> np.ndarray:
        """VolleyBots' 23-number drone state ``[B, D, 23]``: position, quaternion, linear and
        angular velocity (world), heading and up axes, throttles (2 t - 1). Quaternions have
        w >= 0 in every task (VolleyBots fixes the sign in its matches only; q and -q are one
        rotation, and one sign spares a policy learning both). Drones where ``mirror [D]`` is
        true see the court from the other side (x and y negated)."""
        w = self.worlds
        pos, vel, ang, quat = w.pos.copy(), w.vel.copy(), w.angvel.copy(), quat_fix(w.quat)
        if mirror is not None and mirror.any():
            for v in (pos, vel, ang):
                v[:, mirror, :2] *= -1
            quat[:, mirror] = mirror_quat(quat[:, mirror])
        axes = quat_axes(quat)
        return np.concatenate(
            [pos, quat, vel, ang, axes[..., 0, :], axes[..., 2, :], w.throttle * 2 - 1], -1
        )

    # -- the VectorEnv interface -------------------------------------------------------------

    def reset(self, seed: int | None = None) -> VectorStep:
        seed = self._seed if seed is None else seed
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        everything = np.arange(self.num_envs)
        self._begin(everything)
        return self.observe()

    def observe(self) -> VectorStep:
        """A step of no rewards for the worlds as they are now (after a reset, or after a
        caller set them by hand)."""
        obs = self._observe()
        state = obs.reshape(self.num_envs, -1)
        zeros, no = np.zeros((self.num_envs, self.n), np.float32), np.zeros(self.num_envs, bool)
        return VectorStep(
            self._split(obs), state, {}, zeros, no, no.copy(), self._split(obs), state
        )

    def _begin(self, envs: np.ndarray) -> None:
        self.t[envs] = 0
        self.returns[envs] = 0.0
        for v in self.term_sums.values():
            v[envs] = 0.0
        self._spawn(envs)

    def _split(self, obs: np.ndarray) -> dict[str, np.ndarray]:
        return {name: obs[:, list(g.index)] for name, g in self.groups.items()}

    def step(self, actions: dict[str, np.ndarray]) -> VectorStep:
        act = np.zeros((self.num_envs, self.n, 4))
        for name, g in self.groups.items():
            act[:, list(g.index)] = np.clip(np.asarray(actions[name], np.float64), -1.0, 1.0)
        if self.options.action_mode == "ctbr":
            act = self._rate_control(act)
        self.worlds.step(act)
        self.t += 1
        terms, terminated, facts = self._rules()
        self.reward_terms = terms
        rewards = sum(terms.values(), np.zeros((self.num_envs, self.n)))
        self.returns += rewards
        for k, v in terms.items():
            self.term_sums.setdefault(k, np.zeros((self.num_envs, self.n)))
            self.term_sums[k] += v
        truncated = ~terminated & (self.t >= self.max_steps)
        obs = self._observe()
        state = obs.reshape(self.num_envs, -1)
        ended = terminated | truncated
        info = None
        final_obs, final_state = self._split(obs), state
        if ended.any():
            info = {k: np.array(v, np.float64) for k, v in facts.items()}  # a copy: resets reuse
            for k, v in self.term_sums.items():
                info[f"reward_{k}"] = v.mean(axis=1)
            if self.auto_reset:
                final_obs = {k: v.copy() for k, v in final_obs.items()}
                final_state = state.copy()
                self._begin(np.flatnonzero(ended))
                obs = self._observe()
                state = obs.reshape(self.num_envs, -1)
        return VectorStep(
            self._split(obs),
            state,
            {},
            rewards.astype(np.float32),
            terminated,
            truncated,
            final_obs,
            final_state,
            info,
        )

    def _rate_control(self, act: np.ndarray) -> np.ndarray:
        """CTBR -> rotor commands: a P controller on body rates (with gyroscopic feed-forward)
        gives the torques, the inverse allocation matrix the rotor thrusts."""
        w = self.worlds
        axes = quat_axes(w.quat)  # [B, D, 3 axis, 3]
        omega = np.einsum("bdij,bdj->bdi", axes, w.angvel)  # body frame
        target = act[..., 1:] * MAX_RATE
        torque = INERTIA * RATE_GAIN * (target - omega) + np.cross(omega, INERTIA * omega)
        collective = (act[..., :1] + 1) / 2 * 4 * KF
        thrust = np.einsum("ij,bdj->bdi", MIXER, np.concatenate([collective, torque], -1))
        return np.clip(thrust / KF, 0.0, 1.0) * 2 - 1  # steady-state thrust is linear in a


HOVER_COMMAND = 2 * MASS * 9.81 / (4 * KF) - 1
"""The rotor command at which thrust balances weight (throttle^2 * 4 KF = m g)."""
