"""The wheel: it carries the data files (templates, CUDA headers, YAML configs, the demo's
transcript), not only Python, and `pkagent demo` runs from it installed outside the checkout."""

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (path,) = out.glob("pkagent-*.whl")
    return path


def test_wheel_contains_data_files(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        p.relative_to(ROOT).as_posix()
        for pattern in ("configs/**/*.yaml", "prompts/**/*.j2", "kernels_lib/**/*.cuh", "kernels_lib/**/*.cu")
        for p in ROOT.glob(pattern)
    }
    assert "configs/hardware/h200_2.yaml" in expected
    missing = expected - names
    assert not missing, f"not in the wheel: {sorted(missing)}"
    assert {"pkagent/cli.py", "eval/__init__.py", "experiments/search/run.py", "agent/demo.jsonl"} <= names
    assert not any(n.startswith(("tests/", "examples/", "benchmarks/")) for n in names)
    assert any(n.endswith("entry_points.txt") for n in names)


@pytest.mark.slow
def test_demo_runs_from_the_wheel_outside_the_checkout(wheel, tmp_path):
    """A fresh virtual environment holding only the wheel (--no-deps), its dependencies seen
    through a .pth naming this environment's site-packages, so nothing is downloaded; the demo
    run from a directory outside the checkout, without PYTHONPATH."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # this environment's site-packages, after the wheel's: a path line in a .pth adds the directory
    # but does not run the .pth files in it, so the checkout's editable install stays invisible
    deps = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir()]
    Path(site, "base_deps.pth").write_text("".join(p + "\n" for p in deps))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = subprocess.run(
        [str(python), "-c", "import agent.demo, eval, experiments; print(agent.demo.__file__)"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
    )
    assert where.returncode == 0, where.stderr[-2000:]
    assert Path(where.stdout.strip()).is_relative_to(env_dir), where.stdout  # the wheel's copy, not the checkout's
    demo = subprocess.run(
        [str(env_dir / "bin" / "pkagent"), "demo", "--out", "run"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "correct" in demo.stdout and (elsewhere / "run" / "result.json").is_file()
    assert (elsewhere / "run" / "solution.py").is_file()
