"""Print docs/problems.md, the table of the problem suite: python -m eval.problems._doc > docs/problems.md"""

import inspect

from eval.problem import CATEGORIES, all_problems


def main() -> None:
    probs = all_problems()
    order = {c: i for i, c in enumerate(CATEGORIES)}
    probs.sort(key=lambda p: (order[p.meta.category], p.id))

    def one_line(p):
        doc = inspect.cleandoc(p.module.__doc__ or "").split("\n\n")[0].replace("\n", " ")
        first = doc.split(": ")[0] if len(doc.split(". ")[0]) > 140 else doc.split(". ")[0]
        return first.rstrip(".").replace("|", "\\|") + "."

    def tags(p):
        t = set(p.meta.tags)
        out = []
        if "sub_groups" in t:
            out.append("sub-groups")
        if "variable_size" in t:
            out.append("variable size")
        if "backward" in t:
            out.append("backward")
        return ", ".join(out)

    lines = [
        "# The problem suite",
        "",
        "Every problem is one module in `eval/problems/` (the format is in `eval/problem.py`). The",
        "table lists them by category with the public code each one mirrors, the world sizes it",
        "supports and what it computes; `pkagent problems show ID` prints the full statement. Every",
        "reference runs on CPU with gloo at world sizes 2 and 4 in `tests/test_suite.py`, and every",
        "problem states a per-rank roofline (link bytes, HBM bytes, FLOPs) derived in its source.",
        "",
        "Regenerate this table after adding a problem:",
        "",
        "```",
        "python -m eval.problems._doc > docs/problems.md",
        "```",
        "",
        f"{len(probs)} problems in {len({p.meta.category for p in probs})} categories.",
        "",
        "| id | category | source (repository: file, function) | world sizes | notes | what it does |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for p in probs:
        m = p.meta
        src = f"[{m.source_repo}](https://github.com/{m.source_repo}): `{m.source_file}`, `{m.source_function}`"
        lines.append(f"| `{p.id}` | {m.category} | {src} | {', '.join(map(str, m.world_sizes))} | {tags(p)} | {one_line(p)} |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
