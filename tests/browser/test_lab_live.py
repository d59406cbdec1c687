"""The notebooks as a learner meets them: JupyterLab with a live kernel, in headless Chromium.

Run by `make lab-test` (in `make test`: a fast subset) and `make lab-test-full` (everything),
which set LAB_TEST and run with no network (tests/browser/offline.sh); skipped otherwise.
JupyterLab runs on 127.0.0.1 over a copy of the course (tests/browser/lab_session.py).

Per chapter with a widget (LAB_TEST=fast: chapter 1; full: every one; a chapter with no
stored widget output is reported as skipped):
  opened, it is not modified and its kernel is python3; no news prompt; before Run All each
  stored widget preview says it is a static preview; Run All ends with no error and nothing
  on stderr; every widget is then live ipywidgets controls (one per control of the widget);
  one control per widget is moved with the mouse or keyboard and the widget's output changes.
Per learner copy (fast: exercises A1; full: every one): opened, not modified; its first
  exercise's check, run on the stub, shows the checker's sentence ("is not implemented yet")
  without a chained traceback; the solution from exercises/solutions pasted into the stub
  cell (clipboard, Ctrl+V) makes the same check print its one line "<name>: all checks passed."
The tests read no output text other than the checkers' lines, so re-executed notebooks pass.
Also: JupyterLab's save of each notebook just opened gives back the bytes of the repository; the
first learner copy's link to its chapter opens the chapter, whose MyST renders (jupyterlab-myst).
Screenshots: _build/lab-screenshots/ (LAB_SHOTS). Wall and CPU time (JupyterLab and kernels) are
printed per notebook.
"""
import os
import re
import sys
import time
from pathlib import Path

import pytest

from book_pages import CHROMIUM
from lab_session import KERNEL_IDLE, CHROMIUM_ARGS, ROOT, LabPage, LabServer, error_text, plain_text

MODE = os.environ.get("LAB_TEST", "")
pytestmark = pytest.mark.skipif(MODE not in ("fast", "full"),
                                reason="set LAB_TEST=fast or full (make lab-test, make lab-test-full)")
sys.path.insert(0, str(ROOT / "tools"))

if os.environ.get("LAB_NOTEBOOKS"):  # e.g. LAB_NOTEBOOKS="chapters/03_scoring_functions.ipynb"
    CHOSEN = os.environ["LAB_NOTEBOOKS"].split()
elif MODE == "full":
    CHOSEN = [p.relative_to(ROOT).as_posix() for p in
              sorted(ROOT.glob("chapters/*.ipynb")) + sorted(ROOT.glob("exercises/*.ipynb"))]
else:  # the cheapest chapter with a widget, and a learner copy whose check runs in a second
    CHOSEN = ["chapters/01_attention_cues.ipynb", "exercises/a1_attention_cost.ipynb"]
CHAPTERS = [p for p in CHOSEN if p.startswith("chapters/")]
LEARNER = [p for p in CHOSEN if p.startswith("exercises/") and "/solutions/" not in p]
SHOTS = Path(os.environ.get("LAB_SHOTS") or ROOT / "_build" / "lab-screenshots")
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
# Seconds a chapter's Run All may take: generous, since chapter 9 took over 600 s on a 2-core
# machine shared with other work (its nbval budget is 120 s on a quiet one).
RUN_ALL_TIMEOUT = float(os.environ.get("LAB_RUN_ALL_TIMEOUT", 1800))
NEWS = "official Jupyter news"
TIMES = {}
# The one line a passing check prints (book/checks/_core.py): "<name>: all checks passed."
PASSED = re.compile(r"^\S[^\n]*: all checks passed\.$", re.MULTILINE)


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    with LabServer(tmp_path_factory.mktemp("lab")) as lab:
        print(f"\nJupyterLab answered in {lab.server_seconds:.1f} s"
              + (f"; lab extensions not installed by requirements.txt, left out: {lab.disabled}"
                 if lab.disabled else ""))
        yield lab


@pytest.fixture(scope="session")
def lab(server):
    playwright = pytest.importorskip("playwright.sync_api")
    started = time.time()
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = LabPage(browser, server, SHOTS)
        page.start()
        TIMES["JupyterLab page loaded"] = time.time() - started
        yield page
        browser.close()
    SHOTS.mkdir(parents=True, exist_ok=True)
    (SHOTS / "console.txt").write_text("\n\n".join(page.console))
    print(f"\nlive JupyterLab stage (load {os.getloadavg()[0]:.1f}), wall: "
          + "; ".join(f"{k} {v:.0f} s" for k, v in TIMES.items())
          + f"; CPU of JupyterLab and its kernels {server.cpu_seconds():.0f} s")
    if page.tolerated:
        print("tolerated known races (lab_session.py):\n  " + "\n  ".join(t[:200] for t in page.tolerated))


@pytest.fixture(autouse=True)
def console_per_test(lab):
    """Each test answers for the console messages that come while it runs."""
    lab.mark()
    yield


@pytest.fixture
def opened(lab):
    """The notebooks a test opens (it appends their paths); closed, kernels shut down, at its end."""
    paths = []
    yield paths
    for path in paths:
        lab.close(path)


def test_jupyterlab_opens_without_news_prompt_or_console_errors(lab):
    lab.page.wait_for_timeout(3000)  # the news prompt, when it comes, comes within a second or two
    assert NEWS not in lab.text(), "JupyterLab asks about news: tools/jupyter/labconfig is not used"
    assert not lab.problems(), lab.problems()
    assert not lab.remote, f"requests off the machine: {lab.remote}"


def opened_clean(lab, path):
    """Open `path`; it must be unmodified with a python3 kernel once the kernel is idle, and
    JupyterLab's own save of it must write back the bytes the repository holds."""
    before = (lab.server.root / path).read_bytes()
    seconds = lab.open(path)
    lab.page.wait_for_timeout(1500)  # JupyterLab writes kernelspec/language_info once the kernel answers
    state = lab.state(path)
    assert not state["dirty"], (
        f"{path} shows as modified as soon as it opens: its kernelspec or language_info is not the "
        "form JupyterLab writes (run tools/normalise_notebooks.py)")
    kernel = lab.page.evaluate("(p) => window.__panel(p).sessionContext.session.kernel.name", path)
    assert kernel == "python3"
    lab.save(path)
    after = (lab.server.root / path).read_bytes()
    assert after == before, f"{path}: JupyterLab's save changed the file ({len(before)} -> {len(after)} bytes)"
    return seconds


def widget_cells(cells):
    return [c for c in cells if any(WIDGET_MIME in o.get("data", {}) for o in c["outputs"])]


def control_count(cell):
    html = next(o["data"]["text/html"] for o in cell["outputs"] if "text/html" in o.get("data", {}))
    html = "".join(html) if isinstance(html, list) else html
    return len(re.findall(r"data-k=\"\d+\"", html))


WIDGET_VIEW = """(node) => { const live = node.querySelector('.jp-OutputArea .jupyter-widgets.widget-vbox');
  const out = live && live.querySelector('.widget-output');
  return {live: !!live, error: /Error displaying widget|Model not found/.test(node.innerText),
          preview: !!node.querySelector('.book-widget'),
          controls: live ? live.querySelectorAll('.widget-hbox > .widget-inline-hbox').length : 0,
          kinds: live ? [...live.querySelectorAll('.widget-hbox > .widget-inline-hbox')].map(
            w => w.classList.contains('widget-dropdown') ? 'dropdown' :
                 w.querySelector('.noUi-handle, input[type=range]') ? 'slider' :
                 w.querySelector('input[type=text], textarea') ? 'text' : w.className) : [],
          output: out ? out.innerHTML : null}; }"""


def move_first_control(lab, node, kind):
    """Change the widget's first control as a learner would; return what was done."""
    control = node.locator(".widget-hbox > .widget-inline-hbox").first
    control.scroll_into_view_if_needed()
    if kind == "dropdown":
        select = control.locator("select")
        options = select.locator("option").all_text_contents()
        current = select.evaluate("s => s.selectedIndex")
        target = options[1 if current == 0 else 0]
        select.select_option(label=target)
        return f"dropdown -> {target!r}"
    if kind == "slider":
        handle = control.locator(".noUi-handle")
        handle.click()
        before = control.inner_text()
        handle.press("ArrowRight")
        lab.page.wait_for_timeout(200)
        if control.inner_text() == before:  # already at the right end
            handle.press("ArrowLeft")
        return f"slider {before.strip()!r} -> {control.inner_text().strip()!r}"
    if kind == "text":
        box = control.locator("input[type=text], textarea").first
        box.fill(box.input_value() + " again")
        box.press("Enter")
        return "text box edited"
    raise AssertionError(f"unknown control {kind}")


@pytest.mark.parametrize("path", CHAPTERS)
def test_chapter_runs_all_with_live_widgets(lab, opened, path):
    report = {}
    cpu = lab.cpu_seconds()
    opened.append(path)
    report["open"] = opened_clean(lab, path)
    assert NEWS not in lab.text()
    cells = lab.cells(path)
    stored = widget_cells(cells)
    if not stored:
        pytest.skip(f"{path} has no stored widget output (no widget, or outputs not stored)")
    notes = []
    for cell in stored:  # untrusted notebook, scripts stripped: the preview must say so
        node = lab.cell(path, cell["index"])
        node.scroll_into_view_if_needed()
        note = node.locator(".book-widget-note")
        notes.append(note.count() == 1 and note.is_visible())
    lab.screenshot(lab.cell(path, stored[0]["index"]).locator(".jp-Cell-outputWrapper"),
                   Path(path).stem + "-widget-preview")
    # Asserted at the end, so that one run reports everything else about the chapter too.
    stale = [c["index"] for c, ok in zip(stored, notes) if not ok]
    lab.select(path, 0)
    lab.command("notebook:run-all-cells")
    cells, report["run all"] = lab.wait_until_done(path, timeout=RUN_ALL_TIMEOUT)
    problems = []
    for c in cells:
        if c["type"] != "code" or "raises-exception" in c["tags"]:
            continue
        if any(o["output_type"] == "error" for o in c["outputs"]):
            problems.append(f"cell {c['index']}: {error_text(c['outputs'])[-600:]}")
        for o in c["outputs"]:
            if o["output_type"] == "stream" and o["name"] == "stderr":
                problems.append(f"cell {c['index']} wrote to stderr: {''.join(o['text'])[:300]}")
    assert not problems, f"{path} after Run All:\n" + "\n".join(problems)
    live = widget_cells(cells)
    assert len(live) == len(stored), f"{path}: {len(stored)} widgets stored, {len(live)} after Run All"
    moved = []
    for cell in live:
        node = lab.cell(path, cell["index"])
        node.scroll_into_view_if_needed()
        lab.page.wait_for_function("(n) => !!n.querySelector('.widget-output')", arg=node.element_handle(),
                                   timeout=30_000, polling=250)
        view = node.evaluate(WIDGET_VIEW)
        assert view["live"] and not view["error"] and not view["preview"], (
            f"{path}, cell {cell['index']}: the widget is not shown as live controls: {view}")
        assert view["controls"] == control_count(cell), (
            f"{path}, cell {cell['index']}: {view['controls']} live controls, {control_count(cell)} expected: "
            f"{ {k: v for k, v in view.items() if k != 'output'} }")
        before, started = view["output"], time.time()
        action = move_first_control(lab, node, view["kinds"][0])
        lab.page.wait_for_function(
            "([n, before]) => { const o = n.querySelector('.widget-output'); return o && o.innerHTML !== before"
            " && o.querySelector('img, pre, .jp-OutputArea-output'); }",
            arg=[node.element_handle(), before], timeout=60_000, polling=250)
        lab.wait_until_done(path)
        moved.append(f"cell {cell['index']}: {action}, output changed in {time.time() - started:.1f} s")
    lab.screenshot(lab.cell(path, live[0]["index"]).locator(".jp-Cell-outputWrapper"),
                   Path(path).stem + "-widget-live")
    lab.window_shot(Path(path).stem + "-widget-live-window")
    TIMES[path] = sum(report.values())
    print(f"\n{path}: opened unmodified, saved unchanged in {report['open']:.0f} s; {len(stored) - len(stale)} of "
          f"{len(stored)} previews say 'Static preview'; Run All {report['run all']:.0f} s, no error or stderr; "
          + "; ".join(moved) + f"; CPU of the kernel and server so far {lab.cpu_seconds() - cpu:.0f} s")
    assert not lab.problems(), lab.problems()
    assert not lab.remote, lab.remote
    assert not stale, (f"{path}: stored widget previews (cells {stale}) without a visible 'Static preview' "
                       "note: re-execute the notebook with the current book.widgets (tools/execute.py)")


def first_exercise(cells, solution_path):
    """The first check cell, the stub cell it checks, and the stub's solution source."""
    from make_exercises import strip_solution
    import nbformat

    solutions = [c.source for c in nbformat.read(solution_path, as_version=4).cells if c.cell_type == "code"]
    check = next(c for c in cells if c["type"] == "code" and "checks.check_" in c["source"])
    stubs = [c for c in cells[:check["index"]] if c["type"] == "code" and "NotImplementedError" in c["source"]]
    assert stubs, f"no stub before the check cell {check['index']}"
    stub = stubs[-1]
    answer = next((s for s in solutions if "### BEGIN SOLUTION" in s
                   and strip_solution(s, "solution").strip() == stub["source"].strip()), None)
    assert answer is not None, f"no solution cell whose stub is cell {stub['index']}"
    solved = "\n".join(line for line in answer.splitlines()
                       if not re.match(r"^\s*### (BEGIN|END) SOLUTION", line))
    return check, stub, solved


def paste(lab, path, index, text):
    """Replace a cell's code by `text` as a learner would: click in it, Ctrl+A, Ctrl+V."""
    lab.page.evaluate("(t) => navigator.clipboard.writeText(t)", text)
    node = lab.cell(path, index)
    editor = node.locator(".cm-content")
    editor.scroll_into_view_if_needed()
    editor.click()
    lab.page.keyboard.press("Control+a")
    lab.page.keyboard.press("Control+v")
    lab.page.keyboard.press("Escape")
    lab.page.wait_for_timeout(300)
    got = lab.cells(path)[index]["source"]
    assert got.strip() == text.strip(), f"the pasted code differs from the solution:\n{got}"


def run_cell(lab, path, index):
    lab.select(path, index)
    lab.command("notebook:run-cell")
    lab.page.wait_for_function(
        "([p, i]) => { const c = window.__panel(p).content.widgets[i]; return c.model.executionCount !== null"
        " && c.model.executionState !== 'running'; }", arg=[path, index], timeout=300_000, polling=250)
    cells, _ = lab.wait_until_done(path, indices={index})
    return cells[index]


@pytest.mark.parametrize("path", LEARNER)
def test_learner_copy_check_fails_short_then_passes(lab, opened, path):
    started, cpu = time.time(), lab.cpu_seconds()
    opened.append(path)
    opened_clean(lab, path)
    cells = lab.cells(path)
    check, stub, solved = first_exercise(cells, ROOT / "exercises" / "solutions" / Path(path).name)
    lab.select(path, check["index"])
    lab.command("notebook:run-all-above")
    cells, _ = lab.wait_until_done(path, indices=set(range(check["index"])))
    above = [c for c in cells[:check["index"]] if c["type"] == "code" and error_text(c["outputs"])
             and c["index"] != stub["index"]]
    assert not above, f"{path}: cells before the check fail: {[c['index'] for c in above]}"
    failed = run_cell(lab, path, check["index"])
    message = error_text(failed["outputs"])
    shot_fail = lab.screenshot(lab.cell(path, check["index"]), Path(path).stem + "-check-failed")
    lab.window_shot(Path(path).stem + "-check-failed-window")
    paste(lab, path, stub["index"], solved)
    run_cell(lab, path, stub["index"])
    passed = run_cell(lab, path, check["index"])
    shot_pass = lab.screenshot(lab.cell(path, check["index"]), Path(path).stem + "-check-passed")
    lab.window_shot(Path(path).stem + "-check-passed-window")
    lines = message.strip().splitlines()
    printed = plain_text(passed["outputs"]).strip()
    print(f"\n{path}: check on the stub: {len(lines)} line(s): {lines[-1][:100] if lines else ''!r}...; "
          f"pasted solution: {printed!r}; screenshots {shot_fail.name}, {shot_pass.name}; "
          f"{time.time() - started:.0f} s, CPU {lab.cpu_seconds() - cpu:.0f} s")
    assert "is not implemented yet" in message, f"{path}: the stub's check says:\n{message}"
    assert "During handling of the above exception" not in message and len(lines) <= 4, (
        f"{path}: the stub's check shows a traceback ({len(lines)} lines), not the checker's short message:\n"
        f"{message}")
    assert not re.search(r"book[/\\]checks[/\\]|_core\.py", message), (
        f"{path}: the stub's check shows frames of book.checks:\n{message}")
    assert not error_text(passed["outputs"]), f"{path}: the solution fails its check:\n{error_text(passed['outputs'])}"
    assert PASSED.fullmatch(printed), f"{path}: the passing check prints {printed!r}, not '<name>: all checks passed.'"
    assert not lab.problems(), lab.problems()
    assert not lab.remote, lab.remote
    TIMES[path] = time.time() - started
    if path == LEARNER[0]:
        follow_link_to_chapter(lab, opened, path)


def follow_link_to_chapter(lab, opened, path):
    """The learner copy's link to its chapter (a {doc} role in the solution notebook, rewritten by
    tools/make_exercises.py) opens the chapter in JupyterLab when clicked; jupyterlab-myst renders
    the chapter's markdown: math typeset, no raw role or directive. Checked on one learner copy."""
    chapter = "chapters/" + Path(path).name
    lab.select(path, 0)
    link = lab.page.locator(f".jp-MarkdownCell a[href*='{chapter}']").first
    link.scroll_into_view_if_needed(timeout=30_000)
    link.click()
    opened.append(chapter)
    lab.page.wait_for_function("(p) => !!window.__panel(p)", arg=chapter, timeout=60_000, polling=250)
    lab.page.wait_for_function(
        "(p) => window.jupyterapp.shell.currentWidget === window.__panel(p)", arg=chapter,
        timeout=30_000, polling=250)
    lab.page.wait_for_function(KERNEL_IDLE, arg=chapter, timeout=180_000, polling=250)
    lab.wait_rendered(chapter)
    lab.page.wait_for_function("() => document.querySelectorAll('.jp-Notebook .katex, .jp-Notebook mjx-container')"
                               ".length > 0", timeout=60_000, polling=250)
    text = lab.page.evaluate("(p) => window.__panel(p).node.innerText", chapter)
    raw = re.findall(r"\{(?:doc|cite|ref|numref|eq)\}`[^`]*`|```\{\w", text)
    print(f"{path}: its link opened {chapter}; MyST rendered, no raw role or directive")
    assert not raw, f"{chapter}: MyST shown raw in JupyterLab: {raw[:5]}"
    assert not lab.problems(), lab.problems()
