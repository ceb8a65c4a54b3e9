"""Patch-parallel 3x3 convolution for high-resolution diffusion: image rows split over ranks,
one halo row exchanged with each neighbour.

The latent image (B x C x Himg x Wimg) is split by rows: rank r holds `x`
(B x C x Himg/W x Wimg bf16), rows [r*Himg/W, (r+1)*Himg/W). `weight` (Cout x C x 3 x 3 bf16)
and `bias` (Cout bf16) are replicated. Every rank returns its rows of
conv2d(full image, weight, bias, stride 1, padding 1) (B x Cout x Himg/W x Wimg bf16): the
first and last rows need one row from the rank above and below (zero padding at the image
border).

DistriFusion's DistriConv2dPP splits UNet convolutions this way across GPUs; this is the
synchronous version (fresh halos every call, no stale activations).
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="patch_parallel_conv2d",
    name="Patch-parallel conv2d with halo rows (DistriFusion)",
    category="vision",
    source_repo="mit-han-lab/distrifuser",
    source_file="distrifuser/modules/pp/conv2d.py",
    source_function="DistriConv2dPP.forward (synchronous halo exchange)",
    world_sizes=(2, 4, 8),
    atol=2e-2,
    rtol=2e-2,
    tags=("p2p", "halo", "conv"),
)

B, C, COUT, HIMG, WIMG = 2, 640, 640, 256, 256


def _dims(world_size, size):
    f = size**0.25
    return B, scaled(C, f, 8), scaled(COUT, f, 8), scaled(HIMG, f, 4 * world_size), scaled(WIMG, f, 4)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    b, c, co, h, wd = _dims(world_size, size)
    g = generator(seed * 1000 + rank, device)
    x = randn((b, c, h // world_size, wd), g, torch.bfloat16, device)
    gw = generator(seed * 1000 + 999, device)
    weight = randn((co, c, 3, 3), gw, torch.bfloat16, device, scale=(9 * c) ** -0.5)
    bias = randn((co,), gw, torch.bfloat16, device, scale=0.1)
    return x, weight, bias


def reference(x, weight, bias):
    rank, w = dist.get_rank(), dist.get_world_size()
    top = torch.zeros_like(x[:, :, :1])
    bottom = torch.zeros_like(x[:, :, :1])
    ops = []
    if rank > 0:
        ops += [dist.P2POp(dist.isend, x[:, :, :1].contiguous(), rank - 1), dist.P2POp(dist.irecv, top, rank - 1)]
    if rank + 1 < w:
        ops += [dist.P2POp(dist.isend, x[:, :, -1:].contiguous(), rank + 1), dist.P2POp(dist.irecv, bottom, rank + 1)]
    for r in dist.batch_isend_irecv(ops):
        r.wait()
    return F.conv2d(torch.cat([top, x, bottom], dim=2), weight, bias, padding=(0, 1))


def roofline(world_size, size=1.0):
    # link: a middle rank receives one row from each neighbour: 2 B C Wimg bf16.
    # HBM:  read x and the weight, write the output.
    # FLOPs: 2 B Cout C 9 (Himg/W) Wimg.
    b, c, co, h, wd = _dims(world_size, size)
    w = world_size
    return Roofline(
        link_bytes=2 * b * c * wd * 2,
        hbm_bytes=(b * c * h // w * wd + co * c * 9 + b * co * h // w * wd) * 2,
        flops=2 * b * co * c * 9 * h / w * wd,
    )
