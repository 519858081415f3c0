"""torch CPU tensors: read in place, and the results viewed as torch's FP4 / FP8 dtypes."""

import numpy as np
import pytest

import blockscale as bs

torch = pytest.importorskip("torch")


def test_tensors_are_read_in_place():
    t = torch.randn(32, 64)
    from blockscale._tensor import as_matrix

    array, element = as_matrix(t)
    assert element == "float32" and array.__array_interface__["data"][0] == t.data_ptr()
    b = torch.randn(32, 64, dtype=torch.bfloat16)
    array, element = as_matrix(b)
    assert element == "bfloat16" and array.__array_interface__["data"][0] == b.data_ptr()


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_torch_equals_numpy(dtype):
    t = torch.randn(48, 96).to(getattr(torch, dtype))
    a = bs.quantize(t, "nvfp4", encode_scale=100.0)
    b = bs.quantize(t.float().numpy(), "nvfp4", encode_scale=100.0)
    np.testing.assert_array_equal(a.elements, b.elements)
    np.testing.assert_array_equal(a.scales, b.scales)


def test_grad_tensors_and_non_contiguous_views():
    t = torch.randn(16, 64, requires_grad=True)
    q = bs.quantize(t, "mxfp4")
    np.testing.assert_array_equal(q.elements, bs.quantize(t.detach().numpy(), "mxfp4").elements)
    wide = torch.randn(64, 16)
    np.testing.assert_array_equal(bs.quantize(wide.T, "nvfp4").elements,
                                  bs.quantize(wide.T.contiguous(), "nvfp4").elements)


def test_dtype_views():
    x = torch.randn(32, 64)
    q = bs.quantize(x, "nvfp4", encode_scale=50.0)
    e, s = q.torch_elements(), q.torch_scales()
    assert e.dtype == torch.float4_e2m1fn_x2 and tuple(e.shape) == (32, 32)
    assert s.dtype == torch.float8_e4m3fn
    np.testing.assert_array_equal(s.float().numpy(), q.decoded_scales())
    assert e.view(torch.uint8).data_ptr() == q.elements.ctypes.data  # shared, not copied
    m = bs.quantize(x, "mxfp4")
    assert m.torch_scales().dtype == torch.float8_e8m0fnu
    np.testing.assert_array_equal(m.torch_scales().float().numpy(), m.decoded_scales())
    u = bs.quantize(x, "ue5m3_fp4")
    assert u.torch_scales().dtype == torch.uint8
    r = bs.QuantizedTensor.from_arrays("nvfp4", e, s, q.decode_scale, cols=64)
    np.testing.assert_array_equal(r.dequantize(), q.dequantize())


def test_gpu_tensors_are_refused():
    class Fake:  # a tensor-like object on another device
        pass

    t = torch.randn(2, 16)
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="CPU"):
            bs.quantize(t.cuda(), "nvfp4")
    with pytest.raises(ValueError, match="int64"):
        bs.quantize(torch.ones(2, 16, dtype=torch.int64), "nvfp4")
