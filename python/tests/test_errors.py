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
        (lambda: bs.dequantize(X), "q must be a QuantizedTensor"),
        (lambda: bs.dequantize(None), "q must be a QuantizedTensor"),
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


def test_read_only_inputs_are_read_and_read_only_outputs_refused():
    x = np.ones((4, 32), np.float32)
    x.flags.writeable = False
    q = bs.quantize(x, "nvfp4")
    assert bs.measure_amax(x, "nvfp4") == 1.0
    e, s = q.elements.copy(), q.scales.copy()
    e.flags.writeable = s.flags.writeable = False
    r = bs.QuantizedTensor.from_arrays("nvfp4", e, s, q.decode_scale, cols=32)
    np.testing.assert_array_equal(r.dequantize(), q.dequantize())
    np.testing.assert_array_equal(bs.gemm_reference(r, x), bs.gemm_reference(q, x))
    with pytest.raises(ValueError, match="read-only"):
        bs.quantize_into(x, r)
    codes = bs.convert(x, "e2m1")
    codes.flags.writeable = False
    assert (bs.decode(codes, "e2m1") == 1.0).all()


def test_hadamard_against_a_float_operand_is_refused():
    a = bs.quantize(X, "nvfp4", hadamard=True)
    with pytest.raises(ValueError, match="Hadamard"):
        bs.gemm_reference(a, X)


def test_from_arrays_checks_shapes_not_only_sizes():
    q = bs.quantize(np.ones((4, 48), np.float32), "nvfp4")
    padded = np.zeros((4, 4), np.uint8)
    padded[:, :3] = q.scales
    with pytest.raises(ValueError, match="scales must be"):
        bs.QuantizedTensor.from_arrays("nvfp4", q.elements, padded, 1.0, cols=48)
    with pytest.raises(ValueError, match="elements must be"):
        bs.QuantizedTensor.from_arrays("nvfp4", q.elements, q.scales, 1.0, cols=16)
    with pytest.raises(ValueError, match="elements must be"):
        bs.QuantizedTensor.from_arrays("nvfp4", q.elements.reshape(1, -1), q.scales, 1.0, cols=48)
    with pytest.raises(ValueError, match="C-contiguous"):
        bs.QuantizedTensor.from_arrays("nvfp4", np.zeros((4, 48), np.uint8)[:, ::2], q.scales, 1.0, cols=48)
    with pytest.raises(ValueError, match="decode_scale"):
        bs.QuantizedTensor.from_arrays("nvfp4", q.elements, q.scales, float("nan"), cols=48)
    with pytest.raises(ValueError, match="layout"):
        bs.QuantizedTensor.from_arrays("nvfp4", q.elements, q.scales, 1.0, cols=48, layout="tc")


def test_policies_know_their_format_and_exclude_encode_scale():
    p = bs.CurrentTensorScale("mxfp4")
    assert p.format == "mxfp4"
    with pytest.raises(ValueError, match="made for mxfp4, not nvfp4"):
        bs.quantize(X, "nvfp4", policy=p)
    assert p.calls == 0
    with pytest.raises(ValueError, match="either encode_scale or a policy"):
        bs.quantize(X, "nvfp4", policy=bs.CurrentTensorScale("nvfp4"), encode_scale=2.0)


def test_a_shared_policy_counts_every_call_from_every_thread():
    import threading

    p = bs.PeriodicTensorScale("nvfp4", interval=1)
    x = np.ones((1, 16), np.float32)
    threads = [threading.Thread(target=lambda: [bs.quantize(x, "nvfp4", policy=p) for _ in range(2000)])
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (p.calls, p.amax_measurements) == (4000, 4000)


def test_argument_types_give_value_errors():
    q = bs.quantize(X, "nvfp4")
    for call in (lambda: q.dequantize(threads=-1), lambda: bs.gemm_reference(q, q, threads=2**32),
                 lambda: bs.quantize(X, "nvfp4", seed=1.7), lambda: bs.quantize(X, "nvfp4", hadamard=True, hadamard_signs=True),
                 lambda: bs.scale_offsets("bogus", 2, 2),
                 lambda: bs.convert(X, "e2m1", "stochastic", random_bits=np.zeros(X.shape)),
                 lambda: bs.convert(X, "e2m1", "stochastic", random_bits=np.zeros(X.size, np.uint32))):
        with pytest.raises(ValueError):
            call()
    assert bs.scale_offsets("tensor_core", 2**34, 0).shape == (2**34, 0)  # no loop over rows


def test_zero_dimensional_and_misaligned_inputs():
    assert bs.convert(np.float32(1.5), "e2m1").shape == ()
    assert bs.decode(np.uint8(3), "e2m1").shape == ()
    raw = np.zeros(4 * 32 * 4 + 1, np.uint8)[1:].view(np.float32).reshape(4, 32)  # offset 1
    raw[:] = np.arange(32, dtype=np.float32)
    np.testing.assert_array_equal(bs.quantize(raw, "nvfp4").elements,
                                  bs.quantize(raw.copy(), "nvfp4").elements)


def test_rule_presets_follow_the_element_format():
    x = np.random.default_rng(2).standard_normal((4, 64)).astype(np.float32)
    np.testing.assert_array_equal(bs.quantize(x, "mxfp8", rule="ocp_floor").scales,
                                  bs.quantize(x, "mxfp8").scales)
    assert bs.scale_rule("ocp_floor", "mxfp8").target == bs.default_rule("mxfp8").target == 256


def test_messages_name_the_argument_and_say_the_right_thing():
    with pytest.raises(ValueError) as e:
        bs.quantize(X.astype(np.int32), "nvfp4")
    assert "int32" in str(e.value) and "float64" not in str(e.value)
    with pytest.raises(ValueError, match=r"encode_scale \(9\.9999461e-41\)"):
        bs.quantize(X, "nvfp4", encode_scale=1e-40)


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: bs.PeriodicTensorScale("nvfp4", interval=-5), "interval"),
        (lambda: bs.DelayedTensorScale("nvfp4", history=-1), "history"),
        (lambda: bs.DelayedTensorScale("nvfp4", history=5000), "history"),
        (lambda: bs.CurrentTensorScale("nvfp4", headroom=-3), "headroom"),
        (lambda: bs.CurrentTensorScale("nvfp4", headroom=60), "headroom"),
        (lambda: bs.PeriodicTensorScale("ue5m3_fp4", headroom=34), "headroom"),
        (lambda: bs.DelayedTensorScale("mxfp4", margin=255), "margin"),
    ],
)
def test_policy_arguments_are_checked(make, name):
    with pytest.raises(ValueError, match=name):
        make()


def test_policy_arguments_at_their_limits():
    # The whole span of the scale format is usable: UE4M3 has 17 binades down to its smallest
    # subnormal, UE5M3 33, UE8M0 254.
    for format, most in (("nvfp4", 17), ("ue5m3_fp4", 33), ("mxfp4", 254)):
        assert bs.CurrentTensorScale(format, headroom=most).numerator > 0
        assert bs.CurrentTensorScale(format, headroom=0).numerator > 0
    assert bs.DelayedTensorScale("nvfp4", history=1024).history == 1024


def test_one_version():
    import importlib.metadata

    assert bs.__version__ == bs._core.registry()["version"]
    assert importlib.metadata.version("blockscale") == bs.__version__
