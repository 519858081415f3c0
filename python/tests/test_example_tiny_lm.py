"""The tiny language-model example runs end to end (a few steps) and writes what it promises."""

import csv
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.peers
pytest.importorskip("torch")

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python" / "tiny_lm.py"


def test_tiny_lm_smoke(tmp_path):
    out = tmp_path / "out"
    subprocess.run(
        [sys.executable, str(EXAMPLE), "--steps", "4", "--eval-every", "2", "--eval-batches", "1",
         "--seeds", "1", "--jobs", "1", "--batch-size", "2", "--max-bytes", "200000",
         "--d-model", "32", "--layers", "2", "--heads", "2", "--context", "32", "--out", str(out)],
        check=True, cwd=tmp_path, timeout=600)
    rows = list(csv.DictReader(open(out / "metrics.csv")))
    recipes = {r["recipe"] for r in rows}
    assert recipes == {"high_precision", "nvfp4", "ue5m3_fp4", "mxfp4"}
    evaluated = [r for r in rows if r["val_loss"]]  # validation rows (every --eval-every steps)
    assert {r["recipe"] for r in evaluated} == recipes
    assert all(float(r["val_loss"]) > 0 for r in evaluated)
    assert (out / "val_loss.svg").read_text().startswith("<svg")
    summary = (out / "summary.txt").read_text()
    assert all(name in summary for name in recipes)
