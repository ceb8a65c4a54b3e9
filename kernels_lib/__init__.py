"""kernels_lib: ParallelKittens-style multi-GPU primitives for CUDA kernels.

Device side: header-only CUDA C++ in include/pk/ (see README.md). Host side: symmetric
buffers and the PBuf argument (symm), the fast build path (build), stream-ordered signals
(sync), the multimem gate (multimem). Importable without a GPU.
"""

from kernels_lib.build import (
    ARCH,
    Build,
    BuildError,
    Kernel,
    LaunchError,
    Module,
    compile_cubin,
    copy_engine,
    include_dir,
    load,
    load_inline,
)
from kernels_lib.multimem import MulticastRefused
from kernels_lib.symm import MAX_RANKS, PBuf, SymmBuffer, flags, pbuf, symm_buffer

__all__ = [
    "ARCH",
    "Build",
    "BuildError",
    "Kernel",
    "LaunchError",
    "Module",
    "compile_cubin",
    "copy_engine",
    "include_dir",
    "load",
    "load_inline",
    "MulticastRefused",
    "MAX_RANKS",
    "PBuf",
    "SymmBuffer",
    "flags",
    "pbuf",
    "symm_buffer",
]
