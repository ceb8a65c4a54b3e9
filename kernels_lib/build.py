"""The fast build path: CUDA source -> cubin with nvcc, cached by content hash, launched through
the CUDA driver API on torch tensors.

    mod = kernels_lib.load(SOURCE)                     # compiles once, then a cache hit
    k = mod.kernel("my_kernel")                        # an extern "C" __global__ function
    k(grid, block, [x, out, pbuf, ctypes.c_int32(n)])  # on torch's current stream

Arguments: a torch tensor passes its data pointer; a ctypes value (c_int32, c_uint64, c_float,
a PBuf, ...) passes itself by value. Plain Python numbers are refused: the kernel's parameter
type decides the width, so say it (ctypes.c_int32(n)). For launches in a hot loop, pack once
(k.pack([...])), change the ctypes values in place, and call k.launch(grid, block, packed).

The cache (PKAGENT_KERNEL_CACHE, default ~/.cache/pkagent/kernels) keys each build by the
source, the flags, the nvcc version and the kernels_lib headers. Concurrent builds of one source
take a file lock and rename the result into place, so they never see a partial file.
A compiler error raises BuildError carrying nvcc's message.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ARCH = "-gencode=arch=compute_90a,code=sm_90a"
INCLUDE = Path(__file__).resolve().parent / "include"


class BuildError(RuntimeError):
    """nvcc refused the source. `log` holds the compiler's output, `command` the command line."""

    def __init__(self, log: str, command: list[str]):
        self.log = log
        self.command = command
        super().__init__(f"nvcc failed:\n{log.strip()}")


class LaunchError(RuntimeError):
    """The CUDA driver refused a module load or a kernel launch."""


def include_dir() -> str:
    """The folder to pass as -I: sources include <pk/pk.cuh> (or one header of pk/)."""
    return str(INCLUDE)


def cache_dir() -> Path:
    d = Path(os.environ.get("PKAGENT_KERNEL_CACHE") or Path.home() / ".cache" / "pkagent" / "kernels")
    d.mkdir(parents=True, exist_ok=True)
    return d


def nvcc() -> str:
    path = os.environ.get("NVCC") or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(path):
        raise BuildError(f"nvcc not found (looked at $NVCC, PATH and {path})", [path])
    return path


@cache
def _nvcc_version(path: str) -> str:
    return subprocess.run([path, "--version"], capture_output=True, text=True).stdout


def _headers_digest() -> str:
    h = hashlib.sha256()
    for p in sorted(INCLUDE.rglob("*.cuh")):
        h.update(p.relative_to(INCLUDE).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()


@dataclass(frozen=True)
class Build:
    path: Path  # the cubin
    key: str  # content hash
    cached: bool  # True: found in the cache, nvcc not run
    seconds: float  # time spent in this call


def compile_cubin(source: str, flags: tuple[str, ...] | list[str] = (), *, arch: str = ARCH, name: str = "pk") -> Build:
    """Compile `source` to a cubin for `arch`, or find it in the cache. Raises BuildError."""
    t0 = time.perf_counter()
    compiler = nvcc()
    flags = tuple(flags)
    h = hashlib.sha256()
    for part in (source, "\0".join(flags), arch, _nvcc_version(compiler), _headers_digest()):
        h.update(part.encode())
        h.update(b"\0")
    key = h.hexdigest()[:32]
    cache = cache_dir()
    out = cache / f"{name}-{key}.cubin"
    if out.exists():
        return Build(out, key, True, time.perf_counter() - t0)
    with open(cache / f"{name}-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if out.exists():  # another process built it while we waited
            return Build(out, key, True, time.perf_counter() - t0)
        with tempfile.TemporaryDirectory(dir=cache, prefix=f".{name}-") as tmp:
            src = Path(tmp) / f"{name}.cu"
            src.write_text(source)
            obj = Path(tmp) / f"{name}.cubin"
            cmd = [compiler, "-cubin", arch, "-O3", "-std=c++17", "-lineinfo", f"-I{INCLUDE}", *flags, str(src), "-o", str(obj)]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0 or not obj.exists():
                raise BuildError((r.stderr + r.stdout).replace(str(src), f"{name}.cu"), cmd)
            os.replace(obj, out)  # atomic: readers see the whole file or none
    return Build(out, key, False, time.perf_counter() - t0)


# ---- the CUDA driver, through ctypes ------------------------------------------------------------

_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


@cache
def _libcuda():
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuLaunchKernel.argtypes = (
        [ctypes.c_void_p] + [ctypes.c_uint] * 6 + [ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    )
    lib.cuModuleLoadData.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
    lib.cuModuleGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p]
    lib.cuFuncSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    lib.cuMemcpyDtoDAsync_v2.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p]
    lib.cuDeviceGetAttribute.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int]
    return lib


def check(code: int, what: str) -> None:
    if code != 0:
        s = ctypes.c_char_p()
        _libcuda().cuGetErrorString(code, ctypes.byref(s))
        raise LaunchError(f"{what}: CUDA error {code} ({(s.value or b'?').decode()})")


def current_stream() -> int:
    import torch

    return torch.cuda.current_stream().cuda_stream


class Packed:
    """Kernel arguments packed for cuLaunchKernel; the ctypes values may be changed in place."""

    def __init__(self, values: list):
        self.values = values
        self.argv = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
        self.argp = ctypes.cast(self.argv, ctypes.c_void_p)


def _as_ctype(a):
    if isinstance(a, (ctypes._SimpleCData, ctypes.Structure, ctypes.Array)):
        return a
    if hasattr(a, "data_ptr"):  # torch tensor
        return ctypes.c_uint64(a.data_ptr())
    raise TypeError(
        f"kernel argument of type {type(a).__name__}: pass a torch tensor or a ctypes value "
        "(e.g. ctypes.c_int32(n), ctypes.c_uint64(n), ctypes.c_float(x), a PBuf)"
    )


class Kernel:
    def __init__(self, func: int, name: str):
        self.func = ctypes.c_void_p(func)
        self.name = name
        self._smem_limit = 48 * 1024

    @staticmethod
    def pack(args) -> Packed:
        return Packed([_as_ctype(a) for a in args])

    def launch(self, grid, block, packed: Packed, smem: int = 0, stream: int | None = None) -> None:
        g = (grid, 1, 1) if isinstance(grid, int) else tuple(grid) + (1,) * (3 - len(grid))
        b = (block, 1, 1) if isinstance(block, int) else tuple(block) + (1,) * (3 - len(block))
        lib = _libcuda()
        if smem > self._smem_limit:
            check(
                lib.cuFuncSetAttribute(self.func, _CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem),
                f"{self.name}: shared memory {smem}",
            )
            self._smem_limit = smem
        s = current_stream() if stream is None else stream
        check(lib.cuLaunchKernel(self.func, *g, *b, smem, s, packed.argp, None), f"launch {self.name}{g}x{b}")

    def __call__(self, grid, block, args, smem: int = 0, stream: int | None = None) -> None:
        self.launch(grid, block, self.pack(args), smem, stream)


class Module:
    """A cubin loaded into the current CUDA context (torch's, on the current device)."""

    def __init__(self, build: Build):
        import torch

        torch.cuda.init()
        torch.empty(1, device="cuda")  # makes torch's context current on this thread
        self.build = build
        self.handle = ctypes.c_void_p()
        check(_libcuda().cuModuleLoadData(ctypes.byref(self.handle), build.path.read_bytes()), f"load {build.path.name}")
        self._kernels: dict[str, Kernel] = {}

    def kernel(self, name: str) -> Kernel:
        if name not in self._kernels:
            f = ctypes.c_void_p()
            code = _libcuda().cuModuleGetFunction(ctypes.byref(f), self.handle, name.encode())
            if code != 0:
                raise LaunchError(f'no kernel named {name!r} in {self.build.path.name} (declare it extern "C" __global__)')
            self._kernels[name] = Kernel(f.value, name)
        return self._kernels[name]

    def __getattr__(self, name: str) -> Kernel:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.kernel(name)


_MODULES: dict[tuple, Module] = {}


def load(source: str, flags: tuple[str, ...] | list[str] = (), *, name: str = "pk") -> Module:
    """Compile (or find in the cache) and load `source` on the current device; cached per process."""
    import torch

    key = (source, tuple(flags), name, torch.cuda.current_device())
    mod = _MODULES.get(key)
    if mod is None:
        mod = _MODULES[key] = Module(compile_cubin(source, flags, name=name))
    return mod


def copy_engine(dst_ptr: int, src_ptr: int, nbytes: int, stream: int | None = None) -> None:
    """Copy nbytes between device addresses (either may be a peer's) with the copy engine, on
    `stream` (default: torch's current stream). Uses no SM: overlaps with kernels. Best for
    messages of tens of MB and more; under ~1 MB SM stores are faster."""
    s = current_stream() if stream is None else stream
    check(_libcuda().cuMemcpyDtoDAsync_v2(dst_ptr, src_ptr, nbytes, s), "copy engine")


def load_inline(name: str, cpp_sources, cuda_sources, functions=None, **kw):
    """torch.utils.cpp_extension.load_inline with kernels_lib's include path, sm_90a and a build
    directory of its own per source (concurrent builds of different sources never share one)."""
    from torch.utils import cpp_extension

    h = hashlib.sha256(repr((name, cpp_sources, cuda_sources, functions, _headers_digest())).encode()).hexdigest()[:16]
    d = cache_dir() / f"inline-{name}-{h}"
    d.mkdir(parents=True, exist_ok=True)
    kw.setdefault("extra_cuda_cflags", ["-O3", ARCH, "-std=c++17"])
    kw["extra_include_paths"] = [include_dir(), *kw.get("extra_include_paths", [])]
    return cpp_extension.load_inline(name, cpp_sources, cuda_sources, functions=functions, build_directory=str(d), **kw)
