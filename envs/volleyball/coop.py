"""VolleyBots' cooperative tasks (``volley_bots/envs/cooperative/``): bump and pass (two drones
pass the ball between them) and set and spike (a setter sets, an attacker spikes it over the
net into a target; the hard variant has a defender that returns it).

Both drones start near their anchors on the +x half of the 18 x 9 m court with the ball 2 m
above drone 0. A step on which the ball touches a drone is a contact, credited to the drone
nearest the ball; it counts as a hit more than 3 steps after that drone's last contact (so a
contact lasting several steps counts once). A counted hit is a success unless
it was not the drone's turn or the ball was not in its racket (then it is a wrong hit, -10
for the hitter, and the episode ends). The episode also ends (-10 for all) when the ball
drops below 0.2 m, rises above 16 m, enters the net or leaves the court, or a drone drops too
low or reaches the net.

Observation (bump and pass 43, set and spike 40): the drone state (23), position - anchor,
other drone - self, self - ball, ball velocity, whose turn (one-hot, 2 or 3), own id (2), and
for bump and pass the time (t / T, 4 times), as VolleyBots' training scripts set them
(``multijuggle.sh`` keeps the time encoding, ``multiattack_*.sh`` turn it off).
"""

from __future__ import annotations

import numpy as np

from envs.volleyball.core import VolleyballBatch, random_quat
from envs.volleyball.drills import TILT
from envs.volleyball.match import RACKET_HEIGHT, RACKET_RADIUS
from envs.volleyball.physics import quat_axes
from envs.volleyball.scene import NET_HEIGHT, Layout

HIT_GAP = 3
LENGTH, WIDTH = 18.0, 9.0


def _cos_xy(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine between the xy parts of ``a`` and ``b`` (0 where either is zero)."""
    a, b = a[..., :2], b[..., :2]
    norm = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    return np.where(norm > 0, (a * b).sum(-1) / np.maximum(norm, 1e-9), 0.0)


class _Coop(VolleyballBatch):
    AGENTS = ("drone_0", "drone_1")
    MAX_STEPS = 800
    ANCHORS = np.array([[4.5, -2.5, 2.0], [4.5, 2.5, 2.0]])
    TURNS = 2
    DRONE_LOW = 0.4
    TIME_ENCODING = True

    @property
    def OBS_DIM(self) -> int:  # noqa: N802
        return 23 + 12 + self.TURNS + 2 + 4 * self.TIME_ENCODING

    def layout(self) -> Layout:
        return Layout(2, court=(LENGTH, WIDTH))

    def _spawn(self, envs):
        n = len(envs)
        pos = self.ANCHORS + self.rng.uniform([-0.5, -0.5, -0.2], [0.5, 0.5, 0.2], (n, 2, 3))
        quat = random_quat(self.rng, [-TILT, -TILT, 0], [TILT, TILT, 2 * np.pi], (n, 2))
        self.worlds.reset(envs, pos, quat, pos[:, 0] + [0.0, 0.0, 2.0])
        if not hasattr(self, "turn"):
            B = self.num_envs
            self.turn = np.zeros(B, int)
            self.last_contact = np.zeros((B, 2), int)
            self.success_hits = np.zeros(B, int)
        self.turn[envs], self.last_contact[envs] = 0, -100
        self.success_hits[envs] = 0

    def _observe(self):
        w = self.worlds
        state = self.drone_state()
        t = np.repeat((self.t / self.max_steps)[:, None, None], 4, -1)
        turn = np.eye(self.TURNS)[np.minimum(self.turn, self.TURNS - 1)]
        parts = [
            state,
            w.pos - self.ANCHORS,
            w.pos[:, ::-1] - w.pos,
            w.pos - w.ball_pos[:, None],
            np.repeat(w.ball_vel[:, None], 2, 1),
            np.repeat(turn[:, None], 2, 1),
            np.broadcast_to(np.eye(2), (self.num_envs, 2, 2)),
        ]
        if self.TIME_ENCODING:
            parts.append(np.repeat(t, 2, 1))
        return np.concatenate(parts, -1).astype(np.float32)

    def _hits(self):
        """(success_hit, wrong_hit) ``[B, 2]`` (see the module docstring)."""
        w = self.worlds
        rel = w.ball_pos[:, None] - w.pos
        nearest = np.linalg.norm(rel, axis=-1).argmin(1)
        hitter = w.ball_contact.any(1)[:, None] & (np.arange(2) == nearest[:, None])
        counted = hitter & (self.t[:, None] - self.last_contact > HIT_GAP)
        self.last_contact = np.where(hitter, self.t[:, None], self.last_contact)
        up = quat_axes(w.quat)[..., 2, :]
        along = np.einsum("bdk,bdk->bd", rel, up)
        off = np.linalg.norm(rel - along[..., None] * up, axis=-1)
        in_racket = (along >= 0) & (along <= RACKET_HEIGHT) & (off <= RACKET_RADIUS)
        wrong = counted & ((np.arange(2) != self.turn[:, None]) | ~in_racket)
        success = counted & ~wrong
        self.success_hits += success.sum(1)
        return success, wrong

    def _ball_bad(self):
        ball = self.worlds.ball_pos
        net = (
            (np.abs(ball[:, 0]) < 0.1)
            & (np.abs(ball[:, 1]) < WIDTH / 2)
            & (ball[:, 2] < NET_HEIGHT)
        )
        out = (np.abs(ball[:, 0]) > LENGTH / 2) | (np.abs(ball[:, 1]) > WIDTH / 2)
        return (ball[:, 2] < 0.2) | (ball[:, 2] > 16.0) | net | out

    def _anchor_penalty(self):
        gap = np.linalg.norm(self.worlds.pos - self.ANCHORS, axis=-1) - 0.5
        return 0.05 * np.clip(gap, 0.0, None).mean(1, keepdims=True)

    def _toward(self, weights: np.ndarray) -> np.ndarray:
        """Shaping towards the ball: the mean over drones of 0.05 weight / (1 + xy distance)."""
        w = self.worlds
        xy = np.linalg.norm(w.pos[..., :2] - w.ball_pos[:, None, :2], axis=-1)
        return (0.05 * weights / (1 + xy)).mean(1, keepdims=True)


class BumpAndPass(_Coop):
    """Bump and pass (``multi_juggle_volleyball.py``): drones at (4.5, -+2.5, 2) take turns
    hitting the ball. Rewards (shared unless said): +1 per successful hit, +1 when the ball
    crosses y = 0 above 4 m, -0.05 x the mean distance beyond 0.5 m from the anchors, 0.05 /
    (1 + xy distance) for the drone whose turn it is and minus that for the other (mean),
    the hitter's cos(ball direction, towards the other drone) on a success, -10 per fault
    (the ball's for all, a drone's own for it). Facts: ``success_hits``, ``passes`` (crossings
    above 4 m)."""

    FACTS = ("success_hits", "passes")

    def _spawn(self, envs):
        super()._spawn(envs)
        if not hasattr(self, "last_cross"):
            self.last_cross = np.zeros(self.num_envs, int)
            self.passes = np.zeros(self.num_envs, int)
        self.last_cross[envs], self.passes[envs] = -100, 0

    def _rules(self):
        w = self.worlds
        success, wrong = self._hits()
        self.turn = (self.turn + success.any(1)) % 2
        ball = w.ball_pos
        crossing = np.abs(ball[:, 1]) <= 0.1
        fresh = crossing & (self.t - self.last_cross > HIT_GAP)
        self.last_cross = np.where(crossing, self.t, self.last_cross)
        passed = fresh & (ball[:, 2] > 4.0)
        self.passes += passed
        pos = w.pos
        drone_bad = (pos[..., 2] < self.DRONE_LOW) | (
            (np.abs(pos[..., 0]) < 0.2)
            & (np.abs(pos[..., 1]) < WIDTH / 2)
            & (pos[..., 2] < NET_HEIGHT)
        )
        ball_bad = self._ball_bad()
        sign = np.where(np.arange(2) == self.turn[:, None], 1.0, -1.0)
        direction = _cos_xy(np.repeat(w.ball_vel[:, None], 2, 1), pos[:, ::-1] - pos)
        ones = np.ones((self.num_envs, 2))
        terms = {
            "hit": success.any(1, keepdims=True) * ones,
            "pass": passed[:, None] * ones,
            "anchor": -self._anchor_penalty() * ones,
            "ball_distance": self._toward(sign) * ones,
            "hit_direction": success * direction,
            "misbehave": -10.0 * (ball_bad[:, None].astype(float) + drone_bad + wrong),
        }
        terminated = ball_bad | drone_bad.any(1) | wrong.any(1)
        facts = {
            "success_hits": self.success_hits.astype(float),
            "passes": self.passes.astype(float),
        }
        return terms, terminated, facts


class SetAndSpikeEasy(_Coop):
    """Set and spike (``multi_attack_volleyball_easy.py``): the setter (drone 0, anchor (2,
    -2.5, 2.5)) hits first, then the attacker (drone 1, anchor (2, 2.5, 3.5)); turn 2 means
    spiked. Rewards (shared, each 5): a successful hit, a downward spike, the spiked ball
    crossing the net, the spiked ball landing within 1 m of the target (-4.5, 0); -0.05 x
    the mean distance beyond 0.5 m from the anchors; shaping: 0.05 / (1 + xy distance) for
    the drone whose turn it is (minus for the one that just hit), the hitter's
    cos(ball direction, towards its aim: the attacker, then the target), 0.2 clip(5 - ball
    vz, 0) on the spike, 0.2 clip(10 - distance to target, 0) where the spike lands; -10 per
    fault, a drone below 0.2 m or past the net included. Facts: ``success_hits``,
    ``in_target``."""

    FACTS = ("success_hits", "in_target")

    ANCHORS = np.array([[2.0, -2.5, 2.5], [2.0, 2.5, 3.5]])
    TARGET = np.array([-4.5, 0.0])
    TURNS = 3
    TIME_ENCODING = False
    DRONE_LOW = 0.2
    WEIGHTS = np.array([[1.0, 0.0], [-1.0, 1.0], [0.0, -1.0]])  # ball-distance shaping per turn

    def _spawn(self, envs):
        super()._spawn(envs)
        if not hasattr(self, "in_target"):
            self.in_target = np.zeros(self.num_envs, bool)
            self.last_x = np.zeros(self.num_envs)
        self.in_target[envs] = False
        self.last_x[envs] = self.worlds.ball_pos[envs, 0]

    def _landed_in_target(self, landed: np.ndarray) -> np.ndarray:
        ball = self.worlds.ball_pos
        return landed & (np.linalg.norm(ball[:, :2] - self.TARGET, axis=-1) < 1.0)

    def _rules(self):
        w = self.worlds
        success, wrong = self._hits()
        self.turn = self.turn + success.any(1)  # no wrap: 2 = spiked, any later hit is wrong
        ball, vel, pos = w.ball_pos, w.ball_vel, w.pos
        crossed = (ball[:, 0] <= -0.1) & (self.last_x > -0.1) & (self.turn == 2)
        self.last_x = ball[:, 0].copy()
        spiked = self.turn == 2
        landed = spiked & (ball[:, 2] < 0.2)
        in_target = self._landed_in_target(landed)
        self.in_target |= in_target
        drone_bad = (pos[..., 2] < self.DRONE_LOW) | (pos[..., 0] < 0)
        ball_bad = self._ball_bad()
        aims = np.stack(
            [pos[:, 1] - pos[:, 0], np.c_[self.TARGET - pos[:, 1, :2], np.zeros(self.num_envs)]], 1
        )
        ones = np.ones((self.num_envs, 2))
        terms = {
            "hit": 5.0 * success.any(1, keepdims=True) * ones,
            "downward_spike": 5.0 * (success[:, 1] & (vel[:, 2] < 0))[:, None] * ones,
            "cross": 5.0 * crossed[:, None] * ones,
            "in_target": 5.0 * in_target[:, None] * ones,
            "anchor": -self._anchor_penalty() * ones,
            "ball_distance": self._toward(self.WEIGHTS[np.minimum(self.turn, 2)]) * ones,
            "hit_direction": success * _cos_xy(np.repeat(vel[:, None], 2, 1), aims),
            "spike_velocity": 0.2
            * (success[:, 1] * np.clip(5.0 - vel[:, 2], 0.0, None))[:, None]
            * ones,
            "misbehave": -10.0
            * (ball_bad[:, None].astype(float) + drone_bad.any(1, keepdims=True) + wrong),
        }
        terms.update(self._extra_terms(landed))
        terminated = ball_bad | drone_bad.any(1) | wrong.any(1)
        facts = {
            "success_hits": self.success_hits.astype(float),
            "in_target": self.in_target.astype(float),
        }
        return terms, terminated, facts

    def _extra_terms(self, landed):
        dist = np.linalg.norm(self.worlds.ball_pos[:, :2] - self.TARGET, axis=-1)
        near = 0.2 * landed * np.clip(10.0 - dist, 0.0, None)
        return {"target_distance": near[:, None] * np.ones((1, 2))}


class SetAndSpikeHard(SetAndSpikeEasy):
    """Set and spike against a defender (``multi_attack_volleyball_hard.py``): a board (a
    disc of radius 0.5 m resting at (-4, 0, 0.5)) plans an intercept when the spiked ball
    flies towards it (vx < -2, falling, above 1.2 m): where the ball's ballistic path
    reaches 1.1 m inside the far half. It flies from its rest towards that point at the speed
    that gets it there when the ball does, at most 8 m/s (and on, as VolleyBots' board does
    not stop), and where it meets the ball (within 0.6 m) returns it from the planned point
    towards (3, 1, 1.3) in 1.5 s. The board is kinematic and not drawn.
    The spike scores (``in_target``) when the ball lands after the board failed to reach
    it, or after a return that went out or into the net. Drones must stay above 0.4 m.
    """

    DRONE_LOW = 0.4
    REST = np.array([-4.0, 0.0, 0.5])
    RETURN_TO = np.array([3.0, 1.0, 1.3])
    FLIGHT, SPEED, INTERCEPT_Z = 1.5, 8.0, 1.1

    def _spawn(self, envs):
        super()._spawn(envs)
        if not hasattr(self, "board"):
            B = self.num_envs
            self.board = np.tile(self.REST, (B, 1))
            self.board_vel = np.zeros((B, 3))
            self.plan = np.full((B, 3), np.nan)
            self.returned = np.zeros(B, bool)
        self.board[envs] = self.REST
        self.board_vel[envs] = 0.0
        self.plan[envs] = np.nan
        self.returned[envs] = False

    def _defend(self) -> None:
        w = self.worlds
        ball, vel = w.ball_pos, w.ball_vel
        idle = np.isnan(self.plan[:, 0]) & ~self.returned
        trigger = (
            idle & (self.turn == 2) & (vel[:, 0] < -2.0) & (vel[:, 2] < 0) & (ball[:, 2] >= 1.2)
        )
        if trigger.any():
            # Time until the ball falls to the intercept height: z + vz t - g t^2 / 2 = z_i.
            g = 9.81
            disc = vel[:, 2] ** 2 + 2 * g * (ball[:, 2] - self.INTERCEPT_Z)
            t = (vel[:, 2] + np.sqrt(np.maximum(disc, 0.0))) / g
            point = ball + vel * t[:, None]
            point[:, 2] = self.INTERCEPT_Z
            ok = (
                trigger
                & (point[:, 0] >= -LENGTH / 2)
                & (point[:, 0] <= 0)
                & (np.abs(point[:, 1]) <= WIDTH / 2)
            )
            self.plan[ok] = point[ok]
            gap = point - self.REST
            dist = np.linalg.norm(gap, axis=-1, keepdims=True)
            speed = np.minimum(dist / np.maximum(t[:, None], 1e-6), self.SPEED)
            self.board_vel[ok] = (gap / np.maximum(dist, 1e-9) * speed)[ok]
        moving = ~np.isnan(self.plan[:, 0])
        if moving.any():
            self.board[moving] += self.board_vel[moving] * 0.02
            reach = moving & (np.linalg.norm(ball - self.board, axis=-1) < 0.6) & (vel[:, 0] < 0)
            if reach.any():
                d = self.RETURN_TO - self.plan[reach]
                out = np.c_[
                    d[:, :2] / self.FLIGHT, (d[:, 2] + 0.5 * 9.81 * self.FLIGHT**2) / self.FLIGHT
                ]
                w.state[np.ix_(np.flatnonzero(reach), w.ball_qvel[:3])] = out
                w.read()
                self.returned |= reach
                self.plan[reach] = np.nan
                self.board[reach] = self.REST

    def _rules(self):
        self._defend()
        return super()._rules()

    def _landed_in_target(self, landed):
        ball = self.worlds.ball_pos
        out = (np.abs(ball[:, 0]) > LENGTH / 2) | (np.abs(ball[:, 1]) > WIDTH / 2)
        net = (np.abs(ball[:, 0]) < 0.1) & (ball[:, 2] < NET_HEIGHT)
        missed = ~np.isnan(self.plan[:, 0]) & ~self.returned
        return landed & ((self.returned & (out | net)) | missed)

    def _extra_terms(self, landed):
        return {}
