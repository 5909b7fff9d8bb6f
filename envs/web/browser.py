"""The real backend: a MiniWoB++ task page in headless Chromium, driven through Selenium.

One :class:`Browser` is one Chromium. It starts on first use, serves every episode of its task
(an episode is ``core.startEpisodeReal()`` after ``Math.seedrandom(seed)``, as the ``miniwob``
package does), and is restarted when it crashes or hangs: every driver call runs under a
watchdog that kills the browser after ``timeout_s``. No browser outlives its owner:
chromedriver gets SIGKILL when the process that started it dies (``PR_SET_PDEATHSIG``), and
Chromium, connected to chromedriver by a pipe (``--remote-debugging-pipe``), exits with it. A
script that exits with browsers still open closes them at exit (``atexit``).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import sys
import threading
import weakref
from pathlib import Path

from envs.web.actions import Action
from envs.web.page import Node, Page, from_dump

CHROME = os.environ.get("MINIWOB_CHROME_BINARY", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("MINIWOB_CHROMEDRIVER", "/usr/bin/chromedriver")
CHROME_ARGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--remote-debugging-pipe",  # Chromium exits when chromedriver does
    "--disable-crash-reporter",
    "--disable-breakpad",
    "--disable-extensions",
    "--window-size=500,400",
)
EPISODE_MS = 3_600_000
"""MiniWoB++ ends an episode after 10 s of wall time; the env's step limit bounds episodes
instead (a language model may think longer than 10 s per step)."""

DUMP_JS = r"""
var skipIds = {'query': 1, 'sync-task-cover': 1, 'reward-display': 1, 'click-canvas': 1};
var skipTags = {SCRIPT: 1, STYLE: 1, LINK: 1, META: 1, CANVAS: 1, NOSCRIPT: 1};
var next = 0;
// Numbers from the last dump would linger on elements hidden since then.
document.querySelectorAll('[data-arena]').forEach(function (e) {
  e.removeAttribute('data-arena');
});
function dump(el) {
  var tag = el.tagName;
  var d = {tag: tag.toLowerCase(), h: next, kids: [], attrs: {}};
  el.setAttribute('data-arena', next++);
  var st = window.getComputedStyle(el);
  if (st.display === 'none' || st.visibility === 'hidden') { d.hidden = true; return d; }
  // Icons drawn by CSS (content: url(...), or a background image on an empty element with a
  // pointer cursor, such as a tree's expander) or <img>: named by alt text, else by class.
  var button = !el.children.length && !el.textContent.trim() && st.cursor === 'pointer';
  if (tag === 'IMG' || (st.content && st.content.indexOf('url(') === 0) ||
      (button && st.backgroundImage.indexOf('url(') === 0)) {
    d.attrs.image = el.getAttribute('alt') || el.className || '';
  }
  ['type', 'placeholder'].forEach(function (a) {
    if (el.hasAttribute(a)) d.attrs[a] = el.getAttribute(a);
  });
  if (tag === 'INPUT' || tag === 'TEXTAREA') d.value = el.value;
  if (el.checked) d.checked = true;
  if (tag === 'OPTION' && el.selected) d.selected = true;
  if (el.disabled) d.disabled = true;
  for (var i = 0; i < el.childNodes.length; i++) {
    var c = el.childNodes[i];
    if (c.nodeType === 3) d.kids.push(c.nodeValue);
    else if (c.nodeType === 1 && !skipIds[c.id] && !skipTags[c.tagName]) d.kids.push(dump(c));
  }
  return d;
}
var body = dump(document.body);
var focused = document.activeElement && document.activeElement.getAttribute('data-arena');
return {title: document.title, utterance: core.getUtterance(), body: body,
        focused: focused === null || focused === undefined ? -1 : Number(focused),
        done: WOB_DONE_GLOBAL, raw: WOB_RAW_REWARD_GLOBAL, reason: String(WOB_REWARD_REASON)};
"""


PRELOAD_JS = r"""
// Loads every image the page's own style rules name (icons and their :hover variants), so a
// pointer moving onto an icon never meets an image not loaded yet (zero size for a moment:
// the click would land on what lies under it).
var done = arguments[arguments.length - 1], urls = [];
for (var i = 0; i < document.styleSheets.length; i++) {
  var rules;
  try { rules = document.styleSheets[i].cssRules; } catch (e) { continue; }
  for (var j = 0; j < rules.length; j++) {
    var m, re = /url\(["']?([^"')]+)["']?\)/g, text = rules[j].cssText;
    while ((m = re.exec(text)) !== null) urls.push(new URL(m[1], rules[j].parentStyleSheet.href || document.baseURI).href);
  }
}
var left = urls.length;
if (!left) done(0);
urls.forEach(function (u) {
  var img = new Image();
  img.onload = img.onerror = function () { if (--left === 0) done(urls.length); };
  img.src = u;
});
"""


TIMERS_JS = """
// Keeps a ledger of the page's pending timeouts (id -> when due), for SETTLE_JS.
if (!window.__arenaTimers) {
  var pending = window.__arenaTimers = {}, set = window.setTimeout, clear = window.clearTimeout;
  window.__arenaSetTimeout = set;
  window.setTimeout = function (fn, delay) {
    var args = Array.prototype.slice.call(arguments, 2);
    var id = set.call(window, function () {
      delete pending[id];
      return typeof fn === 'function' ? fn.apply(window, args) : (0, eval)(String(fn));
    }, delay);
    pending[id] = Date.now() + (Number(delay) || 0);
    return id;
  };
  window.clearTimeout = function (id) { delete pending[id]; return clear.call(window, id); };
}
"""

COVER_JS = """
// MiniWoB++ ends an episode by showing its START cover, and a click on the cover starts a new
// problem (core.js: endEpisode -> startEpisode; cover.onclick -> startEpisodeReal). The env
// starts episodes itself (reset), so the cover lets clicks through: the second click of a
// double click on Submit then reaches Submit again, as in the twin, whose endEpisode keeps the
// first outcome, instead of starting a new problem that hides it.
var style = document.createElement('style');
style.textContent = '#sync-task-cover { pointer-events: none !important; }';
document.head.appendChild(style);
if (core.cover_div) core.cover_div.onclick = null;
"""

SETTLE_JS = """
// Lets the page run the timeouts and finish the jQuery animations due within SETTLE_MS of the
// action (a widget's typing delay, a fade, a zero-delay refresh) before it is read: the
// observation is the page once settled, not a snapshot that depends on how fast the agent
// acted. jQuery ticks its animations outside the timeout ledger (the pages' jQuery 1.12: one
// setInterval); each running one is due at its start plus its duration (jQuery.timers[i].anim).
var done = arguments[arguments.length - 1], deadline = Date.now() + arguments[0];
var pending = window.__arenaTimers || {}, wait = window.__arenaSetTimeout || setTimeout;
(function check() {
  var next = Infinity, timers = (window.jQuery && window.jQuery.timers) || [];
  for (var id in pending) next = Math.min(next, pending[id]);
  for (var i = 0; i < timers.length; i++) {
    var anim = timers[i].anim;
    if (anim && typeof anim.duration === 'number') {
      next = Math.min(next, anim.startTime + anim.duration);
    }
  }
  if (next > deadline) wait(function () { done(); }, 0);
  else wait(check, Math.max(0, next - Date.now()) + 1);
})();
"""
SETTLE_MS = 600


class BrowserError(RuntimeError):
    """The browser crashed, hung past the watchdog, or cannot start."""


def html_dir() -> Path:
    """Where the ``miniwob`` package keeps the task pages."""
    import importlib.util

    spec = importlib.util.find_spec("miniwob")
    if spec is None or not spec.submodule_search_locations:
        raise BrowserError(
            "web envs need the miniwob package's task pages: pip install --no-deps miniwob==1.1.0"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "html" / "miniwob"


def chrome_missing() -> str | None:
    """Why no browser can start here, or None."""
    for what, path in (("MINIWOB_CHROME_BINARY", CHROME), ("MINIWOB_CHROMEDRIVER", CHROMEDRIVER)):
        if not os.access(path, os.X_OK):
            return (
                f"no Chromium at {path} ({what}); install it with "
                "`apt-get install -y chromium chromium-driver` or point "
                f"{what} at one"
            )
    return None


PR_SET_PDEATHSIG = 1


def _die_with(parent: int):
    """chromedriver's preexec_fn: SIGKILL when its parent ends (prctl(2): strictly, the thread
    that started it, so a browser started from a short-lived thread would end with it)."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)  # loaded here, not in the forked child

    def preexec() -> None:  # runs in the child between fork and exec
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the owner died before prctl: no signal would come
            os._exit(1)

    return preexec


_OPEN: weakref.WeakSet[Browser] = weakref.WeakSet()


@atexit.register
def _close_open_browsers() -> None:
    """Closes the browsers a script leaves open, while threads can still start: later, in
    the interpreter's finalisation, a browser's watchdog thread would never start, and its
    ``__del__`` waited for it forever with the browsers alive."""
    for browser in list(_OPEN):
        browser.close()


class Browser:
    """One headless Chromium showing one MiniWoB++ task."""

    def __init__(self, task: str, timeout_s: float = 30.0):
        self.task, self.timeout_s = task, timeout_s
        self.url = (html_dir() / f"{task}.html").as_uri()
        self.driver = None
        self.loaded: str | None = None  # the URL the running browser shows
        self.pid: int | None = None
        self.dead = False
        self._handles: dict[int, Node] = {}

    # --- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        why = chrome_missing()
        if why:
            raise BrowserError(why)
        options = webdriver.ChromeOptions()
        options.binary_location = CHROME
        for arg in CHROME_ARGS:
            options.add_argument(arg)
        service = Service(CHROMEDRIVER, popen_kw={"preexec_fn": _die_with(os.getpid())})
        try:
            with self._watchdog(lambda: service.process):
                self.driver = webdriver.Chrome(service=service, options=options)
                self.pid = service.process.pid
                _OPEN.add(self)
                self._load(self.driver)
        except BrowserError:
            self.close()
            raise
        except Exception as e:
            self.pid = getattr(service.process, "pid", None)
            self.close()
            raise BrowserError(f"Chromium did not start for {self.task}: {e}") from e
        self.dead = False

    def _load(self, driver) -> None:
        """Opens the task's page in the running browser, ready for episodes."""
        driver.get(self.url)
        if not driver.execute_script("return typeof core !== 'undefined'"):
            raise BrowserError(f"{self.url} has no MiniWoB++ core")
        driver.execute_async_script(PRELOAD_JS)
        driver.execute_script(TIMERS_JS)
        driver.execute_script(COVER_JS)
        self.loaded = self.url

    def goto(self, task: str) -> None:
        """The next :meth:`reset` loads ``task``'s page afresh (one browser serves every page
        of a multi-page flow, :mod:`envs.web.flow`)."""
        self.task, self.url = task, (html_dir() / f"{task}.html").as_uri()
        self.loaded = None

    def close(self) -> None:
        """Quits the browser; kills it if it does not quit in time. Safe to call twice."""
        driver, self.driver = self.driver, None
        # In the interpreter's finalisation no watchdog thread can start: kill, do not quit.
        if driver is not None and not sys.is_finalizing():
            with contextlib.suppress(Exception), self._watchdog(lambda: None, 10.0):
                driver.quit()
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, os.WNOHANG)
            self.pid = None
        with contextlib.suppress(Exception):  # the set may be gone in finalisation
            _OPEN.discard(self)

    def restart(self) -> None:
        self.close()
        self.start()

    def __del__(self):
        with contextlib.suppress(Exception):
            self.close()

    def __getstate__(self):  # a pickled env carries no live browser
        return {**self.__dict__, "driver": None, "loaded": None, "pid": None, "_handles": {}}

    @contextlib.contextmanager
    def _watchdog(self, process=None, timeout: float | None = None):
        """Kills chromedriver (and so Chromium) if the block outlives the timeout."""
        fired = threading.Event()

        def kill():
            fired.set()
            self.dead = True
            proc = process() if process else None
            pid = getattr(proc, "pid", None) or self.pid
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

        timer = threading.Timer(timeout or self.timeout_s, kill)
        timer.daemon = True
        timer.start()
        try:
            yield
        except Exception as e:
            if fired.is_set():
                raise BrowserError(
                    f"the browser of {self.task} hung for {timeout or self.timeout_s:.0f} s "
                    "and was killed"
                ) from e
            raise
        finally:
            timer.cancel()

    def _script(self, js: str, *args):
        if self.driver is None:
            self.start()
        return self.call(lambda driver: driver.execute_script(js, *args))

    def call(self, fn):
        """``fn(driver)`` under the watchdog; any failure is a :class:`BrowserError`."""
        if self.driver is None:
            raise BrowserError(f"the browser of {self.task} is not running")
        self._check_alive()
        try:
            with self._watchdog():
                return fn(self.driver)
        except BrowserError:
            raise
        except Exception as e:  # WebDriverException, or the connection to a dead driver
            raise BrowserError(f"the browser of {self.task} failed: {e}") from e

    def _check_alive(self) -> None:
        if self.dead:
            raise BrowserError(f"the browser of {self.task} was killed; it restarts on reset")

    # --- episodes --------------------------------------------------------------------------
    def reset(self, seed: int) -> Page:
        if self.driver is not None and self.loaded != self.url:  # goto() named another page
            self.call(self._load)
        self._script(
            f"core.EPISODE_MAX_TIME = {EPISODE_MS}; core.endEpisode(0);"
            f"Math.seedrandom({int(seed)}); core.setDataMode('train'); core.startEpisodeReal();"
        )
        self._settle()
        return self.observe()

    def _settle(self) -> None:
        with self._watchdog():
            self.driver.execute_async_script(SETTLE_JS, SETTLE_MS)

    def observe(self) -> Page:
        d = self._script(DUMP_JS)
        body = from_dump(d["body"])
        self._handles = {n.handle: n for n in body.walk()}
        self.status = (bool(d["done"]), float(d["raw"] or 0.0), d["reason"])
        return Page(d["title"], d["utterance"], body, self._handles.get(d["focused"]))

    def act(self, action: Action, target: Node | None) -> str | None:
        """Performs ``action``; the error text when the page refused it."""
        from selenium.common.exceptions import (
            ElementClickInterceptedException,
            ElementNotInteractableException,
            NoSuchElementException,
            WebDriverException,
        )
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.by import By
        from selenium.webdriver.common.keys import Keys
        from selenium.webdriver.support.select import Select

        if self.driver is None:
            raise BrowserError(f"the browser of {self.task} is not running")
        self._check_alive()
        name, args = action.name, action.args
        try:
            with self._watchdog():
                element = None
                if target is not None:
                    element = self.driver.find_element(
                        By.CSS_SELECTOR, f'[data-arena="{target.handle}"]'
                    )
                if name == "click":
                    try:
                        element.click()
                    except (ElementClickInterceptedException, ElementNotInteractableException):
                        # Actions address elements, not pixels: an element clipped by the
                        # task's 160 px area, or covered, gets the click itself.
                        self.driver.execute_script("arguments[0].click();", element)
                elif name == "dblclick":
                    ActionChains(self.driver).double_click(element).perform()
                elif name == "hover":
                    ActionChains(self.driver).move_to_element(element).perform()
                elif name == "focus":
                    self.driver.execute_script("arguments[0].focus();", element)
                elif name == "clear":
                    element.clear()
                elif name == "fill":
                    element.clear()
                    element.send_keys(args[1])
                elif name == "select_option":
                    try:
                        Select(element).select_by_visible_text(args[1])
                    except NoSuchElementException:
                        return f"no option {args[1]!r} in element {args[0]!r}"
                elif name == "press":
                    key = args[1]
                    key = getattr(Keys, {"Space": "SPACE"}.get(key, key.upper()), key)
                    element.send_keys(key)
                elif name == "scroll":
                    self.driver.execute_script(
                        "window.scrollBy(arguments[0], arguments[1]);", *args
                    )
                self.driver.execute_async_script(SETTLE_JS, SETTLE_MS)
        except BrowserError:
            raise
        except WebDriverException as e:
            if self.dead or "invalid session" in str(e.msg or "").lower():
                raise BrowserError(f"the browser of {self.task} died") from e
            first = (e.msg or type(e).__name__).splitlines()[0]
            return f"{name} on element {args[0]!r} failed: {first}"
        except Exception as e:  # the connection to a dead chromedriver
            raise BrowserError(f"the browser of {self.task} died: {e}") from e
        return None
