# The two commands of the README: `make demo` and `make test`. Each installs what it needs into
# .venv first. On a machine without an NVIDIA driver the CPU build of torch is installed; on a
# GPU machine pip's default (CUDA) build is.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
NVCC ?= nvcc
CUDA_ARCH ?= -gencode=arch=compute_90a,code=sm_90a

.PHONY: install demo test cuda clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	command -v nvidia-smi >/dev/null 2>&1 || $(PY) -m pip install -q "torch==2.13.0"
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/pkagent demo

# pytest exits 5 when it collects no test: that is a failure here, like any other non-zero code.
test: $(STAMP)
	$(PY) -m pytest -q -ra $(PYTEST_ARGS)

# Compile every CUDA source of the repository for sm_90a (headers through a one-line unit).
cuda:
	bash .ci/compile_cuda.sh

clean:
	rm -rf $(VENV) build dist *.egg-info
