"""Execute every chapter and solution notebook in _toc.yml; time each against its budget.

    python -m benchmarks.notebooks               # all notebooks; exit 1 if a budget is blown
    python -m benchmarks.notebooks --no-fail     # print-only (CI): never fails on timing noise
    python -m benchmarks.notebooks chapters/03_scoring_functions.ipynb   # just these

Each notebook runs in a fresh kernel from its own folder, as `tools/execute.py` runs it, but
the notebook file is not rewritten. Recorded per notebook: wall time (kernel start included),
peak memory of the kernel process (its own `ru_maxrss`, and its children's), and the device it
computed on (plus the peak CUDA memory there was one). Budgets are for a 2-core CPU: a
notebook "exceeds" its budget only beyond BUDGET_TOLERANCE times it, because timings on a
shared machine move by tens of percent.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

import yaml

from benchmarks.common import RESULTS, ROOT, SCHEMA_VERSION, environment, table, write_json

# Seconds per notebook, by the chapter number in its file name; "a1" is the appendix. The
# solutions of part I share their chapter's budget; those of part II (chapters 9-12) have 60 s
# each, as their issues set.
BUDGETS = {"01": 60, "02": 60, "03": 60, "04": 90, "05": 90, "06": 90, "07": 120, "08": 120,
           "a1": 60, "09": 120, "10": 90, "11": 90, "12": 90}
PART_TWO = {"09", "10", "11", "12"}
SOLUTION_BUDGET_PART_TWO = 60
DEFAULT_BUDGET = 60
# Everything together: ten minutes for part I (chapters 1-8, A1 and their solutions), plus
# part II's chapters at their budgets (390 s) and about half a minute per solutions notebook.
TOTAL_BUDGET = 600 + 390 + 4 * 30
BUDGET_TOLERANCE = 1.25     # fail only beyond 125% of a budget

PROBE = """\
import json as _json, resource as _resource, sys as _sys
_kb = 1 if _sys.platform != "darwin" else 1 / 1024  # ru_maxrss: KiB on Linux, bytes on macOS
_probe = {"rss_self_mb": _resource.getrusage(_resource.RUSAGE_SELF).ru_maxrss * _kb / 1024,
          "rss_children_mb": _resource.getrusage(_resource.RUSAGE_CHILDREN).ru_maxrss
          * _kb / 1024, "device": "cpu", "cuda_peak_mb": None}
_torch = _sys.modules.get("torch")
if _torch is not None and _torch.cuda.is_available() and _torch.cuda.is_initialized():
    _probe["device"] = "cuda: " + _torch.cuda.get_device_name()
    _probe["cuda_peak_mb"] = _torch.cuda.max_memory_allocated() / 2**20
print("BENCHMARK-PROBE " + _json.dumps(_probe))
"""


def budget_for(path):
    """The budget in seconds of a notebook, from the chapter number its file name starts with."""
    chapter = Path(path).name.split("_")[0]
    if chapter in PART_TWO and Path(path).parent.name == "solutions":
        return SOLUTION_BUDGET_PART_TWO
    return BUDGETS.get(chapter, DEFAULT_BUDGET)


def toc_notebooks(root=ROOT):
    """The chapter and solution notebooks listed in _toc.yml, in the order of the book."""
    toc = yaml.safe_load((Path(root) / "_toc.yml").read_text())
    files = [c["file"] for part in toc.get("parts", []) for c in part.get("chapters", [])]
    paths = [Path(root) / f"{f}.ipynb" for f in files
             if f.startswith(("chapters/", "exercises/solutions/"))]
    return [p for p in paths if p.exists()]


def execute_notebook(path, timeout=900):
    """Run a notebook in a fresh kernel; return seconds, peak memory, device, and any error."""
    import nbformat
    from nbclient import NotebookClient

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(PROBE))  # in memory only: the file is untouched
    os.environ.setdefault("PYTHONHASHSEED", "0")
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(path.parent)}})
    start, error = time.perf_counter(), None
    try:
        client.execute()
    except Exception as exc:  # a failing or timed-out cell: report it in the table, keep going
        error = describe(exc)
    seconds = time.perf_counter() - start
    probe = {}
    for out in nb.cells[-1].get("outputs", []):
        for line in out.get("text", "").splitlines():
            if line.startswith("BENCHMARK-PROBE "):
                probe = json.loads(line.split(" ", 1)[1])
    peaks = [probe.get("rss_self_mb"), probe.get("rss_children_mb")]
    return {"seconds": seconds,
            "peak_rss_mb": max((p for p in peaks if p is not None), default=None),
            "peak_cuda_mb": probe.get("cuda_peak_mb"),
            "device": probe.get("device"),
            "error": error}


def describe(exc):
    """One line saying why a notebook stopped: the cell's exception, or the timeout."""
    if getattr(exc, "ename", None):  # nbclient's CellExecutionError: the cell's own error
        return f"{exc.ename}: {exc.evalue}"
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"


def status(seconds, budget, error=None):
    """'ok' within the budget, 'over' within the tolerance, 'FAIL' beyond it, or 'error'."""
    if error:
        return "error"
    if seconds <= budget:
        return "ok"
    return "over" if seconds <= budget * BUDGET_TOLERANCE else "FAIL"


def run(paths, execute=None, log=print):
    """Execute `paths` one after another; return the result dictionary written as JSON.

    `execute(path)` defaults to execute_notebook; the tests pass a fake with made-up times."""
    execute = execute or execute_notebook
    measured = {}
    for path in paths:
        path = Path(path)
        name = path.relative_to(ROOT).as_posix() if path.is_absolute() else path.as_posix()
        log(f"running {name} ...")
        measured[name] = execute(path)
    return summarise(measured)


def summarise(measured):
    """The result dictionary from {notebook name: its measurements (seconds, error, ...)}:
    each notebook's budget and status, and the total (also used by nbval_timing)."""
    rows = []
    for name, values in measured.items():
        budget = budget_for(name)
        rows.append({"notebook": name, "budget_s": budget, **values,
                     "status": status(values["seconds"], budget, values.get("error"))})
    total = sum(r["seconds"] for r in rows)
    return {"schema": SCHEMA_VERSION, "kind": "notebooks",
            "tolerance": BUDGET_TOLERANCE, "notebooks": rows,
            "total": {"seconds": total, "budget_s": TOTAL_BUDGET,
                      "status": status(total, TOTAL_BUDGET)}}


def report(result):
    """The result as a printed table, with the total and the environment."""
    rows = result["notebooks"] + [{"notebook": "all together", **result["total"]}]
    columns = [("notebook", "notebook", "{}"), ("seconds", "seconds", "{:.1f}"),
               ("budget", "budget_s", "{}"), ("peak RSS MB", "peak_rss_mb", "{:.0f}"),
               ("peak CUDA MB", "peak_cuda_mb", "{:.0f}"), ("device", "device", "{}"),
               ("status", "status", "{}")]
    env = result.get("environment", {})
    lines = [table(rows, columns), "",
             f"device {env.get('device')}, torch {env.get('torch')}, "
             f"load average at start {env.get('load_average')}, at end "
             f"{result.get('load_average_end')}",
             f"'over': above the budget; 'FAIL': above {result['tolerance']:.0%} of it."]
    lines += [f"error in {r['notebook']}: {r['error']}" for r in result["notebooks"] if r.get("error")]
    return "\n".join(lines)


def exit_code(result, no_fail=False):
    """0 unless a notebook or the total is beyond its tolerance, or a notebook raised."""
    if no_fail:
        return 0
    statuses = [r["status"] for r in result["notebooks"]] + [result["total"]["status"]]
    return 1 if any(s in ("FAIL", "error") for s in statuses) else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="*", help="notebooks to run (default: all in _toc.yml)")
    parser.add_argument("--no-fail", action="store_true",
                        help="print the table but always exit 0 (CI: timing noise is not a failure)")
    parser.add_argument("--name", default=None, help="results file name (default notebooks-<device>)")
    parser.add_argument("--results-dir", default=str(RESULTS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    paths = [Path(p).resolve() for p in args.paths] or toc_notebooks()
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    env = environment(device)
    result = run(paths)
    result["environment"] = env
    result["load_average_end"] = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
    path = write_json(result, args.name or f"notebooks-{device}", args.results_dir)
    print(report(result))
    print(f"results: {path}")
    return exit_code(result, args.no_fail)


if __name__ == "__main__":
    sys.exit(main())
