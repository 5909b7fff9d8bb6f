"""Web navigation: MiniWoB++ tasks for agents that read pages as text and act in BrowserGym's
action language.

- ``web/<task>-v1``: the real task page of the ``miniwob`` package (1.1) in headless Chromium
  (one browser per env; :class:`envs.web.pool.BrowserPool` runs many as Ray actors).
- ``websim/<task>-v0``: the in-process twin of the task (:mod:`envs.web.twin`), the same page
  for the same seed, thousands of episodes per second.

``websim/flow-<name>-v0`` and ``web/flow-<name>-v1`` chain several of these pages into one
episode, a multi-page errand (:mod:`envs.web.flow`, :data:`FLOWS`).

Version history: web v1 = miniwob 1.1 pages; websim v0 = first twin. Both ids, since text
format 2 (``envs.web.page.TEXT_FORMAT``), print the tree as BrowserGym's
``flatten_axtree_to_str`` does (``textbox '' value='x'`` for ``textbox, value='x'``).
"""

from envs.registry import register

TASKS = (
    "ascending-numbers", "bisect-angle", "book-flight-nodelay", "book-flight", "button-delay",
    "buy-ticket", "chase-circle", "choose-date-easy", "choose-date-medium", "choose-date-nodelay",
    "choose-date", "choose-list", "circle-center", "click-button-sequence", "click-button",
    "click-checkboxes-large", "click-checkboxes-soft", "click-checkboxes-transfer",
    "click-checkboxes", "click-collapsible-2-nodelay", "click-collapsible-2",
    "click-collapsible-nodelay", "click-collapsible", "click-color", "click-dialog-2",
    "click-dialog", "click-link", "click-menu-2", "click-menu", "click-option",
    "click-pie-nodelay", "click-pie", "click-scroll-list", "click-shades", "click-shape",
    "click-tab-2-easy", "click-tab-2-hard", "click-tab-2-medium", "click-tab-2", "click-tab",
    "click-test-2", "click-test-transfer", "click-test", "click-widget", "copy-paste-2",
    "copy-paste", "count-shape", "count-sides", "daily-calendar", "drag-box", "drag-circle",
    "drag-cube", "drag-items-grid", "drag-items", "drag-shapes-2", "drag-shapes",
    "drag-single-shape", "drag-sort-numbers", "draw-circle", "draw-line", "email-inbox-delete",
    "email-inbox-forward-nl-turk", "email-inbox-forward-nl", "email-inbox-forward",
    "email-inbox-important", "email-inbox-nl-turk", "email-inbox-noscroll", "email-inbox-reply",
    "email-inbox-star-reply", "email-inbox", "enter-date", "enter-password", "enter-text-2",
    "enter-text-dynamic", "enter-text", "enter-time", "find-greatest", "find-midpoint",
    "find-word", "focus-text-2", "focus-text", "form-sequence-2", "form-sequence-3",
    "form-sequence", "generate-number", "grid-coordinate", "guess-number", "highlight-text-2",
    "highlight-text", "hot-cold", "hover-shape", "identify-shape", "login-user-popup",
    "login-user", "moving-items", "multi-layouts", "multi-orderings", "navigate-tree",
    "number-checkboxes", "odd-or-even", "order-food", "phone-book", "read-table-2", "read-table",
    "resize-textarea", "right-angle", "scroll-text-2", "scroll-text", "search-engine",
    "sign-agreement", "simon-says", "simple-algebra", "simple-arithmetic", "social-media-all",
    "social-media-some", "social-media", "stock-market", "terminal", "text-editor",
    "text-transform", "tic-tac-toe", "unicode-test", "use-autocomplete-nodelay",
    "use-autocomplete", "use-colorwheel-2", "use-colorwheel", "use-slider-2", "use-slider",
    "use-spinner", "visual-addition",
)  # fmt: skip
"""Every task page the ``miniwob`` package ships (a test checks the list against it)."""

TWIN_TASKS = (
    "click-test", "click-test-2", "click-button", "click-button-sequence", "click-link",
    "click-checkboxes", "click-option", "enter-text", "enter-text-2", "enter-password",
    "login-user", "focus-text", "focus-text-2", "choose-list", "click-tab-2", "click-dialog",
    "email-inbox", "social-media", "search-engine", "book-flight-nodelay", "book-flight",
    "use-autocomplete", "navigate-tree",
)  # fmt: skip
"""Tasks the twin models (``envs.web.twin.task_models()``; a test checks they agree)."""


FLOWS = {
    "flow-search": ("login-user", "search-engine", "click-dialog"),
    "flow-email": ("login-user", "email-inbox"),
    "flow-flight": ("login-user", "book-flight-nodelay", "click-dialog"),
}
"""Multi-page flows (:mod:`envs.web.flow`): name -> its pages' tasks in order (twin tasks, so
each runs on both backends and has a scripted expert)."""


def _validate(cfg: dict) -> None:
    from envs.web.env import check_task_args

    if "max_steps" in cfg:
        check_task_args(cfg["max_steps"])


for _task in TASKS:
    register(
        f"web/{_task}-v1",
        "envs.web.env:browser_env",
        description=f"MiniWoB++ {_task} in headless Chromium",
        validate=_validate,
        task=_task,
    )
for _task in TWIN_TASKS:
    register(
        f"websim/{_task}-v0",
        "envs.web.env:twin_env",
        description=f"in-process twin of MiniWoB++ {_task}",
        validate=_validate,
        task=_task,
    )
for _flow, _pages in FLOWS.items():
    for _backend, _id in (("twin", f"websim/{_flow}-v0"), ("browser", f"web/{_flow}-v1")):
        register(
            _id,
            "envs.web.flow:flow_env",
            description=f"{len(_pages)}-page flow: {', '.join(_pages)}"
            + (" (twins)" if _backend == "twin" else " (headless Chromium)"),
            validate=_validate,
            flow=_flow,
            backend=_backend,
        )
