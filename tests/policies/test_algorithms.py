"""Training smoke tests per algorithm and env kind, the masking path, every mpe2 scenario with
the right modules, frozen modules, remote learners and capability checks."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import envs
from policies import algorithm
from policies.algorithm import AlgorithmInfo, AlgorithmMismatch, Capabilities, EnvFacts
from policies.batch import BatchSpec
from policies.modules import ActorCritic

SMALL = dict(train_batch_size=256, minibatch_size=128, num_epochs=2, num_envs_per_env_runner=8)


def build(env_id, algo="ippo", **options):
    info = algorithm.get(algo)
    settings = info.settings(**SMALL)
    for key, value in options.pop("model", {}).items():
        setattr(settings.model, key, value)
    return info.build(env_id, settings, seed=0, **options).build_algo()


def trained_modules(result) -> dict:
    """Learner metrics of the modules that took a gradient step."""
    return {
        k: v for k, v in result["learners"].items() if not k.startswith("__") and "policy_loss" in v
    }


VECTOR_ALGOS = [
    n
    for n in algorithm.names()
    if algorithm.get(n).losses == algorithm.PPO_LOSSES
    and algorithm.get(n).capabilities.obs_kinds != {"text"}
    and n != "selfplay"
]
"""PPO's algorithms of vector envs (bc and grpo train language models: tests/policies/test_lm.py;
selfplay plays two-team games: tests/policies/test_selfplay.py; the value-based ones:
tests/policies/test_q*.py and tests/training/test_q_runs.py)."""


@pytest.mark.parametrize("algo", VECTOR_ALGOS)
@pytest.mark.parametrize("env_id", ["mpe/simple_spread-v3", "mpe/simple_spread_continuous-v3"])
def test_two_iterations_train(ray_session, algo, env_id):
    algo_ = build(env_id, algo)
    before = {k: v.clone() for k, v in algo_.get_module("shared").state_dict().items()}
    for _ in range(2):
        result = algo_.train()
    learner = trained_modules(result)["shared"]
    assert np.isfinite(learner["policy_loss"]) and np.isfinite(learner["vf_loss"])
    assert result["env_runners"]["num_env_steps_sampled_lifetime"] >= 512
    after = algo_.get_module("shared").state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    algo_.stop()


# Every mpe2 scenario: one module per agent group where groups differ.
MPE_MODULES = {
    "collect_treasure": {"collector", "deposit"},
    "simple": {"agent"},
    "simple_adversary": {"adversary", "agent"},
    "simple_crypto": {"eve", "bob", "alice"},
    "simple_formation": {"agent"},
    "simple_line": {"agent"},
    "simple_push": {"adversary", "agent"},
    "simple_reference": {"agent"},
    "simple_speaker_listener": {"speaker", "listener"},
    "simple_spread": {"agent"},
    "simple_tag": {"adversary", "agent"},
    "simple_world_comm": {"leadadversary", "adversary", "agent"},
}


@pytest.mark.parametrize("scenario", sorted(MPE_MODULES))
def test_every_mpe_scenario_trains_with_a_module_per_group(ray_session, scenario):
    env_id = next(i for i in envs.ids("mpe") if i.startswith(f"mpe/{scenario}-v"))
    algo_ = build(env_id, "ippo", env_config={"max_cycles": 10})
    modules = set(algo_.config.rl_module_spec.rl_module_specs)
    assert modules == {"shared"} if MPE_MODULES[scenario] == {"agent"} else MPE_MODULES[scenario]
    for _ in range(2):
        result = algo_.train()
    assert set(trained_modules(result)) == modules
    for metrics in trained_modules(result).values():
        assert np.isfinite(metrics["policy_loss"])
    assert set(result["env_runners"]["module_episode_returns_mean"]) == modules
    algo_.stop()


def test_per_agent_policies_and_frozen_modules(ray_session):
    algo_ = build("mpe/simple_tag-v3", "ippo", sharing="per_agent", frozen=("agent_0",))
    specs = algo_.config.rl_module_spec.rl_module_specs
    assert set(specs) == {"adversary_0", "adversary_1", "adversary_2", "agent_0"}
    frozen = {k: v.clone() for k, v in algo_.get_module("agent_0").state_dict().items()}
    trained = {k: v.clone() for k, v in algo_.get_module("adversary_1").state_dict().items()}
    result = algo_.train()
    assert set(trained_modules(result)) == {"adversary_0", "adversary_1", "adversary_2"}
    assert all(
        torch.equal(v, algo_.get_module("agent_0").state_dict()[k]) for k, v in frozen.items()
    )
    assert any(
        not torch.equal(v, algo_.get_module("adversary_1").state_dict()[k])
        for k, v in trained.items()
    )
    # Weights set from outside (self-play's opponent) reach the learner and the sampler.
    from policies.ppo import set_module_weights

    new = {k: torch.zeros_like(v) for k, v in frozen.items()}
    set_module_weights(algo_, {"agent_0": new})
    for module in (algo_.get_module("agent_0"), algo_.env_runner.module["agent_0"]):
        assert all(float(v.abs().sum()) == 0 for v in module.state_dict().values())
    algo_.stop()


def test_shared_policy_across_differing_spaces_is_a_clear_error():
    with pytest.raises(AlgorithmMismatch, match="shared needs one observation.*per_group"):
        algorithm.get("ippo").build(
            "mpe/simple_tag-v3", algorithm.get("ippo").settings(), sharing="shared"
        )
    with pytest.raises(AlgorithmMismatch, match="cannot freeze"):
        algorithm.get("ippo").build(
            "mpe/simple_tag-v3", algorithm.get("ippo").settings(), frozen=("nobody",)
        )


def test_capabilities_refuse_what_an_algorithm_cannot_train():
    vec = envs.make_vector("test/masked_grid-v0", 1)
    facts = EnvFacts.of("test/masked_grid-v0", vec)
    assert facts.masked and facts.action_kinds == {"discrete"} and facts.obs_kinds == {"vector"}
    narrow = AlgorithmInfo(
        "narrow",
        "test",
        object,
        Capabilities(
            action_kinds=frozenset({"continuous"}),
            action_masks=False,
            groups=False,
            obs_kinds=frozenset({"image"}),
            recurrent=False,
        ),
        declare=None,
        configure=None,
    )
    with pytest.raises(AlgorithmMismatch) as e:
        narrow.check(facts, recurrent=True)
    for part in (
        "narrow cannot train test/masked_grid-v0",
        "discrete",
        "masks",
        "vector",
        "recurrent",
    ):
        assert part in str(e.value)
    tag = EnvFacts.of("mpe/simple_tag-v3", envs.make_vector("mpe/simple_tag-v3", 1))
    with pytest.raises(AlgorithmMismatch, match="2 agent groups"):
        narrow.check(tag)
    no_state = EnvFacts("x/y-v0", frozenset({"discrete"}), False, 1, frozenset({"vector"}), 0)
    with pytest.raises(AlgorithmMismatch, match="no global state"):
        algorithm.get("mappo").check(no_state)
    algorithm.get("ippo").check(no_state)  # ippo's critic reads the observation


def test_unknown_algorithm_names_the_known_ones():
    with pytest.raises(AlgorithmMismatch, match="allowed: ippo, mappo"):
        algorithm.get("dqn")


def test_mappo_with_masks_never_samples_illegal_actions(ray_session):
    algo_ = build("test/masked_grid-v0", "mappo")
    algo_.train()  # the env raises on an illegal action
    episodes = algo_.env_runner.sample(num_timesteps=64)
    spec = algo_.env_runner.modules["shared"].spec
    assert spec.mask_dim == 3
    for e in episodes:
        masks, a = e.get_observations()["action_mask"][:-1], e.get_actions()
        assert masks[np.arange(len(a)), a].all()
    algo_.stop()


def test_masked_logits_are_minus_infinity_like():
    spec = BatchSpec(obs_shape=(3,), mask_dim=2)
    module = ActorCritic(
        observation_space=spec.space(),
        action_space=gym.spaces.Discrete(2),
        model_config={"batch_spec": spec.to_dict()},
    )
    batch = spec.pack(np.array([[0.1, 0.2, 0.3]]), np.array([[1.0, 0.0]]))
    logits, _ = module.step({k: torch.from_numpy(v) for k, v in batch.items()}, None)
    assert logits[0, 1] < -1e30 and torch.softmax(logits, -1)[0, 0] == 1.0


def test_remote_env_runner_and_remote_learner_train(ray_session):
    algo_ = build("mpe/simple_spread-v3", "ippo", num_env_runners=1)
    result = algo_.train()
    assert result["env_runners"]["num_env_steps_sampled_lifetime"] >= 256
    algo_.stop()
    algo_ = build("mpe/simple_spread-v3", "mappo", learners=1)
    before = {k: v.clone() for k, v in algo_.get_module("shared").state_dict().items()}
    result = algo_.train()
    assert np.isfinite(trained_modules(result)["shared"]["policy_loss"])
    after = algo_.get_module("shared").state_dict()  # fetched from the remote Learner
    assert any(not torch.equal(before[k], after[k]) for k in before)
    algo_.stop()


def test_masked_mappo_trains_on_smac_with_the_global_state(ray_session):
    algo_ = build("smac/3m-v0", "mappo")
    spec = algo_.env_runner.modules["shared"].spec
    assert (spec.obs_shape, spec.mask_dim, spec.state_dim, spec.num_ids) == ((30,), 9, 48, 3)
    for _ in range(2):
        result = algo_.train()  # the core raises on any unavailable action
    runners = result["env_runners"]
    assert 0.0 <= runners["win_rate"] <= 1.0
    assert np.isfinite(trained_modules(result)["shared"]["vf_loss"])
    algo_.stop()


def test_recurrent_mappo_trains_on_smac(ray_session):
    algo_ = build("smac/3m-v0", "mappo", model={"recurrent": True, "max_seq_len": 8})
    module = algo_.get_module("shared")
    assert module.is_stateful() and module.model_config["max_seq_len"] == 8
    before = {k: v.clone() for k, v in module.state_dict().items()}
    for _ in range(2):
        result = algo_.train()
    assert np.isfinite(trained_modules(result)["shared"]["policy_loss"])
    after = algo_.get_module("shared").state_dict()
    assert not torch.equal(before["pi_gru.weight_hh_l0"], after["pi_gru.weight_hh_l0"])
    algo_.stop()


def test_mappo_paper_settings_follow_the_on_policy_scripts():
    """``--set paper=true``: marlbenchmark/on-policy's config and per-map scripts."""
    from policies.mappo import paper_settings

    info = algorithm.get("mappo")
    s = paper_settings("smac/5m_vs_6m-v0", info.settings(paper=True))
    assert (s.lr, s.clip_param, s.num_epochs, s.grad_clip, s.vf_loss_coeff) == (
        5e-4, 0.05, 10, 10.0, 1.0
    )  # fmt: skip
    # one minibatch of every agent's chunks (on-policy's num_mini_batch 1), whatever the agents
    assert (s.train_batch_size, s.num_minibatches, s.num_envs_per_env_runner) == (3200, 1, 8)
    assert s.model.recurrent and s.model.max_seq_len == 10
    mmm2 = paper_settings("smac/MMM2-v0", info.settings(paper=True))
    assert (mmm2.num_epochs, mmm2.num_minibatches, mmm2.clip_param) == (5, 2, 0.2)
    assert paper_settings("smac/2s3z-v0", info.settings(paper=True)).num_epochs == 15
    assert paper_settings("smacv2/protoss_5_vs_5-v0", info.settings(paper=True)).num_epochs == 5
    off = info.settings()
    assert paper_settings("smac/3m-v0", off) is off
    spec = info.modules("smac/3m-v0", info.settings(paper=True))
    assert spec.rl_module_specs["shared"].model_config["max_seq_len"] == 10
    with pytest.raises(AlgorithmMismatch, match="sets lr itself"):
        paper_settings("smac/3m-v0", info.settings(paper=True, lr=3e-4))
    mixed = info.settings(paper=True)
    mixed.model.recurrent = True
    with pytest.raises(AlgorithmMismatch, match="model.recurrent"):
        paper_settings("smac/3m-v0", mixed)
    with pytest.raises(AlgorithmMismatch, match="not a SMAC battle"):
        paper_settings("mpe/simple_spread-v3", info.settings(paper=True))
