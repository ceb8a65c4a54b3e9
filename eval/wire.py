"""The wire between a rank's judge (trusted) and its runner (the candidate's process).

One stream socket per rank. A message is an 8-byte length, a JSON header, then the raw bytes
of the tensors the header declares (dtype and shape each). Nothing is ever unpickled: the judge
reads what the runner sends as data, checked against declared dtypes, shapes and a byte budget,
so code in the runner can send a wrong answer but never code or a forged object.

A tree of outputs (tensors inside lists, tuples and dicts, with numbers and strings beside them)
travels as a JSON tree whose tensor leaves are indices into the message's tensors.
"""

from __future__ import annotations

import json
import math
import socket
import struct
from typing import Any

import torch

MAX_HEADER = 4 << 20
DTYPES = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.float64,
        torch.float32,
        torch.float16,
        torch.bfloat16,
        torch.complex64,
        torch.complex128,
        torch.int64,
        torch.int32,
        torch.int16,
        torch.int8,
        torch.uint8,
        torch.bool,
        torch.float8_e4m3fn,
        torch.float8_e5m2,
    )
}


class WireError(Exception):
    """A message that breaks the protocol (too large, undeclared dtype, cut short)."""


class BadOutput(TypeError):
    """An output that is not plain data: a tensor subclass, a sparse tensor, an arbitrary object."""


def send(sock: socket.socket, header: dict[str, Any], tensors: list[torch.Tensor] = ()) -> None:
    """Send `header` and `tensors` (copied to the host, contiguous) as one message."""
    host = [t.detach().to("cpu").contiguous() for t in tensors]
    meta = [{"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape)} for t in host]
    head = json.dumps({**header, "_tensors": meta}).encode()
    sock.sendall(struct.pack("<Q", len(head)) + head)
    for t in host:
        if t.numel():
            sock.sendall(memoryview(t.reshape(-1).view(torch.uint8).numpy()))


def _exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise EOFError("the other side closed the connection")
        got += k
    return buf


def recv(sock: socket.socket, max_bytes: float = math.inf) -> tuple[dict[str, Any], list[torch.Tensor]]:
    """One message: its header and its tensors (on the host), at most `max_bytes` of them."""
    (n,) = struct.unpack("<Q", _exact(sock, 8))
    if n > MAX_HEADER:
        raise WireError(f"a header of {n} bytes (the limit is {MAX_HEADER})")
    try:
        header = json.loads(_exact(sock, n))
        metas = header.pop("_tensors")
        if not isinstance(header, dict) or not isinstance(metas, list):
            raise ValueError("not an object")
    except (ValueError, KeyError, AttributeError, TypeError) as e:
        raise WireError(f"a header that is not the protocol's JSON ({e})") from None
    out, total = [], 0
    for m in metas:
        try:
            dtype, shape = DTYPES[m["dtype"]], [int(s) for s in m["shape"]]
        except (KeyError, TypeError, ValueError):
            raise WireError(f"a tensor of undeclared or unsupported type {str(m)[:100]}") from None
        if any(s < 0 for s in shape) or len(shape) > 16:
            raise WireError(f"a tensor of shape {shape}")
        nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
        total += nbytes
        if total > max_bytes:
            raise WireError(f"more tensor bytes than the reference's outputs allow ({total} > {max_bytes:.0f})")
        raw = torch.empty(nbytes, dtype=torch.uint8)
        if nbytes:
            view, got = memoryview(raw.numpy()), 0
            while got < nbytes:
                k = sock.recv_into(view[got:], nbytes - got)
                if k == 0:
                    raise EOFError("the other side closed the connection")
                got += k
        out.append(raw.view(dtype).reshape(shape))
    return header, out


def flatten(obj: Any, tensors: list[torch.Tensor]) -> Any:
    """`obj` as a JSON tree; its tensors appended to `tensors`. Raises BadOutput for leaves that
    are neither plain tensors nor plain values (a tensor subclass, a lazy object, a module)."""
    if isinstance(obj, torch.Tensor):
        if type(obj) is not torch.Tensor:
            raise BadOutput(
                f"a {type(obj).__module__}.{type(obj).__qualname__}, a torch.Tensor subclass (outputs must be plain tensors)"
            )
        if obj.layout != torch.strided:
            raise BadOutput(f"a tensor of layout {obj.layout} (outputs must be strided tensors)")
        tensors.append(obj)
        return {"T": len(tensors) - 1}
    if type(obj) in (list, tuple):
        return {"L" if type(obj) is list else "U": [flatten(o, tensors) for o in obj]}
    if type(obj) is dict:
        if not all(type(k) in (str, int) for k in obj):
            raise BadOutput("a dict whose keys are not str or int")
        return {"D": [[k, flatten(v, tensors)] for k, v in obj.items()]}
    if obj is None or type(obj) in (bool, int, float, str):
        return {"V": obj}
    raise BadOutput(f"a {type(obj).__module__}.{type(obj).__qualname__}, which is not a tensor or a plain value")


def unflatten(tree: Any, tensors: list[torch.Tensor]) -> Any:
    """The inverse of flatten, for a tree received from the other side (validated as it goes)."""
    if not isinstance(tree, dict) or len(tree) != 1:
        raise WireError("a malformed output tree")
    ((kind, val),) = tree.items()
    if kind == "T":
        if type(val) is not int or not 0 <= val < len(tensors):
            raise WireError("an output tree naming a tensor that was not sent")
        return tensors[val]
    if kind in ("L", "U") and isinstance(val, list):
        items = [unflatten(v, tensors) for v in val]
        return items if kind == "L" else tuple(items)
    if kind == "D" and isinstance(val, list):
        return {k: unflatten(v, tensors) for k, v in val}
    if kind == "V" and (val is None or type(val) in (bool, int, float, str)):
        return val
    raise WireError("a malformed output tree")
