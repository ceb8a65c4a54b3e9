#!/usr/bin/env bash
# Fetches what scripts/gpu_check_sweep.sh needs on a GPU machine whose image has torch, typer,
# rich, pyyaml, jinja2, httpx, matplotlib and pytest but not the rest of pkagent's dependencies:
# wheels for CPython 3.12 into .whl/ (pydantic, tenacity, anthropic's SDK for the search stage's
# scripted model) and Debian's bubblewrap package into .debs/. Run it here, where the package
# registries are reachable, then name .whl and .debs in the device call's carry list.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl .debs
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
  pydantic==2.14.4 pydantic_core==2.50.5 typing-inspection==0.4.5 annotated-types==0.8.0 tenacity==9.1.4 \
  anthropic==2.14.0 docstring-parser==0.18.0 httpx2==2.16.2 httpcore2==2.16.2 truststore==0.10.5 \
  jiter==0.19.0 opentelemetry-api==1.45.2 sniffio==1.3.1
(cd .debs && apt-get download bubblewrap >/dev/null)
ls .whl .debs
