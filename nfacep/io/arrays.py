"""pyarrow arrays to numpy and back without pandas.

pyarrow imports pandas, when it is installed, the first time an array is made from a Python
list (``pa.array``) or turned into numpy (``to_numpy``), which costs a command such as
``nfacep match`` on a small file most of its start-up. These helpers do the same from the
arrays' buffers: :func:`to_numpy` for arrays of numbers and booleans without nulls (anything
else goes to pyarrow's ``to_numpy``, which keeps its meaning), :func:`strings` for a short
list of strings (the value sets of ``is_in`` and ``index_in``), and :func:`index_in` for the
labels' codes without importing ``pyarrow.compute``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

__all__ = ["index_in", "strings", "to_numpy"]

#: numpy's dtype of each fixed-width arrow type read from its values buffer
_DTYPES = {
    pa.int8(): np.int8,
    pa.int16(): np.int16,
    pa.int32(): np.int32,
    pa.int64(): np.int64,
    pa.uint8(): np.uint8,
    pa.uint16(): np.uint16,
    pa.uint32(): np.uint32,
    pa.uint64(): np.uint64,
    pa.float32(): np.float32,
    pa.float64(): np.float64,
}


def to_numpy(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """``values`` as a numpy array, as pyarrow's ``to_numpy(zero_copy_only=False)`` gives it:
    numbers without nulls read in place (read-only, as pyarrow's zero-copy arrays are),
    booleans unpacked; arrays with nulls, or of other types, by pyarrow."""
    if isinstance(values, pa.ChunkedArray):
        values = values.chunk(0) if values.num_chunks == 1 else values.combine_chunks()
    if values.null_count:
        return values.to_numpy(zero_copy_only=False)
    n, offset = len(values), values.offset
    if values.type == pa.bool_():
        if n == 0:
            return np.zeros(0, dtype=bool)
        bits = np.frombuffer(values.buffers()[1], dtype=np.uint8)
        return np.unpackbits(bits, bitorder="little")[offset : offset + n].view(bool)
    dtype = _DTYPES.get(values.type)
    if dtype is None:
        return values.to_numpy(zero_copy_only=False)
    if n == 0:
        return np.zeros(0, dtype=dtype)
    return np.frombuffer(values.buffers()[1], dtype=dtype, count=offset + n)[offset:]


def strings(values: Sequence[str]) -> pa.Array:
    """An arrow string array of ``values`` (``pa.array(values, pa.string())``)."""
    data = [v.encode("utf-8") for v in values]
    offsets = np.zeros(len(data) + 1, dtype=np.int32)
    np.cumsum([len(d) for d in data], out=offsets[1:])
    return pa.Array.from_buffers(
        pa.string(),
        len(data),
        [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(data))],
    )


def index_in(values: pa.Array, labels: Sequence[str]) -> pa.Array:
    """``pyarrow.compute.index_in(values, value_set=strings(labels))``: each value's index
    among ``labels``, null where it is none of them.

    The same kernel called by name (``call_function``, which ``pyarrow.compute`` re-exports),
    so that a CSV file whose fields the typed path reads does not import ``pyarrow.compute``:
    that import wraps every one of pyarrow's kernels in a Python function with its docstring,
    tens of milliseconds of every new process's CPU."""
    from pyarrow._compute import SetLookupOptions, call_function

    return call_function("index_in", [values], SetLookupOptions(value_set=strings(labels)))
