"""Converts VolleyBots' released 3v3 policies into plain tensors, once.

VolleyBots (github.com/thu-uav/VolleyBots, MIT) ships its trained actors as torch pickles of
torchrl/tensordict objects under ``checkpoints/``. This script reads them without tensordict
(an allow-list unpickler: tensors, OrderedDicts and stand-ins for tensordict's containers, so
no upstream code runs) and writes each population's actor parameters to an ``.npz`` (read
with ``allow_pickle=False``) and ``manifest.json`` (source commit, each source file's and
each output's sha256, meta-policies)::

    python -m policies.volleybots.convert /path/to/VolleyBots [--out policies/volleybots/weights]

The outputs are committed; nothing here runs at play time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import subprocess
import types
from pathlib import Path

import numpy as np

# VolleyBots' 3v3 populations (scripts/evaluation_shell/volleyball3v3_crossplay.sh and
# volleyball3v3_hier.sh): population name -> (checkpoint folder or file, meta-policy file).
POPULATIONS = {
    "sp": ("checkpoints/crossplay/sp/0.pt", None),
    "fsp": ("checkpoints/crossplay/fsp_population", None),
    "psro_uniform": ("checkpoints/crossplay/psro_uniform_population", None),
    "psro_nash": (
        "checkpoints/crossplay/psro_nash_population",
        "checkpoints/crossplay/psro_nash_meta_policy.npz",
    ),
}
SAFE = {
    ("collections", "OrderedDict"),
    ("torch._utils", "_rebuild_tensor_v2"),
    ("torch._utils", "_rebuild_parameter"),
    ("torch", "Size"),
    ("__builtin__", "set"),
    ("builtins", "set"),
}
STAND_INS = {"tensordict"}  # module prefix of classes replaced by a plain dict stand-in


class _StandIn(dict):
    """Takes the place of a tensordict class: keeps its items and pickled state, runs nothing."""

    def __setstate__(self, state):
        self.state = state


def _unpickler_module() -> types.ModuleType:
    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            if (module, name) in SAFE or (module == "torch" and name.endswith("Storage")):
                return super().find_class(module, name)
            if module.split(".")[0] in STAND_INS:
                return type(name, (_StandIn,), {})
            raise pickle.UnpicklingError(f"{module}.{name} is not on the allow-list")

    mod = types.ModuleType("volleybots_unpickler")
    mod.Unpickler = Unpickler
    mod.load = pickle.load
    return mod


def actor_parameters(path: Path) -> dict[str, np.ndarray]:
    """The actor's parameters of one checkpoint, ``name -> [agents, ...]`` (a shared actor, as
    ``sp/0.pt``, gets an agents axis of 1), names without the leading ``module.``."""
    import torch

    ckpt = torch.load(
        path, pickle_module=_unpickler_module(), weights_only=False, map_location="cpu"
    )
    params = ckpt["actor_params"].state["_parameters"]
    out = {}
    for name, value in params.items():
        array = value.detach().numpy().astype(np.float32)
        out[name.removeprefix("module.")] = array
    shared = out["act_dist.log_std"].ndim == 1
    return {k: v[None] if shared else v for k, v in out.items()}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def convert(repo: Path, out: Path) -> dict:
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    out.mkdir(parents=True, exist_ok=True)
    manifest = {
        "source": "https://github.com/thu-uav/VolleyBots",
        "commit": commit,
        "license": "MIT, copyright (c) 2025 Tsinghua University (see THIRD_PARTY_NOTICES.md)",
        "populations": {},
    }
    for name, (where, meta_file) in POPULATIONS.items():
        where = repo / where
        files = sorted(where.glob("*.pt"), key=lambda p: int(p.stem)) if where.is_dir() else [where]
        arrays: dict[str, np.ndarray] = {}
        for k, f in enumerate(files):
            for key, value in actor_parameters(f).items():
                arrays[f"member{k}/{key}"] = value
        meta = {}
        if meta_file:
            z = np.load(repo / meta_file, allow_pickle=False)
            meta = {side: z[f"meta_policy_{side}"].round(8).tolist() for side in ("0", "1")}
        target = out / f"{name}.npz"
        np.savez(target, **arrays)
        manifest["populations"][name] = {
            "members": len(files),
            "agents_per_member": int(arrays["member0/act_dist.log_std"].shape[0]),
            "files": [{"path": str(f.relative_to(repo)), "sha256": sha256(f)} for f in files]
            + ([{"path": meta_file, "sha256": sha256(repo / meta_file)}] if meta_file else []),
            "meta_policy": meta or "uniform",
            "npz_sha256": sha256(target),
        }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path, help="a checkout of github.com/thu-uav/VolleyBots")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "weights")
    args = parser.parse_args(argv)
    manifest = convert(args.repo, args.out)
    for name, pop in manifest["populations"].items():
        print(f"{name}: {pop['members']} members x {pop['agents_per_member']} actors")


if __name__ == "__main__":
    main()
