"""Hierarchical teams: a high level that picks a skill per drone and frozen low-level skill
policies that fly it (VolleyBots' hierarchical 3v3 volleyball team, :mod:`.team`, with its
rule machine, :mod:`.rules`). ``arena hierarchy CONFIG`` plays one against a flat self-play
policy."""
