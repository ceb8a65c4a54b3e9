"""The prompts: Jinja2 templates (*.j2) and the text blocks they include (*.md, themselves
templates), rendered with StrictUndefined so that a missing value is an error, not an empty
hole in the prompt. kernels_lib's README and a worked example from kernels_lib/examples are
inserted verbatim where they exist.

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
KERNELS_LIB = PROMPTS_DIR.parent / "kernels_lib"
# Worked examples: reference kernels of kernels_lib, measured on GPUs. A prompt shows the first
# one that is not a solution of the problem at hand.
WORKED_EXAMPLES = ("all_reduce_one_shot.py", "reduce_scatter.py")


@lru_cache(maxsize=1)
def _env() -> Any:
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(PROMPTS_DIR)), undefined=jinja2.StrictUndefined,
                              keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True, autoescape=False)


def render(template: str, **context: Any) -> str:
    return _env().get_template(template).render(**context).strip() + "\n"


def check_command(problem_id: str, world_size: int, device: str, size: float) -> str:
    cmd = f"pkagent check solution.py --problem {problem_id} --device {device} --world-size {world_size}"
    return cmd + (f" --size {size:g}" if size != 1.0 else "")


def worked_example(problem_id: str) -> dict[str, str] | None:
    """{"path", "source", "helpers"} of the worked example for this problem, if kernels_lib has one."""
    for name in WORKED_EXAMPLES:
        path = KERNELS_LIB / "examples" / name
        if not path.is_file():
            continue
        source = path.read_text(encoding="utf-8").strip()
        if f"eval/problems/{problem_id}.py" in source:
            continue
        common = KERNELS_LIB / "examples" / "_common.py"
        helpers = common.read_text(encoding="utf-8").strip() if "examples._common" in source and common.is_file() else ""
        return {"path": f"kernels_lib/examples/{name}", "source": source, "helpers": helpers}
    return None


def task_context(problem: Any, hardware: Any, *, world_size: int, device: str, size: float = 1.0,
                 actions: str = "tools") -> dict[str, Any]:
    """Everything the templates use, from an eval.problem.Problem and a HardwareProfile."""
    meta = problem.meta
    readme = KERNELS_LIB / "README.md"
    lib_docs = readme.read_text(encoding="utf-8").strip() if readme.is_file() else ""
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
        "example": worked_example(meta.id),  # code: inserted verbatim, not as a template
    }
