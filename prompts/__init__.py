"""The prompts: Jinja2 templates (*.j2) and the text blocks they include (*.md, themselves
templates), rendered with StrictUndefined so that a missing value is an error, not an empty
hole in the prompt. The worked example is inserted verbatim.

    ctx = task_context(problem, hardware, world_size=2, device="cuda", size=1.0, actions="tools")
    system = render("system.j2", **ctx); task = render("task.j2", **ctx)
    prompt = render("zero_shot.j2", **ctx)
"""

from __future__ import annotations

import inspect
from functools import lru_cache
from pathlib import Path
from typing import Any

PROMPTS_DIR = Path(__file__).resolve().parent
KERNELS_LIB_README = PROMPTS_DIR.parent / "kernels_lib" / "README.md"


@lru_cache(maxsize=1)
def _env() -> Any:
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(PROMPTS_DIR)), undefined=jinja2.StrictUndefined,
                              keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True, autoescape=False)


def render(template: str, **context: Any) -> str:
    return _env().get_template(template).render(**context).strip() + "\n"


def block(name: str) -> str:
    """A text block of prompts/ by file name."""
    return (PROMPTS_DIR / name).read_text(encoding="utf-8").strip()


def check_command(problem_id: str, world_size: int, device: str, size: float) -> str:
    cmd = f"pkagent check solution.py --problem {problem_id} --device {device} --world-size {world_size}"
    return cmd + (f" --size {size:g}" if size != 1.0 else "")


def task_context(problem: Any, hardware: Any, *, world_size: int, device: str, size: float = 1.0,
                 actions: str = "tools") -> dict[str, Any]:
    """Everything the templates use, from an eval.problem.Problem and a HardwareProfile."""
    meta = problem.meta
    lib_docs = KERNELS_LIB_README.read_text(encoding="utf-8").strip() if KERNELS_LIB_README.is_file() else ""
    return {
        "problem": {
            "id": meta.id, "name": meta.name, "category": meta.category, "description": problem.description,
            "source": f"{meta.source_repo}: {meta.source_file} ({meta.source_function})",
            "dtype": meta.dtype, "peer_memory": meta.peer_memory, "cpu_note": meta.cpu_note,
            "reference_source": inspect.getsource(problem.module).strip(),
            "signature": f"solution{inspect.signature(problem.reference)}",
        },
        "hw": hardware.model_dump(),
        "world_size": world_size,
        "device": device,
        "size": size,
        "actions": actions,
        "check_command": check_command(meta.id, world_size, device, size),
        "kernels_lib_docs": lib_docs,
        "example": block("example_all_reduce.md"),  # code: included verbatim, not as a template
    }
