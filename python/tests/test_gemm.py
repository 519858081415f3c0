"""gemm_reference: exact sums against float64 products of the decoded operands."""

import numpy as np
import pytest

import blockscale as bs


def exact_operands(rng, m, n, k, format_a, format_b):
    """Operands whose decoded products are small dyadic numbers: every float64 sum is exact."""
    a = rng.choice([-6, -3, -1, -0.5, 0, 0.5, 1, 2, 4], (m, k)).astype(np.float32)
    b = rng.choice([-4, -1.5, -1, 0, 1, 3, 6], (n, k)).astype(np.float32)
    return bs.quantize(a, format_a), bs.quantize(b, format_b)


@pytest.mark.parametrize("fa,fb", [("nvfp4", "nvfp4"), ("mxfp4", "nvfp4"), ("ue5m3_fp4", "mxfp8")])
def test_exact_when_the_sum_is_exact(rng, fa, fb):
    a, b = exact_operands(rng, 9, 7, 96, fa, fb)
    expect = a.dequantize().astype(np.float64) @ b.dequantize().astype(np.float64).T
    np.testing.assert_array_equal(bs.gemm_reference(a, b), expect.astype(np.float32))


def test_alpha_beta_and_c_in_place(rng):
    a, b = exact_operands(rng, 5, 6, 64, "nvfp4", "nvfp4")
    c = np.ones((5, 6), np.float32)
    out = bs.gemm_reference(a, b, alpha=0.5, beta=2.0, c=c)
    assert out is c
    expect = 0.5 * (a.dequantize().astype(np.float64) @ b.dequantize().astype(np.float64).T) + 2.0
    np.testing.assert_array_equal(c, expect.astype(np.float32))


def test_float_operand_and_threads(rng):
    a = bs.quantize(rng.standard_normal((33, 128)).astype(np.float32), "nvfp4")
    b = rng.standard_normal((17, 128)).astype(np.float32)
    one = bs.gemm_reference(a, b)
    np.testing.assert_array_equal(one, bs.gemm_reference(a, b, threads=2))
    np.testing.assert_allclose(one, a.dequantize().astype(np.float64) @ b.T.astype(np.float64), rtol=1e-5, atol=1e-5)


def test_hadamard_cancels(rng):
    x = rng.standard_normal((8, 64)).astype(np.float32)
    y = rng.standard_normal((8, 64)).astype(np.float32)
    a = bs.quantize(x, "nvfp4", hadamard=True)
    b = bs.quantize(y, "nvfp4", hadamard=True)
    c = bs.gemm_reference(a, b)
    assert np.abs(c - x @ y.T).max() < 0.25 * np.abs(x @ y.T).max()
    with pytest.raises(ValueError, match="Hadamard"):
        bs.gemm_reference(a, bs.quantize(y, "nvfp4"))
