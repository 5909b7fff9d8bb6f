"""VolleyBots' event-driven high level for a 3v3 team (``volleyball_3v3_hier.py`` in
thu-uav/VolleyBots): fixed roles, a state per world moved only by hit events, and a table
of which skill, with which target, each drone runs in each state.

Roles (the team's drone index): 0 sets, 1 attacks, 2 serves and receives. States:

=====  ==================  ===========  ===========  ===========
state  meaning             receiver     setter       attacker
=====  ==================  ===========  ===========  ===========
0      wait for the other  goto R       goto S       goto A
1      pass                **pass**     goto S       goto A
2      set                 hover R      **set**      goto A
3      attack              hover R      hover S'     **attack**
4      after the attack    hover R      hover S'     hover A'
5      our serve           **serve**    goto S       goto A
6      after the serve     hover R      goto S       goto A
=====  ==================  ===========  ===========  ===========

R = (4.5, 0, 1.5), S = (2, -2, 1.8), A = (2, 1.5, 2.5), S' = (2, -2, 1), A' = (2, 0, 2.5), in
the team's own frame (x > 0 its half). Transitions, in this order each step (so several can
fire in one step): 0 -> 1 on a touch by the other team, 1 -> 2 on the receiver's touch, 2 -> 3
on the setter's, 3 -> 4 on the attacker's, 5 -> 6 on the receiver's. VolleyBots' machine stops
in 4 and 6 (it plays one serve or one pass-set-attack per point); with ``rally`` a touch by the
other team in 4 or 6 starts a new pass, so the team keeps playing returned balls.

Targets: the pass goes to the setter's point (2, -2, 2), the set to the attacker's (2, 1.5,
2.5); the serve aims at x in [-5.5, -4.2], y in [-2, 2] on the floor (VolleyBots: x in [-6,
-4.2]), the attack at (-5, -2) or (-5, 2), drawn per point.
"""

from __future__ import annotations

import numpy as np

SKILLS = ("goto", "serve", "pass", "set", "attack")
GOTO, SERVE, PASS, SET, ATTACK = range(len(SKILLS))
SETTER, ATTACKER, RECEIVER = 0, 1, 2

RECEIVER_POINT = (4.5, 0.0, 1.5)
SETTER_POINT = (2.0, -2.0, 1.8)
ATTACKER_POINT = (2.0, 1.5, 2.5)
SETTER_REST = (2.0, -2.0, 1.0)
ATTACKER_REST = (2.0, 0.0, 2.5)
PASS_TARGET = (2.0, -2.0, 2.0)
SET_TARGET = ATTACKER_POINT

WAIT, PASSING, SETTING, ATTACKING, ATTACKED, SERVING, SERVED = range(7)

# State -> (skill, go-to/hover point or None for the skill's own target) per role.
_G = GOTO
TABLE = {
    WAIT: ((_G, SETTER_POINT), (_G, ATTACKER_POINT), (_G, RECEIVER_POINT)),
    PASSING: ((_G, SETTER_POINT), (_G, ATTACKER_POINT), (PASS, None)),
    SETTING: ((SET, None), (_G, ATTACKER_POINT), (_G, RECEIVER_POINT)),
    ATTACKING: ((_G, SETTER_REST), (ATTACK, None), (_G, RECEIVER_POINT)),
    ATTACKED: ((_G, SETTER_REST), (_G, ATTACKER_REST), (_G, RECEIVER_POINT)),
    SERVING: ((_G, SETTER_POINT), (_G, ATTACKER_POINT), (SERVE, None)),
    SERVED: ((_G, SETTER_POINT), (_G, ATTACKER_POINT), (_G, RECEIVER_POINT)),
}
SKILL_OF = np.array([[TABLE[s][r][0] for r in range(3)] for s in range(7)])  # [state, role]
POINT_OF = np.array(
    [[TABLE[s][r][1] or (0.0, 0.0, 0.0) for r in range(3)] for s in range(7)]
)  # [state, role, 3]


class RuleMachine:
    """The high level of one team in B worlds; positions are in the team's own frame.

    Args:
        num_envs: B.
        rally: play balls the other team returns (VolleyBots' machine does not).
        seed: draws the serve and attack targets.
    """

    def __init__(self, num_envs: int, rally: bool = True, seed: int | None = None):
        self.rally = rally
        self.rng = np.random.default_rng(seed)
        self.state = np.zeros(num_envs, int)
        self.serve_target = np.zeros((num_envs, 3))
        self.attack_target = np.zeros((num_envs, 3))

    def reset(self, envs: np.ndarray, serving: np.ndarray) -> None:
        """Starts a point in worlds ``envs``; ``serving [n]``: whether this team serves."""
        n = len(envs)
        self.state[envs] = np.where(serving, SERVING, WAIT)
        self.serve_target[envs] = self.rng.uniform([-5.5, -2.0, 0.0], [-4.2, 2.0, 0.0], (n, 3))
        side = self.rng.choice([-2.0, 2.0], n)
        self.attack_target[envs] = np.stack([np.full(n, -5.0), side, np.zeros(n)], -1)

    def update(self, mine: np.ndarray, theirs: np.ndarray) -> None:
        """Moves the states on this step's touches: ``mine [B, 3]`` by this team's drones
        (by role), ``theirs [B]`` by any drone of the other team."""
        s = self.state
        s[(s == WAIT) & theirs] = PASSING
        if self.rally:
            s[((s == ATTACKED) | (s == SERVED)) & theirs] = PASSING
        s[(s == PASSING) & mine[:, RECEIVER]] = SETTING
        s[(s == SETTING) & mine[:, SETTER]] = ATTACKING
        s[(s == ATTACKING) & mine[:, ATTACKER]] = ATTACKED
        s[(s == SERVING) & mine[:, RECEIVER]] = SERVED

    def decide(self) -> tuple[np.ndarray, np.ndarray]:
        """Each drone's skill ``[B, 3]`` and target ``[B, 3, 3]`` (own frame): the point of a
        go-to, where a hit should send the ball."""
        skill = SKILL_OF[self.state]
        target = POINT_OF[self.state].copy()
        target[skill == SERVE] = self.serve_target[(skill == SERVE).any(1)]
        target[skill == PASS] = PASS_TARGET
        target[skill == SET] = SET_TARGET
        target[skill == ATTACK] = self.attack_target[(skill == ATTACK).any(1)]
        return skill, target
