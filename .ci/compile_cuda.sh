#!/usr/bin/env bash
# Compile every .cu and .cuh file of the repository for sm_90a, two at a time; fail on any error.
set -euo pipefail
cd "$(dirname "$0")/.."
NVCC=${NVCC:-nvcc}
ARCH=${CUDA_ARCH:--gencode=arch=compute_90a,code=sm_90a}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mapfile -t files < <(git ls-files '*.cu' '*.cuh'; git ls-files --others --exclude-standard '*.cu' '*.cuh')
if [ ${#files[@]} -eq 0 ]; then echo "compile_cuda: no CUDA sources"; exit 0; fi
compile() {
  local f=$1 out=$2 tu
  tu="$out/$(echo "$f" | tr '/.' '__').cu"
  if [[ $f == *.cuh ]]; then echo "#include \"$PWD/$f\"" > "$tu"; else tu=$f; fi
  if $NVCC $ARCH -std=c++17 -I kernels_lib/include -Xcompiler -fPIC -c "$tu" -o "$out/$(basename "$tu").o" 2> "$out/$(basename "$tu").log"; then
    echo "ok    $f"
  else
    echo "FAIL  $f"; cat "$out/$(basename "$tu").log"; return 1
  fi
}
export -f compile; export NVCC ARCH
printf '%s\n' "${files[@]}" | sort -u | xargs -P 2 -I{} bash -c 'compile "$1" "$2"' _ {} "$out"
echo "compile_cuda: ${#files[@]} files compiled for sm_90a"
