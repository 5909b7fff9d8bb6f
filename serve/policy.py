"""What the policy server serves, independent of the transport: a run's policy described by
its env's spaces, requests validated against them, and the HTTP API as plain functions.

A served policy is anything with the small :class:`ServedPolicy` interface: ``parse`` turns a
request's JSON into a validated, transport-free value (or raises :class:`RequestError`, a
4xx), and ``act`` answers a whole batch of parsed requests with one forward pass. Which class
serves a run, its RLModule class says (``SERVED_BY``), so a new kind of policy (a language
model) is one class and one attribute, never a branch per env or algorithm. A
language model's policy (``serve.lm``) also answers ``POST /v1/chat/completions``, OpenAI's
chat API, with its ``parse_chat``.

Request body of ``POST /v1/policies/{name}/act``::

    {"observations": {"agent_0": [...], "agent_1": [[...], [...]]}, "explore": false}

One observation per agent, or a list of them (a whole vectorised env in one call). Where the
env masks actions an observation is ``{"observations": [...], "action_mask": [0, 1, ...]}``,
its arrays batched the same way. The answer mirrors it: ``{"actions": {"agent_0": 3,
"agent_1": [1, 4]}, "version": ...}``.

A recurrent policy (a GRU, a Q-network reading its last action) keeps no state on the server:
its answer also holds ``"state": {agent: {key: [...]}}``, which the client sends back with the
agent's next observation (``"state"`` beside ``"observations"``, batched the same way); an
agent without one starts an episode (the initial state).
"""

from __future__ import annotations

import importlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

MAX_ROWS = 8192
"""Most observations in one request (a bigger batch is a 413: split it)."""
MAX_BODY_BYTES = 32 * 1024 * 1024
"""Largest request body (by ``Content-Length`` or as read): a bigger one is a 413 before the
replica reads it."""
MAX_DEPTH = 6
"""Deepest JSON nesting a request may use (``observations`` -> agent -> [n, H, W, C])."""
MAX_INT_DIGITS = 40
"""Most digits of an integer in a request (float32 observations hold at most 39)."""
MAX_CHAT_BYTES = 1 << 20
"""Largest chat request body (a 413): far more text than a model's prompt may hold."""
JSON_TYPES = ("application/json",)
REQUEST_KEYS = ("observations", "explore", "state")


class RequestError(ValueError):
    """A request the server refuses; ``status`` is its 4xx code, the message says why."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def space_json(space: gym.Space) -> dict[str, Any]:
    """A JSON description of a gymnasium space (what clients validate against)."""
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.Box):
        finite = lambda a: [None if not np.isfinite(x) else float(x) for x in a.flat]  # noqa: E731
        return {
            "type": "Box",
            "shape": list(space.shape),
            "dtype": str(space.dtype),
            "low": finite(space.low),
            "high": finite(space.high),
        }
    if isinstance(space, gym.spaces.Dict):
        return {"type": "Dict", "spaces": {k: space_json(v) for k, v in space.spaces.items()}}
    if isinstance(space, gym.spaces.Text):
        return {"type": "Text", "max_length": int(space.max_length)}
    return {"type": type(space).__name__, "repr": str(space)}


@dataclass(frozen=True)
class PolicySpec:
    """One deployed policy: where it comes from and the spaces requests are checked against.

    Args:
        name: the route name, ``/v1/policies/{name}``.
        env: the env id the run trained on.
        algo: the run's algorithm.
        run: the run directory.
        checkpoint: the checkpoint the RLModule is restored from.
        version: ``<run name>/<checkpoint name>``, so a client sees a redeploy.
        agents: the env's agents in order.
        observation_spaces: agent -> observation space.
        action_spaces: agent -> action space.
        meta: the checkpoint's ``arena.json`` (iteration, env steps).
        modules: the run's ``MultiRLModuleSpec`` (rebuilt here, from the env, so replicas
            build the modules without the env).
    """

    name: str
    env: str
    algo: str
    run: str
    checkpoint: str
    version: str
    agents: tuple[str, ...]
    observation_spaces: dict[str, gym.Space]
    action_spaces: dict[str, gym.Space]
    meta: dict[str, Any] = field(default_factory=dict)
    modules: Any = None

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "env": self.env,
            "algo": self.algo,
            "version": self.version,
            "agents": list(self.agents),
            "observation_spaces": {a: space_json(s) for a, s in self.observation_spaces.items()},
            "action_spaces": {a: space_json(s) for a, s in self.action_spaces.items()},
            "masked": any(isinstance(s, gym.spaces.Dict) for s in self.observation_spaces.values()),
            "checkpoint": {"path": self.checkpoint, **self.meta},
        }


NAME_RE = re.compile(r"^[A-Za-z0-9._-]+$")


def spec_from_run(
    run: str | Path, name: str | None = None, seed_index: int | None = None
) -> PolicySpec:
    """The :class:`PolicySpec` of a run directory's newest checkpoint (builds the env once for
    its spaces; the server itself never builds an env); ``seed_index``: the seed of a stacked
    run (``arena train --seeds N``)."""
    import envs
    from serve.lm import BASES, base_spec
    from serve.prm import is_prm_run, prm_spec
    from training.checkpoints import latest_checkpoint, load_config, verify_weights
    from training.evaluation import module_specs

    if str(run) in BASES and not Path(run).exists():  # an untuned base model, no run
        return base_spec(str(run), name)
    if is_prm_run(run):  # a process reward model (arena prm train): POST /v1/reward
        return prm_spec(run, name)
    run = Path(run)
    ckpt = latest_checkpoint(run)
    verify_weights(ckpt)  # a damaged run fails here, before Ray starts
    cfg = load_config(run)
    env = envs.make(cfg.env, **cfg.env_args)
    agents = tuple(env.possible_agents)
    name = name or f"{cfg.algo}-{cfg.env.split('/')[-1]}"
    if not NAME_RE.match(name):
        raise ValueError(f"policy name {name!r} may only use letters, digits and . _ -")
    spec = PolicySpec(
        name=name,
        env=cfg.env,
        algo=cfg.algo,
        run=str(run.resolve()),
        checkpoint=str(ckpt.resolve()),
        version=f"{run.name}/{ckpt.name}" + ("" if seed_index is None else f"/seed{seed_index}"),
        agents=agents,
        observation_spaces={a: env.observation_space(a) for a in agents},
        action_spaces={a: env.action_space(a) for a in agents},
        meta={
            k: v for k, v in json.loads((ckpt / "arena.json").read_text()).items() if k != "files"
        },
        modules=module_specs(run, seed_index),
    )
    env.close()
    return spec


class ServedPolicy(Protocol):
    """The interface the server needs from a policy kind."""

    spec: PolicySpec
    slow: bool
    """Whether answers take long enough (token by token generation) that the server runs
    them off its event loop, in a batch queue of their own."""

    def parse(self, payload: Any) -> Any:
        """Validates a decoded request body; returns what ``act`` takes or raises
        :class:`RequestError`."""

    def act(self, requests: list[Any]) -> list[dict[str, Any]]:
        """Answers parsed requests (from many clients) with one forward pass."""


def envelope(payload: Any, agents: tuple[str, ...]) -> tuple[dict[str, Any], bool]:
    """The ``observations`` (agent -> value, agents checked) and ``explore`` of an act
    request, whatever the policy's kind (a recurrent one reads ``state`` itself)."""
    if not isinstance(payload, dict):
        raise RequestError(f"the body must be a JSON object with keys {list(REQUEST_KEYS)}")
    unknown = sorted(set(payload) - set(REQUEST_KEYS))
    if unknown:
        raise RequestError(f"unknown key(s) {unknown}; allowed: {list(REQUEST_KEYS)}")
    explore = payload.get("explore", False)
    if not isinstance(explore, bool):
        raise RequestError(f"'explore' must be true or false, got {explore!r}")
    obs = payload.get("observations")
    if not isinstance(obs, dict) or not obs:
        raise RequestError(
            "'observations' must be an object of agent -> observation for one or more of "
            f"{list(agents)}"
        )
    for agent in obs:
        if agent not in agents:
            raise RequestError(f"unknown agent {agent!r}; agents: {list(agents)}")
    return obs, explore


def _array(agent: str, what: str, value: Any, shape: tuple[int, ...]) -> tuple[np.ndarray, bool]:
    """``value`` as float32 rows ``[n, prod(shape)]`` and whether it was a single one."""
    try:
        arr = np.asarray(value)
    except ValueError:  # ragged nested lists
        arr = np.asarray(value, dtype=object)
    want = f"{list(shape)} or [n, {', '.join(map(str, shape))}]"
    if arr.dtype.kind not in "iuf" or arr.dtype == object:
        raise RequestError(
            f"agent {agent!r}: {what} must be numbers of shape {want}; got "
            + ("ragged lists" if isinstance(value, list) else type(value).__name__)
        )
    if arr.shape == shape:
        single = True
    elif arr.ndim == len(shape) + 1 and arr.shape[1:] == shape and arr.shape[0] > 0:
        single = False
    else:
        raise RequestError(f"agent {agent!r}: {what} has shape {list(arr.shape)}; expected {want}")
    rows = arr.reshape(-1, int(np.prod(shape))).astype(np.float32, copy=False)
    if not np.isfinite(rows).all():
        raise RequestError(f"agent {agent!r}: {what} holds NaN or infinity")
    return rows, single


@dataclass
class Parsed:
    """A validated request: per agent its observation and mask rows (and recurrent state
    rows, None at an episode's start), and how to answer it."""

    agents: list[str]
    counts: list[int]
    single: list[bool]
    obs: list[np.ndarray]
    masks: list[np.ndarray | None]
    explore: bool
    states: list[dict[str, np.ndarray] | None] = field(default_factory=list)


class ModulesPolicy:
    """A run's feed-forward modules (``policies.modules.ActorCritic``, any agent -> module
    mapping): each request's rows go to their agents' modules, packed by each module's
    ``BatchSpec``; discrete (optionally masked) or continuous actions."""

    slow = False

    def __init__(self, spec: PolicySpec, policy=None):
        from training.evaluation import load_policy

        self.spec = spec
        self.policy = policy or load_policy(spec.run, spec.checkpoint, spec.modules)
        # agent -> its module's state: key -> width (recurrent modules only)
        self.state_widths = {
            a: {k: int(v.shape[-1]) for k, v in m.initial_state(1).items()}
            for m in self.policy.modules.values()
            if m.recurrent
            for a in m.agents
        }
        self.obs_boxes: dict[str, gym.spaces.Box] = {}
        for agent, space in spec.observation_spaces.items():
            box = space["observations"] if isinstance(space, gym.spaces.Dict) else space
            self.obs_boxes[agent] = box
        self.masked = {
            a: isinstance(s, gym.spaces.Dict) for a, s in spec.observation_spaces.items()
        }
        self.bounded = {
            a: bool(np.isfinite(b.low).any() or np.isfinite(b.high).any())
            for a, b in self.obs_boxes.items()
        }

    def _agent_rows(self, agent: str, value: Any) -> tuple[np.ndarray, np.ndarray | None, bool]:
        box = self.obs_boxes[agent]
        if self.masked[agent]:
            if not isinstance(value, dict) or set(value) != {"observations", "action_mask"}:
                raise RequestError(
                    f"agent {agent!r}: this env masks actions; send "
                    '{"observations": [...], "action_mask": [...]}'
                )
            obs, single = _array(agent, "observations", value["observations"], box.shape)
            n_actions = int(self.spec.action_spaces[agent].n)
            mask, mask_single = _array(agent, "action_mask", value["action_mask"], (n_actions,))
            if mask_single != single or len(mask) != len(obs):
                raise RequestError(
                    f"agent {agent!r}: {len(obs)} observation(s) but {len(mask)} action mask(s)"
                )
            if not np.isin(mask, (0.0, 1.0)).all():
                raise RequestError(f"agent {agent!r}: action_mask values must be 0 or 1")
            empty = np.flatnonzero(mask.max(axis=1) < 1)
            if len(empty):
                raise RequestError(
                    f"agent {agent!r}: action mask {empty[:5].tolist()} has no legal action"
                )
        else:
            obs, single = _array(agent, "observation", value, box.shape)
            mask = None
        if self.bounded[agent]:
            low, high = box.low.reshape(-1), box.high.reshape(-1)
            if ((obs < low) | (obs > high)).any():
                raise RequestError(
                    f"agent {agent!r}: observation outside the space's bounds "
                    f"[{low.min():g}, {high.max():g}]"
                )
        return obs, mask, single

    def _agent_state(self, agent: str, value: Any, n: int, single: bool):
        """An agent's recurrent state rows (``key -> [n, width]``), as the last answer gave
        them."""
        widths = self.state_widths.get(agent)
        if widths is None:
            raise RequestError(f"agent {agent!r}: this policy keeps no state; send none")
        if not isinstance(value, dict) or set(value) != set(widths):
            raise RequestError(
                f"agent {agent!r}: 'state' must be an object with keys {sorted(widths)}, as the "
                "last answer gave it"
            )
        out = {}
        for key, width in widths.items():
            rows, one = _array(agent, f"state {key!r}", value[key], (width,))
            if one != single or len(rows) != n:
                raise RequestError(
                    f"agent {agent!r}: {n} observation(s) but {len(rows)} state {key!r} row(s)"
                )
            out[key] = rows
        return out

    def parse(self, payload: Any) -> Parsed:
        obs, explore = envelope(payload, self.spec.agents)
        states = payload.get("state", {})
        if not isinstance(states, dict) or not set(states) <= set(obs):
            raise RequestError(
                "'state' must be an object of agent -> state for agents in 'observations'"
            )
        parsed = Parsed([], [], [], [], [], explore)
        for agent, value in obs.items():
            rows, mask, one = self._agent_rows(agent, value)
            parsed.agents.append(agent)
            parsed.counts.append(len(rows))
            parsed.single.append(one)
            parsed.obs.append(rows)
            parsed.masks.append(mask)
            given = states.get(agent)
            parsed.states.append(
                None if given is None else self._agent_state(agent, given, len(rows), one)
            )
        if sum(parsed.counts) > MAX_ROWS:
            raise RequestError(
                f"{sum(parsed.counts)} observations in one request; at most {MAX_ROWS}", status=413
            )
        return parsed

    def act(self, requests: list[Parsed]) -> list[dict[str, Any]]:
        import torch

        # Rows of every request, grouped by module: one forward pass per module.
        rows: dict[str, list[tuple[int, int]]] = {}
        for i, r in enumerate(requests):
            for k, agent in enumerate(r.agents):
                rows.setdefault(self.policy.module_of[agent], []).append((i, k))
        answers: list[dict[str, Any]] = [{} for _ in requests]
        states: list[dict[str, Any]] = [{} for _ in requests]
        for mid, parts in rows.items():
            module = self.policy.modules[mid]
            place = [self.policy.place[requests[i].agents[k]] for i, k in parts]
            counts = [requests[i].counts[k] for i, k in parts]
            obs = np.concatenate([requests[i].obs[k] for i, k in parts])
            masks = None
            if requests[parts[0][0]].masks[parts[0][1]] is not None:
                masks = np.concatenate([requests[i].masks[k] for i, k in parts])
            batch = module.spec.pack(obs, masks, None, np.repeat(place, counts))
            modes = [requests[i].explore for i, _ in parts]
            explore = modes[0] if len(set(modes)) == 1 else np.repeat(modes, counts)
            hidden = None
            if module.recurrent:
                given = [requests[i].states[k] for i, k in parts]
                init = {k: v.numpy() for k, v in module.initial_state(1).items()}
                hidden = {
                    key: torch.from_numpy(
                        np.concatenate(
                            [
                                g[key] if g is not None else np.repeat(init[key], n, axis=0)
                                for g, n in zip(given, counts, strict=True)
                            ]
                        ).astype(np.float32)
                    )
                    for key in init
                }
            actions, hidden = module.act_rows(batch, explore, hidden)
            actions = actions.tolist()
            hidden = {k: v.numpy().tolist() for k, v in (hidden or {}).items()}
            j = 0
            for (i, k), n in zip(parts, counts, strict=True):
                one, agent = requests[i].single[k], requests[i].agents[k]
                answers[i][agent] = actions[j] if one else actions[j : j + n]
                if hidden:
                    states[i][agent] = {
                        key: v[j] if one else v[j : j + n] for key, v in hidden.items()
                    }
                j += n
        out = []
        for r, ans, st in zip(requests, answers, states, strict=True):
            reply = {"actions": {a: ans[a] for a in r.agents}, "version": self.spec.version}
            if st:
                reply["state"] = {a: st[a] for a in r.agents}
            out.append(reply)
        return out


def served_class(spec: PolicySpec) -> type:
    """The :class:`ServedPolicy` class of ``spec``'s acting modules, which each module class
    names in its ``SERVED_BY`` (``module:class``, imported only when a run needs it: a server
    of MLPs never imports the language-model stack)."""
    from training.evaluation import module_specs

    if spec.algo == "prm":
        from serve.prm import PRMServed

        return PRMServed
    if spec.algo == "base":
        from serve.lm import BaseLM

        return BaseLM
    modules = spec.modules if spec.modules is not None else module_specs(spec.run)
    acting = [s.module_class for s in modules.rl_module_specs.values() if not s.learner_only]
    kinds = {getattr(cls, "SERVED_BY", None) for cls in acting}
    if None in kinds or len(kinds) != 1:
        names = sorted(cls.__name__ for cls in acting)
        raise TypeError(f"no server for RLModule(s) {names}: each must name one in SERVED_BY")
    module, _, name = kinds.pop().partition(":")
    return getattr(importlib.import_module(module), name)


def load(spec: PolicySpec) -> ServedPolicy:
    """The policy of ``spec`` behind the served interface: its modules rebuilt from the run's
    config and loaded with the checkpoint's plain weights (nothing is unpickled)."""
    return served_class(spec)(spec)


_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # +1 / -1 as int8


@dataclass(frozen=True)
class JsonScan:
    """What :func:`scan_json` sees in a body without parsing it."""

    depth: int
    """How deep arrays and objects nest."""
    booleans: int
    """How many ``true``/``false`` literals stand outside strings."""


def scan_json(body: bytes) -> JsonScan:
    """Nesting depth and boolean literals of a UTF-8 JSON ``body``, in time linear in its size
    and at C speed (a body nested 10,000 deep is then a 400, never the parser's recursion
    error). Strings are skipped: their brackets and words do not count.

    A regex that skips strings whole (``"(?:[^"\\]|\\.)*"``) is quadratic on an unterminated
    ``"\\"\\"\\"...``: every quote starts a scan to the end. Here escapes go first, then
    each quote left opens or closes a string, so one running parity marks the strings."""
    # bytes.replace goes left to right like a JSON reader: an escaped backslash, then an
    # escaped quote, leaves nothing behind; every quote left is a string's start or end.
    flat = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    if b'"' in flat:
        a = np.frombuffer(flat, np.uint8)
        inside = np.bitwise_xor.accumulate((a == ord('"')).view(np.uint8))
        flat = a[inside == 0].tobytes()  # outside strings (closing quotes kept)
    steps = np.frombuffer(flat.translate(_STEPS, _NOT_BRACKETS), np.int8)
    depth = peak = 0
    for i in range(0, len(steps), 1 << 20):  # in slices: a 32 MiB body of "[" stays small
        run = np.cumsum(steps[i : i + (1 << 20)], dtype=np.int64) + depth
        peak, depth = max(peak, int(run.max())), int(run[-1])
    # Outside strings, valid JSON has these words only as its two literals.
    return JsonScan(peak, flat.count(b"true") + flat.count(b"false"))


def _bounded_int(text: str) -> int:
    # Python parses at most 4,300 digits (a ValueError past that), and float32 observations
    # hold at most 39: a longer integer is a 400 that says so.
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise RequestError(
            f"an integer of {len(text.lstrip('-'))} digits; at most {MAX_INT_DIGITS}"
        )
    return int(text)


def read_json(body: bytes) -> tuple[Any, int]:
    """``body`` parsed (UTF-8 only, nested at most ``MAX_DEPTH`` deep, integers of at most
    ``MAX_INT_DIGITS`` digits) and how many booleans it holds; raises :class:`RequestError`
    (400). The text is decoded here, strictly: ``json.loads`` given bytes would also read
    UTF-16 and UTF-32, which the depth scan does not see into."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RequestError(
            f"malformed JSON: the body must be UTF-8 ({e.reason} at byte {e.start})"
        ) from None
    scan = scan_json(body)
    if scan.depth > MAX_DEPTH:
        raise RequestError(f"JSON nested {scan.depth} deep; at most {MAX_DEPTH}")
    try:
        return json.loads(text, parse_int=_bounded_int), scan.booleans
    except RequestError:
        raise
    except json.JSONDecodeError as e:
        raise RequestError(f"malformed JSON: {str(e)[:200]}") from None
    except (ValueError, RecursionError) as e:  # not expected after the checks above
        raise RequestError(f"malformed JSON: {type(e).__name__}: {str(e)[:200]}") from None


@dataclass
class Reply:
    """An HTTP answer: status and JSON payload."""

    status: int
    payload: Any

    def body(self) -> bytes:
        return json.dumps(self.payload, separators=(",", ":")).encode()


@dataclass
class Act:
    """A validated act request, for the transport to run (batched or not)."""

    policy: ServedPolicy
    parsed: Any


class Api:
    """The HTTP API over a set of served policies, as functions of (method, path, body)."""

    def __init__(self, policies: dict[str, ServedPolicy]):
        self.policies = policies
        self.chat_models = {n: p for n, p in policies.items() if hasattr(p, "parse_chat")}
        self.reward_models = {n: p for n, p in policies.items() if p.spec.algo == "prm"}

    def route(
        self, method: str, path: str, body: bytes, content_type: str | None = "application/json"
    ) -> Reply | Act:
        """A :class:`Reply`, or an :class:`Act` the transport answers with ``policy.act``.
        ``HEAD`` is answered as ``GET`` (the transport drops the body)."""
        method = "GET" if method == "HEAD" else method
        path = path.rstrip("/") or "/"
        parts = path.strip("/").split("/")
        if path == "/healthz":
            return self._only(method, "GET") or Reply(
                200, {"status": "ok", "policies": sorted(self.policies)}
            )
        if path == "/v1/chat/completions":
            return self._only(method, "POST") or self._media_type(content_type) or self._chat(body)
        if path == "/v1/reward":
            return (
                self._only(method, "POST") or self._media_type(content_type) or self._reward(body)
            )
        if path == "/v1/models":  # what OpenAI clients list before they chat
            return self._only(method, "GET") or Reply(
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": name, "object": "model", "owned_by": "arena"}
                        for name in sorted(self.chat_models)
                    ],
                },
            )
        if parts[:2] == ["v1", "policies"]:
            if len(parts) == 2:
                return self._only(method, "GET") or Reply(
                    200, {"policies": [p.spec.describe() for p in self.policies.values()]}
                )
            policy = self.policies.get(parts[2])
            if policy is None:
                return Reply(
                    404, {"error": f"no policy {parts[2]!r}; policies: {sorted(self.policies)}"}
                )
            if len(parts) == 3:
                return self._only(method, "GET") or Reply(200, policy.spec.describe())
            if len(parts) == 4 and parts[3] == "act":
                return (
                    self._only(method, "POST")
                    or self._media_type(content_type)
                    or self._parse(policy, body)
                )
        return Reply(
            404,
            {
                "error": f"no route {path}; routes: GET /healthz, GET /v1/policies, "
                "GET /v1/policies/{name}, POST /v1/policies/{name}/act, GET /v1/models, "
                "POST /v1/chat/completions, POST /v1/reward"
            },
        )

    @staticmethod
    def _only(method: str, allowed: str) -> Reply | None:
        if method == allowed:
            return None
        return Reply(405, {"error": f"method {method} not allowed here; use {allowed}"})

    @staticmethod
    def _media_type(content_type: str | None) -> Reply | None:
        kind = (content_type or "").split(";", 1)[0].strip().lower()
        if kind in JSON_TYPES:
            return None
        return Reply(
            415, {"error": f"content-type must be application/json, got {content_type or 'none'!r}"}
        )

    @staticmethod
    def _parse(policy: ServedPolicy, body: bytes) -> Reply | Act:
        if len(body) > MAX_BODY_BYTES:
            return Reply(413, {"error": f"request body over {MAX_BODY_BYTES} bytes; split it"})
        try:
            payload, booleans = read_json(body)
            # only "explore" may be true or false
            if booleans > 1 or (
                booleans == 1
                and isinstance(payload, dict)
                and not isinstance(payload.get("explore"), bool)
            ):
                raise RequestError("observations and masks must be numbers, not true/false")
            return Act(policy, policy.parse(payload))
        except RequestError as e:
            return Reply(e.status, {"error": str(e)})

    def _chat(self, body: bytes) -> Reply | Act:
        """An OpenAI chat completion request: the policy its ``model`` names parses the rest."""
        found = self._model_request(body, self.chat_models, "chat", "language-model policies")
        return found if isinstance(found, Reply) else self._act(*found, "parse_chat")

    def _reward(self, body: bytes) -> Reply | Act:
        """A process reward request: the PRM its ``model`` names (or the only one served)
        parses the rest (``serve.prm``)."""
        found = self._model_request(
            body,
            self.reward_models,
            "reward",
            "arena prm train runs; 'model' may be left out when one is served",
            optional=True,
        )
        return found if isinstance(found, Reply) else self._act(*found, "parse")

    @staticmethod
    def _model_request(
        body: bytes, models: dict, what: str, which: str, optional: bool = False
    ) -> Reply | tuple[ServedPolicy, dict]:
        """The policy a JSON body's ``model`` names among ``models`` (the only one where
        ``optional`` and it is left out), and the body; or the 4xx saying what was wrong."""
        if len(body) > MAX_CHAT_BYTES:
            return Reply(413, {"error": f"{what} request body over {MAX_CHAT_BYTES} bytes"})
        try:
            payload, _ = read_json(body)
        except RequestError as e:
            return Reply(e.status, {"error": str(e)})
        name = payload.get("model") if isinstance(payload, dict) else None
        if optional and name is None and len(models) == 1:
            name = next(iter(models))
        if not isinstance(payload, dict) or not isinstance(name, str):
            return Reply(400, {"error": "the body must be a JSON object with a 'model' string"})
        policy = models.get(name)
        if policy is None:
            return Reply(
                404,
                {"error": f"no {what} model {name[:100]!r}; models ({which}): {sorted(models)}"},
            )
        return policy, payload

    @staticmethod
    def _act(policy: ServedPolicy, payload: dict, parse: str) -> Reply | Act:
        try:
            return Act(policy, getattr(policy, parse)(payload))
        except RequestError as e:
            return Reply(e.status, {"error": str(e)})

    def answer(self, method: str, path: str, body: bytes) -> Reply:
        """Route and act at once (a transport without cross-request batching)."""
        out = self.route(method, path, body)
        if isinstance(out, Act):
            return Reply(200, out.policy.act([out.parsed])[0])
        return out
