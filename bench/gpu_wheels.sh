#!/usr/bin/env bash
# bench/gpu_wheels.sh: the wheels a lent GPU machine lacks, downloaded here into .whl/ (which
# git ignores) for the device tool to carry. That machine's image (/work/.library/device/
# KINDS.md) has CUDA torch, transformers, peft, tokenizers, numpy, scipy, pytest... in its
# python3 (3.12), and no package index; it lacks pydantic, jsonschema and datasketch and gguf
# (and their own needs), and its transformers (5.17) is older than the 5.25 tunelab was
# tested on. bench/gpu_env.sh installs whatever .whl/ holds into a folder on PYTHONPATH
# there (pip --target, no index, no build). The versions are this repository's .venv's.
#
#   bash bench/gpu_wheels.sh        # then name .whl in the device call's carry
#   PYTHON_VERSION=3.11 bash bench/gpu_wheels.sh   # for another machine's Python
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS=(
    pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
    typing_extensions==4.16.0
    jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0
    rpds-py==2026.9.1
    datasketch==2.0.0 gguf==0.19.0
    transformers==5.25.0 peft==0.21.2
)
PLATFORMS=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 \
    manylinux2014_x86_64 manylinux1_x86_64; do
    PLATFORMS+=(--platform "$p")
done
rm -rf .whl && mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "${PYTHON_VERSION:-3.12}" \
    --implementation cp "${PLATFORMS[@]}" -d .whl "${WHEELS[@]}"
du -sh .whl
ls .whl
