#!/usr/bin/env python3
"""Checks that the HIP build defines the same GPU kernels as the CUDA build, so no port passes as an
#ifdef stub.

Both lists come from the *device* code of every target, not from host-side launch stubs:
  CUDA: the cubins embedded in each object (.nv_fatbin); a kernel is a section .nv.constant0.<name>
        (its parameter bank), which only __global__ functions have. Read without cuobjdump.
  HIP:  the clang offload bundle in .hip_fatbin, unbundled per gfx target with clang-offload-bundler;
        a kernel is a symbol <name>.kd (its kernel descriptor).

Rules:
  1. within each build, every target defines the same kernels (no per-arch #if holes);
  2. CUDA kernels outside namespace nvidia_only == HIP kernels;
  3. each nvidia_only kernel has a portable sibling in both builds: drop "nvidia_only::",
     replace "_mma_" by "_portable_" in its name, and reduce an MmaConfig<D, ...> template argument
     (the mma flash kernel's tile shape) to its head dim D; or, for a kernel in NAMED_SIBLINGS, a
     kernel of the sibling function named there;
  4. HIP kernels CUDA lacks are allowed only when named in AMD_ONLY below (with the reason), and each
     has a portable sibling in both builds ("_mfma_" or "_dot2_" -> "_portable_", same template arguments,
     or NAMED_SIBLINGS); an
     AMD_ONLY name that no HIP kernel has, or that CUDA defines, is an error too (the list stays exact).

Usage: hip_symbols.py --cuda <objects...> --hip <objects...> [--bundler B] [--objcopy O] [--nm N]
"""
import argparse
import os
import re
import struct
import subprocess
import sys
import tempfile


# Kernels only the HIP build defines, by function name, and why. tests/python/test_sanitize_coverage.py
# reads this list too (compute-sanitizer, NVIDIA's, can never run them).
AMD_ONLY = {
    "flash_fwd_mfma_kernel": "flash forward on AMD matrix cores (v_mfma_f32_16x16x16 f16/bf16), an instruction "
                             "NVIDIA lacks; compiled for every HIP target (a trap body where the chip has no "
                             "MFMA: gfx906, gfx1030), selected at run time on gfx908/90a/940, executed only under "
                             "the HIP CPU Runtime's emulation (scripts/gpu/wave64.sh)",
    "flash_fwd_dot2_kernel": "fp16 flash forward on v_dot2_f32_f16 (packed fp16 pairs, fp32 sums) for gfx906, "
                             "which has no matrix cores; an AMD instruction NVIDIA lacks; compiled for every HIP "
                             "target (dot2 code on gfx906, CDNA and gfx1030, no trap target today), selected at run "
                             "time for fp16 on gfx906/gfx1030, executed only under the HIP CPU Runtime's emulation",
    "gemm_mfma_kernel": "blas::gemm on AMD matrix cores (v_mfma_f32_16x16x16 f16/bf16) where no hipBLAS is "
                        "linked; compiled for every HIP target (a trap body on gfx906, gfx1030), selected at run "
                        "time on gfx908 (fp16)/gfx90a/gfx940, executed only under the HIP CPU Runtime's emulation",
    "linear_gemv_mfma_kernel": "linear's GEMV for 2-32 tokens on AMD matrix cores (v_mfma_f32_16x16x16 f16/bf16); "
                               "compiled for every HIP target (a trap body on gfx906, gfx1030), selected at run time "
                               "on gfx908 (fp16)/gfx90a/gfx940, executed only under the HIP CPU Runtime's emulation",
    "paged_attention_decode_split_mfma_kernel": "split-KV paged decode on AMD matrix cores (v_mfma_f32_16x16x16 "
                                                "f16/bf16); compiled for every HIP target (a trap body on gfx906, "
                                                "gfx1030), selected at run time on gfx908 (fp16)/gfx90a/gfx940, "
                                                "executed only under the HIP CPU Runtime's emulation",
}


# Vendor kernels whose portable sibling has another name and other template arguments (the sibling rules
# of 3 and 4 do not apply): the function name of the kernel that serves where the instruction is missing.
NAMED_SIBLINGS = {
    "linear_gemv_mma_kernel": "linear_gemv_kernel",   # 2-32 tokens on the CUDA-core GEMV (<= 8) or the BLAS
    "linear_gemv_mfma_kernel": "linear_gemv_kernel",
}


def kernel_function(kernel):
    """The unqualified function name of a demangled kernel, e.g. flash_fwd_mfma_kernel (kernels in an
    anonymous namespace demangle with "(anonymous namespace)::", whose parenthesis is not the argument list)."""
    head = re.sub(r"^void\s+", "", kernel.replace("(anonymous namespace)::", "")).split("(")[0].split("<")[0]
    return head.split("::")[-1]


def demangle(names):
    if not names:
        return []
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
    return out.strip().split("\n")


def elf_section_names(blob, off):
    """Section names of the ELF64 image starting at blob[off] (little endian)."""
    if blob[off + 4] != 2 or blob[off + 5] != 1:
        return None, None
    e_flags = struct.unpack_from("<I", blob, off + 0x30)[0]
    e_shoff = struct.unpack_from("<Q", blob, off + 0x28)[0]
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", blob, off + 0x3A)
    if e_shentsize != 64 or e_shnum == 0 or e_shstrndx >= e_shnum:
        return None, None
    base = off + e_shoff
    if base + e_shnum * 64 > len(blob):
        return None, None
    str_hdr = base + e_shstrndx * 64
    str_off = off + struct.unpack_from("<Q", blob, str_hdr + 0x18)[0]
    str_size = struct.unpack_from("<Q", blob, str_hdr + 0x20)[0]
    strtab = blob[str_off:str_off + str_size]
    names = []
    for i in range(e_shnum):
        name_off = struct.unpack_from("<I", blob, base + i * 64)[0]
        end = strtab.find(b"\0", name_off)
        names.append(strtab[name_off:end].decode("ascii", "replace"))
    return e_flags, names


def cuda_kernels(objects):
    """{target: set(mangled kernel names)} from the cubins embedded in the objects."""
    per_target = {}
    for obj in objects:
        blob = open(obj, "rb").read()
        for m in re.finditer(b"\x7fELF", blob):
            if m.start() == 0:
                continue  # the host object itself
            flags, names = elf_section_names(blob, m.start())
            if names is None or not any(n.startswith(".nv.") for n in names):
                continue
            kernels = {n[len(".nv.constant0."):] for n in names if n.startswith(".nv.constant0.")}
            # The SM number sits in e_flags' low byte (sm_90 -> 0x5a) before CUDA 12.9's ABI v2, and
            # in bits 8..15 after it; either way the value is 50..200 for real targets.
            sm = flags & 0xFF if 50 <= (flags & 0xFF) <= 200 else (flags >> 8) & 0xFF
            per_target.setdefault("sm_%d" % sm, set()).update(kernels)
    return per_target


def hip_kernels(objects, bundler, objcopy, nm):
    per_target = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, obj in enumerate(objects):
            fatbin = os.path.join(tmp, "%d.fatbin" % i)
            r = subprocess.run([objcopy, "--dump-section=.hip_fatbin=" + fatbin, obj, os.path.join(tmp, "x.o")],
                               capture_output=True, text=True)
            if r.returncode != 0:
                if "not found" in r.stderr:
                    continue  # host code only (e.g. the dispatcher)
                raise RuntimeError("%s: %s" % (obj, r.stderr.strip()))
            targets = subprocess.run([bundler, "--list", "--type=o", "--input=" + fatbin], check=True,
                                     capture_output=True, text=True).stdout.split()
            for t in targets:
                if not t.startswith("hip"):
                    continue
                co = os.path.join(tmp, "%d.co" % i)
                subprocess.run([bundler, "--unbundle", "--type=o", "--input=" + fatbin, "--targets=" + t,
                                "--output=" + co], check=True, capture_output=True)
                syms = subprocess.run([nm, co], check=True, capture_output=True, text=True).stdout.split("\n")
                kernels = {line.split()[-1][:-3] for line in syms if line.strip().endswith(".kd")}
                per_target.setdefault(t.split("--")[-1], set()).update(kernels)
    return per_target



def portable_sibling(kernel):
    """The portable kernel an NVIDIA-only one stands in for (rule 3 above)."""
    k = re.sub(r"flashport::gpu::nvidia_only::MmaConfig<(\d+)[^>]*>\s*>", r"\1>", kernel)
    return k.replace("nvidia_only::", "").replace("_mma_", "_portable_")

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuda", nargs="+", required=True)
    ap.add_argument("--hip", nargs="+", required=True)
    ap.add_argument("--bundler", default="clang-offload-bundler-15")
    ap.add_argument("--objcopy", default="llvm-objcopy-15")
    ap.add_argument("--nm", default="llvm-nm-15")
    args = ap.parse_args()

    errors = []
    lists = {}
    for vendor, per_target in (("CUDA", cuda_kernels(args.cuda)),
                               ("HIP", hip_kernels(args.hip, args.bundler, args.objcopy, args.nm))):
        if not per_target:
            errors.append("%s: no device code found in the objects" % vendor)
            continue
        union = set().union(*per_target.values())
        for target, kernels in sorted(per_target.items()):
            missing = union - kernels
            print("%s %-8s %3d kernels" % (vendor, target, len(kernels)))
            for k in sorted(demangle(sorted(missing))):
                errors.append("%s target %s lacks kernel %s" % (vendor, target, k))
        lists[vendor] = set(demangle(sorted(union)))
    if len(lists) == 2:
        cuda, hip = lists["CUDA"], lists["HIP"]
        nv_only = {k for k in cuda if "nvidia_only::" in k}
        amd_only = {k for k in hip if kernel_function(k) in AMD_ONLY}
        for k in sorted((cuda - nv_only) - hip):
            errors.append("HIP lacks kernel %s" % k)
        for k in sorted(hip - cuda - amd_only):
            errors.append("CUDA lacks kernel %s" % k)
        for name in sorted(set(AMD_ONLY) - {kernel_function(k) for k in amd_only}):
            errors.append("AMD_ONLY names %s, which no HIP kernel is" % name)
        for k in sorted(amd_only & cuda):
            errors.append("AMD_ONLY kernel %s is in the CUDA build too" % k)
        functions = {vendor: {kernel_function(k) for k in kernels} for vendor, kernels in lists.items()}
        for k in sorted(amd_only | nv_only):
            named = NAMED_SIBLINGS.get(kernel_function(k))
            if named is not None:  # the named sibling, by function name, in both builds
                if named not in functions["CUDA"] or named not in functions["HIP"]:
                    errors.append("vendor kernel %s has no portable sibling %s in both builds" % (k, named))
                continue
            sibling = (re.sub(r"_(mfma|dot2)_", "_portable_", k, count=1) if k in amd_only else portable_sibling(k))
            if sibling == k or sibling not in cuda or sibling not in hip:
                errors.append("%s-only kernel %s has no portable sibling %s in both builds" %
                              ("AMD" if k in amd_only else "NVIDIA", k, sibling))
        print("kernels: %d shared by CUDA and HIP, %d NVIDIA-only, %d AMD-only (each with a portable sibling)" %
              (len(cuda - nv_only), len(nv_only), len(amd_only)))
        for name, why in sorted(AMD_ONLY.items()):
            print("AMD-only %s: %s" % (name, why))
    for e in errors:
        print("ERROR: " + e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
