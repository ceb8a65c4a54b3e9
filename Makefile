# The two commands of the README: `make demo` and `make test`. Each installs what it needs into
# .venv first. On a machine without an NVIDIA driver the CPU build of torch is installed, from
# PyTorch's CPU wheel index (TORCH_CPU_INDEX), or from pip's configured index where that one cannot
# be reached; on a GPU machine pip's default (CUDA) build is.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TORCH ?= torch==2.13.0
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
NVCC ?= nvcc
CUDA_ARCH ?= -gencode=arch=compute_90a,code=sm_90a

.PHONY: install demo test lint cuda clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	command -v nvidia-smi >/dev/null 2>&1 || bash scripts/install_cpu_torch.sh $(PY) "$(TORCH)" "$(TORCH_CPU_INDEX)"
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/pkagent demo

# pytest exits 5 when it collects no test: that is a failure here, like any other non-zero code.
test: $(STAMP)
	$(PY) -m pytest -q -rfE $(PYTEST_ARGS)

# ruff: the linter and the formatter, as configured in pyproject.toml (CI runs both).
lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# Compile every CUDA source of the repository for sm_90a (headers through a one-line unit).
cuda:
	bash .ci/compile_cuda.sh

clean:
	rm -rf $(VENV) build dist *.egg-info
