"""Test doubles for the agent tests: a fake model server (model_server.py) and scripted turns
(scripts.py). SPECS maps each provider to a model spec, the key variable its client reads and
the base URL its SDK needs on the fake server."""

from __future__ import annotations

SPECS = {
    # provider: (model spec, API key variable, base URL suffix on the fake server)
    "openai": ("openai:gpt-5", "OPENAI_API_KEY", "/v1"),
    "anthropic": ("anthropic:claude-haiku-4-5", "ANTHROPIC_API_KEY", ""),
    "google": ("google:gemini-2.5-pro", "GEMINI_API_KEY", ""),
    "openai-compatible": ("openai-compatible:qwen3-coder", "OPENAI_COMPATIBLE_API_KEY", "/v1"),
}

KEY_VARIABLES = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "OPENAI_COMPATIBLE_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_COMPATIBLE_BASE_URL",
    "ANTHROPIC_AUTH_TOKEN",
)
