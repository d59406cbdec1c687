"""JupyterLab with a live kernel, as a learner runs it, driven from headless Chromium.

`LabServer` starts `jupyter lab` on 127.0.0.1 (a free port, a token) over a copy of the
course's chapters/ and exercises/, so that running and saving notebooks in the test touches
no file of the repository. It uses the settings `make lab` uses (tools/jupyter: the news
prompt off) and a fresh settings, workspace and runtime folder, so nothing of the machine's
own JupyterLab state counts. Lab extensions that requirements.txt does not install (someone's
`pip install jupytext` brings one, built for another JupyterLab) are left out and named, so the
test sees the course's JupyterLab. `LabPage` wraps a Playwright page with the few JupyterLab
actions a learner takes (open, Run All, run a cell, paste, move a control) and what the
tests read back; it reaches JupyterLab's application object (exposed with
--LabApp.expose_app_in_browser) only to wait and to read state, never to fake an action that
the page offers (controls are moved with the mouse and keyboard, code is pasted with Ctrl+V).
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "course-live-test"
# The lab extensions requirements.txt installs: the widgets manager, jupyterlab-myst, and the
# pygments theme that JupyterLab itself depends on.
COURSE_EXTENSIONS = {"@jupyter-widgets/jupyterlab-manager", "jupyterlab-myst", "jupyterlab_pygments"}
# The book tests' Chromium flags, but host names other than 127.0.0.1 resolve to nothing.
from book_pages import CHROMIUM_ARGS as _BOOK_ARGS  # noqa: E402

CHROMIUM_ARGS = [a for a in _BOOK_ARGS if not a.startswith("--host-resolver-rules")] + [
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# jupyter_server (2.17 to 2.21 at least) answers GET /api/kernels with 500 when the list is asked
# for while a kernel is starting: the new kernel's `last_activity` is read before it is set
# (TraitError in the server log). JupyterLab polls that list, asks again and carries on; a
# learner sees nothing. Tolerated only when the server log shows that very error.
KERNEL_LIST_RACE = "'last_activity' trait of a ServerKernelManager instance expected a datetime"
# JupyterLab 4.5's cell toolbar checks, on a timer, whether the active cell's toolbar overlaps
# its text; when Run All has moved on and the cell was re-rendered in between, the check reads
# a node that is gone (uncaught TypeError in _cellToolbarOverlapsContents). Nothing changes on
# screen. Seen once in 18 notebooks (chapter 7's Run All); tolerated by that name only.
CELL_TOOLBAR_RACE = "_cellToolbarOverlapsContents"


def installed_lab_extensions():
    """{name: folder} of the prebuilt lab extensions JupyterLab finds (share/jupyter/labextensions)."""
    from jupyter_core.paths import jupyter_path

    found = {}
    for base in jupyter_path("labextensions"):
        for package in sorted(Path(base).glob("**/package.json")):
            if any(part in ("node_modules", "static", "schemas") for part in package.relative_to(base).parts[:-1]):
                continue
            try:
                found.setdefault(json.loads(package.read_text())["name"], package.parent)
            except (ValueError, KeyError):
                continue
    return found


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabServer:
    """`with LabServer(tmp) as lab:` serves a copy of the course at lab.url until the block ends."""

    def __init__(self, tmp):
        self.tmp = Path(tmp)
        self.root = self.tmp / "course"
        self.proc = None
        self.extensions = installed_lab_extensions()
        self.disabled = sorted(set(self.extensions) - COURSE_EXTENSIONS)

    def __enter__(self):
        for folder in ("chapters", "exercises"):
            shutil.copytree(ROOT / folder, self.root / folder,
                            ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        # JupyterLab 4.5 loads a disabled extension's code all the same (and one built for another
        # JupyterLab logs an error): the server gets a folder with the course's extensions only.
        extensions = self.tmp / "labextensions"
        for name in COURSE_EXTENSIONS & set(self.extensions):
            (extensions / name).parent.mkdir(parents=True, exist_ok=True)
            (extensions / name).symlink_to(self.extensions[name], target_is_directory=True)
        config = self.tmp / "config"
        config.mkdir()
        (config / "jupyter_server_config.json").write_text(
            json.dumps({"LabApp": {"labextensions_path": [str(extensions)]}}))
        settings = self.tmp / "settings"
        # Autosave off: the tests save only when they mean to, and never a notebook they ran.
        docmanager = settings / "@jupyterlab" / "docmanager-extension"
        docmanager.mkdir(parents=True)
        (docmanager / "plugin.jupyterlab-settings").write_text(json.dumps({"autosave": False}))
        env = dict(os.environ,
                   JUPYTER_CONFIG_PATH=os.pathsep.join([str(ROOT / "tools" / "jupyter"), str(config)]),
                   JUPYTERLAB_SETTINGS_DIR=str(settings),
                   JUPYTERLAB_WORKSPACES_DIR=str(self.tmp / "workspaces"),
                   JUPYTER_RUNTIME_DIR=str(self.tmp / "runtime"),
                   PYTHONHASHSEED="0")
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
                   f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={self.root}",
                   "--LabApp.expose_app_in_browser=True", "--ServerApp.open_browser=False"]
        if hasattr(os, "getuid") and os.getuid() == 0:
            command.append("--allow-root")
        self.log = self.tmp / "jupyterlab.log"
        self.started = time.time()
        self.proc = subprocess.Popen(command, env=env, stdout=self.log.open("w"), stderr=subprocess.STDOUT)
        deadline = time.time() + 90
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited ({self.proc.returncode}):\n{self.log.read_text()[-3000:]}")
            try:
                urllib.request.urlopen(f"{self.url}/api/status?token={TOKEN}", timeout=2)
                break
            except OSError:
                time.sleep(0.3)
        else:
            raise RuntimeError(f"jupyter lab did not answer in 90 s:\n{self.log.read_text()[-3000:]}")
        self.server_seconds = time.time() - self.started
        return self

    def cpu_seconds(self):
        """CPU seconds (user + system) of the server and of its kernels: the living ones from
        /proc (psutil), the ended ones from the server's children times (it reaps them)."""
        try:
            import psutil
        except ImportError:  # ipykernel depends on psutil; without it, no CPU figures
            return float("nan")
        try:
            server = psutil.Process(self.proc.pid)
            times = server.cpu_times()
            total = times.user + times.system + times.children_user + times.children_system
            for child in server.children(recursive=True):
                try:
                    t = child.cpu_times()
                    total += t.user + t.system
                except psutil.Error:
                    continue
            return total
        except psutil.Error:
            return float("nan")

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def lab_url(self, path=""):
        return f"{self.url}/lab{'/tree/' + path if path else ''}?token={TOKEN}"


# JavaScript run in the page. `panel(path)` finds an open notebook's panel.
HELPERS = """
window.__panel = (path) => Array.from(window.jupyterapp.shell.widgets('main'))
  .find(w => w.context && w.context.path === path && w.content && w.content.model);
window.__outputs = (cell) => cell.model.outputs ? cell.model.outputs.toJSON() : [];
"""

KERNEL_IDLE = """(path) => { const p = window.__panel && window.jupyterapp && window.__panel(path);
  const k = p && p.sessionContext.session && p.sessionContext.session.kernel;
  return !!(k && k.status === 'idle' && p.context.isReady); }"""

STATE = """(path) => { const p = window.__panel(path);
  return {dirty: p.context.model.dirty,
          kernel: p.sessionContext.session ? p.sessionContext.session.kernel.status : null,
          trusted: p.content.widgets.filter(c => c.model.type === 'code').map(c => c.model.trusted)}; }"""

# Per code cell: index, tags, execution count and state, outputs (as nbformat JSON).
CELLS = """(path) => { const p = window.__panel(path);
  return p.content.widgets.map((c, i) => ({index: i, type: c.model.type,
    source: c.model.sharedModel.getSource(),
    tags: (c.model.getMetadata && c.model.getMetadata('tags')) || [],
    count: c.model.type === 'code' ? c.model.executionCount : null,
    running: c.model.type === 'code' && (c.model.executionState === 'running' ||
             /\\*/.test((c.promptNode || {textContent: ''}).textContent)),
    outputs: c.model.type === 'code' ? window.__outputs(c) : []})); }"""

# The same, light enough to poll every half second: no source, no outputs (a chapter's figures
# are megabytes of base64), only whether a cell shows an error.
PROGRESS = """(path) => { const p = window.__panel(path);
  return p.content.widgets.map((c, i) => { if (c.model.type !== 'code') return null;
    const outputs = c.model.outputs; let error = false;
    for (let j = 0; outputs && j < outputs.length; j++) if (outputs.get(j).type === 'error') error = true;
    return {index: i, blank: !c.model.sharedModel.getSource().trim(), count: c.model.executionCount,
      tags: (c.model.getMetadata && c.model.getMetadata('tags')) || [], error,
      running: c.model.executionState === 'running' ||
               /\\*/.test((c.promptNode || {textContent: ''}).textContent)}; }).filter(c => c); }"""


class LabPage:
    """One Chromium page on the server; console errors and off-machine requests are collected."""

    def __init__(self, browser, server, shots):
        self.server, self.shots = server, shots
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
        self.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
        self.remote, self.console, self.tolerated = [], [], []
        self.context.route(re.compile(r"^(?!(?:http://127\.0\.0\.1:|ws://127\.0\.0\.1:|data:|blob:|about:))"),
                           lambda route: (self.remote.append(route.request.url), route.abort()))
        self.context.add_init_script(HELPERS)
        self.page = self.context.new_page()
        self.page.on("console", lambda m: self.console.append(f"{m.type}: {m.text[:1500]}")
                     if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.console.append(f"uncaught: {e}\n{e.stack or ''}"[:1500]))
        self.page.on("response", lambda r: self.console.append(f"HTTP {r.status}: {r.request.method} {r.url}")
                     if r.status >= 400 else None)

    def mark(self):
        """Start a new test: problems() reports only what the console says from now on."""
        self._since = len(self.console)

    def problems(self):
        """Console errors, uncaught exceptions and failed requests since mark(), less the two
        known races above (KERNEL_LIST_RACE, CELL_TOOLBAR_RACE), which are kept in self.tolerated."""
        race = KERNEL_LIST_RACE in self.server.log.read_text(errors="replace")
        kept = []
        for entry in self.console[getattr(self, "_since", 0):]:
            if (race and (re.match(r"HTTP 500: GET \S+/api/kernels\?", entry) or entry.startswith(
                    "error: Failed to load resource: the server responded with a status of 500"))
                    or (entry.startswith("uncaught:") and CELL_TOOLBAR_RACE in entry)):
                if entry not in self.tolerated:
                    self.tolerated.append(entry)
                continue
            kept.append(entry)
        return kept

    def start(self, path=""):
        """Load JupyterLab (once): the first load includes building the page's JavaScript."""
        self.page.goto(self.server.lab_url(path))
        self.page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=120_000, polling=250)
        self.page.wait_for_selector(".jp-FileBrowser", timeout=120_000)

    def text(self):
        return self.page.evaluate("() => document.body.innerText")

    def open(self, path, timeout=180):
        """Open a notebook the way the file browser does (docmanager:open), wait for its kernel."""
        started = time.time()
        self.page.evaluate("async (path) => { await window.jupyterapp.commands.execute("
                           "'docmanager:open', {path}); return null; }", path)
        self.page.wait_for_function(KERNEL_IDLE, arg=path, timeout=timeout * 1000, polling=250)
        return time.time() - started

    def state(self, path):
        return self.page.evaluate(STATE, path)

    def cells(self, path):
        return self.page.evaluate(CELLS, path)

    def cell(self, path, index):
        """A locator for a cell's node (marked with data-live-test so Playwright can find it)."""
        self.page.evaluate("""([path, i]) => { document.querySelectorAll('[data-live-test]')
            .forEach(n => n.removeAttribute('data-live-test'));
          window.__panel(path).content.widgets[i].node.setAttribute('data-live-test', 'cell'); }""", [path, index])
        return self.page.locator("[data-live-test='cell']")

    def select(self, path, index):
        self.page.evaluate("""([path, i]) => { const p = window.__panel(path);
          window.jupyterapp.shell.activateById(p.id); p.content.activeCellIndex = i;
          p.content.mode = 'command'; }""", [path, index])

    def command(self, name):
        self.page.evaluate("(name) => { window.jupyterapp.commands.execute(name); return null; }", name)

    def wait_until_done(self, path, indices=None, timeout=600):
        """Wait until the kernel is idle and every code cell in `indices` (all: None) has run,
        or until a cell shows an error (Run All stops there). Returns the cells and seconds."""
        started = time.time()
        quiet = 0
        while True:
            code = [c for c in self.page.evaluate(PROGRESS, path)
                    if not c["blank"] and (indices is None or c["index"] in indices)]
            errored = any(c["error"] and "raises-exception" not in c["tags"] for c in code)
            done = all(c["count"] is not None and not c["running"] for c in code)
            idle = self.page.evaluate(KERNEL_IDLE, path)
            quiet = quiet + 1 if idle and (done or errored) else 0
            if quiet >= 3:
                return self.cells(path), time.time() - started
            if time.time() - started > timeout:
                pending = [c["index"] for c in code if c["count"] is None or c["running"]]
                raise TimeoutError(f"{path}: cells {pending} still not run after {timeout} s")
            time.sleep(0.5)

    def wait_rendered(self, path, timeout=120):
        """Wait until JupyterLab has attached every cell (it renders them on idle time after
        opening; closing a notebook before that ends logs errors from JupyterLab and jupyterlab-myst)."""
        self.page.wait_for_function("""(path) => { const p = window.__panel(path);
            return !p || p.content.widgets.every(c => c.isAttached); }""",
            arg=path, timeout=timeout * 1000, polling=250)
        self.page.wait_for_timeout(1000)

    def close(self, path):
        """Shut the notebook's kernel down and close its tab without saving."""
        self.wait_rendered(path)
        self.page.evaluate("""async (path) => { const p = window.__panel(path); if (!p) return;
          await p.sessionContext.shutdown(); p.context.model.dirty = false; p.dispose(); }""", path)
        self.page.wait_for_timeout(1000)

    def save(self, path):
        self.page.evaluate("async (path) => { await window.__panel(path).context.save(); return null; }", path)

    def screenshot(self, locator, name):
        """A PNG of what `locator` shows, under self.shots. JupyterLab paints only the cells in
        view (content-visibility), so the node is scrolled into view and given time to paint; a
        node taller than the window is cut at the window's height (a learner sees no more)."""
        self.shots.mkdir(parents=True, exist_ok=True)
        target = self.shots / f"{name}.png"
        locator.scroll_into_view_if_needed()
        self.page.wait_for_timeout(500)
        box = locator.bounding_box()
        viewport = self.page.viewport_size
        if box and box["height"] > viewport["height"] - 40:
            locator.evaluate("n => n.scrollIntoView({block: 'start'})")
            self.page.wait_for_timeout(500)
            box = locator.bounding_box()
            top = max(box["y"], 0)
            self.page.screenshot(path=str(target), clip={
                "x": box["x"], "y": top, "width": box["width"], "height": viewport["height"] - top})
        else:
            locator.screenshot(path=str(target))
        return target

    def window_shot(self, name):
        """A PNG of the whole JupyterLab window as it is, under self.shots."""
        self.shots.mkdir(parents=True, exist_ok=True)
        target = self.shots / f"{name}.png"
        self.page.screenshot(path=str(target))
        return target

    def cpu_seconds(self):
        """CPU seconds (user + system) used so far by the JupyterLab server and its kernels,
        living and ended (kernels are counted once they have been shut down and reaped)."""
        return self.server.cpu_seconds()


def error_text(outputs):
    """The text a learner sees for a cell's error outputs (traceback without colour codes)."""
    return "\n".join(ANSI.sub("", "\n".join(o.get("traceback", []))) or f"{o.get('ename')}: {o.get('evalue')}"
                     for o in outputs if o["output_type"] == "error")


def plain_text(outputs):
    """Everything a cell printed or returned as text."""
    parts = []
    for o in outputs:
        if o["output_type"] == "stream":
            parts.append("".join(o["text"]) if isinstance(o["text"], list) else o["text"])
        elif "data" in o and "text/plain" in o["data"]:
            value = o["data"]["text/plain"]
            parts.append("".join(value) if isinstance(value, list) else value)
    return "\n".join(parts)
