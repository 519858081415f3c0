"""blockscale-convert's compressed-tensors checkpoints read back by compressed-tensors itself.

The test writes small Llama-like checkpoints (config.json, three safetensors shards and an index;
float32, bfloat16 and float16 weights; q/k/v/o, gate/up/down, embeddings, norms, lm_head, a Linear
whose K is not a multiple of 16, an all-zero weight, outliers, -0.0 entries, zero and tiny blocks),
runs $BLOCKSCALE_CONVERT on them, and dequantizes the output with compressed-tensors' own
model-free path (entrypoints.convert: convert_checkpoint with CompressedTensorsDequantizer, which
validates config.json's quantization_config, follows the index and calls NVFP4PackedCompressor's
decompress). Checks:
  (i)   every quantized module decompresses, bit for bit, to bf16(q * (S / G)) computed in float32
        numpy from our bytes (the decompressor works in float32 and returns bfloat16);
  (ii)  fused groups (q/k/v, gate/up) share one global scale, 2688 / the group's amax as
        compressed-tensors computes it;
  (iii) copied tensors and other files are byte-identical to the input; quantization_config.ignore
        names exactly the Linear-like weights that were left unquantized;
  (iv)  blockscale.quantize(w, "nvfp4", encode_scale=G) with G read from the file gives the file's
        element and scale codes bit for bit; where compressed-tensors' q * (S / G) and blockscale's
        (q * S) * s_dec differ after rounding to bfloat16, they are neighbours (1 ulp).
Skipped when BLOCKSCALE_CONVERT (the path of blockscale-convert) is not set. With
BLOCKSCALE_PEERS_SUMMARY=path.json the counts are added to that file (as test_peers_torch.py does).
"""

from __future__ import annotations

import json
import os
import struct
import subprocess

import numpy as np
import pytest

pytestmark = pytest.mark.peers

torch = pytest.importorskip("torch")
ml_dtypes = pytest.importorskip("ml_dtypes")
blockscale = pytest.importorskip("blockscale")
pytest.importorskip("compressed_tensors")

F32 = np.float32
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], F32)
DTYPES = {"float32": ("F32", np.float32), "bfloat16": ("BF16", ml_dtypes.bfloat16),
          "float16": ("F16", np.float16)}
RAW_DTYPES = {"F32": np.float32, "BF16": ml_dtypes.bfloat16, "F16": np.float16, "U8": np.uint8,
              "F8_E4M3": np.uint8, "I64": np.int64}
FUSED = [("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj")]
HIDDEN, INTERMEDIATE, KV, VOCAB, LAYERS = 64, 160, 32, 96, 2
ODD = "model.layers.1.mlp.odd_proj"  # a Linear whose K (72) is not a multiple of 16
ZERO = "model.layers.1.self_attn.o_proj"  # all zeros: amax 0, global scale 1


# ---- safetensors, raw -------------------------------------------------------------------------

def write_safetensors(path, tensors: dict) -> None:
    """tensors: name -> (dtype string, numpy array)."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, array) in tensors.items():
        raw = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path) -> dict:
    """name -> (dtype string, shape, raw bytes)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    return {name: (info["dtype"], info["shape"], data[slice(*info["data_offsets"])])
            for name, info in header.items()}


def read_folder(folder) -> dict:
    out = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".safetensors"):
            for tensor, value in read_safetensors(os.path.join(folder, name)).items():
                assert tensor not in out, f"{tensor} in two shards of {folder}"
                out[tensor] = value + (name,)
    return out


def as_array(entry) -> np.ndarray:
    dtype, shape, raw = entry[:3]
    return np.frombuffer(raw, RAW_DTYPES[dtype]).reshape(shape)


# ---- the input checkpoint ---------------------------------------------------------------------

def make_weights(seed: int = 20261204) -> dict:
    """float32 weights of a 2-layer Llama-like model, with the cases worth testing."""
    rng = np.random.default_rng(seed)

    def normal(rows, cols, std=0.05):
        return (rng.standard_normal((rows, cols)) * std).astype(F32)

    w = {"model.embed_tokens.weight": normal(VOCAB, HIDDEN, 1.0),
         "model.norm.weight": (1 + normal(1, HIDDEN, 0.1))[0],
         "lm_head.weight": normal(VOCAB, HIDDEN)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = (1 + normal(1, HIDDEN, 0.1))[0]
        w[p + "post_attention_layernorm.weight"] = (1 + normal(1, HIDDEN, 0.1))[0]
        w[p + "self_attn.q_proj.weight"] = normal(HIDDEN, HIDDEN)
        w[p + "self_attn.k_proj.weight"] = normal(KV, HIDDEN, 0.08)
        w[p + "self_attn.v_proj.weight"] = normal(KV, HIDDEN, 0.02)
        w[p + "self_attn.o_proj.weight"] = normal(HIDDEN, HIDDEN)
        w[p + "mlp.gate_proj.weight"] = normal(INTERMEDIATE, HIDDEN)
        w[p + "mlp.up_proj.weight"] = normal(INTERMEDIATE, HIDDEN, 0.03)
        w[p + "mlp.down_proj.weight"] = normal(HIDDEN, INTERMEDIATE)
    up = w["model.layers.0.mlp.up_proj.weight"]  # outliers: one dominates the gate/up group
    up[rng.random(up.shape) < 0.003] *= 300
    up[3, 17] = 40.0
    down = w["model.layers.0.mlp.down_proj.weight"]
    down[rng.random(down.shape) < 0.05] = -0.0  # signed zeros
    down[:4, :32] = 0  # zero blocks
    down[4:8, :] *= np.repeat(np.exp2(rng.uniform(-30, 0, (4, INTERMEDIATE // 16))), 16, axis=1)
    w[ZERO + ".weight"] = np.zeros((HIDDEN, HIDDEN), F32)
    w[ODD + ".weight"] = normal(48, 72)
    return w


def shard_of(name: str) -> str:
    """Three shards; layer 1's q_proj sits apart from its k/v siblings."""
    if name.startswith("model.layers.0.") or name == "model.layers.1.self_attn.q_proj.weight":
        return "model-00001-of-00003.safetensors"
    if name.startswith("model.layers.1."):
        return "model-00002-of-00003.safetensors"
    return "model-00003-of-00003.safetensors"


def write_checkpoint(folder, dtype: str) -> dict:
    os.makedirs(folder)
    code, np_dtype = DTYPES[dtype]
    weights = {k: v.astype(np_dtype) for k, v in make_weights().items()}
    shards: dict = {}
    for name, array in weights.items():
        shards.setdefault(shard_of(name), {})[name] = (code, array)
    for shard, tensors in shards.items():
        write_safetensors(os.path.join(folder, shard), tensors)
    index = {"metadata": {"total_size": sum(a.nbytes for a in weights.values())},
             "weight_map": {name: shard_of(name) for name in sorted(weights)}}
    files = {
        "model.safetensors.index.json": json.dumps(index, indent=2),
        "config.json": json.dumps({
            "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": HIDDEN,
            "intermediate_size": INTERMEDIATE, "num_hidden_layers": LAYERS,
            "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": VOCAB,
            "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "torch_dtype": dtype}, indent=2),
        "generation_config.json": json.dumps({"bos_token_id": 1, "eos_token_id": 2}),
        "tokenizer.json": json.dumps({"version": "1.0", "model": {"type": "BPE", "vocab": {}}}),
    }
    for name, text in files.items():
        with open(os.path.join(folder, name), "w") as f:
            f.write(text)
    return weights


# ---- expectations from the contract ------------------------------------------------------------

def expected_quantized(weights: dict) -> set:
    return {name[: -len(".weight")] for name, a in weights.items()
            if a.ndim == 2 and name != "lm_head.weight" and "embed" not in name
            and a.shape[1] % 16 == 0}


def linear_like(weights: dict) -> set:
    return {name[: -len(".weight")] for name, a in weights.items()
            if a.ndim == 2 and "embed" not in name and "norm" not in name}


def fused_groups(modules: set) -> list:
    groups = []
    for m in sorted(modules):
        parent, _, leaf = m.rpartition(".")
        for group in FUSED:
            if leaf == group[0] and all(f"{parent}.{s}" in modules for s in group):
                groups.append([f"{parent}.{s}" for s in group])
    return groups


def ct_global_scale(amax: np.float32) -> np.float32:
    """compressed-tensors' 448 * 6 / amax as torch computes it: fp32(1/amax) * 2688, 1 if not
    finite."""
    with np.errstate(divide="ignore", over="ignore"):
        g = (F32(1) / F32(amax)) * F32(2688)
    return g if np.isfinite(g) else F32(1)


def e4m3_value(codes: np.ndarray) -> np.ndarray:
    return codes.view(ml_dtypes.float8_e4m3fn).astype(F32)


def unpack(packed: np.ndarray) -> np.ndarray:
    out = np.empty((packed.shape[0], packed.shape[1] * 2), np.uint8)
    out[:, 0::2] = packed & 0x0F
    out[:, 1::2] = packed >> 4
    return out


# ---- the fixture: input, our output, compressed-tensors' dequantization of it ------------------

class Converted:
    pass


@pytest.fixture(scope="module", params=list(DTYPES))
def converted(request, tmp_path_factory):
    convert = os.environ.get("BLOCKSCALE_CONVERT")
    if not convert:
        pytest.skip("BLOCKSCALE_CONVERT is not set (the path of the blockscale-convert binary)")
    if not os.access(convert, os.X_OK):
        pytest.fail(f"BLOCKSCALE_CONVERT={convert} is not an executable file")
    from compressed_tensors.entrypoints.convert import (
        CompressedTensorsDequantizer,
        convert_checkpoint,
    )

    base = tmp_path_factory.mktemp(f"ckpt-{request.param}")
    c = Converted()
    c.dtype = request.param
    c.input_dir, c.output_dir, c.dequant_dir = base / "input", base / "nvfp4", base / "dequant"
    c.weights = write_checkpoint(c.input_dir, request.param)
    done = subprocess.run([convert, str(c.input_dir), str(c.output_dir)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, f"blockscale-convert failed:\n{done.stdout}\n{done.stderr}"
    c.input = read_folder(c.input_dir)
    c.output = read_folder(c.output_dir)
    with open(c.output_dir / "config.json") as f:
        c.config = json.load(f)
    # compressed-tensors' own model-free path: parses quantization_config, follows the index,
    # decompresses every targeted module (NVFP4PackedCompressor.decompress) into bfloat16
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    dequantizer = CompressedTensorsDequantizer(str(c.output_dir), dtype=torch.bfloat16)
    convert_checkpoint(str(c.output_dir), str(c.dequant_dir), dequantizer, max_workers=1,
                       device="cpu")
    c.dequant = read_folder(c.dequant_dir)
    c.modules = sorted(expected_quantized(c.weights))
    return c


def our_tensors(c, m):
    packed = as_array(c.output[m + ".weight_packed"])
    scales = as_array(c.output[m + ".weight_scale"])
    g = as_array(c.output[m + ".weight_global_scale"]).view(F32)[0]
    return packed, scales, g


# ---- the checks ---------------------------------------------------------------------------------

def test_layout_and_config(converted):
    c = converted
    quantized = {n[: -len(".weight_packed")] for n in c.output if n.endswith(".weight_packed")}
    assert quantized == set(c.modules)
    for m in c.modules:
        rows, cols = c.weights[m + ".weight"].shape
        assert m + ".weight" not in c.output
        assert c.output[m + ".weight_packed"][:2] == ("U8", [rows, cols // 2])
        assert c.output[m + ".weight_scale"][:2] == ("F8_E4M3", [rows, cols // 16])
        assert c.output[m + ".weight_global_scale"][:2] == ("F32", [1])
    # the index names every tensor and the shard that holds it
    with open(c.output_dir / "model.safetensors.index.json") as f:
        weight_map = json.load(f)["weight_map"]
    assert weight_map == {name: entry[3] for name, entry in c.output.items()}
    q = c.config["quantization_config"]
    assert q["quant_method"] == "compressed-tensors"
    assert q["format"] == "nvfp4-pack-quantized"
    group = q["config_groups"]["group_0"]
    weights = group["weights"]
    assert (weights["num_bits"], weights["type"], weights["strategy"], weights["group_size"]) == (
        4, "float", "tensor_group", 16)
    assert "float8_e4m3fn" in str(weights["scale_dtype"])
    assert group.get("input_activations") is None
    # ignore: exactly the Linear-like weights left unquantized (lm_head, K % 16 != 0)
    assert sorted(q["ignore"]) == sorted(linear_like(c.weights) - set(c.modules))
    assert ODD in q["ignore"] and "lm_head" in q["ignore"]
    # config.json: the input's, plus quantization_config
    with open(c.input_dir / "config.json") as f:
        original = json.load(f)
    assert {k: v for k, v in c.config.items() if k != "quantization_config"} == original


def test_decompressor_bit_exact(converted):
    """(i) compressed-tensors' decompression of every module is bf16(q * (S / G)) in float32."""
    c = converted
    for m in c.modules:
        packed, scales, g = our_tensors(c, m)
        values = E2M1[unpack(packed)]
        with np.errstate(under="ignore"):
            expected = (values * np.repeat(e4m3_value(scales) / g, 16, axis=1))
        expected = expected.astype(ml_dtypes.bfloat16).view(np.uint16)
        dtype, shape, raw = c.dequant[m + ".weight"][:3]
        assert (dtype, shape) == ("BF16", list(values.shape)), m
        got = np.frombuffer(raw, np.uint16).reshape(shape)
        np.testing.assert_array_equal(got, expected, err_msg=m)
    # its decompression of the all-zero weight is zero
    assert not np.any(np.frombuffer(c.dequant[ZERO + ".weight"][2], np.uint16) & 0x7FFF)


def test_global_scales_and_fused_groups(converted):
    """(ii) G = fp32(1/amax) * 2688 over the module, or over its fused group, shared by the
    group."""
    c = converted
    amax = {m: F32(np.abs(c.weights[m + ".weight"].astype(F32)).max()) for m in c.modules}
    groups = fused_groups(set(c.modules))
    assert len(groups) == 2 * LAYERS
    group_of = {m: grp for grp in groups for m in grp}
    for m in c.modules:
        g = our_tensors(c, m)[2]
        grp = group_of.get(m, [m])
        assert g == ct_global_scale(max(amax[s] for s in grp)), m
        assert {c.output[s + ".weight_global_scale"][2] for s in grp} == {
            c.output[m + ".weight_global_scale"][2]}
    assert our_tensors(c, ZERO)[2] == F32(1)
    # the outlier in layer 0's up_proj sets gate_proj's scale too
    gate = our_tensors(c, "model.layers.0.mlp.gate_proj")[2]
    assert gate == ct_global_scale(amax["model.layers.0.mlp.up_proj"])
    assert gate != ct_global_scale(amax["model.layers.0.mlp.gate_proj"])


def test_copied_tensors_and_files(converted):
    """(iii) everything not quantized is the input, byte for byte."""
    c = converted
    quantized = {m + ".weight" for m in c.modules}
    produced = {m + s for m in c.modules for s in (".weight_packed", ".weight_scale",
                                                   ".weight_global_scale")}
    assert set(c.output) == (set(c.input) - quantized) | produced
    for name in set(c.input) - quantized:
        assert c.output[name][:3] == c.input[name][:3], name
        # compressed-tensors' dequantizer passes them through unchanged as well
        assert c.dequant[name][:3] == c.input[name][:3], name
    for name in ("generation_config.json", "tokenizer.json"):
        assert (c.output_dir / name).read_bytes() == (c.input_dir / name).read_bytes()


def test_agrees_with_blockscale(converted):
    """(iv) blockscale.quantize with the file's G gives the file's codes; dequantized values
    agree with compressed-tensors' up to neighbouring bfloat16 values."""
    c = converted
    total = differ = f32_differ = 0
    for m in c.modules:
        packed, scales, g = our_tensors(c, m)
        q = blockscale.quantize(c.weights[m + ".weight"], "nvfp4", encode_scale=float(g))
        np.testing.assert_array_equal(q.elements, packed, err_msg=f"{m}: elements")
        np.testing.assert_array_equal(q.scales, scales, err_msg=f"{m}: scales")
        theirs = np.frombuffer(c.dequant[m + ".weight"][2], np.uint16).reshape(q.shape)
        ours = q.dequantize("bfloat16").view(np.uint16)
        values = E2M1[unpack(packed)]
        S = np.repeat(e4m3_value(scales), 16, axis=1)
        with np.errstate(under="ignore"):
            f32_theirs = values * (S / g)
            f32_ours = (values * S) * F32(q.decode_scale)
        np.testing.assert_array_equal(
            ours, f32_ours.astype(ml_dtypes.bfloat16).view(np.uint16), err_msg=m)
        mask = theirs != ours
        # they differ only where the float32 products differ, and then by one bfloat16 ulp
        assert np.all(f32_theirs[mask] != f32_ours[mask]), m
        gap = np.abs(theirs.astype(np.int64) - ours.astype(np.int64))
        assert np.all(gap[mask] == 1), m
        total += mask.size
        differ += int(mask.sum())
        f32_differ += int((f32_theirs != f32_ours).sum())
    counts = {"values": total, "f32_diffs": f32_differ, "bf16_diffs_1ulp": differ}
    print(f"[peers checkpoints] {c.dtype}: (q * S) * s_dec against q * (S / G): {counts}")
    path = os.environ.get("BLOCKSCALE_PEERS_SUMMARY")
    if path:
        old = {}
        if os.path.exists(path):
            with open(path) as f:
                old = json.load(f)
        old[f"checkpoints_decompress/{c.dtype}"] = counts
        with open(path, "w") as f:
            json.dump(old, f, indent=1, sort_keys=True)
