"""txc arrays, txc.Tensor, torch_view / txc_view, DLPack both ways."""
import numpy as np
import pytest
import torch

import txc
from txc import interop


def test_ones_is_a_txc_array():
    a = txc.ones((2, 3))
    assert isinstance(a, txc.Array)
    assert a.shape == (2, 3) and a.dtype == "float32" and a.strides == (3, 1)
    assert torch.equal(torch.from_dlpack(a), torch.ones(2, 3))


def test_torch_view_and_txc_view_are_zero_copy():
    a = txc.arange(12, dtype=torch.float32)
    t = interop.torch_view(a)
    assert isinstance(t, txc.Tensor) and isinstance(t, torch.Tensor)
    assert t.shape == (12,) and t.dtype == torch.float32 and t.device.type == "txc"
    assert interop.txc_view(t) is a          # the very array object
    assert t._env is txc.default_env()
    # pytrees of them
    d = interop.torch_view({"x": a, "y": [a]})
    assert interop.txc_view(d)["y"][0] is a


def test_dlpack_export_shares_memory():
    a = txc.zeros((3, 4))
    tt = torch.from_dlpack(a)
    assert tt.data_ptr() == a.data_ptr
    n = np.from_dlpack(a)
    assert n.ctypes.data == a.data_ptr
    tt[1, 2] = 5.0                           # writes the txc array's memory
    assert n[1, 2] == 5.0


def test_dlpack_import_zero_copy_and_lifetime():
    src = torch.arange(6, dtype=torch.int64).reshape(2, 3)
    a = txc.from_dlpack(src)
    assert a.data_ptr == src.data_ptr() and a.dtype == "int64" and a.shape == (2, 3)
    n = np.arange(5, dtype=np.float32)
    b = txc.from_dlpack(n)
    assert b.data_ptr == n.ctypes.data
    del n                                    # the array keeps numpy's buffer alive
    assert torch.from_dlpack(b).tolist() == [0, 1, 2, 3, 4]
    c = txc.from_dlpack(src, copy=True)
    assert c.data_ptr != src.data_ptr()


def test_dlpack_import_strided_copies():
    src = torch.arange(12.).reshape(3, 4).t()
    a = txc.from_dlpack(src)
    assert a.shape == (4, 3)
    assert torch.equal(torch.from_dlpack(a), src)


def test_dlpack_dtypes_round_trip():
    for dt in (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.bool):
        src = (torch.arange(6) % 2).to(dt)
        a = txc.from_dlpack(src)
        assert a.dtype == str(dt).replace("torch.", "")
        assert torch.equal(torch.from_dlpack(a), src)


def test_unsupported_dtype_is_refused():
    with pytest.raises(BufferError):
        txc.from_dlpack(torch.zeros(3, dtype=torch.float64))


def test_issue_snippet(env):
    arr = txc.ones((4, 4))
    t = interop.torch_view(arr)
    m = torch.matmul(t, t)
    assert torch.equal(m.to("cpu"), torch.full((4, 4), 4.0))
    assert torch.allclose(torch.sin(t).cpu(), torch.sin(torch.ones(4, 4)))
    assert np.allclose(torch.exp(t).numpy(), np.exp(np.ones((4, 4), np.float32)))
    x = torch.ones((4, 4)).to("txc")
    assert isinstance(x, txc.Tensor) and x.device.type == "txc"


def test_outside_env_says_to_enter_it():
    t = interop.torch_view(txc.ones((2,)))
    with pytest.raises(RuntimeError, match="enter it"):
        torch.sin(t)


def test_to_cpu_copies(env):
    x = torch.arange(4.).to("txc")
    c = x.to("cpu")
    assert type(c) is torch.Tensor and c.tolist() == [0., 1., 2., 3.]
    c[0] = 9.0
    assert x.cpu()[0].item() == 0.0
    assert x.numpy().tolist() == [0., 1., 2., 3.]


def test_module_to_txc(env):
    lin = torch.nn.Linear(4, 3)
    x = torch.randn(2, 4)
    want = lin(x)
    lin.to("txc")
    assert isinstance(lin.weight, txc.Tensor)
    got = lin(x.to("txc"))
    assert isinstance(got, txc.Tensor)
    assert torch.allclose(got.cpu(), want.detach(), atol=1e-6)


def test_ones_size_rules():
    # torch.ones: a float size is a TypeError, a negative one names the dimension
    with pytest.raises(TypeError):
        txc.ones((2.5, 2))
    with pytest.raises(RuntimeError, match="negative dimension -1"):
        txc.ones((-1, 4))
    assert tuple(txc.interop.torch_view(txc.ones((0, 4))).shape) == (0, 4)
