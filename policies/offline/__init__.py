"""Offline multi-task MARL policies on entity tokens (``envs.entities``): one network acts
with any number of units. ``entity_bc``: ODIS's multi-task behaviour cloning (BC-T)."""
