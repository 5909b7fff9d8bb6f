import gymnasium as gym
import numpy as np
import pytest

import envs
from envs.mpe.batched import SpreadBatch
from envs.vector import ParallelEnvBatch


def test_ids_follow_the_pattern_and_cover_every_mpe2_scenario():
    from mpe2.all_modules import mpe_environments

    ids = envs.ids("mpe")
    for key in mpe_environments:  # "mpe/simple_spread_v3"
        name, version = key.split("/")[1].rsplit("_v", 1)
        assert f"mpe/{name}-v{version}" in ids
        assert f"mpe/{name}_continuous-v{version}" in ids


def test_unknown_id_names_the_closest():
    with pytest.raises(envs.EnvError, match="simple_spread-v3"):
        envs.make("mpe/simple_sprad-v3")


def test_unknown_argument_names_the_allowed_ones():
    with pytest.raises(envs.EnvError, match="allowed: .*max_cycles"):
        envs.make("mpe/simple_spread-v3", max_cycle=5)


def test_duplicate_and_malformed_ids_are_refused():
    with pytest.raises(envs.EnvError, match="already registered"):
        envs.register("mpe/simple_spread-v3", lambda: None)
    with pytest.raises(envs.EnvError, match="family/name-vN"):
        envs.register("no_version", lambda: None)


def test_continuous_variant_has_box_actions():
    env = envs.make("mpe/simple_spread_continuous-v3")
    assert isinstance(env.action_space("agent_0"), gym.spaces.Box)


def test_make_vector_uses_the_core_where_it_models_the_arguments():
    assert isinstance(envs.make_vector("mpe/simple_spread-v3", 4), SpreadBatch)
    fallback = envs.make_vector("mpe/simple_spread-v3", 2, terminate_on_success=True)
    assert isinstance(fallback, ParallelEnvBatch)
    assert isinstance(envs.make_vector("mpe/simple-v3", 2), ParallelEnvBatch)


def test_heterogeneous_agents_form_groups_with_their_own_arrays():
    vec = envs.make_vector("mpe/simple_adversary-v3", 2, seed=0)
    assert {g: (v.agents, v.index) for g, v in vec.groups.items()} == {
        "adversary": (("adversary_0",), (0,)),
        "agent": (("agent_0", "agent_1"), (1, 2)),
    }
    vec.reset()
    step = vec.step({"adversary": np.zeros((2, 1), int), "agent": np.zeros((2, 2), int)})
    assert step.obs["adversary"].shape == (2, 1, 8) and step.obs["agent"].shape == (2, 2, 10)
    assert step.rewards.shape == (2, 3)
    ref = envs.make("mpe/simple_adversary-v3")
    obs, _ = ref.reset(seed=0)
    obs, rew, *_ = ref.step(dict.fromkeys(ref.possible_agents, 0))
    np.testing.assert_allclose(step.obs["agent"][0, 1], obs["agent_1"], rtol=1e-6)
    np.testing.assert_allclose(step.rewards[0], [rew[a] for a in ref.possible_agents], rtol=1e-6)


def test_ray_registration_builds_envs_by_id(ray_session):
    from ray.tune.registry import ENV_CREATOR, _global_registry

    creator = _global_registry.get(ENV_CREATOR, "mpe/simple_spread-v3")
    env = creator({"max_cycles": 5})
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"agent_0", "agent_1", "agent_2"}
    assert np.asarray(env.state()).shape == (54,)


def test_listing_ids_imports_no_family_package():
    import subprocess
    import sys

    probe = (
        "import sys, envs; n = len(envs.ids()); "
        "print(n, [m for m in ('mpe2', 'pettingzoo', 'torch', 'ray') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    count, loaded = out.stdout.split(" ", 1)
    assert int(count) >= 62 and loaded.strip() == "[]", out.stdout + out.stderr


def test_a_family_without_its_extra_says_which_to_install(monkeypatch):
    from envs import registry

    monkeypatch.setitem(registry.EXTRAS, "arena_absent_pkg", "absent")
    monkeypatch.setitem(
        registry._REGISTRY,
        "test/absent-v0",
        registry.EnvSpec("test/absent-v0", "arena_absent_pkg.envs:make"),
    )
    with pytest.raises(
        envs.EnvError, match=r"needs the package arena_absent_pkg: .*arena\[absent\]"
    ):
        envs.make("test/absent-v0")
    with pytest.raises(envs.EnvError, match="'package.module:attr'"):
        registry.resolve("no_colon_here")
