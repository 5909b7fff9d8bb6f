"""One definition of the module input: the sampler, ``arena eval``, the policy server and the
benches fill it through ``BatchSpec`` and must agree, row for row and logit for logit."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import envs
from policies import algorithm
from policies.batch import AGENT_ID, MASK, OBS, STATE, BatchSpec
from policies.inference import ModulePolicy, Policy
from policies.sampling import _Module, slot_from_config
from serve.policy import ModulesPolicy, PolicySpec


def modules_of(env_id: str, algo: str, sharing: str = "auto") -> dict:
    info = algorithm.get(algo)
    multi = info.modules(env_id, info.settings(), sharing=sharing)
    torch.manual_seed(0)
    return {mid: spec.build() for mid, spec in multi.rl_module_specs.items()}, multi


def logits(module, batch: dict) -> np.ndarray:
    with torch.no_grad():
        return module.step(
            {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in batch.items()}, None
        )[0].numpy()


@pytest.mark.parametrize(
    "env_id, algo, sharing",
    [
        ("smac/3m-v0", "mappo", "auto"),
        ("mpe/simple_tag-v3", "mappo", "per_group"),
        ("mpe/simple_tag-v3", "ippo", "per_agent"),
        ("test/image_grid-v0", "mappo", "auto"),
    ],
)
def test_every_path_packs_the_same_rows(env_id, algo, sharing):
    built, multi = modules_of(env_id, algo, sharing)
    B = 3
    vec = envs.make_vector(env_id, B, seed=4)
    step = vec.reset()
    env = envs.make(env_id)
    policy = Policy({mid: ModulePolicy(m) for mid, m in built.items()})
    served = ModulesPolicy(
        PolicySpec(
            name="p",
            env=env_id,
            algo=algo,
            run="r",
            checkpoint="c",
            version="v",
            agents=tuple(env.possible_agents),
            observation_spaces={a: env.observation_space(a) for a in env.possible_agents},
            action_spaces={a: env.action_space(a) for a in env.possible_agents},
        ),
        policy,
    )
    for mid, module in built.items():
        spec = multi.rl_module_specs[mid]
        m = _Module(
            slot_from_config(mid, spec),
            BatchSpec.from_dict(spec.model_config["batch_spec"]),
            module,
            True,
            None,
        )
        K = m.agents_per_env
        # the sampler: one step of B envs written into its rollout rows
        sampler = m.spec.buffers(B * K)
        m.write(sampler, step.obs, step.action_mask, step.state)
        if m.spec.kind == "image":
            assert sampler[OBS].dtype == np.uint8
        # eval (and the benches' Policy path): per env, the PettingZoo-style observation dict
        for b in range(B):
            obs = {}
            for agent in m.slot.agents:
                group, idx = next(
                    (g, i) for g, i in m.slot.members if agent in vec.groups[g].agents
                )
                j = vec.groups[group].agents.index(agent)
                o = step.obs[group][b, j]
                obs[agent] = (
                    {"observations": o, "action_mask": step.action_mask[group][b, j]}
                    if m.spec.mask_dim
                    else o
                )
            rows = slice(b * K, (b + 1) * K)
            packed = policy.pack(mid, obs, step.state[b])
            for key in sampler:
                np.testing.assert_array_equal(packed[key], sampler[key][rows], err_msg=key)
            # serve: JSON lists in, the same actor logits out (the server has no global state:
            # the actor never reads it)
            payload = {
                a: (
                    {k2: np.asarray(v).tolist() for k2, v in o.items()}
                    if isinstance(o, dict)
                    else np.asarray(o).tolist()
                )
                for a, o in obs.items()
            }
            parsed = served.parse({"observations": payload})
            mask = None if parsed.masks[0] is None else np.concatenate(parsed.masks)
            from_serve = m.spec.pack(np.concatenate(parsed.obs), mask, None, range(K))
            np.testing.assert_allclose(
                logits(module, from_serve), logits(module, packed), atol=1e-6
            )
            if m.spec.state_dim:
                assert (from_serve[STATE] == 0).all() and from_serve[AGENT_ID].sum() == K
        # the benches' batched path (bench/learn_smac.py): spec.write over a whole core step
        bench = m.spec.buffers(B * K)
        m.spec.write(bench, m.gather(step.obs), m.gather(step.action_mask), step.state)
        for key in sampler:
            np.testing.assert_array_equal(bench[key], sampler[key])
        assert (MASK in sampler) == bool(m.slot.masked)


def test_token_observations_are_embedded():
    spec = BatchSpec.for_space(gym.spaces.Box(0, 99, (12,), np.int64))
    assert spec.kind == "tokens" and spec.obs_high == 99
    from policies.modules import ActorCritic

    module = ActorCritic(
        observation_space=spec.space(),
        action_space=gym.spaces.Discrete(4),
        model_config={"batch_spec": spec.to_dict()},
    )
    batch = spec.pack(np.random.default_rng(0).integers(0, 100, (5, 12)))
    assert logits(module, batch).shape == (5, 4)


def test_bad_observation_shapes_are_named():
    with pytest.raises(ValueError, match="vectors \\[D\\], images \\[H, W, C\\] or tokens"):
        _ = BatchSpec(obs_shape=(2, 3)).kind
