"""MAPPO: PPO whose critic reads the env's global state and the agent's one-hot id.

Yu et al., "The Surprising Effectiveness of PPO in Cooperative Multi-Agent Games" (2022).
The actor reads the agent's own observation (and action mask); the centralised critic is used
in training only, so the deployed policy is decentralised.

``--set paper=true`` on a SMAC battle trains with that paper's SMAC setup for the map
(:data:`PAPER_COMMON`, :data:`PAPER_PER_MAP`, :data:`PAPER_SMACV2`): its loss
(:data:`PAPER_LOSS`), network (:data:`PAPER_MODEL`) and, on SMAC v1 maps, its env setup
(:data:`PAPER_ENV`: the agent-specific state with death masking).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from policies.algorithm import AlgorithmInfo, AlgorithmMismatch, Capabilities
from policies.ppo import PPO_METRICS, PPOSettings, configure_ppo, declare_ppo
from policies.ppo.demos import warm_start

# The MAPPO paper's SMAC setup (github.com/marlbenchmark/on-policy, onpolicy/config.py and
# scripts/train_smac*_scripts/): rMAPPO with a GRU over 10-step chunks, MLP 64x64, lr 5e-4,
# clip 0.2, entropy 0.01, gradient norm 10, value loss weight 1, 8 rollout threads x 400
# steps a batch, one minibatch of every agent's chunks (num_mini_batch; shared_buffer.py's
# recurrent_generator splits all agents' chunks into that many); per map the scripts change
# the epochs, the clip and the minibatches (maps without a script, 2s3z among them, keep the
# config's 15 epochs).
PAPER_COMMON = {
    "lr": 5e-4,
    "clip_param": 0.2,
    "entropy_coeff": 0.01,
    "grad_clip": 10.0,
    "vf_loss_coeff": 1.0,
    "train_batch_size": 8 * 400,
    "num_envs_per_env_runner": 8,
    "num_epochs": 15,
    "num_minibatches": 1,
}
PAPER_PER_MAP = {
    "10m_vs_11m": {"num_epochs": 10},
    "25m": {"num_epochs": 10},
    "27m_vs_30m": {"num_epochs": 5},
    "2c_vs_64zg": {"num_epochs": 5},
    "3s5z": {"num_epochs": 5},
    "3s5z_vs_3s6z": {"num_epochs": 5},
    "3s_vs_5z": {"clip_param": 0.05},
    "5m_vs_6m": {"num_epochs": 10, "clip_param": 0.05},
    "6h_vs_8z": {"num_epochs": 5},
    "8m_vs_9m": {"clip_param": 0.05},
    "MMM2": {"num_epochs": 5, "num_minibatches": 2},
    "corridor": {"num_epochs": 5},
}
PAPER_SMACV2 = {"num_epochs": 5}
"""Every SMACv2 scenario (scripts/train_smacv2_scripts/: 5 epochs, 20 M env steps)."""

# marlbenchmark/on-policy@de66d7a, every SMAC run: the defaults of onpolicy/config.py (and of
# StarCraft2_Env / train_smac.py for the env), under on-policy's knob names.
PAPER_LOSS = {
    "value_loss": "huber",  # use_huber_loss=True (config.py:265)
    "huber_delta": 10.0,  # huber_delta (config.py:270)
    # use_clipped_value_loss=True (config.py:243-244): the value moves at most clip_param
    # from the sampled one (r_mappo.py:62-63; vf_clip_param follows clip_param per map)
    "value_clip": "change",
    "policy_active_masks": True,  # use_policy_active_masks=True (config.py:268-269)
    "value_active_masks": True,  # use_value_active_masks=True (config.py:266-267)
    # advantages standardised over the batch's rows of live agents (r_mappo.py:179-187)
    "advantage_norm": "active_batch",
    "adam_eps": 1e-5,  # opti_eps (config.py:228); weight_decay 0 (config.py:230)
    # separate actor and critic Adam optimisers (rMAPPOPolicy.py:31-37), each clipped at
    # max_grad_norm (use_max_grad_norm, config.py:253-256; r_mappo.py:149, 163)
    "grad_clip_per_network": True,
}
PAPER_MODEL = {
    "recurrent": True,  # use_recurrent_policy=True (config.py:217)
    "max_seq_len": 10,  # data_chunk_length (config.py:220)
    "hidden": [64, 64],  # hidden_size 64, layer_N 1: fc1 and one fc2 (config.py:199-202, mlp.py)
    "activation": "relu",  # use_ReLU=True (config.py:203)
    "value_norm": True,  # use_valuenorm=True (config.py:206)
    "input_norm": True,  # use_feature_normalization=True (config.py:207)
    # use_orthogonal=True (config.py:209), gain=0.01 of the action head (config.py:211),
    # calculate_gain(relu) and a LayerNorm per hidden layer (mlp.py:11-24), GRU + LayerNorm
    # (rnn.py:13-22)
    "init": "onpolicy",
}
PAPER_MODEL_V1 = {"agent_id": True}
"""SMAC v1: the actor reads the agent's one-hot id after its observation (StarCraft2_Env's
``obs_agent_id=True``, StarCraft2_Env.py:84, 1122-1128)."""
PAPER_SMACV2_LOSS = {
    "policy_active_masks": False,
    "value_active_masks": False,
    "advantage_norm": "batch",
}
"""SMACv2: on-policy's wrapper marks every agent done only when the episode is
(onpolicy/envs/starcraft2/SMACv2.py:36), so its active masks are all ones: no masks, and the
advantages standardised over the whole batch (RLlib's sample std + 1e-8 for on-policy's
population std + 1e-5: the same at thousands of rows)."""
PAPER_ENV_ALL = {
    # use_proper_time_limits=False (config.py:263): a time-out ends the episode and is not
    # bootstrapped (StarCraft2_Env.py:560-563 and SMACv2's env set terminated)
    "terminate_at_limit": True,
}
PAPER_ENV = {
    **PAPER_ENV_ALL,
    "use_state_agent": True,  # train_smac.py:119 (StarCraft2_Env.get_state_agent)
    "use_mustalive": True,  # train_smac.py:120: a dead agent's state is zeros but for its id
    "add_center_xy": True,  # train_smac.py:121
    "obs_last_action": True,  # StarCraft2_Env.py:79: allies' last actions in the observation
}
"""The SMAC v1 env options of every paper run; SMACv2 scenarios get :data:`PAPER_ENV_ALL`
only (on-policy runs SMACv2's own env with its state, onpolicy/envs/starcraft2/SMACv2.py)."""


@dataclass
class MAPPOSettings(PPOSettings):
    """MAPPO's settings: PPO's (see :class:`policies.ppo.PPOSettings`)."""

    paper: bool = False
    """SMAC battles only: train with the MAPPO paper's settings for the map (recurrent, lr,
    clip, epochs, batch, minibatches, its loss and network; on SMAC v1 maps its
    agent-specific state); leave those settings and env options at their defaults."""


def paper_settings(env_id: str, settings: MAPPOSettings) -> MAPPOSettings:
    """``settings`` with the MAPPO paper's SMAC setup for ``env_id``'s map filled in (or as
    they are when ``paper`` is off)."""
    if not settings.paper:
        return settings
    family, _, rest = env_id.partition("/")
    if family not in ("smac", "smacv2"):
        raise AlgorithmMismatch(
            f"mappo paper=true is the MAPPO paper's SMAC setup; {env_id!r} is not a SMAC "
            "battle (smac/<map>-v0 or smacv2/<scenario>-v0)"
        )
    name = rest.rsplit("-v", 1)[0]
    per_map = PAPER_SMACV2 if family == "smacv2" else PAPER_PER_MAP.get(name, {})
    knobs = {**PAPER_COMMON, **PAPER_LOSS, **(PAPER_SMACV2_LOSS if family == "smacv2" else {})}
    knobs.update(per_map)
    knobs["vf_clip_param"] = knobs["clip_param"]  # on-policy clips the value with clip_param
    model = {**PAPER_MODEL, **(PAPER_MODEL_V1 if family == "smac" else {})}
    default = MAPPOSettings()
    changed = [k for k in knobs if getattr(settings, k) != getattr(default, k)]
    changed += [f"model.{k}" for k in model
                if getattr(settings.model, k) != getattr(default.model, k)]  # fmt: skip
    if changed:
        raise AlgorithmMismatch(
            f"mappo paper=true sets {', '.join(changed)} itself; leave them out or drop paper"
        )
    return dataclasses.replace(
        settings, model=dataclasses.replace(settings.model, **model), **knobs
    )


def paper_env(env_id: str, settings: MAPPOSettings, env_config: dict) -> dict:
    """``env_config`` with the MAPPO paper's SMAC env options (:data:`PAPER_ENV` on v1 maps,
    :data:`PAPER_ENV_ALL` on SMACv2) where ``paper`` is on; one the user set otherwise is an
    error."""
    family = env_id.partition("/")[0]
    if not settings.paper or family not in ("smac", "smacv2"):
        return env_config
    paper = PAPER_ENV if family == "smac" else PAPER_ENV_ALL
    clash = [f"{k}={env_config[k]!r}" for k, v in paper.items() if env_config.get(k, v) != v]
    if clash:
        sets = ", ".join(f"{k}={v}" for k, v in paper.items())
        raise AlgorithmMismatch(
            f"mappo paper=true sets the env options {sets} itself (the MAPPO paper's SMAC "
            f"env); leave out {', '.join(clash)} or drop paper"
        )
    return {**env_config, **paper}


def declare(env_id: str, settings: MAPPOSettings, opts):
    return declare_ppo(env_id, settings, opts, centralised_critic=True)


ALGORITHM = AlgorithmInfo(
    name="mappo",
    description="shared actor, centralised critic on the global state and agent id",
    settings=MAPPOSettings,
    capabilities=Capabilities(needs_state=True),
    prepare=paper_settings,
    env_options=paper_env,
    declare=declare,
    configure=configure_ppo,
    metrics=PPO_METRICS,
    warm_start=warm_start,
)
