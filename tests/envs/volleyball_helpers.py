"""Helpers of the volleyball tests: hover commands and a ball put in place by hand."""

import numpy as np

from envs.volleyball.core import HOVER_COMMAND


def place_ball(core, pos, vel=(0.0, 0.0, 0.0)):
    """Puts the ball of every world of ``core`` at ``pos`` moving at ``vel``."""
    w = core.worlds
    w.state[:, w.ball_qpos[:3]] = pos
    w.state[:, w.ball_qvel[:3]] = vel
    w.read()


def hover(core):
    """Every drone at the throttle that holds its weight."""
    return {
        name: np.full((core.num_envs, g.num_agents, 4), HOVER_COMMAND)
        for name, g in core.groups.items()
    }
