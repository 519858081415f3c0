"""blockscale.torch on CPU tensors: the recipes as the C++ presets define them, the Linear against a
float64 reference of the recipe built from independent quantize calls, the policies' state, the
autograd wiring by finite differences, convert_model, and errors for bad recipes and shapes."""

import dataclasses

import numpy as np
import pytest

import blockscale as bs

torch = pytest.importorskip("torch")
bst = pytest.importorskip("blockscale.torch")

ROLE_INDEX = {role: i for i, role in enumerate(bst.ROLES)}


def test_presets_are_the_libraries():
    assert bst.RECIPES == ("high_precision", "nvfp4", "ue5m3_fp4", "mxfp4")
    nv = bst.recipe("nvfp4", high_precision_last_layers=2)
    assert nv.high_precision_last_layers == 2
    assert nv.fprop_w.shape == nv.dgrad_w.shape == "tile" and nv.fprop_x.shape == "rowwise"
    assert nv.dgrad_dy.rounding == nv.wgrad_dy.rounding == "stochastic"
    assert nv.fprop_x.rounding == "nearest_even"
    assert nv.wgrad_dy.hadamard and nv.wgrad_x.hadamard and not nv.fprop_x.hadamard
    assert nv.fprop_x.tensor_scale.policy == "current"
    ue = bst.recipe("ue5m3_fp4", interval=7)
    assert {ue.operand(r).format for r in bst.ROLES} == {"ue5m3_fp4"}
    assert ue.fprop_x.tensor_scale == bst.TensorScale("periodic", 7, 8)
    assert not any(ue.operand(r).hadamard for r in bst.ROLES)
    mx = bst.recipe("mxfp4")
    assert mx.fprop_x.rule is not None and mx.fprop_x.tensor_scale.policy == "none"
    assert mx.fprop_x.rule == bs.RULES["ocp_floor"]
    assert not bst.recipe("high_precision").quantized
    assert nv.hadamard_sign_mask == bs._core.default_hadamard_sign_mask()


def reference_operand(r, role, t, seed, step, policy):
    """The recipe's fake quantization of one operand, from blockscale.quantize directly."""
    o = r.operand(role)
    kwargs = dict(shape=o.shape, columnwise=bst.COLUMNWISE[role], rounding=o.rounding,
                  hadamard=o.hadamard, hadamard_signs=r.hadamard_sign_mask,
                  seed=bs._core.operand_seed(seed, ROLE_INDEX[role]), offset=step)
    if o.rule is not None:
        kwargs["rule"] = o.rule
    return bs.fake_quantize(t.detach().numpy(), o.format, policy=policy, **kwargs).astype(np.float64)


@pytest.mark.parametrize("name", ["nvfp4", "ue5m3_fp4", "mxfp4"])
def test_linear_equals_a_float64_reference(name):
    r = bst.recipe(name, interval=2)
    seed, steps = 11, 3
    torch.manual_seed(0)
    layer = bst.Linear(64, 48, bias=True, recipe=r, seed=seed)
    policies = {role: r.operand(role).tensor_scale.make(r.operand(role).format) for role in bst.ROLES}
    for step in range(steps):
        x = (torch.randn(3, 8, 64) * (1 + step)).requires_grad_()
        y = layer(x)
        dy = torch.randn_like(y)
        y.backward(dy)
        x2, dy2 = x.detach().reshape(-1, 64), dy.reshape(-1, 48)
        q = {role: reference_operand(r, role, t, seed, step, policies[role])
             for role, t in (("fprop_x", x2), ("fprop_w", layer.weight), ("dgrad_dy", dy2),
                             ("dgrad_w", layer.weight), ("wgrad_dy", dy2), ("wgrad_x", x2))}
        want_y = q["fprop_x"] @ q["fprop_w"].T + layer.bias.detach().numpy().astype(np.float64)
        want_dx = q["dgrad_dy"] @ q["dgrad_w"].T
        want_dw = q["wgrad_dy"] @ q["wgrad_x"].T
        scale = lambda a: np.abs(a).max() + 1e-30  # noqa: E731
        np.testing.assert_allclose(y.detach().reshape(-1, 48).numpy(), want_y, rtol=0,
                                   atol=1e-5 * scale(want_y))
        np.testing.assert_allclose(x.grad.reshape(-1, 64).numpy(), want_dx, rtol=0,
                                   atol=1e-5 * scale(want_dx))
        np.testing.assert_allclose(layer.weight.grad.numpy(), want_dw, rtol=0,
                                   atol=1e-5 * scale(want_dw))
        np.testing.assert_allclose(layer.bias.grad.numpy(), dy2.sum(0).numpy(), rtol=1e-6)
        layer.weight.grad = None
        layer.bias.grad = None
    # The policies' state: one training call per step for each operand.
    for role, op in layer.quantizers.ops.items():
        p = op.state()
        if p is not None:
            assert p.calls == steps == policies[role].calls
            assert p.amax_measurements == policies[role].amax_measurements
            assert p.encode_scale == policies[role].encode_scale
    assert layer.quantizers.step == steps


def test_evaluation_leaves_the_training_state_alone():
    layer = bst.Linear(32, 16, recipe="nvfp4", seed=3)
    x = torch.randn(4, 32)
    layer.eval()
    with torch.no_grad():
        a, b = layer(x), layer(x)
    assert torch.equal(a, b) and layer.quantizers.step == 0
    assert layer.quantizers.ops["fprop_x"].state(training=True).calls == 0
    assert layer.quantizers.ops["fprop_x"].state(training=False).calls == 2


def test_stochastic_rounding_follows_the_step():
    """The same step of two layers with one seed gives the same gradient bits; the next step
    draws fresh bits."""
    def grads(layer, steps):
        out = []
        for _ in range(steps):
            x = torch.ones(8, 32, requires_grad=True)
            layer(x).backward(torch.linspace(-1, 1, 8 * 16).reshape(8, 16))
            out.append(x.grad.clone())
        return out

    torch.manual_seed(1)
    a = bst.Linear(32, 16, bias=False, recipe="ue5m3_fp4", seed=5)
    b = bst.Linear(32, 16, bias=False, recipe="ue5m3_fp4", seed=5)
    b.weight.data.copy_(a.weight.data)
    ga, gb = grads(a, 2), grads(b, 2)
    assert torch.equal(ga[0], gb[0]) and torch.equal(ga[1], gb[1])
    assert not torch.equal(ga[0], ga[1])  # stochastic rounding of dY with offset = step


def test_high_precision_is_nn_linear():
    torch.manual_seed(2)
    ref = torch.nn.Linear(24, 8)
    layer = bst.Linear.from_linear(ref, "high_precision")
    x = torch.randn(5, 24)
    assert layer.high_precision and torch.equal(layer(x), ref(x))
    assert layer.weight is ref.weight


def test_autograd_wiring_by_finite_differences():
    """With every operand in high precision the custom function is exact: gradcheck in float64."""
    r = bst.Recipe("float")
    q = bst.LinearQuantizers(r, 0)
    x = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    b = torch.randn(4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w, b: bst.quantized_linear(x, w, b, q), (x, w, b))


def test_convert_model():
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up, self.down = torch.nn.Linear(16, 32), torch.nn.Linear(32, 16)

    model = torch.nn.Module()
    model.layers = torch.nn.ModuleList([Block(), Block(), Block()])
    model.head = torch.nn.Linear(16, 10)
    weight = model.layers[0].up.weight
    bst.convert_model(model, bst.recipe("nvfp4", high_precision_last_layers=1),
                      high_precision=["head"], seed=9)
    assert isinstance(model.layers[0].up, bst.Linear) and model.layers[0].up.weight is weight
    assert isinstance(model.layers[1].down, bst.Linear)
    assert type(model.layers[2].up) is torch.nn.Linear  # the last layer stays in high precision
    assert type(model.head) is torch.nn.Linear
    seeds = {q.seed for q in bst.quantizers_of(model)}
    assert len(seeds) == 4  # one per converted Linear
    x = torch.randn(2, 16)
    for block in model.layers:
        x = block.down(block.up(x))
    model.head(x).sum().backward()
    assert weight.grad is not None and torch.isfinite(weight.grad).all()


def test_bad_recipes_and_shapes():
    base = bst.recipe("nvfp4")
    bad = [
        (dataclasses.replace(base, fprop_x=dataclasses.replace(base.fprop_x, format="fp5")),
         "fprop_x.format"),
        (dataclasses.replace(base, fprop_w=dataclasses.replace(base.fprop_w, shape="square")),
         "fprop_w.shape"),
        (dataclasses.replace(base, dgrad_dy=dataclasses.replace(base.dgrad_dy, rounding="up")),
         "dgrad_dy.rounding"),
        (dataclasses.replace(base, wgrad_x=dataclasses.replace(base.wgrad_x, hadamard=False)),
         "Wgrad operands disagree"),
        (dataclasses.replace(base, fprop_x=dataclasses.replace(
            base.fprop_x, tensor_scale=bst.TensorScale("sometimes"))), "tensor_scale.policy"),
        (dataclasses.replace(base, fprop_x=dataclasses.replace(
            base.fprop_x, tensor_scale=bst.TensorScale("current", headroom=99))), "headroom"),
        (dataclasses.replace(base, fprop_x=dataclasses.replace(base.fprop_x, rule="ceiling")),
         "fprop_x.rule"),
        (dataclasses.replace(base, high_precision_last_layers=-1), "high_precision_last_layers"),
    ]
    for r, message in bad:
        with pytest.raises(ValueError, match=message):
            bst.Linear(16, 16, recipe=r)
    with pytest.raises(ValueError, match="unknown recipe 'fp3'"):
        bst.recipe("fp3")
    with pytest.raises(ValueError, match="interval"):
        bst.recipe("ue5m3_fp4", interval=0)
    with pytest.raises(ValueError, match="recipe must be a Recipe"):
        bst.Linear(16, 16, recipe=3)
    layer = bst.Linear(16, 8, recipe="mxfp4")
    with pytest.raises(ValueError, match="x has 12 features, the weight 16 inputs"):
        layer(torch.randn(4, 12))
    with pytest.raises(ValueError, match="int64"):
        layer(torch.ones(4, 16, dtype=torch.int64))


def test_gemm_choice_on_the_cpu():
    """On CPU tensors every GEMM is the emulation: "auto" is "matmul" bit for bit, "device" is an
    error naming why, and a bad choice is refused where it is made."""
    torch.manual_seed(2)
    layers = {g: bst.Linear(64, 32, recipe="ue5m3_fp4", seed=3, gemm=g) for g in ("auto", "matmul")}
    layers["matmul"].load_state_dict(layers["auto"].state_dict())
    x = torch.randn(16, 64)
    outs = {}
    for g, layer in layers.items():
        xi = x.clone().requires_grad_()
        y = layer(xi)
        y.square().sum().backward()
        outs[g] = (y.detach(), xi.grad, layer.weight.grad)
    for a, b in zip(outs["auto"], outs["matmul"]):
        assert torch.equal(a, b)
    assert "gemm=auto" in repr(layers["auto"])
    device = bst.Linear(64, 32, recipe="nvfp4", gemm="device")
    with pytest.raises(ValueError, match="fprop_x x fprop_w: the operands are on cpu"):
        device(x)
    with pytest.raises(ValueError, match="gemm must be one of auto, matmul, device"):
        bst.Linear(16, 16, gemm="cublas")
    with pytest.raises(ValueError, match="gemm must be one of"):
        bst.convert_model(torch.nn.Sequential(torch.nn.Linear(16, 16)), "nvfp4", gemm="fast")
    nvfp4 = bs.quantize(torch.randn(8, 32), "nvfp4")
    assert not bs.gemm_takes(nvfp4, nvfp4)
    with pytest.raises(ValueError, match="gemm: a is on the CPU"):
        bs.gemm(nvfp4, nvfp4)


def test_observers_see_every_quantized_operand():
    layer = bst.Linear(64, 32, recipe="ue5m3_fp4", seed=1)
    seen = []
    layer.quantizers.observe(lambda role, q: seen.append((role, q.format, q.shape)))
    x = torch.randn(16, 64, requires_grad=True)
    layer(x).sum().backward()
    assert seen == [("fprop_x", "ue5m3_fp4", (16, 64)), ("fprop_w", "ue5m3_fp4", (32, 64)),
                    ("dgrad_dy", "ue5m3_fp4", (16, 32)), ("dgrad_w", "ue5m3_fp4", (64, 32)),
                    ("wgrad_dy", "ue5m3_fp4", (32, 16)), ("wgrad_x", "ue5m3_fp4", (64, 16))]
    layer.quantizers.observe(None)
    layer(x).sum().backward()
    assert len(seen) == 6
