"""The PettingZoo faces of the volleyball tasks: one world (B = 1) of each batched core."""

from __future__ import annotations

from envs.vector import CoreEnv
from envs.volleyball import coop, drills, match, skills


class VolleyballEnv(CoreEnv):
    """One volleyball world; ``render()`` draws it with MuJoCo's offscreen renderer."""

    metadata = {**CoreEnv.metadata, "name": "volleyball", "render_fps": 50}

    def render(self):
        from envs.volleyball.render import frame

        return frame(self.core, 0)

    def close(self):
        from envs.volleyball.render import close

        close(self.core)


CORES = {
    core.__name__: core
    for core in (
        drills.Hover,
        drills.BackAndForth,
        drills.HitBall,
        drills.SoloBump,
        coop.BumpAndPass,
        coop.SetAndSpikeEasy,
        coop.SetAndSpikeHard,
        match.Match1v1,
        match.Match3v3,
        match.Match6v6,
        skills.Serve,
        skills.Pass,
        skills.Set,
        skills.Attack,
    )
}
# The registry imports cores and faces by name: ``Hover`` and ``HoverEnv``, ...
for _name, _core in CORES.items():
    globals()[_name] = _core
    globals()[_name + "Env"] = type(
        _name + "Env",
        (VolleyballEnv,),
        {
            "core_class": _core,
            "options": _core.OPTIONS,
            "__doc__": _core.__doc__,
            "__module__": __name__,
        },
    )
