"""The benchmark scripts' logic: budgets, exit codes, JSON form. Nothing here is timed:
notebook runs are faked with made-up seconds, and the layer run is tiny."""
import json
import re
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT))  # `benchmarks` is a folder of scripts at the repository root
from benchmarks import gpu, layers, notebooks  # noqa: E402


# -- Notebook budgets -------------------------------------------------------------------------

@pytest.mark.parametrize("name, budget", [
    ("chapters/01_attention_cues.ipynb", 60), ("chapters/03_scoring_functions.ipynb", 60),
    ("chapters/04_bahdanau.ipynb", 90), ("chapters/06_self_attention_positional_encoding.ipynb", 90),
    ("chapters/07_transformer.ipynb", 120), ("chapters/08_bert.ipynb", 120),
    ("chapters/a1_attention_cost.ipynb", 60),
    ("exercises/solutions/07_transformer.ipynb", 120),  # a solution has its chapter's budget
    ("chapters/09_gpt.ipynb", 120), ("chapters/10_relative_positions.ipynb", 90),
    ("chapters/11_fast_attention.ipynb", 90), ("exercises/solutions/11_fast_attention.ipynb", 60),
    ("chapters/12_vision_transformer.ipynb", 90),
    ("exercises/solutions/09_gpt.ipynb", 60),  # part II's solutions: 60 s each
])
def test_budget_table(name, budget):
    assert notebooks.budget_for(ROOT / name) == budget


def test_total_budget_and_tolerance():
    assert notebooks.TOTAL_BUDGET == 600 + 390 + 120 and notebooks.BUDGET_TOLERANCE == 1.25


@pytest.mark.parametrize("seconds, expected", [(59.0, "ok"), (60.0, "ok"), (70.0, "over"),
                                               (75.0, "over"), (75.1, "FAIL")])
def test_status_fails_only_beyond_the_tolerance(seconds, expected):
    assert notebooks.status(seconds, 60) == expected
    assert notebooks.status(seconds, 60, error="ValueError: boom") == "error"


def fake_execute(times, error=None):
    """A stand-in for execute_notebook: seconds from `times` by file name, no kernel."""
    def execute(path):
        return {"seconds": times[path.name], "peak_rss_mb": 321.0, "peak_cuda_mb": None,
                "device": "cpu", "error": error if path.name == "broken.ipynb" else None}
    return execute


def paths(*names):
    return [ROOT / "chapters" / n for n in names]


def test_a_notebook_beyond_its_budget_gives_exit_code_1_unless_no_fail():
    result = notebooks.run(paths("01_a.ipynb", "04_b.ipynb"),
                           execute=fake_execute({"01_a.ipynb": 80.0, "04_b.ipynb": 10.0}),
                           log=lambda *_: None)
    assert [r["status"] for r in result["notebooks"]] == ["FAIL", "ok"]  # 80 > 1.25 * 60
    assert notebooks.exit_code(result) == 1
    assert notebooks.exit_code(result, no_fail=True) == 0


def test_within_the_tolerance_passes():
    result = notebooks.run(paths("01_a.ipynb", "07_b.ipynb"),
                           execute=fake_execute({"01_a.ipynb": 70.0, "07_b.ipynb": 119.0}),
                           log=lambda *_: None)
    assert [r["status"] for r in result["notebooks"]] == ["over", "ok"]
    assert notebooks.exit_code(result) == 0


def test_the_total_has_its_own_budget():
    names = [f"0{i}_x.ipynb" for i in range(1, 9)]  # each within its own budget's tolerance
    result = notebooks.run(paths(*names), execute=fake_execute(dict.fromkeys(names, 175.0)),
                           log=lambda *_: None)
    assert result["total"]["seconds"] == 1400 and result["total"]["status"] == "FAIL"
    assert notebooks.exit_code(result) == 1


def test_an_execution_error_fails_and_is_reported():
    result = notebooks.run(paths("broken.ipynb"), execute=fake_execute(
        {"broken.ipynb": 1.0}, error="CellExecutionError: NameError"), log=lambda *_: None)
    assert result["notebooks"][0]["status"] == "error"
    assert notebooks.exit_code(result) == 1
    result["environment"] = {"device": "cpu", "torch": "x", "load_average": [1, 1, 1]}
    assert "error in chapters/broken.ipynb: CellExecutionError" in notebooks.report(result)


def test_main_writes_json_and_returns_the_exit_code(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(notebooks, "execute_notebook", fake_execute({"01_attention_cues.ipynb": 99.0}))
    args = [str(ROOT / "chapters/01_attention_cues.ipynb"), "--results-dir", str(tmp_path)]
    assert notebooks.main(args) == 1
    assert notebooks.main(args + ["--no-fail"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"chapters/01_attention_cues\.ipynb\s+99\.0\s+60\s+321\s+-\s+cpu\s+FAIL", out)
    saved = json.loads((tmp_path / "notebooks-cpu.json").read_text())
    check_notebook_schema(saved)


def check_notebook_schema(result):
    assert result["schema"] == 1 and result["kind"] == "notebooks"
    assert {"device", "torch", "load_average", "cpu_count", "created"} <= set(result["environment"])
    for row in result["notebooks"]:
        assert set(row) >= {"notebook", "seconds", "budget_s", "peak_rss_mb", "peak_cuda_mb",
                            "device", "status", "error"}
        assert isinstance(row["seconds"], float) and row["status"] in {"ok", "over", "FAIL", "error"}
    assert set(result["total"]) == {"seconds", "budget_s", "status"}


def test_toc_notebooks_are_chapters_and_solutions_that_exist():
    found = notebooks.toc_notebooks()
    assert found and all(p.exists() for p in found)
    assert all(p.parent.name in {"chapters", "solutions"} for p in found)
    assert ROOT / "chapters/01_attention_cues.ipynb" in found


def test_execute_notebook_reports_time_memory_device_and_errors(tmp_path):
    """One real (tiny) notebook in a fresh kernel, and one that raises."""
    import nbformat

    good, bad = tmp_path / "01_good.ipynb", tmp_path / "01_bad.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = [0] * 10**6")]),
                   good)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 / 0")]), bad)
    before = good.read_text()
    measured = notebooks.execute_notebook(good, timeout=120)
    assert measured["error"] is None and measured["seconds"] > 0
    assert measured["device"] == "cpu" and measured["peak_rss_mb"] > 10
    assert good.read_text() == before, "the benchmark must not rewrite the notebook"
    failed = notebooks.execute_notebook(bad, timeout=120)
    assert failed["error"] == "ZeroDivisionError: division by zero"
    slow = tmp_path / "01_slow.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import time\ntime.sleep(30)")]), slow)
    timed_out = notebooks.execute_notebook(slow, timeout=2)
    assert timed_out["error"].startswith("CellTimeoutError: A cell timed out"), timed_out["error"]


# -- Layer benchmarks ---------------------------------------------------------------------------

def test_layer_run_json_form_and_ratios(tmp_path):
    """A tiny real run (n = 8 and 16, batch 2): every layer measured, ratios to nn.MHA."""
    result = layers.run("cpu", lengths=[8, 16], repeat=1, transformer=False, batch=2,
                        log=lambda *_: None)
    names = {r["layer"] for r in result["layers"]}
    assert {"ours readable", "ours fused", "nn.MHA", "nn.MHA need_weights=False",
            "SDPA core (no projections)"} <= names
    for r in result["layers"]:
        assert r["mode"] in {"forward", "forward+backward"} and r["seq_len"] in {8, 16}
        assert r["median_ms"] > 0 and r["peak_mb"] >= 0 and len(r["times_ms"]) == 1
        assert r["time_ratio"] > 0
    assert all(r["time_ratio"] == 1.0 for r in result["layers"] if r["layer"] == "nn.MHA")
    assert {(g["layer"], g["seq_len"]) for g in result["goals"]} == {
        ("ours fused", 8), ("ours fused", 16)}   # the readable goals are at 64 and 1024 only
    json.dumps(result)                            # all of it serialises
    assert "forward+backward: time ratio to nn.MHA" in layers.report(result)


def test_goals_and_ratios_from_made_up_rows():
    rows = [{"mode": "forward+backward", "seq_len": n, "layer": name, "median_ms": ms, "peak_mb": 1.0}
            for n, name, ms in [(64, "nn.MHA", 10.0), (64, "ours readable", 12.0),
                                (64, "ours fused", 11.0), (1024, "nn.MHA", 100.0),
                                (1024, "ours readable", 250.0), (1024, "ours fused", 60.0)]]
    rows.append({"mode": "forward+backward", "seq_len": 4096, "layer": "ours fused", "skipped": "memory"})
    layers.add_ratios(rows)
    found = {(g["layer"], g["seq_len"]): (round(g["ratio"], 2), g["met"]) for g in layers.goals(rows)}
    assert found == {("ours readable", 64): (1.2, True), ("ours fused", 64): (1.1, False),
                     ("ours readable", 1024): (2.5, False), ("ours fused", 1024): (0.6, True)}


def test_lengths_that_do_not_fit_are_skipped_not_run(monkeypatch):
    monkeypatch.setattr(layers, "fits", lambda n, device, batch=32: n <= 8)
    result = layers.run("cpu", lengths=[8, 1 << 20], repeat=1, transformer=False, batch=2,
                        memory=False, log=lambda *_: None)
    skipped = [r for r in result["layers"] if r.get("skipped")]
    assert skipped and all(r["seq_len"] == 1 << 20 and r["skipped"] == "memory" for r in skipped)


# -- The GPU script -----------------------------------------------------------------------------

def test_gpu_script_refuses_to_run_without_a_gpu_unless_allowed(monkeypatch, capsys):
    monkeypatch.setattr(gpu.torch.cuda, "is_available", lambda: False)
    assert gpu.main([]) == 2
    assert "no CUDA GPU" in capsys.readouterr().out


def test_gpu_script_writes_both_parts(monkeypatch, tmp_path):
    monkeypatch.setattr(gpu.torch.cuda, "is_available", lambda: False)
    seen = {}

    def run_notebooks(paths):
        seen["paths"] = paths
        return notebooks.run(paths, execute=fake_execute({"01_attention_cues.ipynb": 5.0}),
                             log=lambda *_: None)

    def run_layers(device, lengths, repeat, batch, deadline):
        seen["device"], seen["deadline"], seen["batch"] = device, deadline, batch
        return layers.run(device, lengths=[8], repeat=1, transformer=False, batch=2,
                          memory=False, log=lambda *_: None)

    args = ["--allow-cpu", "--quick", str(ROOT / "chapters/01_attention_cues.ipynb"),
            "--results-dir", str(tmp_path)]
    assert gpu.main(args, run_notebooks=run_notebooks, run_layers=run_layers) == 0
    saved = json.loads((tmp_path / "gpu-on-cpu.json").read_text())
    assert saved["kind"] == "gpu" and seen["device"] == "cpu" and seen["deadline"] > 0
    assert seen["batch"] == layers.BATCH
    check_notebook_schema(saved["notebooks"])
    assert saved["layers"]["kind"] == "layers"


def test_benchmark_code_moves_to_the_cpu_before_numpy():
    """No `.numpy()` on a tensor that may live on a GPU: every call goes through `.cpu()`."""
    for path in list((ROOT / "benchmarks").glob("*.py")) + [ROOT / "book" / "cost.py"]:
        for line in path.read_text().splitlines():
            if ".numpy()" in line:
                assert ".cpu().numpy()" in line or "to_numpy" in line, f"{path.name}: {line.strip()}"


def test_nbval_timing_sums_each_notebooks_cells_and_flags_failures(monkeypatch):
    from types import SimpleNamespace

    from benchmarks import nbval_timing

    monkeypatch.setattr(nbval_timing, "_seconds", nbval_timing.defaultdict(float))
    monkeypatch.setattr(nbval_timing, "_errors", {})
    def log(nodeid, when, duration, failed=False):
        nbval_timing.pytest_runtest_logreport(
            SimpleNamespace(nodeid=nodeid, when=when, duration=duration, failed=failed))
    log("chapters/01_attention_cues.ipynb::Cell 0", "setup", 5.0)
    log("chapters/01_attention_cues.ipynb::Cell 0", "call", 20.0)
    log("chapters/01_attention_cues.ipynb::Cell 1", "call", 50.0)      # 75 s: over 60, < 75
    log("chapters/07_transformer.ipynb::Cell 3", "call", 200.0, failed=True)
    log("tests/test_repo.py::test_x", "call", 999.0)                   # not a notebook
    rows = {r["notebook"]: r for r in nbval_timing.result()["notebooks"]}
    assert set(rows) == {"chapters/01_attention_cues.ipynb", "chapters/07_transformer.ipynb"}
    assert rows["chapters/01_attention_cues.ipynb"]["seconds"] == 75.0
    assert rows["chapters/01_attention_cues.ipynb"]["status"] == "over"
    assert rows["chapters/07_transformer.ipynb"]["status"] == "error"
    assert nbval_timing.result()["total"]["seconds"] == 275.0
