"""A pytest plugin: while `make test` runs the notebooks under nbval, time each one and print
the budget table of `benchmarks.notebooks` at the end, without ever failing the run.

    pytest --nbval-lax chapters exercises -p benchmarks.nbval_timing

This is CI's view of the chapter budgets, measured at no extra cost: the notebooks run once,
for the tests. A notebook's time is the sum of its cells' setup, call and teardown (the kernel
start is in the first cell's setup). `make bench` measures the same budgets on their own, with
peak memory, and exits non-zero beyond the tolerance.
"""
import os
from collections import defaultdict

from benchmarks.common import environment, write_json
from benchmarks import notebooks

_seconds = defaultdict(float)
_errors = {}
_environment = {}


def pytest_sessionstart(session):
    import torch

    _environment.update(environment("cuda" if torch.cuda.is_available() else "cpu"))


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::")[0]
    if not path.endswith(".ipynb"):
        return
    _seconds[path] += report.duration
    if report.failed and path not in _errors:
        _errors[path] = f"a cell failed in {report.when}"


def result():
    """The timings so far, in the form benchmarks.notebooks writes."""
    measured = {path: {"seconds": seconds, "peak_rss_mb": None, "peak_cuda_mb": None,
                       "device": _environment.get("device"), "error": _errors.get(path)}
                for path, seconds in _seconds.items()}
    return {**notebooks.summarise(measured), "source": "nbval"}


def pytest_terminal_summary(terminalreporter):
    if not _seconds:
        return
    measured = result()
    measured["environment"] = _environment
    measured["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    path = write_json(measured, "notebooks-nbval")
    terminalreporter.write_sep("-", "notebook times against their budgets (never fails the run)")
    terminalreporter.write_line(notebooks.report(measured))
    terminalreporter.write_line(f"results: {path}")
