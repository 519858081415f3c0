"""Training recipes in PyTorch: a drop-in `Linear`, the autograd function `quantized_linear`, and
`convert_model`, on CPU tensors through the host library and on CUDA tensors through the device
kernels (the same bits).

Each of a linear layer's six GEMM operands (Fprop: X, W; Dgrad: dY, W; Wgrad: dY, X) is quantized
as the recipe says — block format, block shape, rounding (stochastic on the gradients), Hadamard
transform, scale rule, tensor-scale policy. Each GEMM then runs on the quantized operands: on CUDA
tensors by the device GEMM (`blockscale.gemm`) where it takes them (both operands of one E2M1
format, K a multiple of the block size), else — and always on CPU tensors — in float32 on the
dequantized values (torch's matmul: the software emulation of an FP4 training step). `gemm=`
chooses: "auto" (that rule), "matmul" (always the emulation) or "device" (the device GEMM, or an
error naming why not). Columnwise operands are quantized from the original tensors, never from a
quantized copy.

    import blockscale.torch as bst
    model = bst.convert_model(model, bst.recipe("ue5m3_fp4"), high_precision=["lm_head"])

The recipes are the presets of the C++ library (training/recipe.hpp), read from it, or your own
(`dataclasses.replace` on a preset). See docs/python.md.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional, Union

import torch
import torch.nn.functional as F
from torch import nn

from . import _device
from ._native import core as _core
from ._gemm import _format_refusal, gemm
from ._quantize import RULES, quantize
from ._tensor import QuantizedTensor, block_formats

# The six GEMM operands of a linear layer, in the C++ order (training/linear.hpp's gemm_operand),
# and whether each is quantized columnwise (the result then holds the transpose).
ROLES = ("fprop_x", "fprop_w", "dgrad_dy", "dgrad_w", "wgrad_dy", "wgrad_x")
COLUMNWISE = {"fprop_x": False, "fprop_w": False, "dgrad_dy": False,
              "dgrad_w": True, "wgrad_dy": True, "wgrad_x": True}
RECIPES = tuple(_core.recipe_names())  # the presets' names
POLICIES = ("none", "current", "periodic", "delayed")
GEMMS = ("auto", "matmul", "device")  # how a quantized layer multiplies (the module's docstring)


@dataclass(frozen=True)
class TensorScale:
    """Which tensor-scale policy an operand uses, with its parameters (C++ tensor_scale_config)."""

    policy: str = "none"  # "none", "current", "periodic" or "delayed"
    interval: int = 100  # periodic: calls between amax measurements
    headroom: int = 0  # current, periodic: binades below the scale format's largest value
    history: int = 16  # delayed: amax history length
    margin: int = 0  # delayed: margin in binades

    def make(self, format: str) -> Any:
        """A fresh host policy for `format`, or None for "none"."""
        from . import CurrentTensorScale, DelayedTensorScale, PeriodicTensorScale

        if self.policy == "none":
            return None
        if self.policy == "current":
            return CurrentTensorScale(format, headroom=self.headroom)
        if self.policy == "periodic":
            return PeriodicTensorScale(format, interval=self.interval, headroom=self.headroom)
        if self.policy == "delayed":
            return DelayedTensorScale(format, history=self.history, margin=self.margin)
        raise ValueError(f"tensor_scale.policy must be one of {', '.join(POLICIES)}, "
                         f"not {self.policy!r}")


@dataclass(frozen=True)
class OperandRecipe:
    """How one GEMM operand is quantized (C++ operand_recipe); format "high_precision": not."""

    format: str = "high_precision"
    shape: str = "rowwise"  # or "tile": 16x16 blocks, the same scales both ways (weights)
    rounding: str = "nearest_even"  # or "stochastic"
    hadamard: bool = False
    rule: Any = None  # None: the format's default; a preset name, ScaleRule or (target, rounding)
    tensor_scale: TensorScale = field(default_factory=TensorScale)

    @property
    def quantized(self) -> bool:
        return self.format != "high_precision"


@dataclass(frozen=True)
class Recipe:
    """A training recipe (C++ recipe): the six operands and the layers kept in high precision."""

    name: str
    fprop_x: OperandRecipe = field(default_factory=OperandRecipe)
    fprop_w: OperandRecipe = field(default_factory=OperandRecipe)
    dgrad_dy: OperandRecipe = field(default_factory=OperandRecipe)
    dgrad_w: OperandRecipe = field(default_factory=OperandRecipe)
    wgrad_dy: OperandRecipe = field(default_factory=OperandRecipe)
    wgrad_x: OperandRecipe = field(default_factory=OperandRecipe)
    high_precision_first_layers: int = 0
    high_precision_last_layers: int = 0
    hadamard_sign_mask: int = field(default_factory=_core.default_hadamard_sign_mask)

    @property
    def quantized(self) -> bool:
        return any(self.operand(role).quantized for role in ROLES)

    def operand(self, role: str) -> OperandRecipe:
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
        return getattr(self, role)

    def layer_in_high_precision(self, index: int, count: int) -> bool:
        """Whether layer `index` of `count` runs in high precision (C++ layer_in_high_precision)."""
        return index < self.high_precision_first_layers or index >= count - self.high_precision_last_layers

    def check(self) -> "Recipe":
        """Raises ValueError naming the first bad field; returns self."""
        known = block_formats()
        for role in ROLES:
            o = self.operand(role)
            if not isinstance(o, OperandRecipe):
                raise ValueError(f"{role} must be an OperandRecipe, not {type(o).__name__}")
            if o.format != "high_precision" and o.format not in known:
                raise ValueError(f"{role}.format must be 'high_precision' or one of "
                                 f"{', '.join(known)}, not {o.format!r}")
            if o.shape not in ("rowwise", "tile"):
                raise ValueError(f"{role}.shape must be 'rowwise' or 'tile', not {o.shape!r}")
            if o.rounding not in ("nearest_even", "stochastic"):
                raise ValueError(f"{role}.rounding must be 'nearest_even' or 'stochastic', "
                                 f"not {o.rounding!r}")
            if isinstance(o.rule, str) and o.rule not in RULES:
                raise ValueError(f"{role}.rule must be one of {', '.join(RULES)}, a ScaleRule or "
                                 f"a (target, rounding) pair, not {o.rule!r}")
            if o.tensor_scale.policy not in POLICIES:
                raise ValueError(f"{role}.tensor_scale.policy must be one of "
                                 f"{', '.join(POLICIES)}, not {o.tensor_scale.policy!r}")
            if o.quantized:
                o.tensor_scale.make(o.format)  # the policy's own checks (headroom, interval)
        for gemm, a, b in (("Fprop", "fprop_x", "fprop_w"), ("Dgrad", "dgrad_dy", "dgrad_w"),
                           ("Wgrad", "wgrad_dy", "wgrad_x")):
            if self.operand(a).quantized and self.operand(b).quantized and \
                    self.operand(a).hadamard != self.operand(b).hadamard:
                raise ValueError(f"the recipe's {gemm} operands disagree on the Hadamard "
                                 f"transform, which only cancels when both have it")
        for name in ("high_precision_first_layers", "high_precision_last_layers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, not {value!r}")
        return self


def _operand_from(d: dict) -> OperandRecipe:
    t = d["tensor_scale"]
    return OperandRecipe(d["format"], d["shape"], d["rounding"], d["hadamard"], d["rule"],
                         TensorScale(t["policy"], t["interval"], t["headroom"], t["history"],
                                     t["margin"]))


def recipe(name: str, *, interval: int = 100, high_precision_last_layers: int = 0) -> Recipe:
    """The C++ preset `name` ("high_precision", "nvfp4", "ue5m3_fp4", "mxfp4"): the UE5M3 recipe
    takes its refresh `interval`, NVFP4 how many last layers stay in high precision."""
    d = _core.recipe_preset(name, interval, high_precision_last_layers)
    return Recipe(d["name"], *(_operand_from(d[role]) for role in ROLES),
                  d["high_precision_first_layers"], d["high_precision_last_layers"],
                  d["hadamard_sign_mask"])


def _as_recipe(r: Union[str, Recipe]) -> Recipe:
    if isinstance(r, str):
        return recipe(r)
    if not isinstance(r, Recipe):
        raise ValueError(f"recipe must be a Recipe or a preset name ({', '.join(RECIPES)}), "
                         f"not {type(r).__name__}")
    return r.check()


class OperandQuantizer:
    """The fake quantization of one GEMM operand of one layer: its tensor-scale policies (one for
    training, one for evaluation; a device copy of each on first CUDA use), its Philox seed, and
    the step (the layer's training-step count) as the stochastic-rounding stream offset."""

    def __init__(self, spec: OperandRecipe, role: str, seed: int, hadamard_sign_mask: int):
        self.spec, self.role, self.seed = spec, role, seed
        self.columnwise = COLUMNWISE[role]
        self.hadamard_sign_mask = hadamard_sign_mask
        self.policies = {mode: spec.tensor_scale.make(spec.format) for mode in ("train", "eval")}
        self.device_policies: dict = {}
        self.amax_hook: Optional[Callable[[torch.Tensor], Any]] = None
        # Called with (role, QuantizedTensor) after every quantization (LinearQuantizers.observe).
        self.observer: Optional[Callable[[str, QuantizedTensor], Any]] = None

    def policy(self, t: torch.Tensor, training: bool) -> Any:
        mode = "train" if training else "eval"
        host = self.policies[mode]
        if host is None or t.device.type == "cpu":
            return host
        key = (mode, t.device)
        if key not in self.device_policies:
            self.device_policies[key] = _device.device_policy(host, t.device)
        p = self.device_policies[key]
        p.amax_hook = self.amax_hook if training else None
        return p

    def quantize(self, t: torch.Tensor, step: int, training: bool) -> QuantizedTensor:
        """t quantized (tᵀ when columnwise) on t's device: one step of the operand's policy."""
        if not self.spec.quantized:
            raise ValueError(f"{self.role} is a high-precision operand of this recipe")
        kwargs = dict(shape=self.spec.shape, columnwise=self.columnwise,
                      rounding=self.spec.rounding, hadamard=self.spec.hadamard,
                      hadamard_signs=self.hadamard_sign_mask, seed=self.seed, offset=step)
        if self.spec.rule is not None:
            kwargs["rule"] = self.spec.rule
        q = quantize(t.detach(), self.spec.format, policy=self.policy(t, training), **kwargs)
        if self.observer is not None:
            self.observer(self.role, q)
        return q

    def __call__(self, t: torch.Tensor, step: int, training: bool) -> torch.Tensor:
        """float32 values of t quantized and dequantized (of tᵀ when columnwise), on t's device;
        t itself (or tᵀ) for a high-precision operand."""
        if not self.spec.quantized:
            return t.T if self.columnwise else t
        return _values(self.quantize(t, step, training))

    def state(self, training: bool = True) -> Any:
        """The host policy (for the device: read back, which waits for the device), or None."""
        mode = "train" if training else "eval"
        on_device = [p for (m, _), p in self.device_policies.items() if m == mode]
        return on_device[0].read() if on_device else self.policies[mode]


class LinearQuantizers:
    """The six operand quantizers of one linear layer and its training-step count."""

    def __init__(self, r: Recipe, seed: int = 0, gemm: str = "auto"):
        if gemm not in GEMMS:
            raise ValueError(f"gemm must be one of {', '.join(GEMMS)}, not {gemm!r}")
        self.recipe = r
        self.seed = seed
        self.gemm = gemm
        self.step = 0
        self.ops = {role: OperandQuantizer(r.operand(role), role,
                                           _core.operand_seed(seed, i), r.hadamard_sign_mask)
                    for i, role in enumerate(ROLES)}

    def set_amax_hook(self, hook: Optional[Callable[[torch.Tensor], Any]]) -> None:
        """Calls hook(amax) between measuring and applying every device policy's amax (an int32
        CUDA tensor of one element, the amax's float bit pattern, which orders as the amaxes do):
        `lambda t: torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)` keeps the
        tensor scales of data-parallel ranks equal."""
        for op in self.ops.values():
            op.amax_hook = hook

    def observe(self, observer: Optional[Callable[[str, QuantizedTensor], Any]]) -> None:
        """Calls observer(role, q) with every operand this layer quantizes (None: stop), e.g. to
        measure its block scales; the observer must not change q."""
        for op in self.ops.values():
            op.observer = observer

    def policies(self) -> list:
        """The training policies (host objects; device ones read back)."""
        return [p for p in (op.state() for op in self.ops.values()) if p is not None]


class _QuantizedGemms(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, q: LinearQuantizers, training: bool):
        step = q.step
        if training:
            q.step += 1
        ctx.save_for_backward(x, weight)
        ctx.q, ctx.step, ctx.training, ctx.has_bias = q, step, training, bias is not None
        y = _product(q, ("fprop_x", x), ("fprop_w", weight), step, training)
        if bias is not None:
            y = y + bias.to(y.dtype)
        return y.to(x.dtype)

    @staticmethod
    def backward(ctx, dy):
        x, weight = ctx.saved_tensors
        q, step, training = ctx.q, ctx.step, ctx.training
        dy = dy.contiguous()
        dx = _product(q, ("dgrad_dy", dy), ("dgrad_w", weight), step, training)
        dw = _product(q, ("wgrad_dy", dy), ("wgrad_x", x), step, training)
        db = dy.sum(0) if ctx.has_bias else None
        return dx.to(x.dtype), dw.to(weight.dtype), db, None, None


def _values(q: QuantizedTensor) -> torch.Tensor:
    """The float32 values of a quantized operand, as a torch tensor on its device."""
    values = q.dequantize("float32")
    return values if isinstance(values, torch.Tensor) else torch.from_numpy(values)


def _product(q: LinearQuantizers, a: tuple, b: tuple, step: int, training: bool) -> torch.Tensor:
    """A · Bᵀ of one GEMM, with A and B the operands (role, tensor) as the recipe quantizes them
    (the transposes for columnwise roles): the device GEMM or torch's matmul, as q.gemm says.
    Whether the device GEMM takes the pair is decided before anything is quantized, so that a
    refusal leaves the policies as they were."""
    (role_a, ta), (role_b, tb) = a, b
    op_a, op_b = q.ops[role_a], q.ops[role_b]
    refusal = "emulation requested" if q.gemm == "matmul" else _device_gemm_refusal(op_a, ta, op_b, tb)
    if refusal is not None:
        if q.gemm == "device":
            raise ValueError(f"gemm='device': the device GEMM refuses {role_a} x {role_b}: "
                             f"{refusal}")
        return _matmul(op_a(ta, step, training), op_b(tb, step, training).T)
    qa, qb = op_a.quantize(ta, step, training), op_b.quantize(tb, step, training)
    return gemm(qa, qb)


def _device_gemm_refusal(op_a: OperandQuantizer, ta: torch.Tensor, op_b: OperandQuantizer,
                         tb: torch.Tensor) -> Optional[str]:
    """Why the device GEMM would refuse the pair the two operands quantize to, from the recipe and
    the shapes (what blockscale.gemm_takes checks of the quantized tensors), or None."""
    for op in (op_a, op_b):
        if not op.spec.quantized:
            return f"{op.role} is a high-precision operand of this recipe"
    if ta.device.type != "cuda" or tb.device != ta.device:
        return f"the operands are on {ta.device} and {tb.device}, not one CUDA device"
    k = ta.shape[0] if op_a.columnwise else ta.shape[1]
    return _format_refusal((op_a.role, op_b.role), (op_a.spec.format, op_b.spec.format), k)


def _matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a · b in the wider of their dtypes, at least float32 (dequantized operands are float32)."""
    dtype = torch.promote_types(torch.promote_types(a.dtype, b.dtype), torch.float32)
    return a.to(dtype) @ b.to(dtype)


def quantized_linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                     quantizers: LinearQuantizers, training: bool = True) -> torch.Tensor:
    """y = x · weightᵀ + bias with every operand of Fprop, Dgrad and Wgrad quantized as
    `quantizers.recipe` says (x: [..., in], weight: [out, in]). In training, each call is one step
    of the quantizers (the stochastic-rounding offset and the policies' call count)."""
    if x.shape[-1] != weight.shape[1]:
        raise ValueError(f"x has {x.shape[-1]} features, the weight {weight.shape[1]} inputs")
    x2 = x.reshape(-1, x.shape[-1])
    if x2.shape[1] > 1 and x2.stride(1) != 1 or x2.shape[0] > 1 and x2.stride(0) != x2.shape[1]:
        x2 = x2.contiguous()
    y = _QuantizedGemms.apply(x2, weight, bias, quantizers, training)
    return y.reshape(*x.shape[:-1], weight.shape[0])


class Linear(nn.Linear):
    """torch.nn.Linear whose GEMMs follow a training recipe (a preset name or a Recipe).
    `high_precision=True` (or a recipe without quantized operands) runs it as nn.Linear; `gemm`
    says how the quantized operands are multiplied ("auto", "matmul", "device": see the module)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device: Any = None,
                 dtype: Any = None, *, recipe: Union[str, Recipe] = "ue5m3_fp4", seed: int = 0,
                 high_precision: bool = False, gemm: str = "auto"):
        super().__init__(in_features, out_features, bias, device, dtype)
        self.recipe = _as_recipe(recipe)
        self.high_precision = bool(high_precision) or not self.recipe.quantized
        self.quantizers = LinearQuantizers(self.recipe, seed, gemm)

    @classmethod
    def from_linear(cls, linear: nn.Linear, recipe: Union[str, Recipe], *, seed: int = 0,
                    high_precision: bool = False, gemm: str = "auto") -> "Linear":
        """A Linear sharing `linear`'s parameters (not copies)."""
        new = cls.__new__(cls)
        nn.Module.__init__(new)
        new.in_features, new.out_features = linear.in_features, linear.out_features
        new.weight, new.bias = linear.weight, linear.bias
        new.recipe = _as_recipe(recipe)
        new.high_precision = bool(high_precision) or not new.recipe.quantized
        new.quantizers = LinearQuantizers(new.recipe, seed, gemm)
        new.train(linear.training)
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.high_precision:
            return F.linear(x, self.weight, self.bias)
        return quantized_linear(x, self.weight, self.bias, self.quantizers, self.training)

    def extra_repr(self) -> str:
        if self.high_precision:
            return f"{super().extra_repr()}, recipe=high precision"
        return f"{super().extra_repr()}, recipe={self.recipe.name}, gemm={self.quantizers.gemm}"


_LAYER_INDEX = re.compile(r"(?:^|\.)(\d+)(?:\.|$)")


def convert_model(model: nn.Module, recipe: Union[str, Recipe], *,
                  high_precision: Iterable[str] = (), seed: int = 0,
                  amax_hook: Optional[Callable[[torch.Tensor], Any]] = None,
                  gemm: str = "auto") -> nn.Module:
    """Replaces every torch.nn.Linear of `model` (in place; returned) by a Linear under `recipe`
    sharing its parameters. Those whose qualified names match a pattern of `high_precision`
    (fnmatch: "lm_head", "*.gate") stay nn.Linear, and so do the recipe's first / last layers,
    where a module's layer is the first integer of its name ("layers.3.mlp.up" is layer 3) and
    the count is the largest such integer plus one. Each converted Linear gets its own seed;
    `gemm` is every converted Linear's (see the module)."""
    r = _as_recipe(recipe)
    if gemm not in GEMMS:
        raise ValueError(f"gemm must be one of {', '.join(GEMMS)}, not {gemm!r}")
    patterns = [high_precision] if isinstance(high_precision, str) else list(high_precision)
    linears = [(name, m) for name, m in model.named_modules() if type(m) is nn.Linear]
    layers = {}
    for name, _ in linears:
        found = _LAYER_INDEX.search(name)
        layers[name] = int(found.group(1)) if found else None
    count = max((i for i in layers.values() if i is not None), default=-1) + 1
    for index, (name, module) in enumerate(linears):
        if any(fnmatch.fnmatchcase(name, p) for p in patterns):
            continue
        layer = layers[name]
        if layer is not None and r.layer_in_high_precision(layer, count):
            continue
        new = Linear.from_linear(module, r, seed=((seed << 20) + index) & (2**64 - 1), gemm=gemm)
        if amax_hook is not None:
            new.quantizers.set_amax_hook(amax_hook)
        parent_name, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, child, new)
    return model


def quantizers_of(model: nn.Module) -> list[LinearQuantizers]:
    """The LinearQuantizers of every blockscale Linear in `model` (for their policies)."""
    return [m.quantizers for m in model.modules() if isinstance(m, Linear) and not m.high_precision]


__all__ = ["ROLES", "COLUMNWISE", "RECIPES", "POLICIES", "GEMMS", "TensorScale", "OperandRecipe", "Recipe",
           "recipe", "OperandQuantizer", "LinearQuantizers", "quantized_linear", "Linear",
           "convert_model", "quantizers_of"]
