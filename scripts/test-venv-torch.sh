#!/usr/bin/env bash
# The Python frontend's venv (python/: torch, transformers, torchax + JAX,
# pytest, scikit-build-core): scripts/test-venv.sh torch, which describes it.
exec "$(dirname "$0")/test-venv.sh" torch
