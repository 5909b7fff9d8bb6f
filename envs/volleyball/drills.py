"""VolleyBots' single-drone tasks (``volley_bots/envs/single/``): hover, back and forth, hit the
ball over the net, and juggle it (solo bump). Numbers follow the task files and their configs
(``cfg/task/*.yaml``) with the observation options of VolleyBots' training scripts (throttles
in the observation, no time encoding).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from envs.volleyball.core import VolleyballBatch, VolleyballOptions, random_quat
from envs.volleyball.scene import Layout

TILT = 0.1 * np.pi
ANCHOR = np.array([4.5, 0.0, 2.0])


class Hover(VolleyballBatch):
    """Hold the pose (0, 0, 2) with a random target heading (``hover.py``).

    Start: position in [-2.5, 2.5]^2 x [1, 2.5], roll and pitch within 0.2 pi, any yaw.
    Observation (26): target - position, the drone state without position (20), target
    heading - heading. Reward: pose 1 / (1 + (1.2 d)^2) with d the norm of both errors, plus
    pose x (upright ((up_z + 1) / 2)^2 + spin 1 / (1 + w_z^4)), plus effort 0.1 exp(-sum of
    throttles). Ends when z < 0.2 or d > 4. Fact: ``pos_error``, VolleyBots' moving average of
    the position error (weight 0.2 on each new step).
    """

    FACTS = ("pos_error",)

    MAX_STEPS = 500
    OBS_DIM = 26
    TARGET = np.array([0.0, 0.0, 2.0])

    def layout(self) -> Layout:
        return Layout(1, ball=False, net=False)

    def _spawn(self, envs):
        n = len(envs)
        pos = self.rng.uniform([-2.5, -2.5, 1.0], [2.5, 2.5, 2.5], (n, 1, 3))
        quat = random_quat(
            self.rng, [-0.2 * np.pi, -0.2 * np.pi, 0], [0.2 * np.pi] * 2 + [2 * np.pi], (n, 1)
        )
        self.worlds.reset(envs, pos, quat)
        if not hasattr(self, "heading"):
            self.heading = np.zeros((self.num_envs, 3))
            self.pos_error = np.zeros(self.num_envs)
        yaw = self.rng.uniform(0, 2 * np.pi, n)
        self.heading[envs] = np.stack([np.cos(yaw), np.sin(yaw), np.zeros(n)], -1)
        self.pos_error[envs] = 0.0  # VolleyBots' moving average starts from 0

    def _errors(self, state):
        return self.TARGET - state[:, 0, :3], self.heading - state[:, 0, 13:16]

    def _observe(self):
        state = self.drone_state()
        rpos, rheading = self._errors(state)
        return np.concatenate([rpos, state[:, 0, 3:], rheading], -1)[:, None].astype(np.float32)

    def _rules(self):
        state = self.drone_state()
        rpos, rheading = self._errors(state)
        d = np.linalg.norm(np.concatenate([rpos, rheading], -1), axis=-1)
        pose = 1.0 / (1.0 + np.square(1.2 * d))
        up = np.square((state[:, 0, 18] + 1) / 2)
        spin = 1.0 / (1.0 + np.square(np.square(state[:, 0, 12])))
        effort = 0.1 * np.exp(-self.worlds.throttle[:, 0].sum(-1))
        err = np.linalg.norm(rpos, axis=-1)
        self.pos_error = self.pos_error * 0.8 + err * 0.2
        terms = {"pose": pose, "up": pose * up, "spin": pose * spin, "effort": effort}
        terminated = (state[:, 0, 2] < 0.2) | (d > 4.0)
        return {k: v[:, None] for k, v in terms.items()}, terminated, {"pos_error": self.pos_error}


class BackAndForth(VolleyballBatch):
    """Fly between (4.5, 0, 2) and (9, 4.5, 2) as often as possible (``back_and_forth.py``).

    A target counts as reached after 5 steps in a row within 0.6 m of it; then the other one
    becomes the target. Observation (26): the drone state (23), target - position. Reward:
    2.5 x the steps in a row at the target, plus 0.5 / (1 + d^2) x 0.02 x (50 - that count),
    minus 10 when the drone leaves z in [0.4, 5] or gets 7.5 m from its target (which ends
    the episode). Fact: ``targets_reached``.
    """

    FACTS = ("targets_reached",)

    MAX_STEPS = 800
    OBS_DIM = 26
    POINTS = np.array([[4.5, 0.0, 2.0], [9.0, 4.5, 2.0]])

    def layout(self) -> Layout:
        return Layout(1, ball=False, net=False)

    def _spawn(self, envs):
        n = len(envs)
        pos = np.broadcast_to(self.POINTS[0], (n, 1, 3))
        quat = random_quat(self.rng, [-TILT, -TILT, 0], [TILT, TILT, 2 * np.pi], (n, 1))
        self.worlds.reset(envs, pos, quat)
        if not hasattr(self, "target"):
            self.target = np.ones(self.num_envs, int)
            self.count = np.zeros(self.num_envs, int)
            self.reached = np.zeros(self.num_envs, int)
        self.target[envs], self.count[envs], self.reached[envs] = 1, 0, 0

    def _observe(self):
        state = self.drone_state()[:, 0]
        rpos = self.POINTS[self.target] - state[:, :3]
        return np.concatenate([state, rpos], -1)[:, None].astype(np.float32)

    def _rules(self):
        pos = self.worlds.pos[:, 0]
        dist = np.linalg.norm(self.POINTS[self.target] - pos, axis=-1)
        self.count = np.where(dist < 0.6, self.count + 1, 0)
        stop = 2.5 * self.count
        closeness = 0.5 / (1 + np.square(dist)) * 0.02 * (50 - self.count)
        reach = self.count >= 5
        self.reached += reach
        self.target = np.where(reach, 1 - self.target, self.target)
        misbehave = (pos[:, 2] < 0.4) | (pos[:, 2] > 5.0) | (dist > 7.5)
        terms = {"stop": stop, "distance": closeness, "misbehave": -10.0 * misbehave}
        facts = {"targets_reached": self.reached.astype(float)}
        return {k: v[:, None] for k, v in terms.items()}, misbehave, facts


@dataclass
class BallTaskOptions(VolleyballOptions):
    """Single-drone ball tasks."""

    min_hit_gap: int = 25
    """Steps after a counted hit during which another contact is a wrong hit (0.5 s)."""


class _BallDrill(VolleyballBatch):
    """A drone near the anchor (4.5, 0, 2) on the +x half of the 18 x 9 court with the ball
    dropped from ``BALL_OFFSET`` above it. A hit is the start of a ball-drone contact; one more
    than ``min_hit_gap`` steps after the last counted hit counts (``true_hit``), an earlier one
    is a wrong hit and ends the episode.

    Observation (32): the drone state (23), position - anchor, position - ball, ball velocity.
    """

    OPTIONS = BallTaskOptions
    OBS_DIM = 32
    BALL_OFFSET = 3.0

    def layout(self) -> Layout:
        return Layout(1, court=(18.0, 9.0))

    def _spawn(self, envs):
        n = len(envs)
        pos = ANCHOR + self.rng.uniform([-0.5, -0.5, -0.2], [0.5, 0.5, 0.2], (n, 1, 3))
        quat = random_quat(self.rng, [-TILT, -TILT, 0], [TILT, TILT, 2 * np.pi], (n, 1))
        self.worlds.reset(envs, pos, quat, pos[:, 0] + [0, 0, self.BALL_OFFSET])
        if not hasattr(self, "hits"):
            self.hits = np.zeros(self.num_envs, int)
            self.last_hit = np.zeros(self.num_envs, int)
            self.touching = np.zeros(self.num_envs, bool)
        self.hits[envs], self.last_hit[envs], self.touching[envs] = 0, -100, False

    def _observe(self):
        w = self.worlds
        state = self.drone_state()[:, 0]
        parts = [state, state[:, :3] - ANCHOR, state[:, :3] - w.ball_pos, w.ball_vel]
        return np.concatenate(parts, -1)[:, None].astype(np.float32)

    def _hits(self) -> tuple[np.ndarray, np.ndarray]:
        """(true_hit, wrong_hit) ``[B]`` of this step."""
        contact = self.worlds.ball_contact[:, 0]
        hit = contact & ~self.touching
        self.touching = contact.copy()
        true_hit = hit & (self.t - self.last_hit > self.options.min_hit_gap)
        self.hits += true_hit
        self.last_hit = np.where(true_hit, self.t, self.last_hit)
        return true_hit, hit & ~true_hit


class HitBall(_BallDrill):
    """Hit the falling ball over the net (``single_hit_volleyball.py``): the ball starts 3 m
    above the drone; success (which ends the episode) is the ball going down below 2 m after
    exactly one hit. Reward: 1 per hit; 2 x (4.5 - ball x) on success (more the further the
    ball flew towards and over the net); -0.05 while more than 1 m from the anchor; -10 for a
    wrong hit, the drone below 0.4 m or at the net plane, the ball below 0.15 m or above 16 m
    (each ends the episode). Facts: ``success``, ``hits``, ``ball_x`` (at the end)."""

    FACTS = ("success", "hits", "ball_x")

    MAX_STEPS = 500
    BALL_OFFSET = 3.0

    def _rules(self):
        w = self.worlds
        true_hit, wrong_hit = self._hits()
        pos, ball, vel = w.pos[:, 0], w.ball_pos, w.ball_vel
        away = np.linalg.norm(pos - ANCHOR, axis=-1) > 1.0
        done = (self.hits == 1) & (ball[:, 2] <= 2.0) & (vel[:, 2] < 0)
        drone_bad = (pos[:, 2] < 0.4) | (np.abs(pos[:, 0]) < 0.01)
        ball_bad = (ball[:, 2] < 0.15) | (ball[:, 2] > 16.0)
        terms = {
            "hit": 1.0 * true_hit,
            "distance": 2.0 * done * (ANCHOR[0] - ball[:, 0]),
            "anchor": -0.05 * away,
            "wrong_hit": -10.0 * wrong_hit,
            "misbehave": -10.0 * (drone_bad.astype(float) + ball_bad),
        }
        terminated = drone_bad | ball_bad | wrong_hit | done
        facts = {
            "success": done.astype(float),
            "hits": self.hits.astype(float),
            "ball_x": ball[:, 0],
        }
        return {k: v[:, None] for k, v in terms.items()}, terminated, facts


class SoloBump(_BallDrill):
    """Juggle the ball (``single_juggle_volleyball.py``): the ball starts 2 m above the drone.
    Reward: 2 per hit, 8 more for a hit while the mean apex of the flights between hits is
    above 3.5 m; shaping every step 1 / (1 + xy distance to the ball) + 0.5 clip(ball z -
    max(drone z, 1), 0, 2); -10 for a wrong hit, the drone outside z in [0.4, 2.5] or at the
    net plane, the ball below 0.15 m, above 4.5 m or off the court (each ends the episode).
    Facts: ``bumps`` (counted hits), ``apex`` (mean apex between hits)."""

    FACTS = ("bumps", "apex")

    MAX_STEPS = 800
    BALL_OFFSET = 2.0
    MIN_HEIGHT = 3.5

    def _spawn(self, envs):
        super()._spawn(envs)
        if not hasattr(self, "apex"):
            self.apex = np.zeros(self.num_envs)
            self.apex_sum = np.zeros(self.num_envs)
        self.apex[envs] = self.apex_sum[envs] = 0.0

    def _rules(self):
        w = self.worlds
        true_hit, wrong_hit = self._hits()
        pos, ball = w.pos[:, 0], w.ball_pos
        self.apex = np.maximum(self.apex, ball[:, 2])
        counted = true_hit & (self.hits > 1)  # the fall before the first hit is no flight
        self.apex_sum += np.where(counted, self.apex, 0.0)
        self.apex = np.where(true_hit, 0.0, self.apex)
        mean_apex = self.apex_sum / np.maximum(self.hits - 1, 1e-5)
        xy = np.linalg.norm(ball[:, :2] - pos[:, :2], axis=-1)
        height = np.clip(ball[:, 2] - np.maximum(pos[:, 2], 1.0), 0.0, 2.0)
        drone_bad = (pos[:, 2] < 0.4) | (pos[:, 2] > 2.5) | (np.abs(pos[:, 0]) < 0.01)
        ball_bad = (
            (ball[:, 2] < 0.15)
            | (ball[:, 2] > 4.5)
            | (np.abs(ball[:, 0]) > 9.0)
            | (np.abs(ball[:, 1]) > 4.5)
        )
        terms = {
            "hit": 2.0 * true_hit,
            "height_bonus": 8.0 * (true_hit & (mean_apex > self.MIN_HEIGHT)),
            "shaping": 1.0 / (1.0 + xy) + 0.5 * height,
            "wrong_hit": -10.0 * wrong_hit,
            "misbehave": -10.0 * (drone_bad.astype(float) + ball_bad),
        }
        terminated = drone_bad | ball_bad | wrong_hit
        facts = {"bumps": self.hits.astype(float), "apex": mean_apex}
        return {k: v[:, None] for k, v in terms.items()}, terminated, facts
