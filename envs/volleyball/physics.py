"""B volleyball worlds of one scene, stepped together in MuJoCo's C.

The whole batch is one array, ``state [B, nstate]`` (MuJoCo's full physics state of every
world). A step writes every world's rotor thrusts and external forces into one control array
and hands both to ``mujoco.rollout``, which runs the physics substeps of all worlds in C on a
thread pool and returns the new states and the ball-contact sensors of every substep. Nothing in
Python runs per body or per substep.

The drone follows VolleyBots (``volley_bots/actuators/rotor_group.py``,
``robots/drone/multirotor.py``): a rotor command a in [-1, 1] sets the target throttle
sqrt((a + 1) / 2), the throttle follows it with a first-order lag (0.43 of the gap per 0.02 s
step), thrust = throttle^2 * KF and the rotor's drag moment is KM / KF of its thrust (in the
MJCF actuator's gear). Linear drag and the downwash of drones above act as external forces.
"""

from __future__ import annotations

import mujoco
import numpy as np
from mujoco import rollout

from envs.volleyball.scene import Layout, model

DT = 0.02  # control step (VolleyBots: 50 Hz)
GRAVITY = 9.81
MASS = 1.52
KF = 838.0**2 * 8.54858e-6  # max thrust per rotor, N (about 6.0)
TAU = 0.43  # throttle lag per step
DOWNWASH_KR, DOWNWASH_KZ = 2.0, 0.3
HOVER_THROTTLE = np.sqrt(MASS * GRAVITY / (4 * KF))
_STATE = mujoco.mjtState.mjSTATE_FULLPHYSICS
_CONTROL = mujoco.mjtState.mjSTATE_CTRL | mujoco.mjtState.mjSTATE_XFRC_APPLIED


def quat_rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotates vectors ``v [..., 3]`` by unit quaternions ``q [..., 4]`` (w, x, y, z)."""
    w, u = q[..., :1], q[..., 1:]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def quat_axes(q: np.ndarray) -> np.ndarray:
    """The body axes of unit quaternions ``q [..., 4]`` in world frame, ``[..., 3 (axis), 3]``."""
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y)], -1),
            np.stack([2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x)], -1),
            np.stack([2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)], -1),
        ],
        -2,
    )


class Worlds:
    """B copies of one volleyball scene.

    Args:
        layout: the scene.
        num_envs: B.
        nthread: threads of the rollout pool (0: MuJoCo runs in the calling thread).
        substeps: MuJoCo steps per control step (the model's timestep is ``DT / substeps``).
        drag: linear drag coefficient (force = -drag * mass * velocity).
        downwash: whether drones push down on drones below them.

    Attributes (views refreshed after every step; index with ``[B, drone]``):
        pos, quat, vel, angvel: drone position, orientation (w, x, y, z), world linear velocity
            and world angular velocity.
        ball_pos, ball_vel: the ball's position and velocity ``[B, 3]``.
        throttle: ``[B, D, 4]`` rotor throttles in [0, 1].
        ball_contact: ``[B, D]`` bool, the ball touched the drone during the last step.
    """

    def __init__(
        self,
        layout: Layout,
        num_envs: int,
        nthread: int = 0,
        substeps: int = 4,
        drag: float = 0.0,
        downwash: bool = True,
    ):
        self.layout, self.num_envs, self.substeps, self.nthread = (
            layout,
            num_envs,
            substeps,
            nthread,
        )
        self.drag, self.downwash = drag, downwash
        self.model = m = model(layout)
        m.opt.timestep = DT / substeps
        D = self.num_drones = layout.drones
        self._data = [mujoco.MjData(m) for _ in range(max(nthread, 1))]
        self._rollout = rollout.Rollout(nthread=nthread)
        self._models = [m] * num_envs  # rollout's fast path takes one model per world
        d = self._data[0]
        mujoco.mj_forward(m, d)
        initial = np.empty(mujoco.mj_stateSize(m, _STATE))
        mujoco.mj_getState(m, d, initial, _STATE)
        self.initial = initial
        self.state = np.tile(initial, (num_envs, 1))
        self._out = np.empty((num_envs, substeps, initial.size))
        self._sensors = np.empty((num_envs, substeps, m.nsensordata))
        # Controls are held over the substeps; rollout wants them per substep.
        self.control = np.zeros((num_envs, substeps, m.nu + 6 * m.nbody))
        self.ctrl = self.control[:, 0, : m.nu].reshape(num_envs, D, 4)
        self.xfrc = self.control[:, 0, m.nu :].reshape(num_envs, m.nbody, 6)
        qpos0, qvel0 = 1, 1 + m.nq  # the state starts with time, then qpos, then qvel

        def joint(name: str) -> tuple[np.ndarray, np.ndarray]:
            j = m.joint(name)
            return qpos0 + j.qposadr[0] + np.arange(7), qvel0 + j.dofadr[0] + np.arange(6)

        drones = [joint(f"drone{i}/root") for i in range(D)]
        self.drone_qpos = np.array([q for q, _ in drones]).reshape(D, 7)
        self.drone_qvel = np.array([v for _, v in drones]).reshape(D, 6)
        self.drone_body = np.array([m.body(f"drone{i}/drone").id for i in range(D)], int)
        self.ball_qpos, self.ball_qvel = joint("ball") if layout.ball else (None, None)
        self.ball_body = m.body("ball").id if layout.ball else None
        self.throttle = np.zeros((num_envs, D, 4))
        self.ball_contact = np.zeros((num_envs, D), bool)
        self.read()

    def __getstate__(self) -> dict:
        # MuJoCo's model, data and thread pool are rebuilt from the layout on unpickling.
        skip = {"model", "_data", "_rollout", "_models"}
        return {k: v for k, v in self.__dict__.items() if k not in skip}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.model = model(self.layout)
        self.model.opt.timestep = DT / self.substeps
        self._data = [mujoco.MjData(self.model) for _ in range(max(self.nthread, 1))]
        self._rollout = rollout.Rollout(nthread=self.nthread)
        self._models = [self.model] * self.num_envs

    # -- state -------------------------------------------------------------------------------

    def read(self) -> None:
        """Refreshes the position and velocity views from ``state``."""
        q = self.state[:, self.drone_qpos]
        v = self.state[:, self.drone_qvel]
        self.pos, self.quat = q[..., :3], q[..., 3:]
        self.vel = v[..., :3]
        self.angvel = quat_rotate(self.quat, v[..., 3:])  # MuJoCo's free joint: body frame
        if self.ball_qpos is not None:
            self.ball_pos = self.state[:, self.ball_qpos[:3]]
            self.ball_vel = self.state[:, self.ball_qvel[:3]]

    def reset(
        self,
        envs: np.ndarray,
        drone_pos: np.ndarray,
        drone_quat: np.ndarray | None = None,
        ball_pos: np.ndarray | None = None,
        ball_vel: np.ndarray | None = None,
    ) -> None:
        """Puts worlds ``envs`` back to rest with drones at ``drone_pos [n, D, 3]`` (level
        unless ``drone_quat`` is given) hovering (throttle at hover), and the ball at
        ``ball_pos [n, 3]`` moving with ``ball_vel``."""
        envs = np.asarray(envs)
        self.state[envs] = self.initial
        quat = np.broadcast_to([1.0, 0, 0, 0], drone_pos.shape[:-1] + (4,))
        if drone_quat is not None:
            quat = drone_quat
        rows = envs[:, None]
        for k in range(3):
            self.state[rows, self.drone_qpos[:, k]] = drone_pos[..., k]
        for k in range(4):
            self.state[rows, self.drone_qpos[:, 3 + k]] = quat[..., k]
        if self.ball_qpos is not None:
            far = np.array([0.0, 0.0, -10.0])  # a scene whose task has no ball in play
            pos = far if ball_pos is None else ball_pos
            self.state[rows, self.ball_qpos[:3]] = np.broadcast_to(pos, (len(envs), 3))
            vel = np.zeros(3) if ball_vel is None else ball_vel
            self.state[rows, self.ball_qvel[:3]] = np.broadcast_to(vel, (len(envs), 3))
        self.throttle[envs] = HOVER_THROTTLE
        self.ball_contact[envs] = False
        self.read()

    # -- dynamics ----------------------------------------------------------------------------

    def step(self, commands: np.ndarray) -> None:
        """One control step of every world with rotor commands ``[B, D, 4]`` in [-1, 1]."""
        target = np.sqrt(np.clip((commands + 1.0) / 2.0, 0.0, 1.0))
        self.throttle += TAU * (target - self.throttle)
        thrust = self.throttle**2 * KF
        self.ctrl[:] = thrust
        force = np.zeros((self.num_envs, self.num_drones, 3))
        if self.drag:
            force -= self.drag * MASS * self.vel
        if self.downwash and self.num_drones > 1:
            force += self._downwash(thrust.sum(-1))
        self.xfrc[:, self.drone_body, :3] = force
        self.control[:, 1:] = self.control[:, :1]
        self._rollout.rollout(
            self._models,
            self._data,
            self.state,
            self.control,
            control_spec=_CONTROL,
            skip_checks=True,
            nstep=self.substeps,
            state=self._out,
            sensordata=self._sensors,
        )
        self.state[:] = self._out[:, -1]
        if self.model.nsensordata:  # one contact sensor per drone, in drone order
            self.ball_contact = self._sensors.max(axis=1) > 0
        self.read()

    def _downwash(self, total_thrust: np.ndarray) -> np.ndarray:
        """The push of each drone's rotor wash on the drones below it (VolleyBots'
        ``MultirotorBase.downwash``, kr = 2, kz = 0.3): a drone at distance z along another's
        thrust axis and r off it feels exp(-(kr r / z)^2 / 2) / (1 + kz z)^2 of that thrust,
        pointing against it."""
        up = quat_axes(self.quat)[..., 2, :]  # [B, D, 3]
        thrust = up * total_thrust[..., None]  # world thrust vector of each drone
        rel = self.pos[:, None, :, :] - self.pos[:, :, None, :]  # [B, i, j]: from i to j
        z = np.einsum("bijk,bjk->bij", rel, up)  # how far source j is above i along j's axis
        r = np.linalg.norm(rel - z[..., None] * up[:, None], axis=-1)
        z = np.clip(z, 0.0, None)
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.exp(-0.5 * np.square(DOWNWASH_KR * r / z)) / (1 + DOWNWASH_KZ * z) ** 2
        v = np.nan_to_num(v, nan=0.0)
        idx = np.arange(self.num_drones)
        v[:, idx, idx] = 0.0
        return -np.einsum("bij,bjk->bik", v, thrust)
