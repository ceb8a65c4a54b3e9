"""What the push-based reference kernels share: a receive buffer, per-tile flags, the launch."""

from __future__ import annotations

import ctypes
import os

import torch
import torch.distributed as dist

import kernels_lib as kl

KIB = 1024


def plan(nbytes: int, max_senders: int = 64, max_receivers: int = 64, tile: int = 0) -> tuple[int, int, int]:
    """(tile bytes, sender blocks, receiver blocks) for moving nbytes per peer: tiles of 4 KiB to
    256 KiB, about 64 of them at least (or `tile` bytes, a multiple of 16, where given), and no
    more blocks than tiles (senders + receivers <= 128 so that every block is resident at once,
    which the waits need). PK_MAX_SENDERS and PK_MAX_RECEIVERS override the caps (for tuning
    sweeps)."""
    max_senders = int(os.environ.get("PK_MAX_SENDERS", max_senders))
    max_receivers = int(os.environ.get("PK_MAX_RECEIVERS", max_receivers))
    if tile % 16 or tile < 0:
        raise ValueError(f"plan: tile of {tile} bytes, not a positive multiple of 16")
    tile = tile or max(4 * KIB, min(256 * KIB, (nbytes // 64) // (4 * KIB) * (4 * KIB)))
    tiles = -(-nbytes // tile)
    return tile, min(tiles, max_senders), min(tiles, max_receivers)


class Launch:
    """A kernel with its arguments packed once; per call only x and out change, and the launch
    goes straight to cuLaunchKernel (a few microseconds of Python per call). The kernel takes
    (x, out, *fixed_before, epochs, *fixed_after): `epochs` is this launch's zeroed counter of
    one uint32 per block, for pk::block_epoch, so the epoch lives in device memory and a CUDA
    graph of calls stays correct when replayed. One Launch per configuration (grid, flags,
    buffers): two Launch objects must never share a flags or receive buffer (two epoch sequences
    in one buffer break the parity argument)."""

    def __init__(
        self,
        source: str,
        name: str,
        fixed_before: list,
        fixed_after: list,
        grid: int,
        block: int,
        smem: int = 0,
        module: str | None = None,
        build_flags: tuple[str, ...] = (),
    ):
        from kernels_lib.build import _libcuda

        self.kernel = kl.load(source, build_flags, name=module or name).kernel(name)
        self.epochs = torch.zeros(grid, dtype=torch.int32, device="cuda")  # launches done, per block
        torch.cuda.synchronize()  # zeroed before a launch on any stream reads it
        self.x, self.out = ctypes.c_uint64(), ctypes.c_uint64()
        self.packed = self.kernel.pack([self.x, self.out, *fixed_before, self.epochs, *fixed_after])
        self.grid, self.block, self.smem = grid, block, smem
        if smem > 48 * 1024:
            kl.build.check(_libcuda().cuFuncSetAttribute(self.kernel.func, 8, smem), f"{name}: shared memory {smem}")
        self._launch = _libcuda().cuLaunchKernel
        self._stream = torch._C._cuda_getCurrentRawStream

    def __call__(self, x: torch.Tensor, out: torch.Tensor) -> None:
        self.x.value, self.out.value = x.data_ptr(), out.data_ptr()
        code = self._launch(
            self.kernel.func, self.grid, 1, 1, self.block, 1, 1, self.smem, self._stream(x.device.index), self.packed.argp, None
        )
        if code:
            kl.build.check(code, f"launch {self.kernel.name}")


def world() -> tuple[int, int]:
    return dist.get_rank(), dist.get_world_size()


def check_input(x: torch.Tensor, multiple: int) -> torch.Tensor:
    if x.dtype is torch.bfloat16 and x.is_cuda and x.is_contiguous() and x.numel() % multiple == 0:
        return x
    if x.dtype != torch.bfloat16 or not x.is_cuda:
        raise TypeError(f"expects a CUDA bfloat16 tensor, got {x.dtype} on {x.device}")
    if x.numel() % multiple:
        raise ValueError(f"expects a number of elements divisible by {multiple}, got {x.numel()}")
    return x.contiguous()
