"""The README's Python example runs as written and computes what it says."""

import pathlib
import re

import numpy as np
import pytest

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_readme_example(capsys):
    text = README.read_text()
    section = text[text.index("## Python") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert len(code.strip().splitlines()) <= 11  # the promised ten lines (and a blank)
    scope = {}
    exec(compile(code, str(README), "exec"), scope)
    x, q, u, c = scope["x"], scope["q"], scope["u"], scope["c"]
    assert q.format == "nvfp4" and u.format == "ue5m3_fp4"
    assert q.elements.shape == (256, 512) and q.scales.shape == (256, 64)
    assert c.shape == (256, 256)
    expect = q.dequantize().astype(np.float64) @ u.dequantize().astype(np.float64).T
    np.testing.assert_allclose(c, expect, rtol=1e-6, atol=1e-4)
    printed = capsys.readouterr().out
    sqnr = [float(v) for v in re.findall(r"SQNR ([0-9.]+) dB", printed)]
    assert len(sqnr) == 2 and all(17 < v < 22 for v in sqnr)  # FP4 on Gaussian data: ~19-20 dB


def test_readme_torch_example(capsys):
    torch = pytest.importorskip("torch")
    import blockscale.torch as bst

    text = README.read_text()
    section = text[text.index("## Python") :]
    code = re.findall(r"```python\n(.*?)```", section, re.S)[1]
    assert len(code.strip().splitlines()) <= 11
    scope = {}
    exec(compile(code, str(README), "exec"), scope)
    model = scope["model"]
    assert isinstance(model[0], bst.Linear) and type(model[2]) is torch.nn.Linear
    assert model[0].quantizers.step == 1 and model[0].weight.grad is not None
    assert torch.isfinite(model[0].weight.grad).all() and torch.isfinite(model[2].weight.grad).all()
    assert "recipe=UE5M3-FP4" in capsys.readouterr().out
