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

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(PROMPTS_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def render(template: str, **context: Any) -> str:
    return _env().get_template(template).render(**context).strip() + "\n"


PKB_COPY = "pkb"  # where a ParallelKernelBench problem's files are copied in the agent's work directory


def check_command(problem_id: str, world_size: int, device: str, size: float, suite: str | None = None) -> str:
    cmd = f"pkagent check solution.py --problem {problem_id}" + (f" --suite {suite}" if suite else "")
    cmd += f" --device {device} --world-size {world_size}"
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


def task_context(
    problem: Any, hardware: Any, *, world_size: int, device: str, size: float = 1.0, actions: str = "tools"
) -> dict[str, Any]:
    """Everything the templates use, from an eval.problem.Problem and a HardwareProfile."""
    from eval.suites import describe_inputs, is_pkb, signature

    meta = problem.meta
    readme = KERNELS_LIB / "README.md"
    lib_docs = readme.read_text(encoding="utf-8").strip() if readme.is_file() else ""
    pkb = is_pkb(problem)
    if pkb:  # a ParallelKernelBench problem: its file as text, its inputs from its own generator
        source = Path(problem.path).read_text(encoding="utf-8", errors="replace").strip()
        sig, inputs = signature(source, problem.path), describe_inputs(problem, world_size, size)
    else:
        source = inspect.getsource(problem.module).strip()
        sig, inputs = f"solution{inspect.signature(problem.reference)}", ""
    return {
        "problem": {
            "id": meta.id,
            "name": meta.name,
            "category": meta.category,
            "description": problem.description,
            "source": f"{meta.source_repo}: {meta.source_file} ({meta.source_function})",
            "dtype": meta.dtype,
            "peer_memory": meta.peer_memory,
            "cpu_note": meta.cpu_note,
            "reference_source": source,
            "signature": sig,
            "suite": "pkb" if pkb else "pkagent",
            "inputs": inputs,
            "atol": meta.atol,
            "rtol": meta.rtol,
        },
        "hw": hardware.model_dump(),
        "world_size": world_size,
        "device": device,
        "size": size,
        "actions": actions,
        "check_command": check_command(meta.id, world_size, device, size, f"pkb:{PKB_COPY}" if pkb else None),
        "pkb_copy": PKB_COPY,
        "kernels_lib_docs": lib_docs,
        "example": worked_example(meta.id),  # code: inserted verbatim, not as a template
    }


# --- a prompt file of the user's (zero-shot), read at run time -------------------------------------------


def _fill(text: str, values: dict[str, str], where: str) -> str:
    """str.format with a clear error for a placeholder we have no value for."""
    import string

    missing = sorted({f for _, f, _, _ in string.Formatter().parse(text) if f and f not in values})
    if missing:
        raise ValueError(f"{where}: no value for placeholder(s) {', '.join(missing)}")
    return text.format(**values)


def prompt_from_file(
    path: str | Path,
    ctx: dict[str, Any],
    *,
    checkout: Path | None = None,
    option: str = "generate_kernel",
    backend: str = "cuda",
    precision: str = "bf16",
    hardware: str | None = None,
    target: str = "",
) -> tuple[str | None, str]:
    """(system, user) messages of a zero-shot prompt taken from the user's file, read now.

    A `.toml` file is read as ParallelKernelBench's prompts.toml: the user message joins the
    blocks that `[options.<option>]` (or `[custom_prompts.<option>]`) lists in `components`,
    each looked up in `[shared]` and every `[templates.*]` table and filled in with
    backend_display and precision_display (from `[backends.<backend>]`, `[precision.<precision>]`),
    ref_arch_src (the reference's source), hardware_context_body (the `[templates.hardware]`
    blocks filled from `[hardware_profiles.<hardware>]`, empty without one), examples_intro and
    examples_entries (the backend's `in_context_examples`, files under `checkout`), then the name
    of the file to write. The system message is `[backends.<backend>].generate_kernel_system_prompt`
    when the file sets one, else none. Any other file is a Jinja2 template rendered with the
    context of our own templates (`problem`, `hw`, `world_size`, `device` ...), as one user message.
    """
    import jinja2

    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".toml":
        tpl = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False).from_string(text)
        return None, tpl.render(**ctx).strip() + "\n"
    import tomllib

    cfg = tomllib.loads(text)
    spec = (cfg.get("options") or {}).get(option) or (cfg.get("custom_prompts") or {}).get(option)
    if not spec or "components" not in spec:
        have = sorted({*(cfg.get("options") or {}), *(cfg.get("custom_prompts") or {})})
        raise ValueError(f"{path}: no [options.{option}] with components (have: {', '.join(have) or 'none'})")
    back = (cfg.get("backends") or {}).get(backend)
    prec = (cfg.get("precision") or {}).get(precision)
    if back is None or prec is None:
        raise ValueError(f"{path}: no [backends.{backend}] or [precision.{precision}]")
    templates = cfg.get("templates") or {}
    blocks = {
        **{k: v for table in templates.values() if isinstance(table, dict) for k, v in table.items()},
        **(cfg.get("shared") or {}),
    }
    values = {
        "backend_display": back.get("backend_display", backend),
        "precision_display": prec.get("precision_display", precision),
        "ref_arch_src": ctx["problem"]["reference_source"] + "\n",
    }
    hw_body = ""
    if hardware:
        profile = (cfg.get("hardware_profiles") or {}).get(hardware)
        if profile is None:
            raise ValueError(f"{path}: no [hardware_profiles.{hardware}]")
        hw = {**values, **{k: str(v) for k, v in profile.items()}}
        parts = [_fill(v, hw, f"{path}: templates.hardware.{k}").strip() for k, v in (templates.get("hardware") or {}).items()]
        hw_body = "\n\n".join(p for p in parts if p)
    values["hardware_context_body"] = hw_body
    examples = back.get("in_context_examples") or []
    if examples and "{examples_" in "".join(str(blocks.get(n, "")) for n in spec["components"]):
        intro = blocks.get("example_intro_one_shot" if len(examples) == 1 else "example_intro_few_shot", "")
        values["examples_intro"] = _fill(intro, values, f"{path}: example intro")
        entries = []
        for i, ex in enumerate(examples):
            base = checkout or path.parent
            entry = {
                **values,
                "example_label": str(ex.get("label") or f"Example {i + 1}"),
                "input_code": (base / ex["pytorch_solution"]).read_text(encoding="utf-8"),
                "output_code": (base / ex["custom_solution"]).read_text(encoding="utf-8"),
            }
            entries.append(
                _fill(
                    blocks.get("example_entry_template", "{input_code}\n\n{output_code}"),
                    entry,
                    f"{path}: example_entry_template",
                )
            )
        values["examples_entries"] = "\n\n".join(entries)
    parts = []
    for name in spec["components"]:
        if name not in blocks:
            raise ValueError(f"{path}: component {name!r} is in no [shared] or [templates.*] table")
        parts.append(_fill(blocks[name], values, f"{path}: {name}").strip())
    user = "\n\n".join(p for p in parts if p)
    if target:
        user += f"\n\nThe file will be saved as {target}; reply with its complete contents."
    system = back.get("generate_kernel_system_prompt")
    return (system.strip() if isinstance(system, str) and system.strip() else None), user + "\n"
