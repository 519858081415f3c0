"""MMA-Sim as a peer of the emulated tensor-core MMAs (include/blockscale/emulation/ptx.hpp).

MMA-Sim (PyPI `mmasim`, arXiv 2511.10909) models the arithmetic of NVIDIA's tensor cores per
instruction and architecture, verified against the GPUs by differential testing. For every
emulated instruction and hardware model (mma.sync m16n8k16 BF16 on sm_80, sm_90, sm_100 and
sm_120; the block-scaled m16n8k64 kind::mxf4nvf4 with UE4M3 and UE8M0 scales on sm_120a) and every
input mix, $BLOCKSCALE_MMA_CASES (tests/peers/mma_cases.cpp) writes random cases run through the
emulation, fragments in and out; MMA-Sim recomputes each output from the same matrices and the two
must agree bit for bit (NaN as NaN). The emulation's `exact` model is checked against the same
peer's exact-once model for the BF16 MMA (MMA-Sim's `e_fdpa` is its exactly rounded reference),
and the sm90 model against MMA-Sim's Hopper warpgroup MMA (wgmma BF16), whose dot-add it is too.

Case counts: BLOCKSCALE_MMA_PEER_CASES per (instruction, architecture, mix), 1,000 by default
(the CI share, under a minute); scripts/mma_peers.sh runs the 10,000-case sweep. With
BLOCKSCALE_PEERS_SUMMARY=path.json the table is added to that file.
"""

import json
import os
import subprocess
import tempfile

import numpy as np
import pytest

pytestmark = pytest.mark.peers

if os.environ.get("BLOCKSCALE_MMA_CASES"):
    # Run by ctest in the peers' environment, which has both: a failed import must fail, not skip.
    import mmasim.nv_ptx as mmasim_ptx
    import torch
else:
    torch = pytest.importorskip("torch")
    mmasim_ptx = pytest.importorskip("mmasim.nv_ptx")

MIXES = ["random", "random_acc", "wide", "cancel", "subnormal", "specials", "zeros", "integers"]
ARCHITECTURES = {"sm80": "Ampere", "sm90": "Hopper", "sm100": "Blackwell", "sm120": "RTX Blackwell"}
INSTRUCTIONS = {
    "bf16": "m16n8k16.f32.bf16.bf16.f32",
    "nvfp4": "m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3",
    "mxfp4": "m16n8k64.kind::mxf4nvf4.block32.f32.e2m1.e2m1.f32.ue8m0",
}
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float16)

CASES = int(os.environ.get("BLOCKSCALE_MMA_PEER_CASES", "1000"))
RESULTS = {}


def _cases_binary():
    path = os.environ.get("BLOCKSCALE_MMA_CASES")
    if not path:
        pytest.skip("BLOCKSCALE_MMA_CASES is not set (the path of blockscale_mma_cases)")
    if not os.access(path, os.X_OK):
        pytest.fail(f"BLOCKSCALE_MMA_CASES={path} is not an executable file")
    return path


def _generate(instruction, model, mix, cases, seed):
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "cases.bin")
        subprocess.run(
            [_cases_binary(), instruction, model, mix, str(cases), str(seed), out], check=True
        )
        data = np.fromfile(out, np.uint8)
    return data


def _read(data, instruction, cases):
    """The records of blockscale_mma_cases as arrays (see its file comment)."""
    k, element = (16, np.uint16) if instruction == "bf16" else (64, np.uint8)
    scales = {"bf16": 0, "nvfp4": 4, "mxfp4": 2}[instruction]
    fields = [("a", element, (16, k)), ("b", element, (8, k))]
    if scales:
        fields += [("sa", np.uint8, (16, scales)), ("sb", np.uint8, (8, scales))]
    fields += [("c", np.uint32, (16, 8)), ("d", np.uint32, (16, 8))]
    record = np.dtype([(name, dtype, shape) for name, dtype, shape in fields])
    assert data.size == cases * record.itemsize, "the case file has an unexpected size"
    return data.view(record)


def _peer_outputs(instruction, arch, r):
    """MMA-Sim's D for every case: [cases, 16, 8] float32 bits."""
    n_cases = r.shape[0]
    c = torch.from_numpy(r["c"].copy()).view(torch.float32)
    if instruction == "bf16":
        a = torch.from_numpy(r["a"].astype(np.int16)).view(torch.bfloat16)
        b = torch.from_numpy(r["b"].astype(np.int16)).view(torch.bfloat16)
        op = mmasim_ptx.MMA(arch, INSTRUCTIONS[instruction])
        args = ()
    else:
        a = torch.from_numpy(E2M1[r["a"] & 15])
        b = torch.from_numpy(E2M1[r["b"] & 15])
        scale_type = torch.float8_e4m3fn if instruction == "nvfp4" else torch.float8_e8m0fnu
        sa = torch.from_numpy(r["sa"].copy()).view(scale_type)
        sb = torch.from_numpy(r["sb"].copy()).view(scale_type)
        op = mmasim_ptx.MMABlockScale(arch, INSTRUCTIONS[instruction])
        # every (m, n) pairs row m's scales with column n's
        args = (
            sa[:, :, None, :].expand(-1, -1, 8, -1).reshape(n_cases * 128, -1),
            sb[:, None, :, :].expand(-1, 16, -1, -1).reshape(n_cases * 128, -1),
        )
    k = a.shape[-1]
    av = a[:, :, None, :].expand(-1, -1, 8, -1).reshape(n_cases * 128, k)
    bv = b[:, None, :, :].expand(-1, 16, -1, -1).reshape(n_cases * 128, k)
    d = op.dpa(av, bv, c.reshape(-1), *args)
    return d.reshape(n_cases, 16, 8).view(torch.int32).numpy().view(np.uint32)


def _bf16_dpa(r, dpa):
    """A peer's D for every BF16 case, from its dot-add `dpa(a rows, b rows, c)` applied to each
    output's row of A, column of B and C: [cases, 16, 8] float32 bits."""
    n_cases = r.shape[0]
    a = torch.from_numpy(r["a"].astype(np.int16)).view(torch.bfloat16)
    b = torch.from_numpy(r["b"].astype(np.int16)).view(torch.bfloat16)
    c = torch.from_numpy(r["c"].copy()).view(torch.float32)
    av = a[:, :, None, :].expand(-1, -1, 8, -1).reshape(n_cases * 128, 16)
    bv = b[:, None, :, :].expand(-1, 16, -1, -1).reshape(n_cases * 128, 16)
    d = dpa(av, bv, c.reshape(-1))
    return d.reshape(n_cases, 16, 8).view(torch.int32).numpy().view(np.uint32)


def _exact_outputs(r):
    """MMA-Sim's exactly rounded BF16 dot-add (e_fdpa), the peer of the `exact` model."""
    from mmasim.arithmetic import fdpa

    return _bf16_dpa(r, fdpa.MMA_E_FDPA(L_max=16).dpa)


def _mismatches(ours, peer):
    """Outputs that differ in bits, NaN matching NaN whatever its payload."""
    nan_ours = (ours & 0x7F800000 == 0x7F800000) & (ours & 0x7FFFFF != 0)
    nan_peer = (peer & 0x7F800000 == 0x7F800000) & (peer & 0x7FFFFF != 0)
    return int(np.count_nonzero((ours != peer) & ~(nan_ours & nan_peer)))


def _first_difference(r, ours, peer):
    case, m, n = np.argwhere(ours != peer)[0]
    return (
        f"case {case}, (m, n) = ({m}, {n}): emulation {ours[case, m, n]:#010x}, "
        f"MMA-Sim {peer[case, m, n]:#010x}, C {r['c'][case, m, n]:#010x}"
    )


def _record(instruction, model, mix, outputs, mismatches):
    RESULTS.setdefault(f"{instruction} {model}", {})[mix] = {
        "cases": outputs // 128,
        "outputs": outputs,
        "mismatches": mismatches,
    }


BF16_CASES = [(model, mix) for model in ARCHITECTURES for mix in MIXES]


@pytest.mark.parametrize("model,mix", BF16_CASES)
def test_bf16_mma_equals_mmasim(model, mix):
    seed = 1 + MIXES.index(mix) + 16 * list(ARCHITECTURES).index(model)
    r = _read(_generate("bf16", model, mix, CASES, seed), "bf16", CASES)
    peer = _peer_outputs("bf16", ARCHITECTURES[model], r)
    bad = _mismatches(r["d"], peer)
    _record("bf16", model, mix, r["d"].size, bad)
    assert bad == 0, _first_difference(r, r["d"], peer)


@pytest.mark.parametrize("mix", MIXES)
def test_sm90_model_equals_mmasim_wgmma(mix):
    # Hopper's warpgroup MMA (wgmma m64nNk16 .f32.bf16.bf16, HGMMA) computes each output with the
    # same dot-add as mma.sync on Hopper in MMA-Sim's model: the sm90 model is the arithmetic an
    # HGMMA emulation uses. Each output depends on its row of A, its column of B and its C only,
    # so the m16n8k16 cases serve (N does not enter: m64n8k16 stands for every N).
    seed = 301 + MIXES.index(mix)
    r = _read(_generate("bf16", "sm90", mix, CASES, seed), "bf16", CASES)
    peer = _bf16_dpa(r, mmasim_ptx.WGMMA("Hopper", "m64n8k16.f32.bf16.bf16").dpa)
    bad = _mismatches(r["d"], peer)
    _record("wgmma bf16 (HGMMA)", "sm90", mix, r["d"].size, bad)
    assert bad == 0, _first_difference(r, r["d"], peer)


@pytest.mark.parametrize("instruction", ["nvfp4", "mxfp4"])
@pytest.mark.parametrize("mix", MIXES)
def test_block_scaled_mma_equals_mmasim(instruction, mix):
    seed = 101 + MIXES.index(mix) + 16 * (instruction == "mxfp4")
    r = _read(_generate(instruction, "sm120", mix, CASES, seed), instruction, CASES)
    peer = _peer_outputs(instruction, "RTX Blackwell", r)
    bad = _mismatches(r["d"], peer)
    _record(instruction, "sm120", mix, r["d"].size, bad)
    assert bad == 0, _first_difference(r, r["d"], peer)


@pytest.mark.parametrize("mix", ["random", "random_acc", "wide", "cancel", "subnormal", "integers"])
def test_exact_model_equals_mmasim_exact_reference(mix):
    # Finite inputs only: MMA-Sim's exact reference takes its specials from a float sum.
    cases = max(CASES // 4, 1)
    r = _read(_generate("bf16", "exact", mix, cases, 201 + MIXES.index(mix)), "bf16", cases)
    peer = _exact_outputs(r)
    # MMA-Sim's exact path keeps the sign of an exact zero sum as its float sum has it; ours is
    # IEEE's (+0 unless every addend is −0): compare zeros by value.
    zero = ((r["d"] & 0x7FFFFFFF) == 0) & ((peer & 0x7FFFFFFF) == 0)
    bad = _mismatches(np.where(zero, 0, r["d"]), np.where(zero, 0, peer))
    _record("bf16", "exact", mix, r["d"].size, bad)
    assert bad == 0, _first_difference(r, r["d"], peer)


def teardown_module(module):
    path = os.environ.get("BLOCKSCALE_PEERS_SUMMARY")
    if RESULTS:
        lines = ["instruction model | mix | cases | outputs | mismatches"]
        for key, mixes in RESULTS.items():
            for mix, row in mixes.items():
                lines.append(
                    f"{key} | {mix} | {row['cases']} | {row['outputs']} | {row['mismatches']}"
                )
        print("\n" + "\n".join(lines))
    if path and RESULTS:
        summary = {}
        if os.path.exists(path):
            with open(path) as f:
                summary = json.load(f)
        summary["mmasim"] = RESULTS
        with open(path, "w") as f:
            json.dump(summary, f, indent=1)
