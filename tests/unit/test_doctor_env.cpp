// `flashport doctor`'s checks of containers, NCCL's variables, the *_VISIBLE_DEVICES lists, the GPU
// driver and the build's GPU code, on fake machines and fake runtime facts.
#include <gtest/gtest.h>

#include "doctor_machine.h"

namespace flashport::doctor::test {
namespace {

// (c) A container on an MI50 host that was started without the GPU's device nodes.
TEST(DoctorContainer, MissingKfdFailsNamingTheDevices) {
    FakeMachine m;
    m.docker();
    m.kfd({90006});
    m.user(false, false);
    const Report r = m.run();
    EXPECT_EQ(find_check(r, "container.detected").found, "docker (/.dockerenv)");
    const Check c = find_check(r, "container.gpu_devices");
    EXPECT_EQ(c.status, Status::FAIL);
    EXPECT_EQ(c.found, "the host has an AMD GPU but the container lacks /dev/kfd and /dev/dri");
    EXPECT_EQ(c.fix,
              "start the container with --device=/dev/kfd --device=/dev/dri --group-add video --group-add render");
    EXPECT_NE(find_check(r, "rocm.kfd_access").fix.find("--device=/dev/kfd"), std::string::npos);
    EXPECT_EQ(r.exit_status(), 1);
}

// The drm card and its render node came in, /dev/kfd did not: only the missing one is named.
TEST(DoctorContainer, DrmWithoutKfd) {
    FakeMachine m;
    m.file("proc/1/cgroup", "0::/kubepods/besteffort/pod1234\n");
    m.file("sys/class/drm/card0/device/vendor", "0x1002\n");
    m.file("dev/dri/renderD128", "", 0666);
    m.root_user();
    const Report r = m.run();
    EXPECT_EQ(find_check(r, "container.detected").found, "kubepods in /proc/1/cgroup");
    const Check c = find_check(r, "container.gpu_devices");
    EXPECT_EQ(c.status, Status::FAIL);
    EXPECT_EQ(c.fix, "start the container with --device=/dev/kfd");  // root needs no --group-add
    EXPECT_EQ(find_check(r, "rocm.driver").status, Status::FAIL);    // amdgpu without KFD, as seen from here
}

TEST(DoctorContainer, NvidiaWithoutDevicesSaysGpusAll) {
    FakeMachine m;
    m.file("run/.containerenv", "");
    m.runtime().backend = "CUDA";
    const Report r = m.run();
    const Check c = find_check(r, "container.gpu_devices");
    EXPECT_EQ(c.status, Status::FAIL);
    EXPECT_NE(c.fix.find("--gpus all"), std::string::npos);
    EXPECT_NE(find_check(r, "gpu.visible").fix.find("--gpus all"), std::string::npos);
    m.file("dev/nvidia0", "");
    EXPECT_EQ(find_check(m.run(), "container.gpu_devices").found, "/dev/nvidia0 passed in");
}

// (d) Docker's default 64 MiB /dev/shm.
TEST(DoctorContainer, SmallShmWarns) {
    FakeMachine m;
    m.docker();
    m.shm("size=65536k");
    const Check c = find_check(m.run(), "container.shm");
    EXPECT_EQ(c.status, Status::WARN);
    EXPECT_EQ(c.found, "/dev/shm is 64.0 MiB: too small for NCCL/RCCL between GPUs");
    EXPECT_EQ(c.fix, "start the container with --shm-size=8g or --ipc=host");
    m.shm("size=8g");
    EXPECT_EQ(find_check(m.run(), "container.shm").status, Status::OK);
    m.shm("mode=1777");  // no size=: half of RAM
    EXPECT_EQ(find_check(m.run(), "container.shm").status, Status::OK);
}

TEST(DoctorContainer, ShmFromProcMountsOutsideAContainer) {
    FakeMachine m;
    m.file("proc/mounts", "proc /proc proc rw 0 0\ntmpfs /dev/shm tmpfs rw,nosuid,size=32768k 0 0\n");
    const Report r = m.run();
    const Check c = find_check(r, "container.shm");
    EXPECT_EQ(c.status, Status::WARN);
    EXPECT_EQ(c.fix, "sudo mount -o remount,size=8G /dev/shm");
    EXPECT_EQ(find_check(r, "container.detected").found, "not in a container");
    EXPECT_EQ(find_check(r, "container.gpu_devices").status, Status::SKIP);
}

// (f) NCCL_SOCKET_IFNAME against ROOT/sys/class/net.
TEST(DoctorNccl, SocketIfname) {
    FakeMachine m;
    m.file("sys/class/net/lo/type", "772\n");
    m.file("sys/class/net/eth0/type", "1\n");
    const auto check = [&](const std::string& value) {
        m.env()["NCCL_SOCKET_IFNAME"] = value;
        return find_check(m.run(), "nccl.socket_ifname");
    };
    const Check missing = check("ib0");
    EXPECT_EQ(missing.status, Status::FAIL);
    EXPECT_EQ(missing.found, "NCCL_SOCKET_IFNAME=ib0 leaves NCCL no interface; interfaces here: lo, eth0");
    EXPECT_NE(missing.fix.find("ip -br link"), std::string::npos);
    const Check partial = check("eth,ib");
    EXPECT_EQ(partial.status, Status::WARN);
    EXPECT_EQ(partial.found, "NCCL_SOCKET_IFNAME=eth,ib: no interface matches ib; NCCL uses eth0");
    EXPECT_EQ(check("eth").status, Status::OK);     // a prefix
    EXPECT_EQ(check("=eth").status, Status::FAIL);  // an exact name
    EXPECT_EQ(check("^lo").found, "NCCL_SOCKET_IFNAME=^lo: NCCL may use eth0");
    EXPECT_EQ(check("^eth,lo").status, Status::FAIL);  // excludes everything
    m.env().erase("NCCL_SOCKET_IFNAME");
    EXPECT_EQ(find_check(m.run(), "nccl.socket_ifname").status, Status::OK);
}

TEST(DoctorNccl, P2pDisableAndTimeouts) {
    FakeMachine m;
    m.env()["NCCL_P2P_DISABLE"] = "1";
    m.env()["NCCL_ASYNC_ERROR_HANDLING"] = "1";
    m.env()["NCCL_DEBUG"] = "INFO";
    const Report r = m.run();
    EXPECT_EQ(find_check(r, "nccl.p2p_disable").status, Status::WARN);
    EXPECT_NE(find_check(r, "nccl.p2p_disable").found.find("slowing multi-GPU"), std::string::npos);
    EXPECT_EQ(find_check(r, "nccl.debug").found, "NCCL_DEBUG=INFO");
    const Check t = find_check(r, "nccl.timeouts");
    EXPECT_EQ(t.status, Status::WARN);
    EXPECT_EQ(t.fix, "use the TORCH_NCCL_ names: NCCL_ASYNC_ERROR_HANDLING -> TORCH_NCCL_ASYNC_ERROR_HANDLING");
    EXPECT_EQ(r.exit_status(), 0);  // warnings only
}

// (g) The visible-devices lists against two AMD GPUs.
TEST(DoctorVisibleDevices, Lists) {
    FakeMachine m;
    m.kfd({90006, 90006});
    const auto check = [&](const std::string& name, const std::string& value, const std::string& id) {
        m.env() = {{name, value}};
        return find_check(m.run(), id);
    };
    const Check empty = check("HIP_VISIBLE_DEVICES", "", "gpu.hip_visible_devices");
    EXPECT_EQ(empty.status, Status::FAIL);
    EXPECT_EQ(empty.found, "HIP_VISIBLE_DEVICES='' hides every GPU (2 found)");
    EXPECT_EQ(empty.fix, "unset HIP_VISIBLE_DEVICES, or list the GPUs to use (0-1)");
    const Check partly = check("HIP_VISIBLE_DEVICES", "0,3", "gpu.hip_visible_devices");
    EXPECT_EQ(partly.status, Status::WARN);
    EXPECT_EQ(partly.found, "HIP_VISIBLE_DEVICES='0,3': no GPU has index 3 (2 found: 0-1)");
    EXPECT_EQ(check("ROCR_VISIBLE_DEVICES", "5", "gpu.rocr_visible_devices").status, Status::FAIL);
    EXPECT_EQ(check("CUDA_VISIBLE_DEVICES", "-1", "gpu.cuda_visible_devices").status, Status::FAIL);
    EXPECT_EQ(check("HIP_VISIBLE_DEVICES", "1", "gpu.hip_visible_devices").found,
              "HIP_VISIBLE_DEVICES='1': 1 of the 2 GPU(s)");
    EXPECT_EQ(check("ROCR_VISIBLE_DEVICES", "GPU-4f1b2c", "gpu.rocr_visible_devices").status, Status::OK);
    // HIP indexes what ROCR left: one GPU, so index 1 names none.
    m.env() = {{"ROCR_VISIBLE_DEVICES", "1"}, {"HIP_VISIBLE_DEVICES", "1"}};
    const Report both = m.run();
    EXPECT_EQ(find_check(both, "gpu.rocr_visible_devices").status, Status::OK);
    EXPECT_EQ(find_check(both, "gpu.hip_visible_devices").status, Status::FAIL);
}

TEST(DoctorVisibleDevices, NoGpuToCompare) {
    FakeMachine m;
    m.env()["CUDA_VISIBLE_DEVICES"] = "0,1";
    EXPECT_EQ(find_check(m.run(), "gpu.cuda_visible_devices").found,
              "CUDA_VISIBLE_DEVICES='0,1' (no GPU found to compare it with)");
    m.env()["CUDA_VISIBLE_DEVICES"] = "";
    EXPECT_EQ(find_check(m.run(), "gpu.cuda_visible_devices").status, Status::WARN);
}

// A CPU build on a machine without GPU drivers: nothing fails, the GPU and ROCm checks say why they skip.
TEST(DoctorGpu, BareCpuMachineSkips) {
    FakeMachine m;
    const Report r = m.run();
    const Check c = find_check(r, "gpu.visible");
    EXPECT_EQ(c.status, Status::SKIP);
    EXPECT_NE(c.found.find("this build has no GPU backend"), std::string::npos);
    EXPECT_EQ(find_check(r, "build.arch").status, Status::SKIP);
    const Check kfd = find_check(r, "rocm.kfd_access");
    EXPECT_EQ(kfd.status, Status::SKIP);
    EXPECT_NE(kfd.found.find("no AMD GPU driver"), std::string::npos);
    EXPECT_EQ(find_check(r, "rocm.hsa_override").status, Status::OK);
    EXPECT_EQ(r.exit_status(), 0) << report_text(r);
}

// The GPU facts a CUDA or HIP build would report.

TEST(DoctorGpu, DriverOlderThanRuntimeFails) {
    FakeMachine m;
    m.runtime().backend = "CUDA";
    m.runtime().gpus = {{"NVIDIA A100 (sm_80)", "sm_80", int64_t(40) << 30}};
    m.runtime().build_archs = {"80-real", "86-real", "89-real", "90"};
    m.runtime().versions = {12020, 12040};
    const Report r = m.run();
    const Check c = find_check(r, "gpu.driver");
    EXPECT_EQ(c.status, Status::FAIL);
    EXPECT_EQ(c.found, "driver 12.2 is older than the CUDA runtime 12.4 this build links");
    EXPECT_NE(c.fix.find("update the NVIDIA driver"), std::string::npos);
    m.runtime().versions = {12080, 12040};
    EXPECT_EQ(find_check(m.run(), "gpu.driver").found, "driver 12.8, runtime 12.4 (CUDA)");
    m.runtime().versions = {0, 12040};
    EXPECT_EQ(find_check(m.run(), "gpu.driver").status, Status::FAIL);
    m.runtime().gpus.clear();
    EXPECT_EQ(find_check(m.run(), "gpu.visible").status, Status::FAIL);
}

TEST(DoctorBuild, CudaArchCoverage) {
    const auto check = [](const std::string& arch,
                          std::vector<std::string> built = {"80-real", "86-real", "89-real", "90"}) {
        FakeMachine m;
        m.runtime().backend = "CUDA";
        m.runtime().versions = {12040, 12040};
        m.runtime().gpus = {{"a GPU", arch, int64_t(1) << 30}};
        m.runtime().build_archs = std::move(built);
        return find_check(m.run(), "build.arch");
    };
    EXPECT_EQ(check("sm_86").status, Status::OK);
    EXPECT_NE(check("sm_87").found.find("sm_87 runs sm_86 machine code"), std::string::npos);  // same major
    const Check turing = check("sm_75");
    EXPECT_EQ(turing.status, Status::FAIL);
    EXPECT_EQ(turing.fix,
              "cmake --preset cuda -DCMAKE_CUDA_ARCHITECTURES=\"80-real;86-real;89-real;90;75-real\" "
              "&& cmake --build build/cuda");
    const Check blackwell = check("sm_100");
    EXPECT_EQ(blackwell.status, Status::WARN);  // compute_90 PTX, JIT-compiled
    EXPECT_NE(blackwell.found.find("JIT-compiles compute_90 PTX"), std::string::npos) << blackwell.found;
    EXPECT_EQ(check("sm_90", {"90a-real"}).status, Status::OK);
    EXPECT_EQ(check("sm_89", {"90a"}).status, Status::FAIL);  // arch-specific code runs on sm_90 only
    EXPECT_EQ(check("sm_90", {"80-virtual"}).status, Status::WARN);
}

TEST(DoctorBuild, HipArchFromKfd) {
    FakeMachine m;
    m.kfd({110000});
    m.runtime().backend = "HIP";
    m.runtime().build_archs = {"gfx906", "gfx908", "gfx90a"};
    const Check c = find_check(m.run(), "build.arch");
    EXPECT_EQ(c.status, Status::FAIL);
    EXPECT_NE(c.found.find("no code object for gfx1100"), std::string::npos) << c.found;
    EXPECT_EQ(c.fix,
              "cmake --preset hip -DFLASHPORT_HIP_ARCHS=\"gfx906;gfx908;gfx90a;gfx1100\" "
              "&& cmake --build build/hip");
    // An override the build has code for makes it run (rocm.hsa_override judges the override itself).
    m.env()["HSA_OVERRIDE_GFX_VERSION"] = "9.0.6";
    EXPECT_EQ(find_check(m.run(), "build.arch").status, Status::OK);
}

TEST(DoctorCpu, IsaThreadsAndBlas) {
    FakeMachine m;
    m.file("proc/cpuinfo",
           "processor\t: 0\nmodel name\t: Fake CPU 9000\nprocessor\t: 1\nmodel name\t: Fake CPU 9000\n");
    m.runtime().cpu_threads = 8;
    m.runtime().cpu_isa = "generic";
    m.runtime().blas.clear();
    m.runtime().blas_error = "libopenblas.so.0: cannot open shared object file";
    const Report r = m.run();
    EXPECT_EQ(find_check(r, "cpu.model").found, "Fake CPU 9000, 2 logical CPUs");
    EXPECT_EQ(find_check(r, "cpu.isa").status, Status::WARN);
    const Check threads = find_check(r, "cpu.threads");
    EXPECT_EQ(threads.status, Status::WARN);
    EXPECT_EQ(threads.fix.rfind("set OMP_NUM_THREADS=2 or fewer", 0), 0u) << threads.fix;
    EXPECT_NE(find_check(r, "cpu.blas").found.find("cannot open shared object"), std::string::npos);
    m.runtime().cpu_isa.clear();
    m.runtime().cpu_isa_error = "FLASHPORT_CPU_ISA=avx512 but this CPU lacks AVX-512";
    EXPECT_EQ(find_check(m.run(), "cpu.isa").status, Status::FAIL);
}

TEST(DoctorReport, TextAndJson) {
    FakeMachine m;
    m.docker();
    m.shm("size=65536k");
    const Report r = m.run();
    const std::string text = report_text(r);
    EXPECT_NE(text.find("Container\n[ok]   container.detected: docker (/.dockerenv)\n"), std::string::npos) << text;
    EXPECT_NE(text.find("[warn] container.shm: /dev/shm is 64.0 MiB: too small for NCCL/RCCL between GPUs\n"
                        "       fix: start the container with --shm-size=8g or --ipc=host\n"),
              std::string::npos)
        << text;
    const nlohmann::ordered_json j = report_json(r);
    EXPECT_EQ(j.at("warn").get<int>(), r.count(Status::WARN));
    EXPECT_EQ(j.at("checks").size(), r.checks.size());
    const nlohmann::json& first = j.at("checks").at(0);
    EXPECT_EQ(first.at("id"), "gpu.visible");
    EXPECT_EQ(first.at("group"), "gpu");
    EXPECT_EQ(first.at("status"), "skip");
}

}  // namespace
}  // namespace flashport::doctor::test
