#!/usr/bin/env bash
# Install the CPU build of torch into a venv: from PyTorch's CPU wheel index when it answers,
# else from pip's configured index (PyPI's Linux torch wheels are CUDA builds, so on a machine
# whose pip sees only PyPI this brings the CUDA wheels; the script says so).
#   bash scripts/install_cpu_torch.sh PYTHON REQUIREMENT INDEX_URL
set -euo pipefail
py=$1 req=$2 index=$3
if "$py" -c "import urllib.request, sys; urllib.request.urlopen(sys.argv[1] + '/torch/', timeout=10)" "$index" 2>/dev/null; then
  echo "install: $req, CPU build, from $index"
  "$py" -m pip install -q "$req" --index-url "$index" --extra-index-url https://pypi.org/simple
else
  echo "install: $index cannot be reached; $req from pip's configured index (a CPU build only where that index has one)"
  "$py" -m pip install -q "$req"
fi
