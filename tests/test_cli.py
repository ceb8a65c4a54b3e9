"""The command line: version, help, doctor on a machine without a GPU."""

import json
import subprocess
import sys

import pkagent


def pk(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pkagent", *args], capture_output=True, text=True, env=env)


def test_version():
    out = pk("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"pkagent {pkagent.__version__}"


def test_help_lists_subcommands():
    out = pk("--help")
    assert out.returncode == 0
    assert "doctor" in out.stdout


def test_unknown_subcommand_is_usage_error():
    out = pk("frobnicate")
    assert out.returncode == 2


def test_doctor_json_without_gpu(monkeypatch):
    import os

    env = dict(os.environ, OPENAI_API_KEY="sk-secret-value-123", NCCL_NVLS_ENABLE="0")
    env.pop("ANTHROPIC_API_KEY", None)
    out = pk("doctor", "--json", env=env)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["pkagent"] == pkagent.__version__
    assert report["python"].count(".") == 2
    assert "OPENAI_API_KEY" in report["api_keys_set"] and "ANTHROPIC_API_KEY" not in report["api_keys_set"]
    assert "sk-secret-value-123" not in out.stdout
    assert "NCCL_NVLS_ENABLE=0" in report["multicast"]["disabled_by_environment"]
    assert isinstance(report["devices"], list) and isinstance(report["docker"]["answers"], bool)
    if not report["cuda_available"]:
        assert report["devices"] == [] and "no CUDA device" in report["gpu_note"]


def test_doctor_table():
    out = pk("doctor")
    assert out.returncode == 0, out.stderr
    for row in ("python", "torch", "nvcc", "NVLink multicast", "docker engine", "API keys set"):
        assert row in out.stdout
