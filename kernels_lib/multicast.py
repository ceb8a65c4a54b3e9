"""NVLink multicast (NVLS, multimem) policy: where it is disabled, nothing that mentions it runs.

Multicast objects on shared GPU hosts can take the GPUs out of service for days, so our
machines disable it through the environment. Every process pkagent starts carries
MULTICAST_OFF_ENV, the checker refuses a candidate whose sources mention multicast while the
environment disables it, and kernels_lib's multimem wrappers refuse to run unless
`allowed()` says so.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

MULTICAST_OFF_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}

_MENTION = re.compile(r"multimem|multicast|nvls", re.IGNORECASE)


def disabled_by(env: Mapping[str, str] | None = None) -> list[str]:
    """The variables of `env` (default: os.environ) that disable multicast, as NAME=VALUE."""
    env = os.environ if env is None else env
    return [f"{k}={env[k]}" for k, off in MULTICAST_OFF_ENV.items() if env.get(k) == off]


def allowed(env: Mapping[str, str] | None = None) -> bool:
    """Multicast may run only where no variable of MULTICAST_OFF_ENV disables it."""
    return not disabled_by(env)


def mentions(text: str) -> list[str]:
    """The multicast terms in `text` (multimem, multicast, NVLS; any case), sorted, unique."""
    return sorted({m.group(0).lower() for m in _MENTION.finditer(text)})


def off_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of `env` (default: os.environ) with multicast disabled."""
    out = dict(os.environ if env is None else env)
    out.update(MULTICAST_OFF_ENV)
    return out
