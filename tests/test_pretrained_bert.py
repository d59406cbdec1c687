"""The stored pretraining run of chapter 8 (book/checkpoints/bert_pydoc.pt, made by
`make pretrain` = tools/pretrain_bert.py): small, what its record says, and reproducible."""
import hashlib
import json
import random
import re
import subprocess
import sys

import pytest
import torch

from book import bert
from conftest import ROOT, read_notebook, source

RECORD = json.loads(bert.CHECKPOINT.with_suffix(".json").read_text())


def test_the_checkpoint_is_small_and_is_the_file_its_record_describes():
    data = bert.CHECKPOINT.read_bytes()
    assert len(data) < 5_000_000 and len(data) == RECORD["bytes"]
    assert hashlib.sha256(data).hexdigest() == RECORD["sha256"], (
        "book/checkpoints/bert_pydoc.pt is not the file its record names: rerun `make pretrain`")
    assert RECORD["command"] == "python tools/pretrain_bert.py"


def test_the_checkpoint_holds_the_recipe_the_vocabulary_and_every_step():
    model, vocab, history, recipe = bert.load_pretrained()
    assert recipe == RECORD["recipe"]
    assert len(history["MLM"]) == len(history["NSP"]) == recipe["num_steps"]
    assert vocab.idx_to_token == bert.PydocCorpus().vocab.idx_to_token
    assert bert.num_params(model) == bert.num_params(bert.small_bert(len(vocab)))


def test_the_chapter_runs_the_same_recipe_shorter():
    """Chapter 8 trains the stored run's recipe for fewer steps: same model, lr and warm-up."""
    nb = read_notebook(ROOT / "chapters" / "08_bert.ipynb")
    text = "\n".join(source(c) for c in nb["cells"] if c["cell_type"] == "code")
    call = re.search(r"history = pretrain\(model, batches, vocab, num_steps=(\d+), lr=([\d.e-]+),"
                     r" device=device, warmup=(\d+)\)", text)
    recipe = RECORD["recipe"]
    assert call and float(call[2]) == recipe["lr"] and int(call[3]) == recipe["warmup"]
    assert int(call[1]) < recipe["num_steps"]
    assert "batch_size=64" in text and "max_len = 32" in text and recipe["batch_size"] == 64


def test_a_missing_checkpoint_says_how_to_make_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="make pretrain"):
        bert.load_pretrained(tmp_path / "none.pt")


def test_the_script_reproduces_the_first_steps_losses():
    """Rerun the first 20 steps; their losses equal the stored ones (to 1e-3, any CPU)."""
    result = subprocess.run([sys.executable, "tools/pretrain_bert.py", "--check", "20"],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "MLM: largest difference over the first 20 steps" in result.stdout


def test_the_stored_run_reaches_what_its_record_says():
    result = RECORD["held_out"]
    assert result["mlm"] >= 3 * result["baseline"]
    model, vocab, _, recipe = bert.load_pretrained()
    corpus = bert.PydocCorpus()
    docs = bert.PydocCorpus.documents(corpus.test)
    data = bert.encode(bert.nsp_pairs(docs, random.Random(0)), vocab, recipe["max_len"])
    again = bert.evaluate_pretraining(model, data, vocab, rounds=1)
    assert again["mlm"] >= 3 * again["baseline"]
    torch.testing.assert_close(torch.tensor(again["baseline"]), torch.tensor(0.07), atol=0.02,
                               rtol=0)
