"""Run directories and their checkpoints: atomic writes, verification, resume points.

A run directory ``runs/<env id>/<algo>/<run>/`` holds

* ``config.yaml``: the resolved :class:`training.config.TrainConfig`;
* ``checkpoints/iter_NNNNNN/``: RLlib's checkpoint (for resume), each module's plain weights in
  ``weights/`` (for eval and serve, which never unpickle; with what they need beside them, such
  as a LoRA student's ``student.base.json``) and ``arena.json`` (iteration, env steps, and the
  size and sha256 of every file); ``checkpoints/latest`` names the newest;
* ``metrics.csv`` and TensorBoard events (``tb/``);
* ``eval.json`` and media from ``arena eval``.

Every file is written to a temporary name and renamed, so a crash leaves the last complete
checkpoint and the metrics up to it; ``--resume`` goes on from there.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

from envs.files import write_atomic  # re-exported: training and tune import it from here
from training.config import ConfigError, TrainConfig


class RunError(ValueError):
    """A run directory that cannot be used (missing, or without a checkpoint)."""


RUN_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")


def run_dir_for(cfg: TrainConfig, out: str, name: str | None) -> Path:
    """``out/<env>/<algo>/<name>``; a name that is not one plain folder name (a path, ``..``,
    a hidden name) is a :class:`RunError`: a run never writes outside ``out``."""
    name = name or time.strftime("%Y%m%d-%H%M%S") + f"-s{cfg.seed}"
    if not RUN_NAME.match(name):
        raise RunError(
            f"--name {name[:80]!r}: a run name is one folder name of letters, digits and . _ - "
            "(not starting with . or -), at most 128 characters"
        )
    return Path(out) / cfg.env / cfg.algo / name


CHECKPOINT_NAME = re.compile(r"^iter_\d{1,12}$")


def _pointed(run: Path) -> tuple[Path | None, str]:
    """The complete checkpoint ``checkpoints/latest`` names, or None and why not. A pointer
    that names a path rather than a checkpoint folder of this run is a :class:`RunError`:
    it is never followed."""
    if not (run / "config.yaml").exists():
        raise RunError(f"{run} is not a run directory (no config.yaml)")
    ckdir = run / "checkpoints"
    pointer = ckdir / "latest"
    if not pointer.exists():
        if not any(ckdir.glob("iter_*")):
            raise RunError(f"{run} has no checkpoint yet (no checkpoints/latest)")
        return None, f"{pointer} is missing"
    try:
        name = pointer.read_text(errors="replace").strip()[:200]
    except OSError as e:
        return None, f"{pointer} cannot be read ({e.strerror})"
    if "/" in name or "\\" in name or name.startswith("."):
        raise RunError(
            f"{pointer} names {name[:80]!r}, not a checkpoint of this run (iter_N in {ckdir}); "
            "pick one with --checkpoint iter_N"
        )
    if not CHECKPOINT_NAME.match(name):
        return None, f"{pointer} is damaged (it names {name[:40]!r}, not iter_N)"
    if not (ckdir / name / "arena.json").is_file():
        return None, f"checkpoint {name} (named by {pointer}) is missing or incomplete"
    return ckdir / name, ""


def _checkpoints(ckdir: Path) -> list[Path]:
    """The ``iter_N`` folders in ``ckdir``, newest first."""
    return sorted((p for p in ckdir.glob("iter_*") if CHECKPOINT_NAME.match(p.name)), reverse=True)


def _complete(run: Path) -> list[Path]:
    """The run's checkpoint folders with an ``arena.json``, newest first."""
    return [p for p in _checkpoints(run / "checkpoints") if (p / "arena.json").is_file()]


def latest_checkpoint(run: Path) -> Path:
    """The newest complete checkpoint of ``run``, or a :class:`RunError`. A damaged or
    missing ``latest`` pointer falls back to the newest checkpoint with an ``arena.json``,
    with one warning line."""
    ckpt, problem = _pointed(run)
    if ckpt is not None:
        return ckpt
    complete = _complete(run)
    if not complete:
        raise RunError(f"{run}: {problem}, and no other checkpoint is complete")
    print(f"arena: warning: {problem}; using {complete[0].name} instead", file=sys.stderr)
    return complete[0]


def load_config(run: Path) -> TrainConfig:
    from training.config import read_config_file

    if not (run / "config.yaml").exists():
        raise RunError(f"{run} is not a run directory (no config.yaml)")
    try:
        data = read_config_file(run / "config.yaml")  # its errors name the file already
    except ConfigError as e:
        raise RunError(str(e)) from None
    try:
        cfg = TrainConfig.from_dict(_with_its_loss(data))
        cfg.validate()
    except ConfigError as e:
        raise RunError(f"{run / 'config.yaml'}: {e}") from None
    return cfg


RLLIB_PPO_LOSS = {"value_clip": "loss", "advantage_norm": "batch", "adam_eps": 1e-8}
"""The PPO loss of runs saved before the loss choices existed (RLlib's)."""


def _with_its_loss(data: dict) -> dict:
    """A saved run's config with the PPO loss it learned with: runs saved before the loss
    choices (``vf_clip_param`` but no ``value_clip``) resume and evaluate with RLlib's."""
    settings = data.get(data.get("algo", ""))
    if isinstance(settings, dict) and "vf_clip_param" in settings and "value_clip" not in settings:
        data = {**data, data["algo"]: {**settings, **RLLIB_PPO_LOSS}}
    return data


def save_checkpoint(algo, run: Path, it: int, env_steps: int, keep: int) -> Path | None:
    """RLlib's checkpoint (for resume) plus each module's plain weights in ``weights/`` (for
    eval and serve, which never unpickle) and ``arena.json`` (iteration, env steps, and the
    size and sha256 of every file, so a damaged checkpoint is found before it is loaded).
    Weights that are not all finite are never written (None): ``latest`` keeps naming the
    last sound checkpoint."""
    import torch

    from policies.inference import WEIGHTS_DIR, save_weights

    weights = algo.learner_group.get_weights()
    for state in weights.values():
        for value in state.values():
            if not torch.isfinite(torch.as_tensor(value)).all():
                return None
    ckdir = run / "checkpoints"
    ckdir.mkdir(parents=True, exist_ok=True)
    name = f"iter_{it:06d}"
    tmp = ckdir / f".{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    algo.save_to_path(str(tmp.resolve()))
    save_weights(weights, tmp / WEIGHTS_DIR)
    extra = getattr(algo, "write_weight_files", None)  # what a module's weights need beside
    if extra is not None:
        extra(tmp / WEIGHTS_DIR)
    meta = {"iteration": it, "env_steps": env_steps, "files": file_digests(tmp)}
    (tmp / "arena.json").write_text(json.dumps(meta, indent=1))
    final = ckdir / name
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    write_atomic(ckdir / "latest", name)
    # Keep the newest ``keep`` up to this one. Newer ones (a run resumed from an older
    # checkpoint) are never pruned in their place: that could delete the one just written.
    older = sorted(p for p in ckdir.glob("iter_*") if p.name < name)
    for old in older[: max(0, len(older) - (keep - 1))]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def file_digests(root: Path) -> dict[str, dict]:
    """Size and sha256 of every file under ``root``, by relative path."""
    out = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name != "arena.json"):
        out[str(path.relative_to(root))] = {
            "bytes": path.stat().st_size,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        }
    return out


def checkpoint_meta(ckpt: Path) -> dict:
    """``arena.json`` of ``ckpt``, checked: iteration and env steps as integers; every file it
    records present with its size and hash. Anything else is a :class:`RunError` naming it."""
    try:
        meta = json.loads((ckpt / "arena.json").read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RunError(
            f"{ckpt / 'arena.json'} is missing or damaged ({type(e).__name__})"
        ) from None
    ok = isinstance(meta, dict) and all(
        isinstance(meta.get(k), int) and not isinstance(meta.get(k), bool) and meta[k] >= 0
        for k in ("iteration", "env_steps")
    )
    if not ok:
        raise RunError(f"{ckpt / 'arena.json'} lacks a valid iteration and env_steps")
    files = meta.get("files")
    if files is None:
        return meta  # written before files were recorded: the loaders' own checks still apply
    if not isinstance(files, dict):
        raise RunError(f"{ckpt / 'arena.json'}: 'files' is not a mapping")
    for rel, want in files.items():
        path = ckpt / rel
        data = path.read_bytes() if path.is_file() else None
        if (
            data is None
            or not isinstance(want, dict)
            or len(data) != want.get("bytes")
            or hashlib.sha256(data).hexdigest() != want.get("sha256")
        ):
            raise RunError(
                f"{path} is missing or damaged (its size or hash differs from arena.json)"
            )
    return meta


def verify_weights(ckpt: Path) -> None:
    """Checks a checkpoint before its weights are loaded (see :func:`checkpoint_meta`)."""
    checkpoint_meta(ckpt)


def resumable_meta(ckpt: Path) -> dict:
    """:func:`checkpoint_meta`, and for a checkpoint whose ``arena.json`` lists no files
    (written before Arena recorded them) a check that every module's RLlib folder is there:
    RLlib would quietly start a missing module from fresh weights."""
    meta = checkpoint_meta(ckpt)
    if "files" in meta:
        return meta
    modules = ckpt / "learner_group" / "learner" / "rl_module"
    have = {p.name for p in modules.iterdir() if p.is_dir()} if modules.is_dir() else set()
    want = {p.stem for p in (ckpt / "weights").glob("*.pt")}
    missing = sorted(want - have) if want else ([] if have else ["any module"])
    if missing:
        raise RunError(
            f"{ckpt.name} is an old-format checkpoint (arena.json lists no files) and "
            f"{modules} lacks {', '.join(missing[:5])}; resume another with --checkpoint iter_N"
        )
    return meta


def resume_checkpoint(run: Path, name: str | None) -> tuple[Path, dict]:
    """The checkpoint to resume: ``name`` (``iter_N``) if given, else the newest one that
    verifies; a damaged newer one (or a damaged ``latest`` pointer) is skipped with one
    warning line."""
    ckdir = run / "checkpoints"
    if name is not None:
        ckpt = ckdir / name
        if not CHECKPOINT_NAME.match(name) or not ckpt.is_dir():
            have = sorted(p.name for p in ckdir.glob("iter_*")) if ckdir.is_dir() else []
            raise RunError(f"{run} has no checkpoint {name[:80]!r}; it has {have or 'none'}")
        return ckpt, resumable_meta(ckpt)
    pointed, problem = _pointed(run)
    candidates = _checkpoints(ckdir)
    if pointed is not None:  # never newer than latest: those are an abandoned attempt's
        candidates = [p for p in candidates if p.name <= pointed.name]
    problems = [problem] if problem else []
    for ckpt in candidates:
        try:
            meta = resumable_meta(ckpt)
        except RunError as e:
            problems.append(str(e))
            continue
        if problems:
            print(
                f"arena: warning: {problems[0]}; resuming from {ckpt.name} instead", file=sys.stderr
            )
        return ckpt, meta
    raise RunError(problems[0] if problems else f"{run} has no checkpoint to resume")


# --- plain-torch loops (arena prm train, arena offline) ------------------------------------------
LOOP_CHECKPOINT, LOOP_PROGRESS = "checkpoint.pt", "progress.json"
"""A plain-torch loop's files beside its identity file: the weights and optimiser state, and
where it stands (step, losses, seconds)."""


def claim_loop_dir(out: Path, identity: str, spec: dict, what: str, error: type) -> None:
    """Refuses ``out`` when it holds another run (its ``identity`` file names another
    ``spec``) or files that are not a run; the same spec continues the run there."""
    saved = out / identity
    if saved.is_file():
        before = json.loads(saved.read_text())
        if {k: before.get(k) for k in spec} != spec:
            named = next((before.get(k) for k in spec if k != "config"), None)
            raise error(f"{out} holds another {what} run ({named}); use a new --out")
    elif out.exists() and any(out.iterdir()):
        raise error(f"{out} holds files but no {what} run; use a new --out")


def load_loop(out: Path) -> tuple[dict | None, dict | None]:
    """A loop's last checkpoint (tensors only, ``weights_only``) and progress, or Nones."""
    import torch

    ckpt, progress = out / LOOP_CHECKPOINT, out / LOOP_PROGRESS
    if not (ckpt.is_file() and progress.is_file()):
        return None, None
    return torch.load(ckpt, weights_only=True), json.loads(progress.read_text())


def save_loop(out: Path, blob: dict, progress: dict) -> None:
    """Writes the checkpoint, then the progress that points past it, each atomically: a
    crash between the two resumes from the older progress and repeats those steps."""
    import torch

    from envs.files import replacing

    with replacing(out / LOOP_CHECKPOINT) as tmp:
        torch.save(blob, tmp)
    write_atomic(out / LOOP_PROGRESS, json.dumps(progress))
