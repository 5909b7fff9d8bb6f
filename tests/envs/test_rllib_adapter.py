import numpy as np

from envs.rllib import RLlibMultiAgentEnv


def test_adapter_steps_with_all_flags_and_state():
    env = RLlibMultiAgentEnv("mpe/simple_spread-v3", {"max_cycles": 3, "with_state": True})
    obs, infos = env.reset(seed=0)
    assert set(obs) == set(env.possible_agents)
    assert infos["agent_0"]["state"].shape == (54,)
    for _t in range(3):
        obs, rew, terms, truncs, infos = env.step({a: 0 for a in env.agents})
    assert truncs["__all__"] and not terms["__all__"]
    assert env.observation_spaces["agent_0"].shape == (18,)


def test_adapter_keeps_rllib_mask_convention():
    env = RLlibMultiAgentEnv("test/masked_grid-v0")
    obs, _ = env.reset(seed=1)
    assert set(obs["a0"]) == {"observations", "action_mask"}
    assert np.asarray(obs["a0"]["action_mask"]).shape == (3,)
