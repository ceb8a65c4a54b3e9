"""Symmetric buffers through PyTorch's symmetric memory, cached, and the PBuf kernel argument.

    buf = kernels_lib.symm_buffer((2, world, n), torch.bfloat16)   # allocates once per key
    k(grid, block, [x, out, buf.pbuf(), ...])                       # pk::pbuf<T> in the kernel

A SymmBuffer is one allocation of the same shape on every rank of a group, mapped into every
rank's address space (torch.distributed._symmetric_memory: empty + rendezvous). It is cached by
(shape, dtype, group, tag, device), so a solution() called a thousand times allocates once; the
first call is a collective (every rank must make it, in the same order).
Launch epochs are not kept here: they live in device memory (pk::block_epoch in pk/signal.cuh,
kernels_lib.sync), so that CUDA graphs of launches replay correctly.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

MAX_RANKS = 8  # PK_MAX_RANKS in pk/pbuf.cuh


class PBuf(ctypes.Structure):
    """The host image of pk::pbuf<T>: 8 pointers, the multicast address, rank, world size."""

    _fields_ = [
        ("ptr", ctypes.c_uint64 * MAX_RANKS),
        ("mc", ctypes.c_uint64),
        ("rank", ctypes.c_int32),
        ("world", ctypes.c_int32),
    ]


def pbuf(ptrs, rank: int, offset_bytes: int = 0, mc: int = 0) -> PBuf:
    """A PBuf over the ranks' addresses `ptrs`, each advanced by offset_bytes."""
    w = len(ptrs)
    if not 1 <= w <= MAX_RANKS:
        raise ValueError(f"pbuf: {w} ranks; kernels_lib supports 1..{MAX_RANKS}")
    if not 0 <= rank < w:
        raise ValueError(f"pbuf: rank {rank} outside 0..{w - 1}")
    p = PBuf()
    for i, a in enumerate(ptrs):
        p.ptr[i] = int(a) + offset_bytes
    p.mc = int(mc) + offset_bytes if mc else 0
    p.rank, p.world = rank, w
    return p


def _group_name(group) -> str:
    import torch.distributed as dist

    return (group or dist.group.WORLD).group_name


@dataclass
class SymmBuffer:
    tensor: object  # this rank's torch tensor
    handle: object  # torch's _SymmetricMemory
    group_name: str
    rank: int
    world: int
    ptrs: list[int]
    signal_pads: list[int]
    extra: dict = field(default_factory=dict)  # a place for a solution's cached views and args

    def pbuf(self, offset_bytes: int = 0) -> PBuf:
        """pk::pbuf over this buffer (from offset_bytes on). No multicast address: see multimem."""
        return pbuf(self.ptrs, self.rank, offset_bytes)

    def peer(self, rank: int, shape, dtype, offset_elems: int = 0):
        """A torch tensor over rank `rank`'s copy (writes go over NVLink)."""
        return self.handle.get_buffer(rank, tuple(shape), dtype, offset_elems)


_CACHE: dict[tuple, SymmBuffer] = {}


def symm_buffer(shape, dtype, group=None, tag: str = "", zero: bool = False) -> SymmBuffer:
    """The cached symmetric buffer for (shape, dtype, group, tag, device); created collectively
    on first use (zeroed first if zero=True, before any rank can see it)."""
    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    name = _group_name(group)
    dev = torch.cuda.current_device()
    key = (shape, dtype, name, tag, dev)
    buf = _CACHE.get(key)
    if buf is not None:
        return buf
    if hasattr(symm_mem, "enable_symm_mem_for_group"):  # needed by older torch; newer warns it is not
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            symm_mem.enable_symm_mem_for_group(name)
    t = symm_mem.empty(*shape, dtype=dtype, device=f"cuda:{dev}")
    if zero:
        t.zero_()
        torch.cuda.synchronize()
    h = symm_mem.rendezvous(t, name)
    g = group or dist.group.WORLD
    buf = SymmBuffer(t, h, name, dist.get_rank(g), dist.get_world_size(g), list(h.buffer_ptrs), list(h.signal_pad_ptrs))
    if buf.world > MAX_RANKS:
        raise ValueError(f"kernels_lib supports up to {MAX_RANKS} ranks, group has {buf.world}")
    _CACHE[key] = buf
    return buf


def flags(n: int, group=None, tag: str = "") -> SymmBuffer:
    """A zeroed symmetric buffer of n 32-bit flags (int32 in torch; uint32_t in kernels)."""
    import torch

    return symm_buffer((n,), torch.int32, group, "flags:" + tag, zero=True)
