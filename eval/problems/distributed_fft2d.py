"""Slab-decomposed 2-D FFT: local FFTs along rows, a global transpose (all-to-all), FFTs along
columns.

The complex N x N field is split by rows: rank r holds rows [r*N/W, (r+1)*N/W) as `x`
(N/W x N x 2 float32: real and imaginary parts). Every rank returns its column slab of the
2-D FFT (norm="ortho") of the whole field, as (N x N/W x 2) float32: element [k0, c] is
FFT2(field)[k0, r*N/W + c].

mpi4py-fft's PFFT and cuFFTMp do exactly this for spectral solvers: FFT the local axis,
redistribute with an all-to-all so the other axis becomes local, FFT it. The all-to-all
moves (W-1)/W of the field; a fast solution overlaps it with the FFTs.
"""

import math

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="distributed_fft2d",
    name="Distributed 2-D FFT (slab decomposition, all-to-all transpose)",
    category="science",
    source_repo="mpi4py/mpi4py-fft",
    source_file="mpi4py_fft/mpifft.py",
    source_function="PFFT.forward",
    world_sizes=(2, 4, 8),
    dtype="float32",
    atol=1e-3,
    rtol=1e-3,
    tags=("all_to_all", "fft", "complex"),
)

N = 8192


def _n(world_size, size):
    return scaled(N, size**0.5, 8 * world_size)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    n = _n(world_size, size)
    g = generator(seed * 1000 + rank, device)
    return (randn((n // world_size, n, 2), g, torch.float32, device),)


def reference(x):
    w = dist.get_world_size()
    rows, n = x.shape[0], x.shape[1]
    y = torch.fft.fft(torch.view_as_complex(x), dim=1, norm="ortho")  # (N/W, N)
    send = torch.view_as_real(y.reshape(rows, w, rows).transpose(0, 1).contiguous())  # chunk j: columns of rank j
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)  # recv[i]: rank i's rows, my columns
    cols = torch.view_as_complex(recv).reshape(n, rows)
    return torch.view_as_real(torch.fft.fft(cols, dim=0, norm="ortho")).contiguous()


def roofline(world_size, size=1.0):
    # link: of its N/W x N slab a rank keeps 1/W; (W-1)/W of it (8 B per complex64 element)
    #       must leave, and as much arrives.
    # HBM:  read the input slab and write the output slab (the minimum; FFTs of this size
    #       need more passes in practice).
    # FLOPs: 5 N^2 log2(N^2) / W (the usual FFT operation count).
    n = _n(world_size, size)
    w = world_size
    slab = n * n // w * 8
    return Roofline(link_bytes=(w - 1) / w * slab, hbm_bytes=2 * slab, flops=5 * n * n * math.log2(n * n) / w)
