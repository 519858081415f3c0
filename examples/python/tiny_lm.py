"""Trains a tiny byte-level language model under four FP4 training recipes and compares them.

Every linear layer of the transformer (attention qkv and output, MLP up and down) runs its three
GEMMs on operands fake-quantized by blockscale: each operand is quantized to FP4 and dequantized
back to float32, so the float GEMM sees exactly the values a block-scaled GEMM would see.

    GEMM    C = A · Bᵀ      A (blocks along K)       B (blocks along K)        K
    Fprop   Y  = X · Wᵀ     X rowwise                W rowwise                 in-features
    Dgrad   dX = dY · W     dY rowwise               W columnwise (Wᵀ)         out-features
    Wgrad   dW = dYᵀ · X    dY columnwise (dYᵀ)      X columnwise (Xᵀ)         tokens

Recipes:
    high_precision  no quantization (the baseline).
    nvfp4           NVFP4 as Transformer Engine does it: W in 16×16 tiles, X and dY in 1×16
                    blocks, a tensor scale measured on every call, stochastic rounding on dY, the
                    random Hadamard transform on both Wgrad operands, the last block in float.
    ue5m3_fp4       UE5M3 block scales, a tensor scale refreshed every N calls with 8 binades of
                    headroom, stochastic rounding on dY only, no Hadamard, FP4 in every linear.
    mxfp4           OCP MXFP4 (UE8M0 scales, blocks of 32, floor rule), no tensor scale,
                    stochastic rounding on dY, FP4 in every linear.

The recipes are blockscale.torch's (the C++ presets), the linears blockscale.torch.Linear. The
embeddings, norms, attention BMMs and output head stay in float32. The text is the Python
standard library's own top-level .py sources, so the script needs nothing but torch, numpy and
blockscale. Every recipe starts from the same weights and sees the same batches for a given seed.
Validation runs the model as trained (its forward GEMMs quantized), with evaluation-only policies
so that evaluation does not disturb the training policies' schedules or counts.

    python examples/python/tiny_lm.py --jobs 2 --out /tmp/lm_out
    python examples/python/tiny_lm.py --device cuda --d-model 512 --layers 7 --heads 8 \
        --context 256 --batch-size 32 --steps 2000 --eval-every 100 --seeds 1 --out /tmp/lm_gpu

(the second: on a GPU, with the package's CUDA extension; the recipes' GEMMs then run on the
device GEMM where it takes the operands, and `--gemm matmul` makes them software-emulated FP4:
the step time against the high-precision step is the overhead of either)

writes metrics.csv (recipe, seed, step, train_loss, val_loss), runs.csv (one row per training),
val_loss.svg (mean validation loss per recipe) and summary.txt (the printed table).
"""

from __future__ import annotations

import argparse
import csv
import math
import multiprocessing
import pathlib
import statistics
import sysconfig
import time
from dataclasses import dataclass, replace
from typing import Callable, Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import blockscale as bs
import blockscale.torch as bst


# --------------------------------------------------------------------------------------------
# Recipes
# --------------------------------------------------------------------------------------------


def make_recipes(ue5m3_interval: int) -> dict[str, bst.Recipe]:
    """The four recipes compared by this script, by name: the library's presets (NVFP4 with its
    last block in high precision), and MXFP4 with stochastic rounding added on dY."""
    mx = bst.recipe("mxfp4")
    mx_dy = replace(mx.dgrad_dy, rounding="stochastic")
    return {
        "high_precision": bst.recipe("high_precision"),
        "nvfp4": bst.recipe("nvfp4", high_precision_last_layers=1),
        "ue5m3_fp4": bst.recipe("ue5m3_fp4", interval=ue5m3_interval),
        "mxfp4": replace(mx, dgrad_dy=mx_dy, wgrad_dy=mx_dy),
    }


@dataclass(frozen=True)
class ModelConfig:
    vocab: int = 256  # bytes
    context: int = 128
    d_model: int = 192
    heads: int = 4
    layers: int = 4


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention and a 4x GELU MLP."""

    def __init__(self, cfg: ModelConfig, make_linear: Callable[[int, int, float], nn.Linear]):
        super().__init__()
        d, proj_std = cfg.d_model, 0.02 / math.sqrt(2 * cfg.layers)
        self.heads = cfg.heads
        self.norm1 = nn.LayerNorm(d)
        self.qkv = make_linear(d, 3 * d, 0.02)
        self.attn_out = make_linear(d, d, proj_std)
        self.norm2 = nn.LayerNorm(d)
        self.mlp_up = make_linear(d, 4 * d, 0.02)
        self.mlp_down = make_linear(4 * d, d, proj_std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # float BMMs
        x = x + self.attn_out(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp_down(F.gelu(self.mlp_up(self.norm2(x))))


class TinyLM(nn.Module):
    """Decoder-only byte-level transformer; the linears of its blocks are blockscale.torch Linears
    under the recipe (its last layers in high precision as the recipe says)."""

    def __init__(self, cfg: ModelConfig, recipe: bst.Recipe, seed: int, gemm: str = "auto"):
        super().__init__()
        blocks = []
        count = 0
        for layer in range(cfg.layers):
            high_precision = recipe.layer_in_high_precision(layer, cfg.layers)

            def make_linear(d_in: int, d_out: int, std: float) -> nn.Linear:
                nonlocal count
                # Distinct Philox seeds for every (layer, linear) of this run.
                linear = bst.Linear(d_in, d_out, bias=False, recipe=recipe,
                                    seed=seed * 1_000_000 + count, high_precision=high_precision,
                                    gemm=gemm)
                count += 1
                nn.init.normal_(linear.weight, std=std)
                return linear

            blocks.append(Block(cfg, make_linear))
        self.tok = nn.Embedding(cfg.vocab, cfg.d_model)
        self.pos = nn.Embedding(cfg.context, cfg.d_model)
        nn.init.normal_(self.tok.weight, std=0.02)
        nn.init.normal_(self.pos.weight, std=0.02)
        self.blocks = nn.ModuleList(blocks)
        self.norm = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        nn.init.normal_(self.head.weight, std=0.02)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))

    def policies(self) -> list:
        """The training policies of every quantized linear (read back from the device)."""
        return [p for q in bst.quantizers_of(self) for p in q.policies()]


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------


def load_corpus(max_bytes: int) -> np.ndarray:
    """The standard library's top-level .py files in sorted order, concatenated, as bytes."""
    stdlib = pathlib.Path(sysconfig.get_paths()["stdlib"])
    chunks, total = [], 0
    for path in sorted(stdlib.glob("*.py")):
        data = path.read_bytes()
        chunks.append(data)
        total += len(data)
        if total >= max_bytes:
            break
    return np.frombuffer(b"".join(chunks)[:max_bytes], dtype=np.uint8)


def window_starts(rng: np.random.Generator, data: np.ndarray, cfg: TrainConfig) -> np.ndarray:
    """Random start offsets of one batch of windows (context + 1 bytes each) in data."""
    return rng.integers(0, len(data) - cfg.model.context - 1, cfg.batch_size)


def batch(data: np.ndarray, starts: np.ndarray, context: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and next-byte targets for windows of `context` bytes beginning at `starts`."""
    windows = np.stack([data[s : s + context + 1] for s in starts]).astype(np.int64)
    w = torch.from_numpy(windows)
    return w[:, :-1], w[:, 1:]


# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainConfig:
    steps: int
    batch_size: int
    lr: float
    eval_every: int
    eval_batches: int
    max_bytes: int
    ue5m3_interval: int
    model: ModelConfig
    device: str = "cpu"
    gemm: str = "auto"  # blockscale.torch's choice of GEMM for the quantized linears
    shift_census: bool = False  # count the UE5M3 operands' rows whose scales shift onto UE4M3


def learning_rate(step: int, cfg: TrainConfig) -> float:
    """Linear warmup over the first 5% of steps, then cosine decay to 10% of the peak."""
    warmup = max(1, cfg.steps // 20)
    if step < warmup:
        return cfg.lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, cfg.steps - warmup)
    return cfg.lr * (0.1 + 0.45 * (1 + math.cos(math.pi * progress)))


def train_one(job: tuple[str, int, TrainConfig]) -> dict:
    """Trains one (recipe, seed); returns its metrics, wall time and tensor-scale counts."""
    recipe_name, seed, cfg = job
    device = torch.device(cfg.device)
    if device.type == "cpu":
        torch.set_num_threads(1)
    else:
        torch.set_float32_matmul_precision("highest")  # float32 GEMMs, no TF32
    recipe = make_recipes(cfg.ue5m3_interval)[recipe_name]
    m = cfg.model

    data = load_corpus(cfg.max_bytes)
    split = int(len(data) * 0.9)
    train_data, val_data = data[:split], data[split:]
    # Fixed validation windows (independent of the seed) and a per-seed batch order shared by
    # every recipe.
    val_rng = np.random.default_rng(12345)
    val_batches = [tuple(t.to(device) for t in batch(val_data, window_starts(val_rng, val_data, cfg),
                                                     m.context))
                   for _ in range(cfg.eval_batches)]
    data_rng = np.random.default_rng(seed)

    torch.manual_seed(seed)  # the same initial weights for every recipe
    model = TinyLM(m, recipe, seed, cfg.gemm).to(device)
    # Weight decay on the weight matrices only, not on embeddings and norms.
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if p.dim() == 2 and not name.startswith(("tok.", "pos.")) else no_decay).append(p)
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.lr, betas=(0.9, 0.95),
    )

    def evaluate() -> float:
        model.eval()
        with torch.no_grad():
            loss = sum(model(x, y).item() for x, y in val_batches) / len(val_batches)
        model.train()
        return loss

    # With --shift-census: every UE5M3-FP4 operand quantized in training, per GEMM operand role,
    # counted by the rows (and 128-row tiles) whose block scales one power of two per row turns
    # into UE4M3 codes exactly (QuantizedTensor.ue4m3_shift_census).
    census: dict[str, dict[str, int]] = {}

    def count_shifts(role: str, q: bs.QuantizedTensor) -> None:
        if model.training and q.format == "ue5m3_fp4":
            totals = census.setdefault(role, dict.fromkeys(
                ("operands", "rows", "fitting_rows", "tiles", "fitting_tiles"), 0))
            totals["operands"] += 1
            for key, value in q.ue4m3_shift_census().items():
                totals[key] += value

    if cfg.shift_census:
        for quantizers in bst.quantizers_of(model):
            quantizers.observe(count_shifts)

    rows: list[tuple[int, float, Optional[float]]] = []
    # Wall time, and this process's CPU time, which other load on the machine does not inflate.
    start, start_cpu = time.perf_counter(), time.process_time()
    for step in range(cfg.steps):
        for group in opt.param_groups:
            group["lr"] = learning_rate(step, cfg)
        x, y = (t.to(device) for t in batch(train_data, window_starts(data_rng, train_data, cfg),
                                            m.context))
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        done = step + 1
        val = evaluate() if done % cfg.eval_every == 0 or done == cfg.steps else None
        rows.append((done, loss.item(), val))
        if val is not None:
            print(f"[{recipe_name} seed {seed}] step {done:4d}  train {loss.item():.4f}  "
                  f"val {val:.4f}  {time.perf_counter() - start:6.1f} s", flush=True)
    wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu

    policies = model.policies()
    return {
        "recipe": recipe_name,
        "seed": seed,
        "rows": rows,
        "wall_s": wall,
        "cpu_s": cpu,
        "amax_measurements": sum(p.amax_measurements for p in policies),
        "quantize_calls": sum(p.calls for p in policies),
        "params": sum(p.numel() for p in model.parameters()),
        "shift_census": census,
    }


# --------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------

COLORS = {
    "high_precision": "#222222", "nvfp4": "#76b900", "ue5m3_fp4": "#1f77b4", "mxfp4": "#d62728",
}


def nice_ticks(lo: float, hi: float, count: int = 6) -> list[float]:
    """Round tick values covering [lo, hi], about `count` of them."""
    raw = (hi - lo) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = min((m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw))
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def write_svg(path: pathlib.Path, curves: dict[str, list[tuple[int, float]]], title: str) -> None:
    """A line chart of the curves (step, mean validation loss), drawn as plain SVG.

    The y range starts after the first fifth of training so that the early, fast drop does not
    flatten the differences between recipes; lines are clipped to the plot area.
    """
    width, height = 760, 460
    left, right, top, bottom = 70, 190, 40, 60
    pw, ph = width - left - right, height - top - bottom
    max_step = max(s for c in curves.values() for s, _ in c)
    values = [v for c in curves.values() for s, v in c if s >= max_step / 5]
    y_lo, y_hi = min(values), max(values)
    pad = 0.05 * (y_hi - y_lo or 1.0)
    y_lo, y_hi = y_lo - pad, y_hi + pad

    def px(step: float) -> float:
        return left + pw * step / max_step

    def py(value: float) -> float:
        return top + ph * (y_hi - value) / (y_hi - y_lo)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<clipPath id="plot"><rect x="{left}" y="{top}" width="{pw}" height="{ph}"/></clipPath>',
        f'<text x="{left + pw / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>',
    ]
    for tick in nice_ticks(0, max_step):
        x = px(tick)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#eee"/>')
        out.append(f'<text x="{x:.1f}" y="{top + ph + 18}" text-anchor="middle">{tick:g}</text>')
    for tick in nice_ticks(y_lo, y_hi):
        y = py(tick)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">{tick:.3g}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" '
               f'fill="none" stroke="black"/>')
    out.append(f'<text x="{left + pw / 2}" y="{height - 18}" '
               f'text-anchor="middle">training step</text>')
    out.append(f'<text transform="translate(20 {top + ph / 2}) rotate(-90)" text-anchor="middle">'
               f'validation loss (nats/byte)</text>')
    for i, (name, curve) in enumerate(curves.items()):
        color = COLORS.get(name, "#888888")
        points = " ".join(f"{px(s):.1f},{py(v):.1f}" for s, v in curve)
        out.append(f'<polyline points="{points}" fill="none" stroke="{color}" '
                   f'stroke-width="2" clip-path="url(#plot)"/>')
        ly = top + 14 + 20 * i  # legend entry
        out.append(f'<line x1="{left + pw + 15}" y1="{ly}" x2="{left + pw + 40}" y2="{ly}" '
                   f'stroke="{color}" stroke-width="2"/>')
        out.append(f'<text x="{left + pw + 46}" y="{ly + 4}">{name}</text>')
    out.append("</svg>")
    path.write_text("\n".join(out) + "\n")


def mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def summarize(results: list[dict], recipes: list[str], total_wall: float, cfg: TrainConfig) -> str:
    """The results table: final validation loss, gap to high precision, amax passes, wall time."""
    runs = {r: [res for res in results if res["recipe"] == r] for r in recipes}
    final = {r: {res["seed"]: res["rows"][-1][2] for res in runs[r]} for r in recipes}
    base = final.get("high_precision")
    params = results[0]["params"]
    lines = [
        f"tiny_lm: {cfg.model.layers} layers, d_model {cfg.model.d_model}, "
        f"{cfg.model.heads} heads, "
        f"context {cfg.model.context}, {params / 1e6:.2f} M parameters; {cfg.steps} steps of batch "
        f"{cfg.batch_size}; validation on {cfg.eval_batches} fixed batches; "
        f"UE5M3 tensor-scale interval {cfg.ue5m3_interval}",
        "",
        f"{'recipe':<16}{'final val loss':>20}{'gap':>10}{'gap %':>9}{'amax passes':>13}"
        f"{'quantize calls':>16}{'wall s/run':>12}{'CPU s/run':>11}{'ms/step':>9}{'× HP':>7}",
    ]
    base_wall = (statistics.fmean(res["wall_s"] for res in runs["high_precision"])
                 if runs.get("high_precision") else None)
    for r in recipes:
        mean, std = mean_std(list(final[r].values()))
        gap = gap_pct = "-"
        if base is not None and r != "high_precision":
            b = statistics.fmean(base.values())
            gap, gap_pct = f"{mean - b:+.4f}", f"{100 * (mean - b) / b:+.2f}"
        amax = statistics.fmean(res["amax_measurements"] for res in runs[r])
        calls = statistics.fmean(res["quantize_calls"] for res in runs[r])
        wall = statistics.fmean(res["wall_s"] for res in runs[r])
        cpu = statistics.fmean(res["cpu_s"] for res in runs[r])
        ratio = f"{wall / base_wall:.2f}" if base_wall else "-"
        lines.append(f"{r:<16}{f'{mean:.4f} ± {std:.4f}':>20}{gap:>10}{gap_pct:>9}{amax:>13.0f}"
                     f"{calls:>16.0f}{wall:>12.1f}{cpu:>11.1f}{1000 * wall / cfg.steps:>9.1f}"
                     f"{ratio:>7}")
    lines += ["", "final validation loss per seed (gap to high precision with the same seed):"]
    for r in recipes:
        cells = []
        for seed, v in sorted(final[r].items()):
            cell = f"seed {seed}: {v:.4f}"
            if base is not None and seed in base and r != "high_precision":
                cell += f" ({100 * (v - base[seed]) / base[seed]:+.2f}%)"
            cells.append(cell)
        lines.append(f"  {r:<16}" + ", ".join(cells))
    censuses = [res for res in results if res.get("shift_census")]
    if censuses:
        lines += ["", "UE5M3-FP4 operands whose block scales shift onto UE4M3 exactly (one power "
                      "of two per row), summed over the runs' training steps:",
                  f"  {'recipe':<16}{'role':<10}{'operands':>10}{'rows %':>10}{'tiles %':>10}"]
        for r in recipes:
            roles: dict[str, dict[str, int]] = {}
            for res in censuses:
                if res["recipe"] == r:
                    for role, t in res["shift_census"].items():
                        into = roles.setdefault(role, dict.fromkeys(t, 0))
                        for key, value in t.items():
                            into[key] += value
            for role, t in sorted(roles.items()):
                lines.append(f"  {r:<16}{role:<10}{t['operands']:>10}"
                             f"{100 * t['fitting_rows'] / max(t['rows'], 1):>10.3f}"
                             f"{100 * t['fitting_tiles'] / max(t['tiles'], 1):>10.3f}")
    lines += ["",
              "amax passes and quantize calls: per run, summed over all training policies; "
              "ms/step and × HP: the wall time of a training step (with its validations) and its "
              f"ratio to high precision's, on {cfg.device} (gemm={cfg.gemm})",
              f"total wall time: {total_wall:.1f} s"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recipes", nargs="+", default=list(make_recipes(50)),
                        choices=list(make_recipes(50)), help="recipes to train (default: all)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3],
                        help="seeds (default: 1 2 3)")
    parser.add_argument("--steps", type=int, default=450, help="training steps per run")
    parser.add_argument("--batch-size", type=int, default=16, help="sequences per batch")
    parser.add_argument("--lr", type=float, default=2e-3, help="peak learning rate (AdamW)")
    parser.add_argument("--eval-every", type=int, default=25, help="steps between validations")
    parser.add_argument("--eval-batches", type=int, default=8, help="fixed validation batches")
    parser.add_argument("--max-bytes", type=int, default=4_000_000, help="corpus size in bytes")
    parser.add_argument("--ue5m3-interval", type=int, default=50,
                        help="calls between UE5M3 tensor-scale refreshes")
    parser.add_argument("--d-model", type=int, default=192)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--jobs", type=int, default=2,
                        help="parallel training processes (one thread each; 1 on a GPU)")
    parser.add_argument("--device", default="cpu",
                        help="cpu, or cuda: the operands quantized by the device kernels, the "
                             "GEMMs as --gemm says (needs the CUDA extension)")
    parser.add_argument("--gemm", default="auto", choices=list(bst.GEMMS),
                        help="the quantized GEMMs: auto (on cuda the device GEMM where it takes "
                             "the operands, else torch's float32 matmul on the dequantized "
                             "operands; on cpu always the latter), matmul, or device")
    parser.add_argument("--shift-census", action="store_true",
                        help="count, per GEMM operand, the UE5M3-FP4 rows and 128-row tiles whose "
                             "block scales shift onto UE4M3 exactly (written to census.csv)")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("tiny_lm_out"),
                        help="output folder")
    args = parser.parse_args()

    cfg = TrainConfig(
        steps=args.steps, batch_size=args.batch_size, lr=args.lr, eval_every=args.eval_every,
        eval_batches=args.eval_batches, max_bytes=args.max_bytes,
        ue5m3_interval=args.ue5m3_interval,
        model=ModelConfig(context=args.context, d_model=args.d_model, heads=args.heads,
                          layers=args.layers),
        device=args.device,
        gemm=args.gemm,
        shift_census=args.shift_census,
    )
    if args.device != "cpu":
        args.jobs = 1  # one process drives the GPU
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = [(r, s, cfg) for s in args.seeds for r in args.recipes]

    start = time.perf_counter()
    if args.jobs == 1:
        results = [train_one(job) for job in jobs]
    else:
        # spawn: each worker starts a clean interpreter with its own single-threaded torch.
        with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
            results = list(pool.imap_unordered(train_one, jobs))
    total_wall = time.perf_counter() - start
    results.sort(key=lambda res: (args.recipes.index(res["recipe"]), res["seed"]))

    with open(args.out / "metrics.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["recipe", "seed", "step", "train_loss", "val_loss"])
        for res in results:
            for step, train_loss, val_loss in res["rows"]:
                w.writerow([res["recipe"], res["seed"], step, f"{train_loss:.6f}",
                            "" if val_loss is None else f"{val_loss:.6f}"])
    with open(args.out / "runs.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["recipe", "seed", "final_val_loss", "wall_s", "cpu_s", "amax_measurements",
                    "quantize_calls"])
        for res in results:
            w.writerow([res["recipe"], res["seed"], f"{res['rows'][-1][2]:.6f}",
                        f"{res['wall_s']:.1f}", f"{res['cpu_s']:.1f}", res["amax_measurements"],
                        res["quantize_calls"]])

    if args.shift_census:
        with open(args.out / "census.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["recipe", "seed", "role", "operands", "rows", "fitting_rows", "tiles",
                        "fitting_tiles"])
            for res in results:
                for role, t in sorted(res["shift_census"].items()):
                    w.writerow([res["recipe"], res["seed"], role, t["operands"], t["rows"],
                                t["fitting_rows"], t["tiles"], t["fitting_tiles"]])

    curves = {}
    for r in args.recipes:
        by_step: dict[int, list[float]] = {}
        for res in results:
            if res["recipe"] == r:
                for step, _, val_loss in res["rows"]:
                    if val_loss is not None:
                        by_step.setdefault(step, []).append(val_loss)
        curves[r] = [(s, statistics.fmean(v)) for s, v in sorted(by_step.items())]
    write_svg(args.out / "val_loss.svg", curves,
              f"tiny byte-level LM: mean validation loss over {len(args.seeds)} seed(s)")

    summary = summarize(results, args.recipes, total_wall, cfg)
    (args.out / "summary.txt").write_text(summary + "\n")
    print()
    print(summary)


if __name__ == "__main__":
    main()
