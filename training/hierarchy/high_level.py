"""The learned high level of the hierarchical 3v3 team (after HCSP's high-level policy,
thu-uav/HCSP ``hcsp/envs/high_level``): every ``decision_steps`` steps (0.1 s) each near drone
picks an option, the frozen skills of a trained team (:mod:`training.hierarchy.team`) fly it, and the
far team is a frozen flat self-play policy. The agents see the 3v3 observation (57) and their
current option (one-hot); options a drone may not take now are masked:

=================  ==================================================================
option             when
=================  ==================================================================
goto               always: fly to the drone's point (VolleyBots' rule machine's go-to
                   points: setter (2, -2, 1.8), attacker (2, 1.5, 2.5), receiver
                   (4.5, 0, 1.5))
serve              the server (drone 2) while its team's serve is to be made
pass, set          a drone that may still touch the ball (it is on the team's side and
                   the drone has not touched it there), except during the team's serve
attack_left/right  as pass; aims at (-5, -2) or (-5, 2) in the other half
=================  ==================================================================

Reward (the team's, every agent): +1 for a won point, -1 for a lost one, 0.1 for each
touch by the team. The episode is one point; the facts are the 3v3 ones.

The env hosts trained policies, so it lives above ``envs`` and joins the env registry as
``volleyball/3v3_high-v0`` through the ``arena.envs`` entry point
(:func:`training.hierarchy.plugin.register`; ``envs.registry.PLUGINS``). :func:`play_high_level` plays a trained high level with the
protocol of ``arena hierarchy``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np

from envs.vector import AgentGroup, VectorEnv, VectorStep
from envs.volleyball.env import VolleyballEnv

CHOICES = ("goto", "serve", "pass", "set", "attack_left", "attack_right")
GOTO_O, SERVE_O, PASS_O, SET_O, LEFT_O, RIGHT_O = range(len(CHOICES))
OBS_DIM = 57 + len(CHOICES)


@dataclass
class HighLevelOptions:
    """Options of the high-level env.

    Attributes:
        team: a team YAML (``arena hierarchy``'s config) whose skills fly the options and whose
            opponent plays the far side ("": the team that ships with Arena).
        decision_steps: physics steps (0.02 s each) per decision.
        explore_skills: sample the skills' and the opponent's actions (VolleyBots' evaluation
            does) rather than take their means.
        crash_ends: a crash or crowding ends the point undecided. Off by default, as in
            VolleyBots' hierarchical env and ``arena hierarchy``: the point plays on (the flat
            opponent crashes often, and a crash-ended point teaches the high level nothing).
    """

    team: str = ""
    decision_steps: int = 5
    explore_skills: bool = True
    crash_ends: bool = False

    def __post_init__(self):
        if not isinstance(self.team, str):
            raise ValueError(f"team must be a path to a team YAML, got {self.team!r}")
        d = self.decision_steps
        if isinstance(d, bool) or not isinstance(d, int) or not 1 <= d <= 50:
            raise ValueError(f"decision_steps must be an integer in [1, 50], got {d!r}")


def _torch_stream(seed: int):
    """The state of a torch CPU random stream seeded with ``seed``."""
    import torch

    return torch.Generator().manual_seed(seed).get_state()


class HighLevel3v3(VectorEnv):
    """B 3v3 points in which the near team's high level picks options."""

    OPTIONS = HighLevelOptions
    CHOICES: tuple[str, ...] = CHOICES
    FACTS = ("result", "hits")

    def __init__(self, num_envs: int, seed: int | None = None, auto_reset: bool = True, **options):
        import torch

        from envs.volleyball.match import Match3v3
        from training.hierarchy import rules
        from training.hierarchy.team import BUNDLE, SkillTeam, TeamConfig, load_skills, only_module

        self.options = o = HighLevelOptions(**options)
        torch.set_num_threads(1)
        self.team_config = cfg = TeamConfig.from_file(o.team or BUNDLE / "team.yaml")
        self.core = Match3v3(
            num_envs, seed, auto_reset=False, random_serve=True, crash_ends=o.crash_ends
        )
        self.team = SkillTeam(self.core, 0, load_skills(cfg))
        self.opponent = only_module(cfg.opponent, "near")
        self.num_envs, self.auto_reset = num_envs, auto_reset
        self.agents = ("near_0", "near_1", "near_2")
        self.n = 3
        self.max_steps = -(-self.core.max_steps // o.decision_steps)
        obs_space = gym.spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32)
        act_space = gym.spaces.Discrete(len(CHOICES))
        self.groups = {
            "near": AgentGroup("near", self.agents, (0, 1, 2), obs_space, act_space, True)
        }
        self.state_space = gym.spaces.Box(-np.inf, np.inf, (3 * OBS_DIM,), np.float32)
        self.option = np.zeros((num_envs, 3), int)
        self.rng = np.random.default_rng(seed)
        self.skill_rng = _torch_stream(int(self.rng.integers(2**62)))
        self.serve_target = np.zeros((num_envs, 3))
        home = np.array([rules.SETTER_POINT, rules.ATTACKER_POINT, rules.RECEIVER_POINT])
        self.targets = np.zeros((len(CHOICES), 3, 3))  # option, role -> own-frame target
        self.targets[GOTO_O] = home
        self.targets[PASS_O] = rules.PASS_TARGET
        self.targets[SET_O] = rules.SET_TARGET
        self.targets[LEFT_O] = (-5.0, -2.0, 0.0)
        self.targets[RIGHT_O] = (-5.0, 2.0, 0.0)
        self.skill_of = np.array(
            [rules.GOTO, rules.SERVE, rules.PASS, rules.SET, rules.ATTACK, rules.ATTACK]
        )

    # what the renderer reads
    worlds = property(lambda self: self.core.worlds)
    t = property(lambda self: self.core.t)
    hits = property(lambda self: self.core.hits)

    # -- episodes --------------------------------------------------------------------------

    def _begin(self, envs: np.ndarray) -> None:
        self.core._begin(envs)
        self.option[envs] = GOTO_O
        self.serve_target[envs] = self.rng.uniform(
            [-5.5, -2.0, 0.0], [-4.2, 2.0, 0.0], (len(envs), 3)
        )

    def reset(self, seed: int | None = None) -> VectorStep:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
            self.core.rng = np.random.default_rng(seed + 1)
            self.skill_rng = _torch_stream(seed + 2)
        self._begin(np.arange(self.num_envs))
        obs = self._observe()
        zeros, no = np.zeros((self.num_envs, 3), np.float32), np.zeros(self.num_envs, bool)
        state = obs.reshape(self.num_envs, -1)
        split = {"near": obs}
        return VectorStep(split, state, {"near": self._mask()}, zeros, no, no.copy(), split, state)

    # -- observation and masks ---------------------------------------------------------------

    def _observe(self) -> np.ndarray:
        match = self.core._observe()[:, :3]
        onehot = np.eye(len(CHOICES))[self.option]
        return np.concatenate([match, onehot], -1).astype(np.float32)

    def _serving_now(self) -> np.ndarray:
        """``[B]``: the near team is to serve (nobody has touched the ball)."""
        return (self.core.serving == 0) & (self.core.hits == 0)

    def _mask(self) -> np.ndarray:
        core = self.core
        mask = np.zeros((self.num_envs, 3, len(CHOICES)), np.float32)
        mask[..., GOTO_O] = 1.0
        serving = self._serving_now()
        mask[:, 2, SERVE_O] = serving
        may_hit = ~core.already_hit[:, :3] & ~serving[:, None]
        mask[..., PASS_O:] = may_hit[..., None]
        return mask

    # -- step --------------------------------------------------------------------------------

    def step(self, actions: dict[str, np.ndarray]) -> VectorStep:
        choice = np.asarray(actions["near"]).reshape(self.num_envs, 3).astype(int)
        if ((choice < 0) | (choice >= len(CHOICES))).any():
            raise ValueError(f"options must be in [0, {len(CHOICES)}), got {choice.ravel()[:6]}")
        legal = np.take_along_axis(self._mask(), choice[..., None], -1)[..., 0] > 0
        self.option = np.where(legal, choice, GOTO_O)  # an illegal pick goes to its point
        skill = self.skill_of[self.option]
        target = self.targets[self.option, np.arange(3)]
        target[self.option == SERVE_O] = self.serve_target[(self.option == SERVE_O).any(1)]
        import torch

        core, o = self.core, self.options
        rewards = np.zeros(self.num_envs)
        ended = np.zeros(self.num_envs, bool)
        terminated = np.zeros(self.num_envs, bool)
        facts = {k: np.zeros(self.num_envs) for k in self.FACTS}
        # The skills and the opponent sample from the env's own torch stream (seeded by
        # reset), so a seeded episode repeats and the trainer's stream is left alone.
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(self.skill_rng)
            far_obs = core._observe()[:, 3:]  # the far team's own (mirrored) view
            for _ in range(o.decision_steps):
                near = self.team.fly(skill, target, o.explore_skills)
                step = core.step({"near": near, "far": self._opponent(far_obs)})
                far_obs = step.obs["far"]
                live = ~ended
                touches = core.touches[:, :3].sum(1)
                rewards += np.where(live, 0.1 * touches, 0.0)
                now = (step.terminated | step.truncated) & live
                if now.any():
                    for k in self.FACTS:
                        facts[k][now] = step.info[k][now]
                    rewards += np.where(now, step.info["result"], 0.0)
                    terminated |= step.terminated & live
                    ended |= now
                if ended.all():
                    break
            self.skill_rng = torch.get_rng_state()
        truncated = ended & ~terminated
        obs = self._observe()
        state = obs.reshape(self.num_envs, -1)
        final_obs, final_state = {"near": obs}, state
        if ended.any() and self.auto_reset:
            final_obs, final_state = {"near": obs.copy()}, state.copy()
            self._begin(np.flatnonzero(ended))
            obs = self._observe()
            state = obs.reshape(self.num_envs, -1)
        return VectorStep(
            {"near": obs},
            state,
            {"near": self._mask()},
            np.repeat(rewards[:, None], 3, 1).astype(np.float32),
            terminated,
            truncated,
            final_obs,
            final_state,
            facts if ended.any() else None,
        )

    def _opponent(self, obs: np.ndarray) -> np.ndarray:
        act, _ = self.opponent.act_group(
            obs.reshape(self.num_envs, 3, -1), explore=self.options.explore_skills
        )
        return act


class HighLevel3v3Env(VolleyballEnv):
    """One world of :class:`HighLevel3v3` as a PettingZoo ``ParallelEnv`` (drawn as the match
    it plays; one step is a decision, 0.1 s)."""

    metadata = {**VolleyballEnv.metadata, "name": "volleyball_high_level", "render_fps": 10}
    core_class = HighLevel3v3
    options = HighLevelOptions


def play_high_level(
    run: str | Path, games: int = 1000, *, seed: int = 0, explore: bool = True
) -> dict:
    """``games`` points of a learned high level (a run of ``volleyball/3v3_high-v0``) flying
    its team's skills against the team's flat opponent, with ``arena hierarchy``'s protocol
    (:func:`training.hierarchy.team.play_hierarchy`)."""
    import torch

    from training.checkpoints import RunError, load_config
    from training.evaluation import load_policy
    from training.hierarchy.team import Points

    run = Path(run)
    cfg = load_config(run)
    if cfg.env != "volleyball/3v3_high-v0":
        raise RunError(
            f"{run} trained {cfg.env}; a learned high level is a run of volleyball/3v3_high-v0"
        )
    torch.manual_seed(seed)
    policy = load_policy(run)
    module = policy.modules[policy.module_of["near_0"]]
    env_args = {**cfg.env_args, "explore_skills": explore}  # the protocol samples every policy
    env = HighLevel3v3(games, seed, auto_reset=False, **env_args)
    step = env.reset()
    points = Points(env.core)
    chosen = np.zeros(len(env.CHOICES), int)
    for _ in range(env.max_steps + 1):
        if not points.live.any():
            break
        act, _ = module.act_group(step.obs["near"], step.action_mask["near"], explore=explore)
        chosen += np.bincount(act[points.live].ravel(), minlength=len(chosen))
        step = env.step({"near": act})
        points.record(step)
    return {
        "games": games,
        "high_level": str(run),
        "opponent": str(env.team_config.opponent),
        "explore": explore,
        **points.report(),
        "option_share": dict(
            zip(env.CHOICES, np.round(chosen / max(chosen.sum(), 1), 4).tolist(), strict=True)
        ),
    }
