"""The hitting skills of the hierarchical 3v3 team (VolleyBots' hierarchical policy, after HCSP,
thu-uav/HCSP), each a drill of one drone on the near half of the 3v3 court (12 x 6 m):

- ``serve``: the drone at the server's anchor (6, 0, 2), the ball 3 m above it as in a 3v3
  serve; send it over the net to land near a target in the other half.
- ``pass`` (receive): a ball from the other half comes down near the drone, anywhere in the
  back of the near half; send it up to come down near the setter's point.
- ``set``: a ball passed from the back comes down near the drone, near the net; send it up to
  come down near the attacker's point.
- ``attack``: a set ball comes down near the drone, near the net; send it over the net to land
  near a target in the other half.

Go-to and hover are the hover drill's policy (its observation is the target relative to the
drone, so a go-to is a hover at a moving target).

Every skill sees the same 33 numbers, built by :func:`skill_observation` here and in the
hierarchical team alike: the drone state (23), ball - drone, ball velocity, target - drone,
whether it has hit the ball (1, 0 before). Hits are VolleyBots' (:class:`match.Contacts`): a
second hit or a body touch ends the drill as a fault, as it loses the point in a match.

Rewards: 10 for the hit; every step before it 0.2 / (1 + (2 g)^2), g the distance in x and y
from the drone to where the ball will come down to 0.1 m above it (a signal of where to be long
before the ball is near, which a distance to the ball is not); ``serve``, ``pass`` and ``attack``,
at the hit, 10 / (1 + (e / r)^2) with e the distance from the target of where the ball's free flight
will land, 0 if it flies into the net (VolleyBots' serve and attack drills pay the ball's
closeness to the target every step of the flight instead); at the end 10
/ (1 + (e / r)^2) with e the distance from the target where the ball comes down (``pass``,
``set``: through the target's height, 2 m; ``serve``, ``attack``: on the floor, r = 3 m and 5
more for landing inside the other half; r = 2 m else); -10 for a miss, a fault, the ball in
the net or out, the drone below 0.4 m, above 5 m or across the net. Facts: ``hit`` and
``success`` (the ball down within 1 m of the target; serve and attack: inside the other half).
"""

from __future__ import annotations

import abc

import numpy as np

from envs.volleyball.core import VolleyballBatch, random_quat
from envs.volleyball.match import LAND_Z, NET_BOX, Contacts
from envs.volleyball.physics import GRAVITY
from envs.volleyball.scene import NET_HEIGHT, Layout

COURT = (12.0, 6.0)
SERVER = np.array([6.0, 0.0, 2.0])
SKILL_OBS = 33
TILT = 0.1
REACH = 0.8  # m: how far in x and y from a skill's drone its ball comes down


def skill_observation(state, pos, ball_pos, ball_vel, target, touched, sign) -> np.ndarray:
    """The skills' observation ``[B, D, 33]`` of drones with ``state [B, D, 23]`` (already
    mirrored where ``sign [D, 3]`` is -1 in x and y), positions ``pos [B, D, 3]``, the ball
    ``[B, 3]``, their targets ``[B, D, 3]`` (world frame) and ``touched [B, D]``."""
    parts = [
        state,
        (ball_pos[:, None] - pos) * sign,
        np.broadcast_to(ball_vel[:, None], pos.shape) * sign,
        (target - pos) * sign,
        touched[..., None].astype(float),
    ]
    return np.concatenate(parts, -1).astype(np.float32)


def launch(start: np.ndarray, end: np.ndarray, seconds: np.ndarray) -> np.ndarray:
    """The velocity that takes a ball from ``start`` to ``end`` in ``seconds`` (no drag:
    VolleyBots' ball flies without air resistance)."""
    v = (end - start) / seconds[:, None]
    v[:, 2] += 0.5 * GRAVITY * seconds
    return v


def intercept(ball: np.ndarray, vel: np.ndarray, height: np.ndarray) -> np.ndarray:
    """Where (x, y) balls ``[B, 3]`` moving at ``vel`` will fall through ``height [B]``; a ball
    below it (or never reaching it) is taken where it is."""
    dz = ball[:, 2] - height
    disc = vel[:, 2] ** 2 + 2 * GRAVITY * dz
    t = (vel[:, 2] + np.sqrt(np.maximum(disc, 0.0))) / GRAVITY  # the later root: on the way down
    t = np.where((dz > 0) & (disc >= 0), t, 0.0)
    return ball[:, :2] + vel[:, :2] * t[:, None]


class SkillDrill(VolleyballBatch):
    """One hitting skill (a subclass places the drone, the ball and the target)."""

    FACTS = ("success", "hit")
    OBS_DIM = SKILL_OBS
    MAX_STEPS = 250
    OVER_NET = False  # the ball must cross the net and land (serve, attack)
    RADIUS = 2.0
    AIM = 0.0  # weight of the aim at the hit (serve, attack)

    def layout(self) -> Layout:
        return Layout(1, court=COURT)

    def _spawn(self, envs):
        n = len(envs)
        pos, ball, ball_vel, target = self._place(n)
        quat = random_quat(self.rng, [-TILT, -TILT, -TILT], [TILT, TILT, TILT], (n, 1))
        self.worlds.reset(envs, pos[:, None], quat, ball, ball_vel)
        if not hasattr(self, "target"):
            B = self.num_envs
            self.target = np.zeros((B, 3))
            self.touched = np.zeros(B, bool)
            self.contacts = Contacts(B, 1)
        self.target[envs] = target
        self.touched[envs] = False
        self.contacts.reset(envs)

    @abc.abstractmethod
    def _place(self, n: int):
        """Drone position ``[n, 3]``, ball position and velocity, target ``[n, 3]``."""

    def _uniform(self, low, high, n) -> np.ndarray:
        return self.rng.uniform(low, high, (n, len(low)))

    def _incoming(self, drone: np.ndarray, start_low, start_high, seconds) -> tuple:
        """A ball from a point in ``[start_low, start_high]`` that comes down near ``drone``
        (within ``REACH`` in x and y, 0.2-0.8 m above) after ``seconds (low, high)``; balls from
        the other half clear the net by 0.2 m (redrawn until they do)."""
        n = len(drone)
        start = self._uniform(start_low, start_high, n)
        end = drone + self._uniform([-REACH, -REACH, 0.2], [REACH, REACH, 0.8], n)
        t = self.rng.uniform(*seconds, n)
        vel = launch(start, end, t)
        for _ in range(20):
            cross = -start[:, 0] / np.where(vel[:, 0] > 0, vel[:, 0], np.inf)  # time at x = 0
            height = start[:, 2] + vel[:, 2] * cross - 0.5 * GRAVITY * cross**2
            low = (start[:, 0] < 0) & (height < NET_HEIGHT + 0.2)
            if not low.any():
                break
            t[low] += 0.15  # a higher arc
            vel[low] = launch(start[low], end[low], t[low])
        return start, vel

    def _aim(self, ball: np.ndarray, vel: np.ndarray) -> np.ndarray:
        """How well a ball just hit flies: 1 / (1 + (e / r)^2), e the distance from the target
        of where its free flight comes down (exact: the ball has no drag); 0 for a serve or an
        attack into the net, or a pass that crosses it."""
        down = intercept(ball, vel, np.maximum(self.target[:, 2], LAND_Z))
        error = np.linalg.norm(down - self.target[:, :2], axis=-1)
        toward = vel[:, 0] < 0
        t = np.where(toward, ball[:, 0] / np.where(toward, -vel[:, 0], 1.0), 0.0)  # to x = 0
        over = toward & (ball[:, 2] + vel[:, 2] * t - 0.5 * GRAVITY * t**2 > NET_HEIGHT + 0.1)
        fine = over if self.OVER_NET else down[:, 0] > 0  # a pass or set stays on this side
        return np.where(fine, 1.0 / (1 + np.square(error / self.RADIUS)), 0.0)

    def _observe(self):
        w = self.worlds
        return skill_observation(
            self.drone_state(),
            w.pos,
            w.ball_pos,
            w.ball_vel,
            self.target[:, None],
            self.touched[:, None],
            np.ones(3),
        )

    def _rules(self):
        w = self.worlds
        racket, body = self.contacts.update(w, self.t)
        racket, body = racket[:, 0], body[:, 0]
        first = racket & ~self.touched
        fault = (racket & self.touched) | body
        self.touched |= racket
        pos, ball, vel = w.pos[:, 0], w.ball_pos, w.ball_vel
        length, width = COURT
        drone_bad = (pos[:, 2] < 0.4) | (pos[:, 2] > 5.0) | (pos[:, 0] < 0.0)
        in_net = (
            (np.abs(ball[:, 0]) < NET_BOX)
            & (np.abs(ball[:, 1]) < width / 2)
            & (ball[:, 2] < NET_HEIGHT)
        )
        landed = ball[:, 2] < LAND_Z
        missed = ~self.touched & ((ball[:, 2] < 0.5) | (ball[:, 0] < -1.0) & (vel[:, 0] < 0))
        error = np.linalg.norm(ball[:, :2] - self.target[:, :2], axis=-1)
        if self.OVER_NET:
            down = self.touched & landed
            inside = (
                (ball[:, 0] < 0) & (ball[:, 0] > -length / 2) & (np.abs(ball[:, 1]) < width / 2)
            )
            success = down & inside
            bonus = 5.0 * success
        else:
            down = self.touched & (vel[:, 2] < 0) & (ball[:, 2] < self.target[:, 2])
            success = down & (error < 1.0)
            bonus = 0.0
            in_net |= self.touched & (ball[:, 0] < 0)  # a pass or set that crosses is lost
        bad = (
            drone_bad | fault | missed | (in_net & self.touched) | (down & ~success & self.OVER_NET)
        )
        gap = np.linalg.norm(intercept(ball, vel, pos[:, 2] + 0.1) - pos[:, :2], axis=-1)
        terms = {
            "hit": 10.0 * first,
            "aim": np.where(first, self.AIM * self._aim(ball, vel), 0.0),
            "intercept": np.where(self.touched, 0.0, 0.2 / (1 + np.square(2 * gap))),
            "placement": np.where(down, 10.0 / (1 + np.square(error / self.RADIUS)) + bonus, 0.0),
            "fault": -10.0 * bad,
        }
        terminated = bad | down
        facts = {"success": success.astype(float), "hit": self.touched.astype(float)}
        return {k: v[:, None] for k, v in terms.items()}, terminated, facts


class Serve(SkillDrill):
    """Serve from the server's anchor (6, 0, 2), the ball 3 m above, over the net to a target
    at x in [-5.5, -3], y in [-2, 2] (VolleyBots' team draws x in [-6, -4.2])."""

    OVER_NET, RADIUS, AIM = True, 3.0, 10.0
    MAX_STEPS = 300

    def _place(self, n):
        pos = SERVER + self._uniform([-0.1] * 3, [0.1] * 3, n)
        ball = pos + [0.0, 0.0, 3.0]
        target = self._uniform([-5.5, -2.0, 0.0], [-3.0, 2.0, 0.0], n)
        return pos, ball, np.zeros((n, 3)), target


class Pass(SkillDrill):
    """Receive a ball from the other half around the receiver's point (4.5, 0, 1.5); pass
    it to come down at the setter's point (around (2, -2, 2))."""

    AIM = 10.0

    def _place(self, n):
        pos = self._uniform([4.0, -1.0, 1.3], [5.0, 1.0, 1.8], n)
        ball, vel = self._incoming(pos, [-5.0, -2.5, 2.0], [-1.0, 2.5, 3.5], (1.0, 1.6))
        target = self._uniform([1.5, -2.5, 2.0], [2.5, -1.0, 2.0], n)
        return pos, ball, vel, target


class Set(SkillDrill):
    """Set a ball passed from the receiver's point; it is to come down at the attacker's
    point (around (2, 1.5, 2.5))."""

    def _place(self, n):
        pos = self._uniform([1.5, -2.5, 1.6], [2.5, -1.0, 2.0], n)
        ball, vel = self._incoming(pos, [3.5, -1.0, 1.8], [5.5, 1.0, 2.4], (1.0, 1.6))
        target = self._uniform([1.5, 0.5, 2.0], [2.5, 2.0, 2.5], n)
        return pos, ball, vel, target


class Attack(SkillDrill):
    """Attack a set ball from the attacker's point over the net to a target in the other
    half (VolleyBots' team aims at (-5, -2) or (-5, 2))."""

    OVER_NET, RADIUS, AIM = True, 3.0, 10.0

    def _place(self, n):
        pos = self._uniform([1.5, 0.5, 2.0], [2.5, 2.0, 2.6], n)
        ball, vel = self._incoming(pos, [1.5, -2.5, 1.8], [2.5, -1.0, 2.2], (1.0, 1.6))
        target = self._uniform([-5.5, -2.5, 0.0], [-3.0, 2.5, 0.0], n)
        return pos, ball, vel, target
