"""Every bad input is a Python exception naming what is wrong; none crashes the interpreter."""

import numpy as np
import pytest

import blockscale as bs

X = np.ones((4, 32), np.float32)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: bs.quantize(X, "nvfp5"), "unknown block format"),
        (lambda: bs.quantize(X.astype(np.float64), "nvfp4"), "float64"),
        (lambda: bs.quantize(X.astype(np.int32), "nvfp4"), "int32"),
        (lambda: bs.quantize(np.ones(32, np.float32), "nvfp4"), "2-D"),
        (lambda: bs.quantize(np.ones((2, 2, 2), np.float32), "nvfp4"), "2-D"),
        (lambda: bs.quantize(X, "nvfp4", encode_scale=0.0), "encode_scale"),
        (lambda: bs.quantize(X, "nvfp4", encode_scale=float("inf")), "encode_scale"),
        (lambda: bs.quantize(X, "nvfp4", encode_scale=1e-39), "reciprocal"),
        (lambda: bs.quantize(X, "nvfp4", shape="diagonal"), "shape"),
        (lambda: bs.quantize(X, "nvfp4", layout="swizzled"), "layout"),
        (lambda: bs.quantize(X, "nvfp4", rounding="sometimes"), "rounding"),
        (lambda: bs.quantize(X, "nvfp4", rule="best"), "scale rule"),
        (lambda: bs.quantize(X, "nvfp4", rule=(0.0, "up")), "target"),
        (lambda: bs.quantize(X, "nvfp4", rule=(float("nan"), "up")), "target"),
        (lambda: bs.quantize(X, "nvfp4", threads=100000), "threads"),
        (lambda: bs.quantize(X, "nvfp4", threads=-1), "threads"),
        (lambda: bs.quantize(X, "nvfp4", seed=-1), "seed"),
        (lambda: bs.quantize(X, "nvfp4", hadamard=True, hadamard_signs=[1, 2] * 8), "hadamard_signs"),
        (lambda: bs.quantize(X, "nvfp4", policy="current"), "policy"),
        (lambda: bs.quantize(X, "nvfp4", colwise=True), "colwise"),
        (lambda: bs.convert(X, "e9m9"), "unknown scalar format"),
        (lambda: bs.convert(X, "e2m1", "sideways"), "unknown rounding"),
        (lambda: bs.convert(X, "e2m1", overflow="wrap"), "overflow"),
        (lambda: bs.convert(np.ones(3, np.int64), "e2m1"), "floating"),
        (lambda: bs.decode(np.array([16], np.uint8), "e2m1"), "not a e2m1 code"),
        (lambda: bs.decode(np.array([1], np.int32), "e2m1"), "uint8"),
        (lambda: bs.CurrentTensorScale("fp4"), "unknown block format"),
        (lambda: bs.dequantize(bs.quantize(X, "nvfp4"), "float64"), "dtype"),
    ],
)
def test_bad_input_raises(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_gemm_errors():
    a = bs.quantize(X, "nvfp4")
    b = bs.quantize(np.ones((4, 48), np.float32), "nvfp4")
    with pytest.raises(ValueError, match="cols|K"):
        bs.gemm_reference(a, b)
    with pytest.raises(ValueError, match="at least one operand"):
        bs.gemm_reference(X, X)
    with pytest.raises(ValueError, match="float32 array of shape"):
        bs.gemm_reference(a, a, c=np.zeros((3, 3), np.float32))
    with pytest.raises(ValueError, match="QuantizedTensor or a 2-D float32"):
        bs.gemm_reference(a, X.astype(np.float64))


def test_quantize_into_the_wrong_storage():
    q = bs.quantize(X, "nvfp4")
    with pytest.raises(ValueError, match="quantize_into: out"):
        bs.quantize_into(np.ones((4, 64), np.float32), q)
    with pytest.raises(ValueError, match="columnwise"):
        bs.quantize_into(X, q, columnwise=True)
    q.elements = np.zeros((4, 4), np.uint8)  # too small for 4 x 32
    with pytest.raises(ValueError, match="elements holds 16 bytes"):
        bs.quantize_into(X, q)
    q.elements = np.zeros((4, 16), np.uint8)[:, ::2]  # not contiguous
    with pytest.raises(ValueError, match="C-contiguous"):
        bs.quantize_into(X, q)


def test_from_arrays_checks_sizes():
    with pytest.raises(ValueError, match="needs 64 element bytes"):
        bs.QuantizedTensor.from_arrays("nvfp4", np.zeros((4, 8), np.uint8), np.zeros((4, 2), np.uint8), 1.0, cols=32)


def test_empty_matrices_are_fine():
    q = bs.quantize(np.zeros((0, 32), np.float32), "nvfp4")
    assert q.shape == (0, 32) and q.dequantize().shape == (0, 32)
    assert bs.convert(np.zeros(0, np.float32), "e2m1").shape == (0,)
