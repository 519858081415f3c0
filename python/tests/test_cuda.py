"""The device path (marker `cuda`, ctest label cuda; skipped without a GPU and the CUDA extension):
CUDA equals CPU byte for byte on random shapes, every preset format, the options and every recipe;
device policies equal host policies step for step; the device GEMM agrees with the exact reference
within its error bound on every kernel it chooses; streams are respected; a training step does not
synchronise with the host."""

import zlib

import numpy as np
import pytest

import blockscale as bs

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not bs.cuda_available(),
                                 reason="needs a CUDA device and blockscale's CUDA extension")]

OPTIONS = [
    dict(),
    dict(columnwise=True),
    dict(shape="tile"),
    dict(rounding="stochastic", seed=7, offset=3),
    dict(columnwise=True, rounding="stochastic", seed=9, offset=1),
    dict(hadamard=True),
    dict(layout="tensor_core"),
    dict(encode_scale=37.5),
]
SHAPES = [(1, 16), (7, 40), (130, 96), (64, 272)]


def same_codes(a, b):
    assert a.device != "cpu" and b.device == "cpu"
    np.testing.assert_array_equal(a.elements.cpu().numpy(), b.elements)
    np.testing.assert_array_equal(a.scales.cpu().numpy(), b.scales)
    assert a.decode_scale_array.cpu().numpy().tobytes() == b.decode_scale_array.tobytes()


@pytest.mark.parametrize("format", ["nvfp4", "mxfp4", "ue5m3_fp4", "mxfp8"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_quantize_equals_the_cpu(format, dtype):
    g = torch.Generator().manual_seed(zlib.crc32(f"{format} {dtype}".encode()))
    for rows, cols in SHAPES:
        x = (torch.randn(rows, cols, generator=g) * torch.rand(rows, 1, generator=g) * 30)
        x = x.to(getattr(torch, dtype))
        for options in OPTIONS:
            if format == "mxfp8" and ("rounding" in options or "hadamard" in options):
                continue
            if options.get("hadamard") and cols % 16:
                continue
            cpu = bs.quantize(x, format, **options)
            gpu = bs.quantize(x.cuda(), format, **options)
            same_codes(gpu, cpu)
            assert gpu.to("cpu").dequantize().tobytes() == cpu.dequantize().tobytes()
            for out in ("float32", "bfloat16"):
                d = gpu.dequantize(out)
                assert d.is_cuda and d.dtype == getattr(torch, out)
                want = cpu.dequantize(out)
                np.testing.assert_array_equal(d.cpu().view(torch.int16 if out == "bfloat16"
                                                           else torch.int32).numpy(),
                                              want.view(np.int16 if out == "bfloat16" else np.int32))
            amax = bs.measure_amax(x.cuda(), format, **{k: v for k, v in options.items()
                                                         if k in ("columnwise", "hadamard")})
            assert float(amax) == bs.measure_amax(x, format, **{k: v for k, v in options.items()
                                                                 if k in ("columnwise", "hadamard")})


def test_moves_between_devices():
    x = torch.randn(48, 64)
    q = bs.quantize(x, "nvfp4", encode_scale=12.0)
    g = q.to("cuda")
    assert g.is_cuda and g.device.startswith("cuda") and g.to("cuda") is g
    same_codes(g, q)
    back = g.cpu()
    np.testing.assert_array_equal(back.elements, q.elements)
    assert torch.equal(g.dequantize(), torch.from_numpy(q.dequantize()).cuda())


@pytest.mark.parametrize("make", [
    lambda: bs.CurrentTensorScale("nvfp4"),
    lambda: bs.PeriodicTensorScale("ue5m3_fp4", interval=3, headroom=8),
    lambda: bs.DelayedTensorScale("nvfp4", history=4),
])
def test_device_policies_follow_the_host(make):
    host, device = make(), bs.device_policy(make())
    g = torch.Generator().manual_seed(3)
    for step in range(7):
        x = torch.randn(40, 64, generator=g) * (10.0 ** (step % 4 - 1))
        fmt = host.format
        cpu = bs.quantize(x, fmt, policy=host)
        gpu = bs.quantize(x.cuda(), fmt, policy=device)
        same_codes(gpu, cpu)
    back = device.read()
    assert (back.calls, back.amax_measurements, back.encode_scale) == \
        (host.calls, host.amax_measurements, host.encode_scale)


def test_amax_hook_sees_the_measured_amax():
    device = bs.device_policy(bs.CurrentTensorScale("nvfp4"))
    seen = []

    def hook(t):  # as an all-reduce that met a rank with twice the amax would
        seen.append(t.clone())
        t.copy_((t.view(torch.float32) * 2).view(torch.int32))

    device.amax_hook = hook
    x = torch.randn(32, 64)
    gpu = bs.quantize(x.cuda(), "nvfp4", policy=device)
    assert float(seen[0].view(torch.float32)) == float(x.abs().max())
    # The same as the host quantizing with the encode scale a doubled amax gives.
    twice = torch.cat([x, torch.full((1, 64), 0.0)])
    twice[-1, 0] = 2 * x.abs().max()
    host = bs.CurrentTensorScale("nvfp4")
    bs.quantize(twice, "nvfp4", policy=host)
    want = bs.quantize(x, "nvfp4", encode_scale=host.encode_scale)
    same_codes(gpu, want)


def test_streams_are_respected():
    """The launches go to the stream given (or torch's current one): behind a long sleep on that
    stream, the input's copy lands before the quantizer reads it."""
    src = torch.randn(512, 512)
    want = bs.quantize(src, "nvfp4")
    s = torch.cuda.Stream()
    x = torch.zeros(512, 512, device="cuda")
    pinned = src.pin_memory()
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)
        x.copy_(pinned, non_blocking=True)
        q = bs.quantize(x, "nvfp4")
    s.synchronize()
    same_codes(q, want)
    torch.cuda._sleep(50_000_000)  # and an explicit stream= on the default stream
    y = torch.zeros(512, 512, device="cuda")
    y.copy_(pinned, non_blocking=True)
    same_codes(bs.quantize(y, "nvfp4", stream=torch.cuda.current_stream()), want)


def gemm_bound(a, b, alpha, beta, c, out):
    """The device GEMM's error bound against the exact reference (tests/unit/test_cuda_gemm.cu):
    (11 K/16 + 2) 2^-23 |alpha| sum_k |a_k b_k| + 2 ulp(out) (|reference| + |beta c|), with a_k, b_k
    the dequantized operands."""
    da = a.cpu().dequantize().astype(np.float64)
    db = b.cpu().dequantize().astype(np.float64)
    k = da.shape[1]
    ref = bs.gemm_reference(a.cpu(), b.cpu(), alpha=alpha, beta=beta,
                            c=None if c is None else c.copy()).astype(np.float64)
    unit = 2.0**-23 if out == "float32" else 2.0**-7  # ulp(x) <= unit |x|
    bound = (11 * k / 16 + 2) * 2.0**-23 * abs(alpha) * (np.abs(da) @ np.abs(db).T)
    read = c is not None and beta != 0  # beta == 0: C is not read (it may hold NaN)
    bound += 2 * unit * (np.abs(ref) + (np.abs(beta * c.astype(np.float64)) if read else 0))
    return ref, bound + np.finfo(np.float32).tiny


# M on both sides of 16 and 64 (the warpgroup shapes on sm_90a; the BF16 MMA's small and large
# tiles elsewhere), K with rows of 16-byte multiples (what TMA reads) and, for the 16-blocks, without
# (the BF16 MMA's small and large tiles on every device), and a long K over few tiles (split-K).
GEMM_SHAPES = [(1, 70, 64), (16, 129, 384), (40, 96, 160), (64, 33, 256), (65, 200, 96),
               (200, 130, 448), (16, 64, 2048)]
UNALIGNED_SHAPES = [(37, 50, 48), (130, 70, 48)]


@pytest.mark.parametrize("format", ["nvfp4", "mxfp4", "ue5m3_fp4"])
@pytest.mark.parametrize("layout", ["row_major", "tensor_core"])
def test_gemm_agrees_with_the_reference(format, layout):
    g = torch.Generator().manual_seed(zlib.crc32(f"gemm {format} {layout}".encode()))
    for m, n, k in GEMM_SHAPES + (UNALIGNED_SHAPES if format != "mxfp4" else []):
        x = torch.randn(m, k, generator=g) * torch.rand(m, 1, generator=g) * 8
        w = torch.randn(n, k, generator=g) * 0.1
        a = bs.quantize(x.cuda(), format, layout=layout, encode_scale=3.0)
        b = bs.quantize(w.cuda(), format, layout=layout, shape="tile", encode_scale=20.0)
        assert bs.gemm_takes(a, b)
        for out in ("float32", "bfloat16"):
            got = bs.gemm(a, b, dtype=out)
            assert got.is_cuda and got.dtype == getattr(torch, out) and got.shape == (m, n)
            ref, bound = gemm_bound(a, b, 1.0, 0.0, None, out)
            err = np.abs(got.float().cpu().numpy().astype(np.float64) - ref)
            assert (err <= bound).all(), (m, n, k, out, float((err - bound).max()))
        # alpha, beta and a C to accumulate into (beta == 0 with NaN in C: C is not read)
        for alpha, beta, out in ((0.5, 0.0, "float32"), (-2.0, 1.5, "float32"),
                                 (0.75, -1.0, "bfloat16")):
            c0 = torch.randn(m, n, generator=g) if beta else torch.full((m, n), float("nan"))
            c = c0.to(getattr(torch, out)).cuda()
            c_in = c.float().cpu().numpy()  # C as the GEMM reads it (bf16-rounded)
            assert bs.gemm(a, b, alpha=alpha, beta=beta, c=c) is c
            ref, bound = gemm_bound(a, b, alpha, beta, c_in, out)
            err = np.abs(c.float().cpu().numpy().astype(np.float64) - ref)
            assert (err <= bound).all(), (m, n, k, alpha, beta, out)


def test_gemm_respects_the_stream():
    x, w = torch.randn(96, 256), torch.randn(128, 256)
    a, b = bs.quantize(x, "nvfp4"), bs.quantize(w, "nvfp4")
    want, bound = gemm_bound(a, b, 1.0, 0.0, None, "float32")
    s = torch.cuda.Stream()
    da = bs.QuantizedTensor.empty("nvfp4", a.shape_info, device="cuda")
    pinned = torch.from_numpy(a.elements).pin_memory()
    db = b.cuda()
    da.scales.copy_(torch.from_numpy(a.scales))
    da.decode_scale_array.copy_(torch.from_numpy(a.decode_scale_array))
    bs.gemm(db, db)  # the first GEMM on a device synchronises once (it asks which MMA): not here
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)
        da.elements.copy_(pinned, non_blocking=True)
        c = bs.gemm(da, db)
    s.synchronize()
    assert (np.abs(c.cpu().numpy() - want) <= bound).all()


def test_gemm_errors():
    x = torch.randn(8, 64, device="cuda")
    nv, mx = bs.quantize(x, "nvfp4"), bs.quantize(x, "mxfp4")
    cases = [
        ((nv.cpu(), nv), {}, "a is on the CPU"),
        ((nv, mx), {}, "a is nvfp4 and b mxfp4"),
        ((bs.quantize(x, "mxfp8"), bs.quantize(x, "mxfp8")), {}, "E2M1 formats only"),
        ((nv, bs.quantize(torch.randn(8, 32, device="cuda"), "nvfp4")), {}, "the same K"),
        ((bs.quantize(x[:, :40], "nvfp4"),) * 2, {}, "not a multiple of the block size 16"),
        ((nv, bs.quantize(x, "nvfp4", hadamard=True)), {}, "Hadamard"),
        ((nv, nv), dict(dtype="float16"), "dtype must be float32 or bfloat16"),
        ((nv, nv), dict(beta=1.0), "no c was given"),
        ((nv, nv), dict(c=torch.zeros(8, 8)), "torch tensor on cuda"),
        ((nv, nv), dict(c=torch.zeros(8, 9, device="cuda")), r"shape \(8, 8\)"),
        ((nv, nv), dict(c=torch.zeros(8, 8, device="cuda", dtype=torch.float16)), "float32 or"),
        ((nv, nv), dict(c=torch.zeros(8, 16, device="cuda")[:, ::2]), "contiguous rows"),
        ((nv, nv), dict(c=torch.zeros(8, 8, device="cuda", requires_grad=True)), "requires grad"),
        ((nv, nv), dict(dtype=np.int32), "dtype must be float32 or bfloat16"),
    ]
    for (a, b), kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            bs.gemm(a, b, **kwargs)
    # output dtypes by name, torch dtype or numpy dtype
    for dtype, want in (("bfloat16", torch.bfloat16), (torch.float32, torch.float32),
                        (np.float32, torch.float32)):
        assert bs.gemm(nv, nv, dtype=dtype).dtype == want


def test_results_are_allocated_on_the_given_stream():
    """With stream= other than the current stream, the results' memory and zero-fills are queued
    on that stream: behind a long sleep on the current stream, they must not land after the
    kernels that wrote them."""
    x = torch.randn(256, 256)
    want = bs.quantize(x, "nvfp4")
    xg = x.cuda()
    s = torch.cuda.Stream()
    torch.cuda.synchronize()
    torch.cuda._sleep(50_000_000)  # the current stream is busy
    q = bs.quantize(xg, "nvfp4", stream=s)
    d = q.dequantize(stream=s)
    amax = bs.measure_amax(xg, "nvfp4", stream=s)
    c = bs.gemm(q, q, stream=s)
    s.synchronize()
    torch.cuda.synchronize()
    same_codes(q, want)
    assert torch.equal(d.cpu(), torch.from_numpy(want.dequantize()))
    assert float(amax) == float(x.abs().max())
    ref, bound = gemm_bound(want, want, 1.0, 0.0, None, "float32")
    assert (np.abs(c.cpu().numpy() - ref) <= bound).all()


@pytest.mark.parametrize("name", ["nvfp4", "ue5m3_fp4", "mxfp4"])
def test_recipe_linear_on_the_device_gemm(name):
    """The device GEMM and the emulation multiply the same quantized operands: their results agree
    up to the float sums, and the layer's state (steps, policies) is the same."""
    import blockscale.torch as bst

    torch.manual_seed(1)
    r = bst.recipe(name, interval=2)
    device = bst.Linear(128, 96, recipe=r, seed=5, gemm="device").cuda()
    emulated = bst.Linear(128, 96, recipe=r, seed=5, gemm="matmul").cuda()
    emulated.load_state_dict(device.state_dict())
    for step in range(3):
        x = torch.randn(64, 128, device="cuda") * (step + 1)
        dy = torch.randn(64, 96, device="cuda")
        xd, xe = x.clone().requires_grad_(), x.clone().requires_grad_()
        yd, ye = device(xd), emulated(xe)
        torch.testing.assert_close(yd, ye, rtol=1e-4, atol=1e-4 * float(ye.abs().max()))
        yd.backward(dy), ye.backward(dy)
        torch.testing.assert_close(xd.grad, xe.grad, rtol=1e-4,
                                   atol=1e-4 * float(xe.grad.abs().max()))
        torch.testing.assert_close(device.weight.grad, emulated.weight.grad, rtol=1e-4,
                                   atol=1e-4 * float(emulated.weight.grad.abs().max()))
        device.zero_grad(), emulated.zero_grad()
    for a, b in zip(device.quantizers.policies(), emulated.quantizers.policies()):
        assert (a.calls, a.amax_measurements, a.encode_scale) == \
            (b.calls, b.amax_measurements, b.encode_scale)
    # 33 tokens: Wgrad's K is not a multiple of the block size, so "device" refuses and "auto"
    # takes the emulation for that GEMM alone.
    x = torch.randn(33, 128, device="cuda", requires_grad=True)
    with pytest.raises(ValueError, match="wgrad_dy x wgrad_x"):
        device(x).sum().backward()
    device.quantizers.gemm = "auto"
    device(x).sum().backward()


@pytest.mark.parametrize("name", ["nvfp4", "ue5m3_fp4", "mxfp4"])
def test_recipe_linear_equals_the_cpu(name):
    import blockscale.torch as bst

    torch.manual_seed(0)  # float32 matmuls (torch's default precision "highest")
    cpu = bst.Linear(96, 80, recipe=bst.recipe(name, interval=2), seed=4)
    gpu = bst.Linear(96, 80, recipe=bst.recipe(name, interval=2), seed=4, gemm="matmul").cuda()
    gpu.load_state_dict(cpu.state_dict())
    for step in range(3):
        x = torch.randn(33, 96) * (step + 1)
        dy = torch.randn(33, 80)
        # The quantized operands are equal bit for bit ...
        for role, t in (("fprop_x", x), ("fprop_w", cpu.weight), ("dgrad_dy", dy),
                        ("dgrad_w", cpu.weight), ("wgrad_dy", dy), ("wgrad_x", x)):
            a = cpu.quantizers.ops[role](t, step, False)
            b = gpu.quantizers.ops[role](t.cuda(), step, False)
            assert torch.equal(a, b.cpu()), role
        # ... and the layer's results agree up to the float GEMMs' summation order.
        xc, xg = x.clone().requires_grad_(), x.cuda().requires_grad_()
        cpu(xc).backward(dy)
        gpu(xg).backward(dy.cuda())
        torch.testing.assert_close(xg.grad.cpu(), xc.grad, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(gpu.weight.grad.cpu(), cpu.weight.grad, rtol=1e-4, atol=1e-3)
        cpu.zero_grad(), gpu.zero_grad()
    for a, b in zip(cpu.quantizers.policies(), gpu.quantizers.policies()):
        assert (a.calls, a.amax_measurements, a.encode_scale) == \
            (b.calls, b.amax_measurements, b.encode_scale)


def test_a_training_step_does_not_wait_for_the_host():
    import blockscale.torch as bst

    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 64))
    bst.convert_model(model.cuda(), "ue5m3_fp4")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(32, 64, device="cuda")

    def step():
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    # The first step copies the policies to the device and asks the device which MMA the GEMM's
    # code has (one synchronisation each); the next must not wait for the device at all: neither
    # through torch (its sync debug mode) nor through the extension's own CUDA calls (the
    # profiler's record of the runtime API).
    step()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                torch.profiler.ProfilerActivity.CUDA]) as prof:
            with torch.profiler.record_function("training step"):
                step()
    finally:
        torch.cuda.set_sync_debug_mode(0)
    events = prof.events()
    # the CPU's range (the GPU's annotation of the same name ends when the kernels do)
    (span,) = [e.time_range for e in events
               if e.name == "training step" and str(e.device_type).endswith("CPU")]
    # The profiler synchronises when it stops: only calls inside the step count.
    inside = {e.name for e in events
              if span.start <= e.time_range.start and e.time_range.end <= span.end}
    blocking = {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
                "cudaMemcpy", "cudaMemcpy2D", "cudaFree", "cudaMemcpyToSymbol",
                "cudaMemcpyFromSymbol"}
    assert "cudaLaunchKernel" in inside or any("Launch" in name for name in inside)
    assert not inside & blocking, sorted(inside & blocking)
    kernels = {e.name for e in events}
    assert any("blockscale" in name and "gemm" in name for name in kernels), "the device GEMM ran"


def test_errors_on_the_device():
    x = torch.randn(8, 32, device="cuda")
    with pytest.raises(ValueError, match="host CurrentTensorScale"):
        bs.quantize(x, "nvfp4", policy=bs.CurrentTensorScale("nvfp4"))
    with pytest.raises(ValueError, match="NoTensorScale"):
        bs.device_policy(bs.NoTensorScale())
    with pytest.raises(ValueError, match="made for nvfp4"):
        bs.quantize(x, "mxfp4", policy=bs.device_policy(bs.CurrentTensorScale("nvfp4")))
    with pytest.raises(ValueError, match="int64"):
        bs.quantize(torch.ones(8, 32, dtype=torch.int64, device="cuda"), "nvfp4")
    cpu_out = bs.QuantizedTensor.empty("nvfp4", bs.options().quantized_shape(8, 32))
    with pytest.raises(ValueError, match="out is not"):
        bs.quantize_into(x, cpu_out)
