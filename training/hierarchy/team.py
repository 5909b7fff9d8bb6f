"""A hierarchical 3v3 volleyball team: the rule machine (:mod:`training.hierarchy.rules`)
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

from training.hierarchy import rules
from training.hierarchy.rules import (
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

    KEYS = ("hover", "serve", "pass", "set", "attack", "opponent")

    @classmethod
    def from_dict(cls, d: dict, root: str | Path = ".") -> TeamConfig:
        """From YAML keys; relative run paths are taken from ``root``."""
        from training.config import ConfigError

        missing = [k for k in cls.KEYS if k not in d]
        unknown = sorted(set(d) - set(cls.KEYS) - {"rally", "root"})
        if missing or unknown:
            raise ConfigError(
                f"hierarchy config: missing {missing} and unknown {unknown}; it takes the run "
                f"directories {list(cls.KEYS)}, root (where relative ones are) and rally"
            )
        base = Path(root) / str(d.get("root", "."))
        runs = [str(base / str(d[k])) for k in cls.KEYS]
        return cls(*runs, rally=bool(d.get("rally", True)))

    @classmethod
    def from_file(cls, path: str | Path) -> TeamConfig:
        """A YAML file; with ``root`` its relative paths are from the file's folder, else
        from the working directory."""
        import yaml

        from training.config import ConfigError

        path = Path(path)
        try:
            raw = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as e:
            raise ConfigError(f"{path}: cannot read it ({e})") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: expected a mapping of run directories")
        return cls.from_dict(raw, path.parent if "root" in raw else ".")

    def runs(self) -> dict[str, str]:
        return {
            "hover": self.hover,
            "serve": self.serve,
            "pass": self.pass_,
            "set": self.set,
            "attack": self.attack,
        }


BUNDLE = Path(__file__).resolve().parents[2] / "envs" / "volleyball" / "assets" / "team"
"""The trained team that ships with Arena (:func:`export_team` of the runs in
docs/volleyball.md): ``arena hierarchy`` plays it when given no config."""


def export_team(cfg: TeamConfig, out: str | Path) -> Path:
    """Copies the newest weights of ``cfg``'s runs (the modules the team uses, nothing
    pickled) with their run configs into ``out``, a folder of small run directories and a
    ``team.yaml`` naming them; returns that file."""
    import json
    import shutil
    import tempfile

    import yaml

    from policies.inference import WEIGHTS_DIR
    from training.checkpoints import checkpoint_meta, file_digests, latest_checkpoint

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}-"))
    load_skills(cfg)  # every skill loads before anything is written
    sources = {**cfg.runs(), "opponent": cfg.opponent}
    for name, run in sources.items():
        run = Path(run)
        ckpt = latest_checkpoint(run)
        meta = checkpoint_meta(ckpt)
        module = "near" if name == "opponent" else only_module_id(run)
        dest = tmp / name / "checkpoints" / ckpt.name
        (dest / WEIGHTS_DIR).mkdir(parents=True)
        shutil.copy2(ckpt / WEIGHTS_DIR / f"{module}.pt", dest / WEIGHTS_DIR / f"{module}.pt")
        shutil.copy2(run / "config.yaml", tmp / name / "config.yaml")
        (tmp / name / "checkpoints" / "latest").write_text(ckpt.name)
        keep = {"iteration": meta["iteration"], "env_steps": meta["env_steps"], "from": str(run)}
        (dest / "arena.json").write_text(
            json.dumps({**keep, "files": file_digests(dest)}, indent=1)
        )
    team = {"root": ".", **{k: k for k in TeamConfig.KEYS}, "rally": cfg.rally}
    (tmp / "team.yaml").write_text(yaml.safe_dump(team, sort_keys=False))
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    return out / "team.yaml"


def only_module_id(run: Path) -> str:
    from training.evaluation import module_specs

    return next(iter(module_specs(run).rl_module_specs))


def only_module(run: str | Path, module: str | None = None):
    """The :class:`policies.inference.ModulePolicy` of one module (``module``, or the run's
    only one) from ``run``'s newest checkpoint; nothing else of the run is loaded."""
    from policies.inference import WEIGHTS_DIR, ModulePolicy, WeightsError, module_from_weights
    from training.checkpoints import RunError, latest_checkpoint, verify_weights
    from training.evaluation import module_specs

    run = Path(run)
    ckpt = latest_checkpoint(run)
    verify_weights(ckpt)
    specs = module_specs(run).rl_module_specs
    if module is None:
        if len(specs) != 1:
            raise RunError(f"{run}: {len(specs)} modules; a skill run has one")
        module = next(iter(specs))
    if module not in specs:
        raise RunError(f"{run}: no module {module!r} (it has {sorted(specs)})")
    try:
        return ModulePolicy(module_from_weights(specs[module], ckpt / WEIGHTS_DIR / f"{module}.pt"))
    except WeightsError as e:
        raise RunError(str(e)) from None


class SkillTeam:
    """The three drones of one team (``side`` 0 near, 1 far) of a ``Match3v3`` core flying
    the skills a high level picks.

    Args:
        core: the 3v3 core (``envs.volleyball.match.Match3v3``).
        side: 0 or 1.
        skills: ``goto``/``serve``/``pass``/``set``/``attack`` -> ModulePolicy.
    """

    def __init__(self, core, side: int, skills: dict):
        self.core, self.side = core, side
        self.members = np.flatnonzero(core.team == side)  # drone indices, by role
        self.sign = core.sign[self.members]  # [3, 3]: world <-> own frame
        self.skills = skills
        self.skill = np.zeros((core.num_envs, 3), int)

    def fly(self, skill: np.ndarray, target: np.ndarray, explore: bool = True) -> np.ndarray:
        """Rotor commands ``[B, 3, 4]`` for skills ``[B, 3]`` (``rules.SKILLS``) with targets
        ``[B, 3, 3]`` in the team's own frame."""
        from envs.volleyball.skills import skill_observation

        core, w, m = self.core, self.core.worlds, self.members
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
        # every skill module acts for one drone: each row is its agent 0
        act, _ = self.skills[name].act(
            obs.astype(np.float32), agent_index=np.zeros(len(obs), int), explore=explore
        )
        return act


class HierarchicalTeam(SkillTeam):
    """A :class:`SkillTeam` driven by VolleyBots' rule machine (:class:`RuleMachine`)."""

    def __init__(self, core, side: int, skills: dict, rally: bool = True, seed: int = 0):
        super().__init__(core, side, skills)
        self.machine = RuleMachine(core.num_envs, rally, seed)

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
        return self.fly(*self.machine.decide(), explore)


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
    start: str = "serve",
    start_noise: float | None = None,
    team_start: str | None = None,
    render_world: int = 0,
    per_point: bool = False,
) -> dict:
    """``games`` points of the hierarchical team (near) against ``opponent`` (one of
    :data:`OPPONENTS`): ``flat`` (the self-play run's module ``near``, on the far side),
    ``hierarchy`` (a second hierarchical team), ``volleybots:<population>`` (VolleyBots' own
    released policies, :mod:`policies.volleybots`; ``volleybots:sp`` is the flat opponent of
    VolleyBots' hierarchical evaluation), or the sanity opponents ``hover`` (every drone holds
    the hover command) and ``random`` (uniform rotor commands). One point per world, the
    serving team drawn per world; as in VolleyBots' hierarchical env a point ends only on a
    fault or at the step limit (a crash or crowding does not end it). With ``render``, world
    ``render_world`` is drawn to that GIF or MP4 (the worlds' points are the same with or
    without it, so a point found in one run can be drawn in the next). ``per_point`` adds
    each world's server, result, touches and net crossings to the report.

    ``start_noise`` (m and rad) perturbs the drones' start; ``None`` is VolleyBots' start on
    the anchors exactly (0) against its policies, which were trained only from there, and
    Arena's 0.1 otherwise. ``team_start="roles"`` starts the team where VolleyBots'
    hierarchical env starts it (``cfg/task/Volleyball3v3_hier.yaml`` ``serve_near_side_pos``
    and ``defend_near_side_pos``: setter and attacker at their waiting points, the server on
    its anchor or the receiver at its waiting point), ``"anchors"`` on the match's anchors;
    ``None`` is ``roles`` against VolleyBots' policies (its protocol) and ``anchors`` otherwise.

    ``start="receive"`` begins every point with a ball from the other half coming down near
    the receiver's point instead of a serve (the far team has it; the near team's machine
    starts with the pass), so the pass-set-attack chain is measured in the match."""
    if not 0 <= render_world < games:
        raise ValueError(f"render_world must be in 0..{games - 1}, got {render_world}")
    if start not in ("serve", "receive"):
        raise ValueError(f"start must be 'serve' or 'receive', got {start!r}")
    import torch

    from envs.volleyball.match import Match3v3

    if opponent not in OPPONENTS:
        raise ValueError(f"opponent must be one of {', '.join(OPPONENTS)}, got {opponent!r}")
    against_volleybots = opponent.startswith("volleybots:")
    if start_noise is None:
        start_noise = 0.0 if against_volleybots else 0.1
    if team_start is None:
        team_start = "roles" if against_volleybots else "anchors"
    if team_start not in ("anchors", "roles"):
        raise ValueError(f"team_start must be 'anchors' or 'roles', got {team_start!r}")
    torch.manual_seed(seed)
    skills = load_skills(cfg)
    # VolleyBots' hierarchical env plays on through crashes and crowding (it only logs them)
    core = Match3v3(
        games,
        seed,
        auto_reset=False,
        random_serve=True,
        crash_ends=False,
        start_noise=start_noise,
    )
    step = core.reset()
    near = HierarchicalTeam(core, 0, skills, cfg.rally, seed)
    if start == "receive":
        step = _incoming_ball(core, np.random.default_rng(seed))
    if team_start == "roles":
        step = _start_at_roles(core)
    near.begin(np.arange(games))
    if start == "receive":
        near.machine.state[:] = rules.PASSING
    far = None
    if opponent == "flat":
        flat = only_module(cfg.opponent, "near")
    elif opponent == "hierarchy":
        far = HierarchicalTeam(core, 1, skills, cfg.rally, seed + 1)
        far.begin(np.arange(games))
    else:
        flat = opponent_team(opponent, seed + 1)
    points = Points(core)
    used = np.zeros((len(SKILLS),), int)
    frames = []
    if render:
        from envs.volleyball.render import frame
    while points.live.any() and core.t.max() < core.max_steps:
        k = render_world
        if render and points.live[k] and core.t[k] % 2 == 0:  # the world's point, 25 fps
            frames.append(frame(core, k))
        actions = {"near": near.act(explore)}
        if far is None:
            actions["far"], _ = flat.act_group(step.obs["far"], explore=explore)
        else:
            actions["far"] = far.act(explore)
        used += np.bincount(near.skill[points.live].ravel(), minlength=len(SKILLS))
        step = core.step(actions)
        near.observe_touches()
        if far is not None:
            far.observe_touches()
        points.record(step)
    report = {
        "games": games,
        "high_level": "rules",
        "opponent": str(cfg.opponent) if opponent == "flat" else opponent,
        "rally": cfg.rally,
        "start": start,
        "start_noise": start_noise,
        "team_start": team_start,
        "explore": explore,
        **points.report(),
        "skill_share": dict(
            zip(SKILLS, np.round(used / max(used.sum(), 1), 4).tolist(), strict=True)
        ),
    }
    if per_point:
        report["points"] = points.table()
    if render and frames:
        from training.evaluation import write_animation

        frames.append(frame(core, render_world))
        report["animation"] = write_animation(frames, render, 25)
    return report


OPPONENTS = ("flat", "hierarchy", "hover", "random") + tuple(
    f"volleybots:{name}" for name in ("sp", "fsp", "psro_uniform", "psro_nash")
)


class HoverTeam:
    """A sanity opponent: every drone holds the hover rotor command (it never plays the ball)."""

    def act_group(self, obs: np.ndarray, mask=None, explore=True, state=None):
        from envs.volleyball.core import HOVER_COMMAND

        return np.full((*obs.shape[:2], 4), HOVER_COMMAND, np.float32), None


class RandomTeam:
    """A sanity opponent: uniform rotor commands in [-1, 1] (its drones fall)."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)

    def act_group(self, obs: np.ndarray, mask=None, explore=True, state=None):
        return self.rng.uniform(-1.0, 1.0, (*obs.shape[:2], 4)).astype(np.float32), None


def opponent_team(opponent: str, seed: int):
    """The far team of ``opponent``: ``hover``, ``random`` or ``volleybots:<population>``."""
    if opponent == "hover":
        return HoverTeam()
    if opponent == "random":
        return RandomTeam(seed)
    from policies.volleybots import VolleyBotsTeam

    return VolleyBotsTeam(opponent.removeprefix("volleybots:"), side=1, seed=seed)


SERVE_ROLES = np.array([[2.0, -2.0, 1.8], [2.0, 1.5, 2.5], [6.0, 0.0, 2.0]])
DEFEND_ROLES = np.array([[2.0, -2.0, 1.8], [2.0, 1.5, 2.5], [4.5, 0.0, 1.5]])
"""Where VolleyBots' hierarchical env starts the near team (``Volleyball3v3_hier.yaml``)."""


def _start_at_roles(core):
    """Moves the near team of every world to VolleyBots' hierarchical start (its serving
    positions if it serves, else its defending ones), level and hovering; the far team and
    the ball stay where they are."""
    w = core.worlds
    envs = np.arange(core.num_envs)
    pos, quat = w.pos.copy(), w.quat.copy()
    near = core.team == 0
    pos[:, near] = np.where((core.serving == 0)[:, None, None], SERVE_ROLES, DEFEND_ROLES)
    quat[:, near] = [1.0, 0.0, 0.0, 0.0]
    ball_pos, ball_vel = w.ball_pos.copy(), w.ball_vel.copy()
    w.reset(envs, pos, quat, ball_pos, ball_vel)
    return core.observe()


def _incoming_ball(core, rng: np.random.Generator):
    """Every world's point starts with the far team's ball flying from x in [-4, -2] at 3 m
    to come down 0.3 m above a point up to 1 m short of the near receiver's point (y within
    0.5 m) in 1.2-1.5 s, so that left alone it lands in the near half (the far team has
    touched it: the near team may play it once it crosses)."""
    from envs.volleyball.skills import launch

    B = core.num_envs
    start = rng.uniform([-4.0, -1.5, 3.0], [-2.0, 1.5, 3.0], (B, 3))
    # 0.5 m short of the receiver's point at most: left alone it lands inside the court
    end = np.array(rules.RECEIVER_POINT) + rng.uniform([-1.0, -0.5, 0.3], [0.0, 0.5, 0.3], (B, 3))
    vel = launch(start, end, rng.uniform(1.2, 1.5, B))
    w = core.worlds
    w.state[:, w.ball_qpos[:3]] = start
    w.state[:, w.ball_qvel[:3]] = vel
    w.read()
    core.serving[:] = 1
    core.already_hit[:] = (
        True  # nobody may touch it on the far side; the near side may after it crosses
    )
    core.side[:] = 1
    core.last_team[:] = 1
    core.hits[:] = 1  # the far team's touch
    return core.observe()


class Points:
    """The first point of each world of a ``Match3v3`` core (``auto_reset=False``): its result
    and, for one that nobody won, why it ended."""

    def __init__(self, core):
        self.core = core
        self.result = np.full(core.num_envs, np.nan)
        self.why = np.full(core.num_envs, "", object)
        self.steps = np.zeros(core.num_envs, int)
        self.hits = np.zeros(core.num_envs, int)
        self.server = core.serving.copy()  # 0: the near team serves
        self.crossings = np.zeros(core.num_envs, int)  # times the ball changed half
        self._half = core.worlds.ball_pos[:, 0] > 0

    @property
    def live(self) -> np.ndarray:
        return np.isnan(self.result)

    def record(self, step) -> None:
        from envs.volleyball.match import CRASH_Z

        live = self.live
        self.steps[live] += 1
        half = self.core.worlds.ball_pos[:, 0] > 0
        self.crossings += live & (half != self._half)
        self._half = half
        ended = (step.terminated | step.truncated) & live
        if not ended.any():
            return
        core = self.core
        self.result[ended] = step.info["result"][ended]
        self.hits[ended] = step.info["hits"][ended]
        crashed = core.worlds.pos[..., 2] < CRASH_Z
        close = core._too_close()
        for k, side in enumerate(("near", "far")):
            mine = core.team == k
            for name, flag in (("crash", crashed), ("too_close", close)):
                hit = ended & flag[:, mine].any(1) & (self.result == 0) & (self.why == "")
                self.why[hit] = f"{name}_{side}"
        self.why[ended & (self.result == 0) & (self.why == "") & step.truncated] = "time"
        self.why[ended & (self.result == 0) & (self.why == "")] = "both_faulted"

    def report(self) -> dict:
        result = np.nan_to_num(self.result, nan=0.0)
        games = len(result)
        wins, losses = int((result > 0).sum()), int((result < 0).sum())
        from policies.testing import wilson

        low, high = wilson(wins, games)
        reasons, counts = np.unique(self.why[result == 0].astype(str), return_counts=True)
        return {
            "wins": wins,
            "losses": losses,
            "undecided": games - wins - losses,
            "undecided_by": {
                str(r) or "unfinished": int(c) for r, c in zip(reasons, counts, strict=True)
            },
            "win_rate": wins / games,
            "win_rate_ci95": [round(low, 4), round(high, 4)],
            "mean_point_steps": float(self.steps.mean()),
            "mean_hits": float(self.hits.mean()),
            "most_hits": int(self.hits.max()),
            "by_server": {
                side: self._served_by(k, result) for k, side in enumerate(("near", "far"))
            },
        }

    def table(self) -> dict:
        """Each world's point: the serving team (0 near), result (near's view), touches and
        net crossings."""
        return {
            "server": self.server.tolist(),
            "result": np.nan_to_num(self.result, nan=0.0).astype(int).tolist(),
            "hits": self.hits.tolist(),
            "crossings": self.crossings.tolist(),
        }

    def _served_by(self, team: int, result: np.ndarray) -> dict:
        """The points ``team`` served: the near team's wins and the serve's fate."""
        from policies.testing import wilson

        mine = self.server == team
        n, wins = int(mine.sum()), int((result[mine] > 0).sum())
        low, high = wilson(wins, n) if n else (0.0, 1.0)
        return {
            "points": n,
            "near_wins": wins,
            "near_losses": int((result[mine] < 0).sum()),
            "win_rate": wins / n if n else None,
            "win_rate_ci95": [round(low, 4), round(high, 4)],
            # the ball starts on the server's side: one crossing is the serve over the net,
            # a second is a return
            "serve_over": float((self.crossings[mine] >= 1).mean()) if n else None,
            "returned": float((self.crossings[mine] >= 2).mean()) if n else None,
            "mean_crossings": float(self.crossings[mine].mean()) if n else None,
        }
