"""Picks the extension module: `_core_avx512` (x86-64-v4: the library's AVX-512 bodies) where the
CPU has AVX-512 F/BW/VL/DQ/CD and the module was built, else `_core` (portable). Both compute the
same bits; BLOCKSCALE_SIMD=portable forces the portable one."""

from __future__ import annotations

import os


def _cpu_has_avx512() -> bool:
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:  # numpy 1.x
        try:
            from numpy.core._multiarray_umath import __cpu_features__ as features
        except ImportError:
            return False
    return all(features.get(f, False) for f in ("AVX512F", "AVX512BW", "AVX512VL", "AVX512DQ", "AVX512CD"))


simd = "portable"
if os.environ.get("BLOCKSCALE_SIMD", "auto") != "portable" and _cpu_has_avx512():
    try:
        from . import _core_avx512 as core

        simd = "avx512"
    except ImportError:
        pass
if simd == "portable":
    from . import _core as core  # noqa: F811

__all__ = ["core", "simd"]
