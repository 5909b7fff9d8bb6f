"""VolleyBots' competitive tasks (``volley_bots/envs/competitive/``, rules in ``utils/rules.py``):
1v1 on a 6 x 3 m court, 3v3 on 12 x 6 m and 6v6 on 18 x 9 m, one point per episode.

Team ``near`` plays the x > 0 half, team ``far`` the x < 0 half; the far team sees the court
mirrored (x and y negated, its orientation turned by pi about z), so one shared policy can play
either side. The near team serves.

Hits (every task): a drone's hit is a jump of the ball's velocity (dvz > 9.8 dt or |dv_xy| >
0.5) while the ball is, this step or the last, inside its racket (a cylinder of radius 0.2 m
and height 0.2 m up the drone's z axis from its centre); the same drone's hits within 3 steps
count once. The same jump with the ball within 0.5 m of the drone but not in the racket is a
body touch, a fault.

A side loses the point on: a hit out of turn (1v1: by the drone whose turn it is not; 3v3 and
6v6: a second touch by one drone in a possession), a body touch, a drone in the other half,
the ball landing (z < 0.2) in its half, and after its last hit the ball out of bounds (1v1: at
any height; 3v3, 6v6: landing) or in the net (|x| < 0.3, below 2.43 m). Faults by both sides
are a draw. The episode also ends, undecided, when a drone falls below 0.3 m or (3v3, 6v6) two
drones of a team come closer than 0.8 m.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from envs.volleyball.core import VolleyballBatch, VolleyballOptions, random_quat
from envs.volleyball.physics import DT, quat_axes
from envs.volleyball.scene import NET_HEIGHT, Layout

RACKET_RADIUS, RACKET_HEIGHT, BODY_RADIUS = 0.2, 0.2, 0.5
HIT_GAP = 3
CRASH_Z, LAND_Z, CLOSE = 0.3, 0.2, 0.8
NET_BOX = 0.3  # 3 ball radii either side of the net plane


class Contacts:
    """VolleyBots' hit detection over B worlds of D drones (``rules.py``): a drone's hit is a
    jump of the ball's velocity (dvz > 9.8 dt or |dv_xy| > 0.5) while the ball is, this step or
    the last, inside its racket; the same drone's hits within ``HIT_GAP`` steps count once. The
    same jump with the ball within 0.5 m of the drone but not in its racket is a body touch."""

    def __init__(self, num_envs: int, drones: int):
        self.last_hit = np.zeros((num_envs, drones), int)
        self.racket_near = np.zeros((num_envs, drones), bool)
        self.body_near = np.zeros((num_envs, drones), bool)
        self.prev_ball_vel = np.zeros((num_envs, 3))

    def reset(self, envs: np.ndarray) -> None:
        self.last_hit[envs] = -100
        self.racket_near[envs] = self.body_near[envs] = False
        self.prev_ball_vel[envs] = 0.0

    def update(self, w, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(racket_hit, body_touch) ``[B, D]`` of the step just taken by worlds ``w`` at
        episode steps ``t [B]``."""
        rel = w.ball_pos[:, None] - w.pos  # [B, D, 3]
        up = quat_axes(w.quat)[..., 2, :]
        along = np.einsum("bdk,bdk->bd", rel, up)
        off_axis = np.linalg.norm(rel - along[..., None] * up, axis=-1)
        in_racket = (along >= 0) & (along <= RACKET_HEIGHT) & (off_axis <= RACKET_RADIUS)
        near = np.linalg.norm(rel, axis=-1) < BODY_RADIUS
        dv = w.ball_vel - self.prev_ball_vel
        jump = (dv[:, 2] > 9.8 * DT) | (np.linalg.norm(dv[:, :2], axis=-1) > 0.5)
        self.prev_ball_vel = w.ball_vel.copy()
        ready = t[:, None] - self.last_hit > HIT_GAP
        racket = (in_racket | self.racket_near) & jump[:, None] & ready
        body = (near | self.body_near) & jump[:, None] & ready & ~racket
        self.racket_near, self.body_near = in_racket, near
        self.last_hit = np.where(racket, t[:, None], self.last_hit)
        return racket, body


@dataclass
class MatchOptions(VolleyballOptions):
    """Options of a match."""

    random_serve: bool = False
    """Whether the serving team is drawn per episode (VolleyBots: the near team serves)."""
    start_noise: float = 0.1
    """Drones start within this many m (and rad of roll and pitch) of their anchors. 1v1 as
    VolleyBots; its 3v3 and 6v6 start on the anchors exactly (``start_noise=0``), which would
    make every episode begin alike."""

    crash_ends: bool = True
    """Whether a crash (a drone below 0.3 m) or, in 3v3 and 6v6, team mates closer than 0.8 m
    end the point undecided, as in VolleyBots' match envs; its hierarchical 3v3 env only logs
    them (``volleyball_3v3_hier.py``) and plays on until a fault or the step limit."""

    def __post_init__(self):
        super().__post_init__()
        if not 0 <= self.start_noise <= 0.5:
            raise ValueError(f"start_noise must be in [0, 0.5], got {self.start_noise!r}")


class Match(VolleyballBatch):
    """A volleyball match of two teams (a subclass sets the court and the team)."""

    FACTS = ("result", "hits")

    OPTIONS = MatchOptions
    TEAM = 1
    COURT = (6.0, 3.0)
    ANCHORS = np.array([[1.5, 0.0, 2.0]])  # the near team's; the far team's are mirrored
    SERVER = 0  # index in the team of the drone that serves
    BALL_OFFSET = 1.5

    def __init__(self, num_envs: int, seed: int | None = None, auto_reset: bool = True, **options):
        k = self.TEAM
        self.AGENTS = tuple(f"near_{i}" for i in range(k)) + tuple(f"far_{i}" for i in range(k))
        super().__init__(num_envs, seed, auto_reset, **options)
        D = self.n
        self.team = np.repeat([0, 1], k)
        self.far = self.team == 1
        self.sign = np.where(self.far[:, None], [-1.0, -1.0, 1.0], 1.0)  # [D, 3] mirror
        self.anchor = self.ANCHORS[np.tile(np.arange(k), 2)] * self.sign
        B = num_envs
        self.contacts = Contacts(B, D)
        self.touches = np.zeros((B, D), bool)  # racket hits and body touches of the last step
        self.serving = np.zeros(B, int)
        self.hits = np.zeros(B, int)

    def layout(self) -> Layout:
        return Layout(2 * self.TEAM, court=self.COURT)

    # -- episode start -----------------------------------------------------------------------

    def _spawn(self, envs):
        n, D = len(envs), self.n
        tilt = self.options.start_noise
        pos = self.anchor + self.rng.uniform(-tilt, tilt, (n, D, 3))
        quat = random_quat(self.rng, [-tilt, -tilt, 0], [tilt, tilt, 0], (n, D))
        quat[:, self.far] = np.stack(  # yaw pi: the far team faces the net too
            [
                -quat[:, self.far, 3],
                -quat[:, self.far, 2],
                quat[:, self.far, 1],
                quat[:, self.far, 0],
            ],
            -1,
        )
        serving = self.rng.integers(0, 2, n) if self.options.random_serve else np.zeros(n, int)
        server = serving * self.TEAM + self.SERVER
        ball = pos[np.arange(n), server] + [0.0, 0.0, self.BALL_OFFSET]
        self.worlds.reset(envs, pos, quat, ball)
        self.serving[envs] = serving
        self.contacts.reset(envs)
        self.hits[envs] = 0
        self._start_possession(envs, serving, server)

    def _start_possession(self, envs, serving, server):
        """Who may hit first (a subclass keeps its own turn state)."""

    # -- rules -------------------------------------------------------------------------------

    def _faults(self, wrong_turn, body, blame) -> np.ndarray:
        """Faults ``[B, 2]`` of each side: a hit out of turn, a body touch, a drone in the
        other half, the ball landing in its half; out of bounds and net faults go to the
        sides where ``blame [B, 2]`` is true (those held responsible for the ball)."""
        w = self.worlds
        length, width = self.COURT
        ball = w.ball_pos
        fault = np.zeros((self.num_envs, 2), bool)
        crossed = self.anchor[:, 0] * w.pos[..., 0] < 0  # [B, D]
        for k in range(2):
            mine = self.team == k
            fault[:, k] |= (
                wrong_turn[:, mine].any(1) | body[:, mine].any(1) | crossed[:, mine].any(1)
            )
        inside = (np.abs(ball[:, 0]) <= length / 2) & (np.abs(ball[:, 1]) <= width / 2)
        landed = ball[:, 2] < LAND_Z
        fault[:, 0] |= landed & inside & (ball[:, 0] > 0)
        fault[:, 1] |= landed & inside & (ball[:, 0] < 0)
        out = ~inside & self._out_counts(landed)
        net = (
            (np.abs(ball[:, 0]) < NET_BOX)
            & (np.abs(ball[:, 1]) < width / 2)
            & (ball[:, 2] < NET_HEIGHT)
        )
        fault |= (out | net)[:, None] & blame
        return fault

    def _out_counts(self, landed: np.ndarray) -> np.ndarray:
        return landed

    def _finish(self, fault, terms, facts):
        """Turns faults into the win terms, the end of the episode and its facts."""
        w = self.worlds
        result = fault[:, 1].astype(int) - fault[:, 0]  # +1: near wins
        decided = fault.any(1)
        side = np.where(self.far, -1, 1)  # [D]
        terms["win"] = 100.0 * result[:, None] * side
        crashed = w.pos[..., 2] < CRASH_Z
        terms["crash"] = -100.0 * crashed
        terminated = decided | (crashed.any(1) & self.options.crash_ends)
        facts.update(
            battle_won=(result > 0).astype(float),
            result=result.astype(float),
            hits=self.hits.astype(float),
        )
        return terms, terminated, facts


class Match1v1(Match):
    """1v1 (``volleyball_1v1.py``): 6 x 3 m, one drone a side at (+-1.5, 0, 2), the ball
    1.5 m above the near drone. The turn passes on every hit by the drone whose turn it is.

    Observation (37): the drone state (23), position - anchor, the other drone - self, self -
    ball, ball velocity, whose turn (1, 0: mine). Rewards: win +-100, hit +5 (the drone whose
    turn it was), 0.5 / (1 + xy distance to the ball) for the drone whose turn it is, -0.2 x how
    far it is inside 0.5 m of the net, the centre line, a sideline or the baseline, or beyond
    1 m from 2 m height, -100 for a crash.
    """

    MAX_STEPS = 1000
    OBS_DIM = 37

    def _start_possession(self, envs, serving, server):
        if not hasattr(self, "turn"):
            self.turn = np.zeros(self.num_envs, int)
        self.turn[envs] = serving

    def _observe(self):
        w = self.worlds
        state = self.drone_state(self.far)
        s = self.sign
        other = w.pos[:, ::-1] - w.pos
        mine = np.eye(2)[(self.turn[:, None] != np.arange(2)).astype(int)]  # [B, D, 2]
        parts = [
            state,
            (w.pos - self.anchor) * s,
            other * s,
            (w.pos - w.ball_pos[:, None]) * s,
            w.ball_vel[:, None] * s,
            mine,
        ]
        return np.concatenate(parts, -1).astype(np.float32)

    def _rules(self):
        w = self.worlds
        racket, body = self.contacts.update(self.worlds, self.t)
        self.touches = racket | body
        dist = np.linalg.norm(w.pos - w.ball_pos[:, None], axis=-1)
        closest = dist.argmin(1)
        # As VolleyBots: a racket hit is the turn's when the drone on turn is the closest to
        # the ball; otherwise the hitting drone hit out of turn.
        in_turn = (self.turn == closest)[:, None]
        true_hit = (racket & in_turn).any(1)
        wrong_turn = racket & ~in_turn
        self.hits += true_hit
        on_turn = np.arange(2) == self.turn[:, None]
        xy = np.linalg.norm(w.pos[..., :2] - w.ball_pos[:, None, :2], axis=-1)
        terms = {
            "hit": 5.0 * (true_hit[:, None] & on_turn),
            "ball_distance": 0.5 / (1 + xy) * on_turn,
            "position": -0.2 * self._position_penalty(),
        }
        self.turn = np.where(true_hit, 1 - self.turn, self.turn)
        # Out or in the net: the wrong hitters' fault, else the last hitter's (not on turn).
        wrong = wrong_turn | body
        blame = np.where(wrong.any(1, keepdims=True), wrong, np.arange(2) != self.turn[:, None])
        fault = self._faults(wrong_turn, body, blame)
        return self._finish(fault, terms, {})

    def _out_counts(self, landed):
        return np.ones_like(landed)  # 1v1: out at any height

    def _position_penalty(self) -> np.ndarray:
        length, width = self.COURT
        w = self.worlds
        a, b, z = np.abs(w.pos[..., 0]), np.abs(w.pos[..., 1]), w.pos[..., 2]

        def near(gap):
            return np.where(gap < 0.5, 0.5 - gap, 0.0)

        height = np.abs(z - 2.0)
        return (
            near(a)
            + near(length / 2 - a)
            + near(b)
            + near(width / 2 - b)
            + np.where(height > 1, height - 1, 0.0)
        )


class Match3v3(Match):
    """3v3 (``volleyball_3v3.py``): 12 x 6 m; near drones at (3, -1.5, 2), (3, 1.5, 2) and the
    server (6, 0, 2), the far team mirrored; the ball 3 m above the server, which alone may hit
    first. Each drone touches the ball at most once per possession; the flags reset when the
    ball changes side.

    Observation (57): the drone state (23), position - anchor, ball - self, ball velocity, ball
    on my side (1, 0), id in the team (3), may still hit (1, 0), the positions of all drones,
    own team first (18). Rewards: win +-100 (team), hit +10 (the team of the hitter), 0.5 /
    (1 + distance to the ball) for each drone that may still hit, 0.05 / (1 + distance to the
    anchor), -100 for a crash, -100 for each drone closer than 0.8 m to a team mate.
    """

    TEAM = 3
    COURT = (12.0, 6.0)
    ANCHORS = np.array([[3.0, -1.5, 2.0], [3.0, 1.5, 2.0], [6.0, 0.0, 2.0]])
    SERVER = 2
    BALL_OFFSET = 3.0
    MAX_STEPS = 500

    @property
    def OBS_DIM(self) -> int:  # noqa: N802 - a class constant elsewhere
        k = self.TEAM
        return 23 + 3 + 3 + 3 + 2 + k + 2 + 6 * k

    def _start_possession(self, envs, serving, server):
        if not hasattr(self, "already_hit"):
            self.already_hit = np.zeros((self.num_envs, self.n), bool)
            self.side = np.zeros(self.num_envs, int)
            self.last_team = np.zeros(self.num_envs, int)
        self.already_hit[envs] = True
        self.already_hit[envs, server] = False
        self.side[envs] = serving
        self.last_team[envs] = serving

    def _observe(self):
        w = self.worlds
        k, D = self.TEAM, self.n
        state = self.drone_state(self.far)
        s = self.sign
        on_my_side = self.team[None] == self.side[:, None]  # the side the rules last saw
        ident = np.tile(np.eye(k), (2, 1))
        order = np.concatenate([np.arange(D), np.roll(np.arange(D), -k)]).reshape(2, D)
        positions = w.pos[:, order[self.team]] * s[:, None]  # [B, D, D, 3], own team first
        parts = [
            state,
            (w.pos - self.anchor) * s,
            (w.ball_pos[:, None] - w.pos) * s,
            w.ball_vel[:, None] * s,
            np.stack([on_my_side, ~on_my_side], -1),
            np.broadcast_to(ident, (self.num_envs, D, k)),
            np.stack([~self.already_hit, self.already_hit], -1),
            positions.reshape(self.num_envs, D, 3 * D),
        ]
        return np.concatenate(parts, -1).astype(np.float32)

    def _rules(self):
        w = self.worlds
        racket, body = self.contacts.update(self.worlds, self.t)
        self.touches = racket | body
        true_hit = racket & ~self.already_hit
        wrong_turn = racket & self.already_hit
        self.already_hit |= racket
        hit_team = np.stack([true_hit[:, self.team == t].any(1) for t in range(2)], -1)  # [B, 2]
        self.hits += hit_team.any(1)
        self.last_team = np.where(hit_team[:, 1], 1, np.where(hit_team[:, 0], 0, self.last_team))
        dist = np.linalg.norm(w.pos - w.ball_pos[:, None], axis=-1)
        # The shaping reads the flags before a side change clears them (as VolleyBots).
        ball_distance = np.where(self.already_hit, 0.0, 0.5 / (1 + dist))
        side = np.where(w.ball_pos[:, 0] > 0, 0, 1)
        changed = side != self.side
        self.side = side
        receiving = self.team[None] == side[:, None]
        self.already_hit = np.where(changed[:, None], ~receiving, self.already_hit)
        too_close = self._too_close()
        terms = {
            "hit": 10.0 * hit_team[:, self.team],
            "ball_distance": ball_distance,
            "anchor_distance": 0.05 / (1 + np.linalg.norm(w.pos - self.anchor, axis=-1)),
            "too_close": -100.0 * too_close,
        }
        blame = np.arange(2) == self.last_team[:, None]
        fault = self._faults(wrong_turn, body, blame)
        terms, terminated, facts = self._finish(fault, terms, {})
        return terms, terminated | (too_close.any(1) & self.options.crash_ends), facts

    def _too_close(self) -> np.ndarray:
        """``[B, D]``: the drone is closer than 0.8 m to a team mate."""
        pos = self.worlds.pos
        gap = np.linalg.norm(pos[:, :, None] - pos[:, None], axis=-1)
        mates = (self.team[:, None] == self.team[None]) & ~np.eye(self.n, dtype=bool)
        return ((gap < CLOSE) & mates).any(-1)


class Match6v6(Match3v3):
    """6v6 (``volleyball_6v6.py``): 18 x 9 m, six drones a side at (3, -3), (3, 0), (3, 3),
    (6, -3), (9, 0) (the server, on the baseline), (6, 3), all at 2 m; rules and rewards as 3v3.
    Observation: 78 (a 6-way id and the positions of 12 drones)."""

    TEAM = 6
    COURT = (18.0, 9.0)
    ANCHORS = np.array(
        [
            [3.0, -3.0, 2.0],
            [3.0, 0.0, 2.0],
            [3.0, 3.0, 2.0],
            [6.0, -3.0, 2.0],
            [9.0, 0.0, 2.0],
            [6.0, 3.0, 2.0],
        ]
    )
    SERVER = 4
