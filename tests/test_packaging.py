"""The wheel carries the data files (templates, CUDA headers, YAML configs), not only Python."""

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_contains_data_files(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path), str(ROOT)],
        capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    (wheel,) = tmp_path.glob("pkagent-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {p.relative_to(ROOT).as_posix() for pattern in ("configs/**/*.yaml", "prompts/**/*.j2", "kernels_lib/**/*.cuh", "kernels_lib/**/*.cu")
                for p in ROOT.glob(pattern)}
    assert "configs/hardware/h200_2.yaml" in expected
    missing = expected - names
    assert not missing, f"not in the wheel: {sorted(missing)}"
    assert "pkagent/cli.py" in names and "eval/__init__.py" in names
    assert any(n.endswith("entry_points.txt") for n in names)
