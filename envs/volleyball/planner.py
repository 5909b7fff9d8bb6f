"""Demonstrations for the serve drill from a sampling planner.

PPO alone does not find the serve: the ball falls 3 m onto a drone 6 m from the net, and only
a racket tilted about 30 degrees toward the net and climbing at 2-4 m/s into the ball sends it
over (a flat or still racket drops it in the server's own half, a local optimum every reward
we tried kept). The planner searches for that motion directly in the simulator: the
cross-entropy method (Rubinstein 1999) over open-loop plans, a collective thrust and three
body rates (``ctbr``) held for ``knot`` steps each, scored by where the hit ball's free flight
comes down and how high it crosses the net. After the hit a position controller levels the
drone and holds it. Both act through the drill's own rate controller, so a demonstration is
the drill's own observations and the rotor commands that flew them.

It runs in two stages: one search from scratch at the drill's nominal start (the server's
anchor, level, a target mid-court), then, per batch of starts drawn as the drill draws them,
a short search from that plan for each start. Every search runs all its candidates as worlds
of one batched drill.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from envs.volleyball.core import MAX_RATE
from envs.volleyball.physics import GRAVITY, KF, MASS, quat_axes
from envs.volleyball.scene import NET_HEIGHT
from envs.volleyball.skills import SERVER, Serve

CLEARANCE = NET_HEIGHT + 0.25  # m: the height a planned ball crosses the net at, at least


@dataclass
class PlannerSettings:
    """The search.

    Attributes:
        knot: control steps (0.02 s) each planned action is held.
        horizon: steps the plan covers (the hit comes within it).
        population: candidate plans per start.
        elite: share of candidates the next distribution is fitted to.
        iterations: search iterations per start (from the nominal plan).
        nominal_population / nominal_iterations: the search from scratch.
        tether: per start, the score lost per unit of squared distance from the nominal plan.
    """

    knot: int = 5
    horizon: int = 70
    population: int = 64
    elite: float = 0.125
    iterations: int = 20
    nominal_population: int = 512
    nominal_iterations: int = 50
    tether: float = 1.0

    def __post_init__(self):
        for name in ("knot", "horizon", "population", "iterations"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if not 0 < self.elite <= 0.5 or self.population * self.elite < 2:
            raise ValueError(
                f"elite must be in (0, 0.5] and keep 2 or more of population={self.population}, "
                f"got {self.elite!r}"
            )

    @property
    def knots(self) -> int:
        return -(-self.horizon // self.knot)


def landing_score(ball: np.ndarray, vel: np.ndarray, target: np.ndarray) -> np.ndarray:
    """How well a ball just hit flies: minus the distance (m) from the target of where its free
    flight lands, minus 3 per metre it crosses the net below ``CLEARANCE`` (a ball going away
    from the net counts as crossing it 5 s later, far below)."""
    toward = vel[:, 0] < -0.1
    t_net = np.where(toward, ball[:, 0] / np.maximum(-vel[:, 0], 0.1), 5.0)
    h_net = ball[:, 2] + vel[:, 2] * t_net - 0.5 * GRAVITY * t_net**2
    t_land = (
        vel[:, 2] + np.sqrt(vel[:, 2] ** 2 + 2 * GRAVITY * np.maximum(ball[:, 2], 0))
    ) / GRAVITY
    land = ball[:, :2] + vel[:, :2] * t_land[:, None]
    return -np.linalg.norm(land - target[:, :2], axis=-1) - 3 * np.maximum(0, CLEARANCE - h_net)


def hold_position(drill: Serve, hold: np.ndarray) -> np.ndarray:
    """CTBR actions ``[B, 4]`` that level the drone and bring it to rest at ``hold [B, 3]``: a
    PD law on position gives the acceleration wanted, its direction the attitude, and the
    attitude error the body rates."""
    w = drill.worlds
    pos, vel = w.pos[:, 0], w.vel[:, 0]
    axes = quat_axes(w.quat)[:, 0]  # rows: body x, y, z in the world
    acc = 1.0 * (hold - pos) - 2.0 * vel
    acc[:, 2] = GRAVITY + 3.0 * (hold[:, 2] - pos[:, 2]) - 2.5 * vel[:, 2]
    acc[:, :2] = np.clip(acc[:, :2], -4.0, 4.0)
    want = acc / np.linalg.norm(acc, axis=-1, keepdims=True)
    up = axes[:, 2]
    thrust = MASS * np.linalg.norm(acc, axis=-1) / np.maximum(np.sum(up * want, -1), 0.3)
    rate = 8.0 * np.einsum("bij,bj->bi", axes, np.cross(up, want))
    rate[:, 2] = 0.0
    act = np.concatenate([thrust[:, None] / (2 * KF) - 1, rate / MAX_RATE], -1)
    return np.clip(act, -1.0, 1.0)


class ServePlanner:
    """Plans serves for the serve drill and records them.

    Args:
        settings: the search.
        seed: seeds the starts (batch k draws its starts from ``seed + 1 + k``) and the
            search (batch k from ``(seed, k)``, so batches can be planned in any order).
    """

    def __init__(self, settings: PlannerSettings | None = None, seed: int = 0):
        self.s = settings or PlannerSettings()
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.nominal: np.ndarray | None = None  # [knots, 4]

    # -- playing plans -----------------------------------------------------------------------

    def _play(self, drill: Serve, plans: np.ndarray, steps: int, record: bool = False) -> dict:
        """Plays ``plans [B, knots, 4]`` in ``drill`` (worlds already placed) for ``steps``
        steps or until every episode ends: the plan up to the hit, :func:`hold_position` after.
        Returns ``score [B]`` (:func:`landing_score` 3 steps after the hit; -30 without a hit,
        20 less for a drone that falls or crosses before it), ``success``, ``ended`` and, when
        ``record``, ``obs [T, B, 33]``, ``act [T, B, 4]`` (rotor commands), ``reward [T, B]``
        and ``live [T, B]`` (the step belongs to the episode)."""
        B, k = drill.num_envs, self.s.knot
        score = np.full(B, -30.0)
        hit_at = np.full(B, -1)
        fell = np.zeros(B, bool)
        ended = np.zeros(B, bool)
        success = np.zeros(B)
        hold = drill.worlds.pos[:, 0].copy()
        hold[:, 2] = SERVER[2]
        log: dict[str, list] = {"obs": [], "act": [], "reward": [], "live": []}
        obs = drill.observe().obs["drone"][:, 0]
        for t in range(steps):
            plan = plans[:, min(t // k, plans.shape[1] - 1)]
            ctbr = np.where((hit_at >= 0)[:, None], hold_position(drill, hold), plan)
            rotor = drill._rate_control(ctbr[:, None])[:, 0]
            step = drill.step({"drone": rotor[:, None]})
            if record:
                log["obs"].append(obs)
                log["act"].append(rotor)
                log["reward"].append(step.rewards[:, 0])
                log["live"].append(~ended)
            obs = step.obs["drone"][:, 0]
            w = drill.worlds
            fell |= ((w.pos[:, 0, 2] < 0.4) | (w.pos[:, 0, 0] < 0)) & (hit_at < 0) & ~ended
            hit_at[drill.touched & (hit_at < 0)] = t
            scored = (hit_at >= 0) & (t - hit_at == 3) & ~ended
            score[scored] = landing_score(
                w.ball_pos[scored], w.ball_vel[scored], drill.target[scored]
            )
            now = step.terminated | step.truncated
            if step.info is not None:
                success = np.where(now & ~ended, step.info["success"], success)
            ended |= now
            if ended.all():
                break
        score[fell] -= 20.0
        out = {"score": score, "success": success, "ended": ended}
        if record:
            out.update({k: np.array(v) for k, v in log.items()})
        return out

    def _drill(self, starts: int, copies: int, seed: int) -> tuple[Serve, Callable[[], None]]:
        """A drill of ``starts x copies`` worlds (ctbr actions go through its rate controller by
        hand, so it steps rotor commands) and a function that puts every world back at its
        start: copy ``j`` of start ``i`` is world ``i * copies + j``."""
        drill = Serve(starts * copies, seed=seed, auto_reset=False)
        drill.reset(seed=seed)
        w = drill.worlds
        src = np.repeat(np.arange(starts) * copies, copies)
        saved = w.state[src].copy(), w.throttle[src].copy(), drill.target[src].copy()

        def restore():
            drill.reset(seed=seed)  # the drill's own bookkeeping
            w.state[:], w.throttle[:], drill.target[:] = (a.copy() for a in saved)
            w.read()

        return drill, restore

    def _search(
        self, drill, restore, mean: np.ndarray, sigma: float, iterations: int, tether: float = 0.0
    ):
        """CEM over plans for each start: ``mean [S, knots, 4]`` -> the fitted means. With
        ``tether`` > 0 a plan's score loses ``tether`` times its squared distance from the
        starting ``mean``: neighbouring starts get neighbouring plans, which a policy cloning
        them can fit (independent searches land on different ways to serve, whose average
        serves no ball)."""
        S, P = mean.shape[0], drill.num_envs // mean.shape[0]
        anchor = mean.copy()
        keep = max(2, int(P * self.s.elite))
        std = np.full_like(mean, sigma)
        for _ in range(iterations):
            noise = self.rng.standard_normal((S, P) + mean.shape[1:])
            plans = np.clip(mean[:, None] + std[:, None] * noise, -1.0, 1.0)
            plans[:, 0] = mean  # the current mean competes too
            restore()
            score = self._play(drill, plans.reshape(S * P, *mean.shape[1:]), self.s.horizon + 5)
            value = score["score"].reshape(S, P)
            value = value - tether * np.square(plans - anchor[:, None]).sum((2, 3))
            best = np.argsort(value, 1)[:, -keep:]
            elite = np.take_along_axis(plans, best[:, :, None, None], 1)
            mean = 0.7 * elite.mean(1) + 0.3 * mean
            std = 0.7 * elite.std(1) + 0.3 * std + 0.01
        return mean

    # -- the two stages ----------------------------------------------------------------------

    def find_nominal(self) -> np.ndarray:
        """The plan for the nominal start (searched from hover-like zeros)."""
        drill, restore = self._drill(1, self.s.nominal_population, self.seed)
        w = drill.worlds
        w.reset(
            np.arange(drill.num_envs),
            np.tile(SERVER, (drill.num_envs, 1, 1)),
            None,
            SERVER + [0.0, 0.0, 3.0],
            None,
        )
        drill.target[:] = [-4.5, 0.0, 0.0]
        src = w.state.copy(), w.throttle.copy(), drill.target.copy()

        def nominal_restore():
            restore()
            w.state[:], w.throttle[:], drill.target[:] = (a.copy() for a in src)
            w.read()

        start = np.zeros((1, self.s.knots, 4))
        found = self._search(drill, nominal_restore, start, 0.6, self.s.nominal_iterations)
        self.nominal = found[0]
        return self.nominal

    def demonstrate(self, starts: int, batch: int) -> dict[str, np.ndarray]:
        """Plans one serve for each of ``starts`` starts of the drill (those of batch number
        ``batch``), plays each plan to the end of its episode and returns the recording of
        the successful ones: ``obs [N, 33]``, ``act [N, 4]``, ``reward [N]``, ``episode [N]``
        (0 .. episodes - 1) and ``tried``/``succeeded`` counts."""
        if self.nominal is None:
            self.find_nominal()
        seed = self.seed + 1 + batch
        self.rng = np.random.default_rng((self.seed, batch))  # a batch is the same on any worker
        drill, restore = self._drill(starts, self.s.population, seed)
        mean = np.repeat(self.nominal[None], starts, 0)
        mean = self._search(drill, restore, mean, 0.15, self.s.iterations, self.s.tether)
        restore()  # every copy of a start flies its fitted plan; the first one is kept
        played = self._play(drill, np.repeat(mean, self.s.population, 0), drill.max_steps, True)
        first = np.arange(starts) * self.s.population
        good = first[played["success"][first] > 0]
        live = played["live"][:, good]  # [T, E]
        e_idx, t_idx = np.nonzero(live.T)  # episode by episode, each in time order
        return {
            "obs": played["obs"][t_idx, good[e_idx]].astype(np.float32),
            "act": played["act"][t_idx, good[e_idx]].astype(np.float32),
            "reward": played["reward"][t_idx, good[e_idx]].astype(np.float32),
            "episode": e_idx.astype(np.int64),
            "tried": np.int64(starts),
            "succeeded": np.int64(len(good)),
        }
