"""Writes a synthetic Llama-shaped BF16 checkpoint folder of about the size asked for, for timing
blockscale-convert and blockscale-inspect (bench/checkpoints/run.sh). numpy only; the safetensors
files are written by hand (8-byte header length, JSON header, data), one tensor at a time, so the
script needs little memory whatever the size.

    python3 bench/checkpoints/make_checkpoint.py OUT_DIR [--gigabytes 1.5] [--seed 0]

Weights are normal with a per-layer scale and a few outliers per matrix, stored as bfloat16 (the
top 16 bits of float32, rounded to nearest-even).
"""

import argparse
import json
import os
import struct

import numpy as np

HIDDEN, INTERMEDIATE, HEADS, KV_HEADS, VOCAB = 2048, 5632, 16, 4, 32000
HEAD_DIM = HIDDEN // HEADS


def bf16_bytes(x: np.ndarray) -> bytes:
    bits = x.astype(np.float32).view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # nearest-even (no NaN in the input)
    return rounded.astype("<u2").tobytes()


def layer_shapes(layer: int):
    p = f"model.layers.{layer}."
    kv = KV_HEADS * HEAD_DIM
    return [
        (p + "self_attn.q_proj.weight", (HIDDEN, HIDDEN)),
        (p + "self_attn.k_proj.weight", (kv, HIDDEN)),
        (p + "self_attn.v_proj.weight", (kv, HIDDEN)),
        (p + "self_attn.o_proj.weight", (HIDDEN, HIDDEN)),
        (p + "mlp.gate_proj.weight", (INTERMEDIATE, HIDDEN)),
        (p + "mlp.up_proj.weight", (INTERMEDIATE, HIDDEN)),
        (p + "mlp.down_proj.weight", (HIDDEN, INTERMEDIATE)),
        (p + "input_layernorm.weight", (HIDDEN,)),
        (p + "post_attention_layernorm.weight", (HIDDEN,)),
    ]


def write_shard(path: str, tensors, rng) -> int:
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in tensors:
        size = 2 * int(np.prod(shape))
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for name, shape in tensors:
            if len(shape) == 1:
                x = np.ones(shape, np.float32)
            else:
                x = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
                flat = x.reshape(-1)
                flat[rng.integers(0, flat.size, 16)] *= np.float32(30.0)  # outliers
            f.write(bf16_bytes(x))
    return offset


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--gigabytes", type=float, default=1.5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    per_layer = 2 * sum(int(np.prod(s)) for _, s in layer_shapes(0))
    edges = 2 * 2 * VOCAB * HIDDEN + 2 * HIDDEN
    layers = max(1, round((args.gigabytes * 1e9 - edges) / per_layer))
    os.makedirs(args.out, exist_ok=False)
    tensors = [("model.embed_tokens.weight", (VOCAB, HIDDEN))]
    for layer in range(layers):
        tensors += layer_shapes(layer)
    tensors += [("model.norm.weight", (HIDDEN,)), ("lm_head.weight", (VOCAB, HIDDEN))]
    shards, current, size = [], [], 0
    for t in tensors:  # about 500 MB per shard
        current.append(t)
        size += 2 * int(np.prod(t[1]))
        if size > 500e6:
            shards.append(current)
            current, size = [], 0
    if current:
        shards.append(current)
    weight_map, total = {}, 0
    for i, shard in enumerate(shards):
        name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        total += write_shard(os.path.join(args.out, name), shard, rng)
        weight_map.update({n: name for n, _ in shard})
    with open(os.path.join(args.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
              "hidden_size": HIDDEN, "intermediate_size": INTERMEDIATE,
              "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
              "num_hidden_layers": layers, "vocab_size": VOCAB, "torch_dtype": "bfloat16"}
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    print(f"{args.out}: {layers} layers, {len(shards)} shards, {total / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
