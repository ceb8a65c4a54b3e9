"""Run-time gate for the multimem (NVSwitch multicast) wrappers of pk/multimem.cuh.

require() raises MulticastRefused unless kernels_lib.multicast.allowed() (no variable of the
environment disables multicast), the device supports multicast, and the buffer has a multicast
address. Call it before launching any kernel that uses pk::multimem. Our GPU machines disable
multicast, so there it always refuses.
"""

from __future__ import annotations

from kernels_lib import multicast

_CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED = 132


class MulticastRefused(RuntimeError):
    pass


def require(buf=None, device: int | None = None) -> int:
    """The multicast address of `buf` (a SymmBuffer), or raise MulticastRefused saying why."""
    off = multicast.disabled_by()
    if off:
        raise MulticastRefused(f"multicast is disabled by the environment ({', '.join(off)}): use peer loads/stores instead")
    import ctypes

    import torch

    from kernels_lib.build import _libcuda

    dev = torch.cuda.current_device() if device is None else device
    v = ctypes.c_int(0)
    if _libcuda().cuDeviceGetAttribute(ctypes.byref(v), _CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, dev) != 0 or not v.value:
        raise MulticastRefused(f"device {dev} does not support multicast")
    mc = int(getattr(buf.handle, "multicast_ptr", 0) or 0) if buf is not None else 0
    if buf is not None and not mc:
        raise MulticastRefused("the symmetric buffer has no multicast address")
    return mc
