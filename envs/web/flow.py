"""Multi-page flows: one episode walks through several task pages in order, one task a page.

A flow (:data:`envs.web.FLOWS`) is an errand of existing tasks, e.g. log in, then search and
open a result, then close a dialog, in the manner of WebArena's and WorkArena's multi-step
tasks (Zhou et al. 2023, arXiv 2307.13854; Drouin et al. 2024, arXiv 2403.07718) built from
MiniWoB++ pages. ``websim/flow-<name>-v0`` runs the pages' twins, ``web/flow-<name>-v1`` the
real pages in one headless Chromium, which opens the next task's page when a page is solved.

- Page k's seed derives from the episode seed (:func:`page_seed`), so an episode is the same
  errand on both backends. Each page opens afresh (new twins each episode; a page load in the
  browser, which, if it fails twice, raises :class:`envs.web.browser.BrowserError` from
  ``step`` as from ``reset``).
- The goal names the whole errand, every page's own goal in order; the line under it says
  which page is shown and from which step (``Page 2 of 3 (from step 4): ...``)::

      Goal: 3 tasks, one page each, in order: (1) Enter the username ... (2) Use the ...
      Page 2 of 3 (from step 4): Use the textbox to enter "Renda" and press "Search", ...

      RootWebArea 'Search Engine Task'
      ...

  The later pages' goals come from their twins (the real page, when reached, shows the same
  goal: a test checks it).
- Rewards are WebEnv's over the whole flow: 1 (times 0.99 per parse error) when the last page
  is solved, 0 when a page ends unsolved or ``max_steps`` (10 a page) runs out, -1 for an
  action that cannot be carried out. A solved page that is not the last gives 0 and opens the
  next one. ``info`` adds ``page`` (1-based, the page shown), ``pages``, ``pages_solved``,
  ``page_task`` and ``page_seed``; ``success`` means every page was solved.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from envs.web import FLOWS
from envs.web.env import WebEnv, check_task_args
from envs.web.page import Page, Rendered, render

STEPS_PER_PAGE = 10
"""A flow's default ``max_steps`` is this times its pages (WebEnv's default per page)."""


def page_seed(seed: int, k: int) -> int:
    """Page ``k``'s (0-based) seed in the episode of seed ``seed``: 31 bits of numpy's
    ``SeedSequence((seed, k))``."""
    return int(np.random.SeedSequence((int(seed), k)).generate_state(1)[0] >> 1)


class FlowEnv(WebEnv):
    """WebEnv over a flow's pages in turn (module doc)."""

    def __init__(
        self,
        flow: str,
        backend: str = "twin",
        max_steps: int | None = None,
        render_mode: str | None = None,
        timeout_s: float = 30.0,
    ):
        if flow not in FLOWS:
            raise ValueError(f"no flow {flow!r}; flows: {', '.join(FLOWS)}")
        tasks = FLOWS[flow]
        max_steps = STEPS_PER_PAGE * len(tasks) if max_steps is None else max_steps
        check_task_args(max_steps)
        super().__init__(tasks[0], backend, max_steps, render_mode, timeout_s)
        from envs.web.twin import task_models

        self.models = [task_models()[t] for t in tasks]
        self.twins = [m() for m in self.models]
        self.flow, self.tasks, self.task = flow, tasks, flow
        self.metadata = {**self.metadata, "name": f"{backend}_{flow}"}
        self.index = self.solved = self.opened_at = 0
        self.page_seeds, self.goals = [0] * len(tasks), [""] * len(tasks)

    @property
    def page_task(self) -> str:
        return self.tasks[self.index]

    def _reset_page(self, seed: int) -> Page:
        self.solved = self.opened_at = 0
        self.page_seeds = [page_seed(seed, k) for k in range(len(self.tasks))]
        # One twin a page, new each episode, as a page a browser opens is new (no widget state
        # carries over): the pages themselves on the twin, the goals' source on both.
        self.twins = [m() for m in self.models]
        self.goals = [
            t.reset(s).utterance for t, s in zip(self.twins, self.page_seeds, strict=True)
        ]
        return self._open(0)

    def _open(self, k: int) -> Page:
        self.index = k
        if self.backend == "twin":
            self.page_backend = self.twins[k]  # reset with the episode
            return self.page_backend.observe()
        self.page_backend.goto(self.tasks[k])  # loaded afresh
        return super()._reset_page(self.page_seeds[k])

    def _solved(self, page: Page) -> tuple[bool, Page]:
        self.solved += 1
        if self.solved == len(self.tasks):
            return True, page
        self.opened_at = self.steps
        return False, self._open(self.solved)

    def _render(self, page: Page, error: str | None = None) -> Rendered:
        n = len(self.tasks)
        errand = " ".join(f"({k}) {g}" for k, g in enumerate(self.goals, 1))
        here = f"Page {self.index + 1} of {n} (from step {self.opened_at + 1}): {page.utterance}"
        goal = f"{n} tasks, one page each, in order: {errand}\n{here}"
        return render(dataclasses.replace(page, utterance=goal), error)

    def _info(self, error, raw, reason=None, crashed=False) -> dict:
        return {
            **super()._info(error, raw, reason, crashed),
            "success": self.solved == len(self.tasks) and not error,
            "page": self.index + 1,
            "pages": len(self.tasks),
            "pages_solved": self.solved,
            "page_task": self.page_task,
            "page_seed": self.page_seeds[self.index],
        }


def flow_env(
    flow: str,
    backend: str = "twin",
    max_steps: int | None = None,
    timeout_s: float = 30.0,
    render_mode: str | None = None,
) -> FlowEnv:
    return FlowEnv(flow, backend, max_steps, render_mode, timeout_s)


_PAGE = re.compile(r"^Page (\d+) of \d+ \(from step (\d+)\): (.*)$", re.M)


def expert(pages: list):
    """A flow's scripted expert: the shown page's expert (``pages[k]``, a
    :data:`envs.web.teachers.Policy`), given that page's goal and the actions taken on it."""

    def policy(view, history: list[str]) -> str | None:
        m = _PAGE.search(view.goal)
        if m is None:
            return None
        k, start = int(m.group(1)) - 1, int(m.group(2)) - 1
        return pages[k](dataclasses.replace(view, goal=m.group(3)), history[start:])

    return policy
