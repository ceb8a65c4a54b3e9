"""Model names live in one place, configs/models.yaml (with their prices): every model that the
README, the docs, the examples' notes and the configs name is there, spelled the same."""

import re
from pathlib import Path

from configs import load_models

ROOT = Path(__file__).resolve().parents[1]
# PROVIDER:MODEL; placeholders (MODEL, M) are not names. openai-compatible models are priced by
# whoever serves them and need no entry.
SPEC = re.compile(r"\b(openai|anthropic|google):([a-z][A-Za-z0-9._/-]*[A-Za-z0-9])")


def named_models() -> dict[str, set[str]]:
    files = [ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("examples/**/README.md"), *ROOT.glob("configs/**/*.yaml")]
    found: dict[str, set[str]] = {}
    for f in files:
        for _, model in SPEC.findall(f.read_text()):
            found.setdefault(model, set()).add(str(f.relative_to(ROOT)))
    return found


def test_every_model_named_in_docs_and_configs_is_in_models_yaml():
    names = named_models()
    assert {"gpt-5", "claude-sonnet-4-6"} <= set(names)  # the scan finds the README's names
    missing = {m: sorted(where) for m, where in names.items() if m not in load_models().prices}
    assert not missing, f"not in configs/models.yaml: {missing}"


def test_the_scan_catches_a_misspelt_name():
    assert SPEC.findall("--model anthropic:claude-sonnet-4.6 and openai:MODEL") == [("anthropic", "claude-sonnet-4.6")]
    assert "claude-sonnet-4.6" not in load_models().prices
