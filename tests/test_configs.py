"""Configs: the shipped ones validate, overrides work, and every kind of mistake ends in one line
naming the file, the key and what was expected, with exit code 2 from the command line."""

import subprocess
import sys
from pathlib import Path

import pytest

import configs
from configs import ConfigError, ExperimentConfig, HardwareProfile

GOOD = """\
name: demo
models: [replay:x.jsonl]
modes: [agent]
agent:
  step_limit: 10
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "exp.yaml"
    p.write_text(text)
    return p


def test_shipped_configs_validate():
    h200 = configs.load_hardware("h200_2")
    assert h200.num_gpus == 2 and h200.interconnect == "nvlink" and not h200.multicast
    h100 = configs.load_hardware("h100_8")
    assert h100.num_gpus == 8 and h100.multicast
    assert configs.load_models().prices["gpt-5"].output > 0
    for path in (configs.CONFIG_DIR / "experiments").glob("*.yaml"):
        configs.load_experiment(path)


def test_overrides_nested_and_typed(tmp_path):
    cfg = configs.load_experiment(write(tmp_path, GOOD), ["agent.step_limit=40", "samples=3", "sandbox.backend=docker"])
    assert cfg.agent.step_limit == 40 and cfg.samples == 3 and cfg.sandbox.backend == "docker"
    assert isinstance(cfg, ExperimentConfig)


@pytest.mark.parametrize(
    "text, overrides, expect",
    [
        (
            GOOD + "bogus: 1\n",
            [],
            [
                "exp.yaml: bogus: unknown key",
                "expected one of: world_size, device, size, hardware, agent, sandbox, check, pkb, name, problems,",
            ],
        ),
        (GOOD.replace("step_limit: 10", "step_limt: 10"), [], ["agent.step_limt: unknown key", "step_limit"]),
        (GOOD.replace("step_limit: 10", "step_limit: forty"), [], ["agent.step_limit: expected a valid integer", "'forty'"]),
        (GOOD, ["agent.step_limit=many"], ["agent.step_limit: expected a valid integer"]),
        (GOOD.replace("name: demo\n", ""), [], ["exp.yaml: name: missing required key"]),
        (GOOD.replace("modes: [agent]", "modes: [agnet]"), [], ["modes.0: expected 'zero-shot' or 'agent'"]),
        ("name: [unclosed\n", [], ["exp.yaml: line 2, column 1: bad YAML"]),
        ("- a\n- b\n", [], ["exp.yaml: (top level): expected a mapping"]),
        (GOOD, ["step_limit"], ["override 'step_limit': expected key=value"]),
    ],
)
def test_bad_config_one_line(tmp_path, text, overrides, expect):
    with pytest.raises(ConfigError) as info:
        configs.load_experiment(write(tmp_path, text), overrides)
    msg = str(info.value)
    assert "\n" not in msg
    for piece in expect:
        assert piece in msg, msg


def test_missing_file_and_unknown_profile(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.yaml: file not found"):
        configs.load_experiment(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match=r"h999\.yaml: file not found \(bundled hardware: h100_8, h200_2"):
        configs.load_hardware("h999")


def test_hardware_range_checked(tmp_path):
    text = (configs.CONFIG_DIR / "hardware" / "h200_2.yaml").read_text().replace("num_gpus: 2", "num_gpus: 0")
    p = tmp_path / "hw.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=r"hw\.yaml: num_gpus: expected greater than or equal to 1 \(got 0\)"):
        configs.load(HardwareProfile, p)


def test_cli_bad_config_exit_2_no_traceback(tmp_path):
    p = write(tmp_path, GOOD.replace("step_limit: 10", "step_limit: forty"))
    code = (
        "import sys; sys.argv=['pkagent','x'];"
        "import typer, configs;"
        "from pkagent import cli;"
        f"cli.app.command('x')(lambda: configs.load_experiment({str(p)!r}));"
        "cli.main()"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "agent.step_limit: expected a valid integer" in lines[0]
