"""CUDA arrays: the device kernels through the CUDA extension (blockscale._cuda).

A torch CUDA tensor, a CuPy array or any DLPack producer on a CUDA device is read in place; the
kernels are queued on `stream` (default: torch's current stream on the tensor's device, or the
legacy default stream for other producers) and nothing waits for them. Results are torch CUDA
tensors (torch allocates them). The bits equal the CPU's for the same options, seed and offset.
"""

from __future__ import annotations

from typing import Any, Optional

from ._tensor import _is_torch as is_torch

_cuda = None
_cuda_error: Optional[BaseException] = None

INSTALL_HINT = ("reinstall blockscale with its CUDA extension: nvcc on PATH and, on a machine "
                "without a GPU, the target architecture named, e.g. "
                "BLOCKSCALE_CUDA_ARCHITECTURES=90 pip install ./python")


def cuda_module():
    """The CUDA extension, or a RuntimeError saying what to install."""
    global _cuda, _cuda_error
    if _cuda is None and _cuda_error is None:
        try:
            from . import _cuda as module

            _cuda = module
        except ImportError as e:  # the CPU-only build, or no CUDA driver
            _cuda_error = e
    if _cuda is None:
        raise RuntimeError(f"a CUDA array needs blockscale's CUDA extension, which this build lacks "
                           f"({_cuda_error}): {INSTALL_HINT}")
    return _cuda


def cuda_available() -> bool:
    """Whether the CUDA extension is built and sees a GPU."""
    try:
        return cuda_module().device_count() > 0
    except RuntimeError:
        return False


def _torch():
    import torch

    return torch




def is_device_array(x: Any) -> bool:
    """Whether x lives on a CUDA device (torch, CuPy, any DLPack producer)."""
    if is_torch(x):
        return x.device.type == "cuda"
    if hasattr(x, "__cuda_array_interface__"):
        return True
    device = getattr(x, "__dlpack_device__", None)
    if device is not None:
        try:
            return int(device()[0]) == 2  # kDLCUDA (what the extension takes)
        except Exception:  # noqa: BLE001 - a producer that cannot say is not a CUDA array
            return False
    return False


def stream_handle(x: Any, stream: Any) -> int:
    """The cudaStream_t to queue on, as an integer."""
    if stream is None:
        return device_stream(x.device, None) if is_torch(x) else 0
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    raise ValueError(f"stream must be a torch.cuda.Stream, a CuPy stream or a cudaStream_t as an "
                     f"integer, not {type(stream).__name__}")


def device_stream(device: Any, stream: Any) -> int:
    """The stream given, or torch's current stream on `device`, as an integer."""
    if stream is None:
        return int(_torch().cuda.current_stream(device).cuda_stream)
    return stream_handle(None, stream)


class on_device:
    """A context for the launches on x's device and, with `stream` (a handle), for the results'
    allocation on that stream: x's device becomes the current one (torch tensors), and a stream
    other than torch's current one becomes current, so that the results' memory and their
    zero-fills are queued on the stream the kernels run on, and torch's allocator keeps the memory
    for that stream."""

    def __init__(self, x: Any, stream: Optional[int] = None):
        torch = _torch()
        self.guards = []
        if is_torch(x):
            self.guards.append(torch.cuda.device(x.device))
            device = x.device
        else:
            device = torch.device("cuda", torch.cuda.current_device())
        if stream is not None and stream != int(torch.cuda.current_stream(device).cuda_stream):
            s = (torch.cuda.default_stream(device) if stream == 0
                 else torch.cuda.ExternalStream(stream, device=device))
            self.guards.append(torch.cuda.stream(s))

    def __enter__(self):
        for guard in self.guards:
            guard.__enter__()
        return self

    def __exit__(self, *exc):
        for guard in reversed(self.guards):
            guard.__exit__(*exc)
        return False


def device_input(x: Any, name: str = "x") -> tuple[Any, str]:
    """A 2-D CUDA input with contiguous rows and the element name the kernels take: float32 or
    bfloat16 (float16 becomes float32 on the device first, exactly: every float16 is a float32)."""
    if is_torch(x):
        torch = _torch()
        t = x.detach()
        if t.dtype == torch.float16:
            t = t.float()
        if t.dtype not in (torch.float32, torch.bfloat16):
            raise ValueError(f"{name} must be float32, float16 or bfloat16, not {t.dtype}")
        if t.dim() != 2:
            raise ValueError(f"{name} must be 2-D, not {t.dim()}-D (shape {tuple(t.shape)})")
        if t.shape[1] > 1 and t.stride(1) != 1 or t.shape[0] > 1 and t.stride(0) < t.shape[1]:
            t = t.contiguous()  # e.g. a transposed view
        return t, "float32" if t.dtype == torch.float32 else "bfloat16"
    # Other producers: the dtype from DLPack, checked by the extension.
    dtype = str(getattr(x, "dtype", ""))
    if "bfloat16" in dtype:
        return x, "bfloat16"
    if dtype.endswith("float32"):
        return x, "float32"
    raise ValueError(f"{name} must be float32 or bfloat16 on the device (convert float16 first), "
                     f"not {dtype or type(x).__name__}")


def empty(shape: tuple, dtype: str, like: Any):
    """A torch CUDA tensor on like's device."""
    torch = _torch()
    device = like.device if is_torch(like) else torch.device("cuda", torch.cuda.current_device())
    return torch.empty(shape, dtype=getattr(torch, dtype), device=device)


class DevicePolicy:
    """A tensor-scale policy whose state lives on a CUDA device: the kernels read and update it,
    so a training step never waits for the host. Made from a host policy (`device_policy`), whose
    state it copies; `read()` returns a host policy equal to the device state (a synchronisation).

    `amax_hook`, when set, is called with `amax` (an int32 CUDA tensor of one element: the
    measured amax's float bit pattern, which orders as the amaxes do) between measuring and
    applying the amax: `torch.distributed.all_reduce(t, op=ReduceOp.MAX)` makes every rank's
    tensor scale the same.
    """

    def __init__(self, policy: Any, device: Any = None, stream: Any = None):
        torch = _torch()
        from ._native import core

        if isinstance(policy, core.NoTensorScale):
            raise ValueError("a NoTensorScale needs no device state: pass policy=None (encode "
                             "scale 1) for CUDA tensors")
        self.device = torch.device("cuda", torch.cuda.current_device()) if device is None \
            else torch.device(device)
        self.host_class = type(policy)
        self.format = getattr(policy, "format", None)
        self._host = policy
        self.amax_hook = None
        with torch.cuda.device(self.device):
            self._state = cuda_module().DevicePolicy(policy, device_stream(self.device, stream))
            self.amax = torch.from_dlpack(self._state.amax_bits).view(torch.int32)

    def read(self, stream: Any = None) -> Any:
        """A host policy object equal to the device state (waits for the stream); its last step's
        counters are in `.last_stats`."""
        import copy

        torch = _torch()
        host = copy.copy(self._host)
        with torch.cuda.device(self.device):
            stats = self._state.read(host, device_stream(self.device, stream))
        host.last_stats = stats
        return host

    def __repr__(self) -> str:
        return f"DevicePolicy({self.host_class.__name__}, {self.format}, {self.device})"


def device_policy(policy: Any, device: Any = None, stream: Any = None) -> DevicePolicy:
    """The device counterpart of a host tensor-scale policy (its state copied; they then evolve
    apart)."""
    return DevicePolicy(policy, device, stream)
