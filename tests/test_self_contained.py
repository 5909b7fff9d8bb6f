"""The repository stands on its own: no code or doc reads or cites files outside it."""

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = {".git", ".venv", ".smax-venv", ".jaxmarl-venv", "runs", "build", "__pycache__"}
SKIP |= {".pytest_cache"}
OUTSIDE = re.compile(r"\.\./shared\b|\bshared/(anchors|kuberay)\b")


def test_no_file_points_at_a_folder_beside_the_repository():
    found = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP and not d.endswith(".egg-info")]
        for name in files:
            path = Path(folder) / name
            if path.suffix in {".py", ".md", ".yaml", ".toml", ".cfg", ".sh"} or name in {
                "Makefile",
                "Dockerfile",
                "run",
            }:
                for i, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                    if OUTSIDE.search(line) and path != Path(__file__).resolve():
                        found.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert found == []
