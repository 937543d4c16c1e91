"""Builds the C++ extension with CMake against the torch already installed (hence --no-build-isolation):

    pip install --no-build-isolation ./python

It configures the repository (one level up) with FLASHPORT_TORCH_ONLY=ON: the op library and the
extension only, no CLI, engine or tests, so nothing beyond torch, a C++20 compiler, CMake >= 3.25 and
OpenMP is needed. Torch's CMake files come from torch.utils.cmake_prefix_path. CUDA is built when
torch.version.cuda is set and nvcc is found (CUDACXX, PATH or /usr/local/cuda); HIP when
torch.version.hip is set and hipcc is found (compile path only: untested on AMD hardware).
FLASHPORT_CMAKE_ARGS adds configure arguments (e.g. -DCMAKE_CUDA_ARCHITECTURES=90).
"""
import os
import shlex
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _gpu_args(torch):
    # port-check: ignore torch-version-cuda -- picks the CUDA build; ROCm torch (None here) takes the hip branch below
    if torch.version.cuda:
        nvcc = os.environ.get("CUDACXX") or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
        if os.path.exists(nvcc):
            return [f"-DCMAKE_CUDA_COMPILER={nvcc}", "-DFLASHPORT_CUDA=ON"]
        # port-check: ignore torch-version-cuda -- only reached on CUDA torch, to print its version
        print(f"flashport: torch has CUDA {torch.version.cuda} but nvcc is not found: building CPU kernels only")
    if getattr(torch.version, "hip", None):
        if shutil.which("hipcc") or os.path.exists("/opt/rocm/bin/hipcc"):
            return ["-DFLASHPORT_HIP=ON"]
        print("flashport: torch has HIP but hipcc is not found: building CPU kernels only")
    return []


class BuildWithCMake(build_py):
    def run(self):
        super().run()
        import torch  # the user's torch: --no-build-isolation
        out_dir = os.path.abspath(os.path.join(self.build_lib, "flashport"))
        build_dir = os.path.abspath(os.path.join(self.build_lib, "..", "cmake"))
        args = ["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release", "-DFLASHPORT_TORCH_ONLY=ON",
                f"-DFLASHPORT_TORCH_PYTHON={sys.executable}", f"-DFLASHPORT_TORCH_OUTPUT_DIR={out_dir}",
                f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}"]
        args += _gpu_args(torch) + shlex.split(os.environ.get("FLASHPORT_CMAKE_ARGS", ""))
        subprocess.check_call(args)
        jobs = str(os.cpu_count() or 2)
        subprocess.check_call(["cmake", "--build", build_dir, "-j", jobs, "--target", "flashport_torch"])


setup(cmdclass={"build_py": BuildWithCMake})
