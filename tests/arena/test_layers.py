"""The packages import one way (envs <- policies <- training <- serve, tune, cluster <- arena),
with no cycle even through function-level imports, and the CLI parses without torch, RLlib
or Serve."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = [{"envs"}, {"policies"}, {"training"}, {"serve", "tune", "cluster"}, {"arena"}]
"""Bottom first: a package may import only packages of lower layers."""
PACKAGES = set().union(*LAYERS)


def imports_of(package: str) -> set[str]:
    """Every other project package ``package`` imports anywhere (module level or inside
    functions)."""
    found = set()
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            found |= {n.split(".")[0] for n in names} & PACKAGES
    return found - {package}


def graph() -> dict[str, set[str]]:
    return {p: imports_of(p) for p in sorted(PACKAGES)}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node, path):
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path + [node, nxt]
            if nxt not in state and (found := visit(nxt, path + [node])):
                return found
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node, [])):
            return found[found.index(found[-1]) :]
    return None


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_packages_import_without_cycles():
    assert find_cycle(graph()) is None, find_cycle(graph())


def test_packages_import_only_lower_layers():
    layer = {p: i for i, group in enumerate(LAYERS) for p in group}
    upward = {f"{p} -> {q}" for p, deps in graph().items() for q in deps if layer[q] >= layer[p]}
    assert not upward, sorted(upward)


HEAVY = ("torch", "ray.rllib", "ray.serve", "ray.tune")

PROBE = """
import json, sys
from arena import cli

p = cli.parser()
commands = list(p._subparsers._group_actions[0].choices)
for argv in [["--help"]] + [[c, "--help"] for c in commands]:
    try:
        p.parse_args(argv)
    except SystemExit:
        pass
print(json.dumps({"commands": commands, "heavy": [m for m in HEAVY if m in sys.modules]}))
"""


def test_help_imports_no_torch_rllib_or_serve():
    probe = f"HEAVY = {HEAVY!r}\n" + PROBE
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.splitlines()[-1])
    assert {"envs", "train", "eval", "demo", "serve", "submit"} <= set(seen["commands"])
    assert seen["heavy"] == []


@pytest.mark.parametrize("argv", [["--help"], ["train", "--help"], ["serve", "--help"]])
def test_help_returns_at_once(argv):
    out = subprocess.run(
        [sys.executable, "-m", "arena", *argv], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and "usage: arena" in out.stdout, out.stderr
