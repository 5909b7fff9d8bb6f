"""A hierarchical 3v3 volleyball team: the rule machine (:mod:`policies.hierarchy.rules`)
picks a skill and a target per drone every step, and frozen skill policies, each trained as
a drill (``volleyball/{hover,serve,pass,set,attack}-v0``), turn them into rotor commands.

Go-to and hover are the hover drill's policy: its observation is the target relative to the
drone, the drone state without its position and the heading error, so flying to any point is
hovering at it. The hitting skills read :func:`envs.volleyball.skills.skill_observation`.
A team on the far side sees everything mirrored, as the flat policies do.

:func:`play_hierarchy` plays it against a flat self-play policy with VolleyBots' protocol
(``scripts/train_hier.py``): many worlds, the serving team drawn per world, sampled actions,
and the first point of each world counted; draws and undecided points are not wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from policies.hierarchy.rules import (
    ATTACK,
    GOTO,
    PASS,
    SERVE,
    SET,
    SKILLS,
    RuleMachine,
)

GOTO_REACH = 3.0  # m: farther go-to targets are seen at this distance (hover trains within 4)
HITTING = {"serve": SERVE, "pass": PASS, "set": SET, "attack": ATTACK}


@dataclass
class TeamConfig:
    """The runs whose newest weights are the skills (``arena train`` run directories).

    Attributes:
        hover: the hover drill's run (go-to and hover).
        serve, pass_, set, attack: the hitting drills' runs (``pass`` in YAML).
        opponent: a ``--algo selfplay`` run of ``volleyball/3v3-v0`` (its module ``near``).
        rally: play returned balls (VolleyBots' rule machine does not).
    """

    hover: str
    serve: str
    pass_: str
    set: str
    attack: str
    opponent: str
    rally: bool = True

    @classmethod
    def from_dict(cls, d: dict) -> TeamConfig:
        from training.config import ConfigError

        need = ("hover", "serve", "pass", "set", "attack", "opponent")
        missing = [k for k in need if k not in d]
        unknown = sorted(set(d) - set(need) - {"rally"})
        if missing or unknown:
            raise ConfigError(
                f"hierarchy config: missing {missing} and unknown {unknown}; it takes the run "
                f"directories {list(need)} and rally (true/false)"
            )
        return cls(*(str(d[k]) for k in need), rally=bool(d.get("rally", True)))

    def runs(self) -> dict[str, str]:
        return {
            "hover": self.hover,
            "serve": self.serve,
            "pass": self.pass_,
            "set": self.set,
            "attack": self.attack,
        }


def only_module(run: str | Path, module: str | None = None):
    """The :class:`policies.inference.ModulePolicy` of ``run``'s newest checkpoint: its one
    module, or ``module``."""
    from training.checkpoints import RunError
    from training.evaluation import load_policy

    policy = load_policy(run)
    if module is None:
        if len(policy.modules) != 1:
            raise RunError(f"{run}: {len(policy.modules)} modules; a skill run has one")
        module = next(iter(policy.modules))
    if module not in policy.modules:
        raise RunError(f"{run}: no module {module!r} (it has {sorted(policy.modules)})")
    return policy.modules[module]


class HierarchicalTeam:
    """One team (``side`` 0 near, 1 far) of a ``Match3v3`` core, driven by the rule machine.

    Args:
        core: the 3v3 core (``envs.volleyball.match.Match3v3``).
        side: 0 or 1.
        skills: ``goto``/``serve``/``pass``/``set``/``attack`` -> ModulePolicy.
        rally: see :class:`RuleMachine`.
    """

    def __init__(self, core, side: int, skills: dict, rally: bool = True, seed: int = 0):
        self.core, self.side = core, side
        self.members = np.flatnonzero(core.team == side)  # drone indices, by role
        self.sign = core.sign[self.members]  # [3, 3]: world <-> own frame
        self.skills = skills
        self.machine = RuleMachine(core.num_envs, rally, seed)
        self.skill = np.zeros((core.num_envs, 3), int)

    def begin(self, envs: np.ndarray) -> None:
        """New points in worlds ``envs`` (after a reset or an auto-reset)."""
        self.machine.reset(envs, self.core.serving[envs] == self.side)

    def observe_touches(self) -> None:
        """Feeds the last step's touches (racket or body) to the rule machine."""
        touches = self.core.touches
        mine = touches[:, self.members]
        theirs = touches[:, self.core.team != self.side].any(1)
        self.machine.update(mine, theirs)

    def act(self, explore: bool = True) -> np.ndarray:
        """Rotor commands ``[B, 3, 4]`` for the team's drones."""
        from envs.volleyball.skills import skill_observation

        core, w, m = self.core, self.core.worlds, self.members
        skill, target = self.machine.decide()
        self.skill = skill
        target = target * self.sign  # own frame -> world
        state = core.drone_state(core.far)[:, m]  # mirrored for the far side
        pos = w.pos[:, m]
        actions = np.zeros((core.num_envs, 3, 4), np.float32)
        going = skill == GOTO
        if going.any():
            rel = (target - pos) * self.sign
            norm = np.linalg.norm(rel, axis=-1, keepdims=True)
            rel = rel * np.minimum(1.0, GOTO_REACH / np.maximum(norm, 1e-9))
            heading = np.array([1.0, 0.0, 0.0]) - state[..., 13:16]
            obs = np.concatenate([rel, state[..., 3:], heading], -1)[going]
            actions[going] = self._run("goto", obs, explore)
        touched = np.zeros(pos.shape[:2], bool)  # a skill ends with its hit
        hit_obs = skill_observation(state, pos, w.ball_pos, w.ball_vel, target, touched, self.sign)
        for name, k in HITTING.items():
            rows = skill == k
            if rows.any():
                actions[rows] = self._run(name, hit_obs[rows], explore)
        return actions

    def _run(self, name: str, obs: np.ndarray, explore: bool) -> np.ndarray:
        policy = self.skills[name]
        batch = policy.spec.pack(obs.astype(np.float32), None, None, np.zeros(len(obs), int))
        act, _ = policy.act_rows(batch, explore)
        return act


def load_skills(cfg: TeamConfig) -> dict:
    """The skill policies of ``cfg`` (go-to is the hover run's)."""
    runs = cfg.runs()
    skills = {name: only_module(run) for name, run in runs.items()}
    skills["goto"] = skills.pop("hover")
    return skills


def play_hierarchy(
    cfg: TeamConfig,
    games: int = 1000,
    *,
    seed: int = 0,
    explore: bool = True,
    render: str | None = None,
    opponent: str = "flat",
) -> dict:
    """``games`` points of the hierarchical team (near) against ``opponent``: ``flat`` (the
    self-play run's module ``near``, on the far side) or ``hierarchy`` (a second hierarchical
    team). One point per world, the serving team drawn per world. With ``render``, world 0 is
    drawn to that GIF or MP4."""
    import torch

    import envs

    torch.manual_seed(seed)
    skills = load_skills(cfg)
    core = envs.make_vector("volleyball/3v3-v0", games, seed=seed, random_serve=True)
    step = core.reset()
    near = HierarchicalTeam(core, 0, skills, cfg.rally, seed)
    near.begin(np.arange(games))
    if opponent == "flat":
        flat = only_module(cfg.opponent, "near")
        far = None
    elif opponent == "hierarchy":
        far = HierarchicalTeam(core, 1, skills, cfg.rally, seed + 1)
        far.begin(np.arange(games))
    else:
        raise ValueError(f"opponent must be 'flat' or 'hierarchy', got {opponent!r}")
    result = np.full(games, np.nan)
    steps = np.zeros(games, int)
    used = np.zeros((len(SKILLS),), int)
    frames = []
    for _ in range(core.max_steps):
        if render and np.isnan(result[0]):  # world 0's point
            from envs.volleyball.render import frame

            frames.append(frame(core, 0))
        actions = {"near": near.act(explore)}
        if far is None:
            obs = step.obs["far"]
            B, k = obs.shape[:2]
            rows = flat.spec.pack(obs.reshape(B * k, -1), None, None, list(range(k)) * B)
            act, _ = flat.act_rows(rows, explore)
            actions["far"] = act.reshape(B, k, -1)
        else:
            actions["far"] = far.act(explore)
        live = np.isnan(result)
        used += np.bincount(near.skill[live].ravel(), minlength=len(SKILLS))
        step = core.step(actions)
        near.observe_touches()
        if far is not None:
            far.observe_touches()
        ended = (step.terminated | step.truncated) & live
        steps[live] += 1
        if ended.any():
            result[ended] = step.info["result"][ended]
        if not np.isnan(result).any():
            break
    result = np.nan_to_num(result, nan=0.0)
    wins, losses = int((result > 0).sum()), int((result < 0).sum())
    draws = games - wins - losses
    low, high = wilson(wins, games)
    report = {
        "games": games,
        "opponent": opponent if far is not None else str(cfg.opponent),
        "rally": cfg.rally,
        "explore": explore,
        "wins": wins,
        "losses": losses,
        "draws_or_undecided": draws,
        "win_rate": wins / games,
        "win_rate_ci95": [round(low, 4), round(high, 4)],
        "mean_point_steps": float(steps.mean()),
        "skill_share": dict(
            zip(SKILLS, np.round(used / max(used.sum(), 1), 4).tolist(), strict=True)
        ),
    }
    if render and frames:
        from training.evaluation import write_animation

        report["animation"] = write_animation(frames, render, 50)
    return report


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, float(centre - half)), min(1.0, float(centre + half))
