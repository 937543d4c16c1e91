"""Loads the C++ extension that registers torch.ops.flashport.*.

The extension is a plain shared library (no pybind11) built by CMake against the torch of this Python
(scripts/build.sh --torch, or pip install --no-build-isolation ./python). A build tree writes one of
    libflashport_torch_cuda.so   CPU + CUDA kernels (a CUDA torch and a CUDA build of flashport)
    libflashport_torch_hip.so    CPU + HIP kernels (a ROCm torch; compile path only, untested on AMD)
    libflashport_torch.so        CPU kernels
into this folder; the first one that matches this torch is loaded. FLASHPORT_TORCH_LIB=/path/to/lib.so
overrides the search (tests pick a build tree's library with it).
"""
import os

import torch

_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    names = []
    # port-check: ignore torch-version-cuda -- a CUDA torch loads the CUDA build; ROCm falls to the hip test below
    if torch.version.cuda:
        names.append("libflashport_torch_cuda.so")
    if getattr(torch.version, "hip", None):
        names.append("libflashport_torch_hip.so")
    names.append("libflashport_torch.so")
    return [os.path.join(_HERE, n) for n in names]


def load():
    """Loads the extension once; returns its path. Raises ImportError saying how to build it."""
    path = os.environ.get("FLASHPORT_TORCH_LIB")
    if not path:
        found = [p for p in _candidates() if os.path.exists(p)]
        if not found:
            raise ImportError(
                "flashport: the PyTorch extension is not built (looked for "
                + ", ".join(os.path.basename(p) for p in _candidates())
                + f" in {_HERE}); run scripts/build.sh --torch in the repository, "
                "or pip install --no-build-isolation ./python")
        path = found[0]
    try:
        torch.ops.load_library(path)
    except OSError as e:  # typically a library built against another torch (undefined symbols)
        raise ImportError(f"flashport: cannot load {path} into torch {torch.__version__}: {e}; "
                          "rebuild it against this torch") from e
    return path
