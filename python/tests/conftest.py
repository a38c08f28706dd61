import os
import pathlib

import pytest
import torch

import txc

SHARED = pathlib.Path(os.environ.get("TXC_SHARED_DIR", pathlib.Path(__file__).resolve().parents[3] / "shared"))
torch.manual_seed(0)


@pytest.fixture
def env():
    e = txc.default_env()
    with e:
        yield e


@pytest.fixture
def stories260k():
    p = SHARED / "models" / "stories260K"
    if not (p / "model.safetensors").exists():
        pytest.skip(f"no test model at {p} (set TXC_SHARED_DIR)")
    return p
