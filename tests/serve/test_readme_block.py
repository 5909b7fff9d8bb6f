"""The README's serve block, run as written: train, serve in the background, wait for health,
list the policies, act, ``kill $SERVER``; the server must stop cleanly (exit 0, no crash dump,
no traceback) and say so."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_block(title: str) -> str:
    """The indented code block under the README's section ``title``."""
    text = (ROOT / "README.md").read_text()
    section = text.split(f"## {title}\n", 1)[1]
    lines = []
    for line in section.splitlines()[1:]:
        if line.startswith("    "):
            lines.append(line[4:])
        elif lines:
            break
    return "\n".join(lines)


def test_the_readme_serve_block_runs_and_the_server_stops_cleanly(tmp_path):
    block = readme_block("Serve a trained policy (Ray Serve)")
    assert block.startswith("arena train") and block.rstrip().endswith("kill $SERVER")
    script = f"set -e\n{block}\nwait $SERVER && echo SERVER_EXIT=$? || echo SERVER_EXIT=$?\n"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "RAY_AUTH_MODE": "disabled",
        "OMP_NUM_THREADS": "1",
    }
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert '"policies":["mappo-simple_spread-v3"]' in out or "mappo-simple_spread-v3" in out
    assert re.search(r'\{"actions":\{"agent_0":\d\}', out), out[-3000:]
    assert "SERVER_EXIT=0" in out and "arena serve: stopped" in out, out[-3000:]
    assert "Traceback" not in out and "SIGTERM received" not in out, out[-3000:]
