"""The web env: one agent reads a page as text and writes BrowserGym actions.

``web/<task>-v1`` runs the real MiniWoB++ page in headless Chromium
(:class:`envs.web.browser.Browser`); ``websim/<task>-v0`` runs its in-process twin
(:mod:`envs.web.twin`). Both give the same observation text (:mod:`envs.web.page`) and follow
the same rules, those of the web-agent study (Vattikonda et al., NeurIPS 2025):

- an action that does not parse is a step that does nothing; each one multiplies the final
  reward by 0.99, and the error text appears in the next observation;
- an action that parses but cannot be carried out (no such bid, ``fill`` on a button, a
  missing option, an element the browser refuses to click) ends the episode with reward -1;
- the episode ends with reward 1 (times 0.99 per parse error) when the page's own reward is
  positive (MiniWoB++'s success), 0 when it is not or when ``max_steps`` (10) runs out.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from pettingzoo import ParallelEnv

from envs.web import actions as lang
from envs.web.page import Page, Rendered, render

AGENT = "agent_0"
PARSE_ERROR_FACTOR = 0.99
MAX_TEXT = 1 << 16


class TextSpace(gym.spaces.Text):
    """Any string up to ``max_length`` characters (pages carry any Unicode)."""

    def __init__(self, max_length: int = MAX_TEXT):
        super().__init__(max_length=max_length, min_length=0)

    def contains(self, x) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"Text(<={self.max_length} chars)"


def check_task_args(max_steps: int) -> None:
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"max_steps must be an integer >= 1, got {max_steps!r}")


class WebEnv(ParallelEnv):
    """A MiniWoB++ task as a one-agent PettingZoo env with text observations and actions."""

    metadata = {"render_modes": ["ansi"], "is_parallelizable": True, "name": "web"}

    def __init__(
        self,
        task: str,
        backend: str = "twin",
        max_steps: int = 10,
        render_mode: str | None = None,
        timeout_s: float = 30.0,
    ):
        check_task_args(max_steps)
        if backend == "twin":
            from envs.web.twin import task_models

            models = task_models()
            if task not in models:
                raise ValueError(f"the twin has no task {task!r}; it has {', '.join(models)}")
            self.page_backend = models[task]()
        elif backend == "browser":
            from envs.web.browser import Browser

            self.page_backend = Browser(task, timeout_s=timeout_s)
        else:
            raise ValueError(f"backend must be 'twin' or 'browser', got {backend!r}")
        self.task, self.backend, self.max_steps = task, backend, max_steps
        self.render_mode = render_mode
        self.metadata = {**self.metadata, "name": f"{backend}_{task}"}
        self.possible_agents = [AGENT]
        self.agents: list[str] = []
        self._obs_space, self._act_space = TextSpace(), TextSpace(1024)
        self.seed_next: int | None = None
        self.view: Rendered | None = None
        self.restarts = 0

    @property
    def page_task(self) -> str:
        """The task of the page shown (a flow's changes from page to page)."""
        return self.task

    def observation_space(self, agent):
        return self._obs_space

    def action_space(self, agent):
        return self._act_space

    # --- episodes --------------------------------------------------------------------------
    def reset(self, seed=None, options=None):
        if seed is not None or not hasattr(self, "_seeds"):
            self._seeds = np.random.default_rng(seed)
        # Each episode is a page seed; options={"task_seed": s} asks for page s itself.
        forced = (options or {}).get("task_seed")
        self.seed = int(forced) if forced is not None else int(self._seeds.integers(2**31))
        page = self._reset_page(self.seed)
        self.steps, self.parse_errors, self.last_error = 0, 0, None
        self.agents = [AGENT]
        self.view = self._render(page)
        return {AGENT: self.view.text}, {AGENT: self._info(None, 0.0)}

    def _reset_page(self, seed: int) -> Page:
        from envs.web.browser import BrowserError

        try:
            return self.page_backend.reset(seed)
        except BrowserError:
            if self.backend != "browser":
                raise
            self.restarts += 1
            self.page_backend.restart()
            return self.page_backend.reset(seed)

    def step(self, actions):
        from envs.web.browser import BrowserError

        text = actions[AGENT]
        self.steps += 1
        error, failed, crashed = None, False, False
        try:
            action = lang.parse(text)
        except lang.ParseError as e:
            self.parse_errors += 1
            error = f"cannot parse the action: {e}"
        else:
            error = self._check(action)
            if error is None:
                target = self.view.bids.get(action.bid) if action.bid else None
                try:
                    error = self.page_backend.act(action, target)
                except BrowserError as e:
                    crashed, error = True, str(e)
            failed = error is not None
        if crashed:
            self.restarts += 1
            self.page_backend.restart()
            done, raw, reason, page = True, 0.0, "browser restarted", None
        else:
            page = self.page_backend.observe()
            done, raw, reason = self.page_backend.status
            if done and raw > 0 and not failed:
                done, page = self._solved(page)
        if failed and not crashed:
            reward, terminated = -1.0, True
        elif done:
            success = raw > 0
            reward = PARSE_ERROR_FACTOR**self.parse_errors if success else 0.0
            terminated = True
        else:
            reward, terminated = 0.0, False
        truncated = not terminated and self.steps >= self.max_steps
        self.last_error = error
        if page is not None:
            self.view = self._render(page, error)
        obs_text = self.view.text if page is not None else f"Error: {error}"
        info = self._info(error, raw, reason=reason, crashed=crashed)
        if terminated or truncated:
            self.agents = []
        return (
            {AGENT: obs_text},
            {AGENT: reward},
            {AGENT: terminated},
            {AGENT: truncated},
            {AGENT: info},
        )

    def _solved(self, page: Page) -> tuple[bool, Page]:
        """The page was solved: whether the episode ends, and the page shown next (a
        multi-page flow, :class:`envs.web.flow.FlowEnv`, opens its next page)."""
        return True, page

    def _render(self, page: Page, error: str | None = None) -> Rendered:
        return render(page, error)

    def _check(self, action: lang.Action) -> str | None:
        """Why ``action`` cannot apply to the page just shown, or None."""
        bid = action.bid
        if bid is None:
            return None
        if bid not in self.view.bids:
            return f"no element with bid {bid!r} in the page"
        kind = self.view.roles[bid]
        need = {"fill": "textbox", "clear": "textbox", "select_option": "combobox"}.get(action.name)
        if need and kind != need:
            return f"{action.name} needs a {need}; element {bid!r} is a {kind}"
        return None

    def _info(self, error, raw, reason=None, crashed=False) -> dict:
        return {
            "task": self.task,
            "seed": self.seed,
            "step": self.steps,
            "error": error,
            "raw_reward": raw,
            "success": bool(raw > 0) and not error,
            "parse_errors": self.parse_errors,
            "reason": reason,
            "browser_restarted": crashed,
        }

    def __getstate__(self):  # the view points into the page; it is rendered again
        return {**self.__dict__, "view": None}

    def __setstate__(self, state):
        self.__dict__.update(state)
        if self.agents and self.backend == "twin":
            self.view = self._render(self.page_backend.observe(), self.last_error)

    def render(self):
        return self.view.text if self.view is not None else ""

    def state(self):
        """The page as the agent reads it (one agent: its observation is the state)."""
        return np.array([self.render()], dtype=object)

    def close(self):
        close = getattr(self.page_backend, "close", None)
        if close is not None:
            close()


def twin_env(task: str, max_steps: int = 10, render_mode: str | None = None) -> WebEnv:
    return WebEnv(task, "twin", max_steps, render_mode)


def browser_env(
    task: str, max_steps: int = 10, timeout_s: float = 30.0, render_mode: str | None = None
) -> WebEnv:
    return WebEnv(task, "browser", max_steps, render_mode, timeout_s)
