// The real `flashport doctor` binary on this machine (no GPU here, a CPU build) and on a fake machine
// given with --root: its text, its JSON, and its exit statuses (0 clean, 1 a failed check or a bad
// model folder, 2 bad usage).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "doctor_machine.h"

namespace flashport::doctor::test {
namespace {

struct CliRun {
    int rc = -1;
    std::string out, err;
};

std::string slurp(const fs::path& p) {
    std::ifstream f(p);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

CliRun doctor(const std::string& args) {
    FakeMachine tmp;  // a scratch folder for the output files
    const fs::path out = tmp.root() / "out", err = tmp.root() / "err";
    const std::string cmd = std::string(FLASHPORT_CLI_PATH) + " doctor " + args + " > " + out.string() + " 2> " +
                            err.string() + " < /dev/null";
    const int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

TEST(DoctorCli, ThisMachineText) {
    const CliRun r = doctor("");
    EXPECT_TRUE(r.err.empty()) << r.err;
    // A CPU build (this test's, as the binary's): no GPU is not a failure of the machine.
    if (std::string(gpu_backend_name()) == "none")
        EXPECT_NE(r.out.find("GPU and driver\n[skip] gpu.visible: this build has no GPU backend"), std::string::npos)
            << r.out;
    else
        EXPECT_NE(r.out.find("GPU and driver\n["), std::string::npos) << r.out;
    for (const char* title : {"\nBuild\n", "\nROCm\n", "\nContainer\n", "\nNCCL / RCCL\n", "\nCPU\n"})
        EXPECT_NE(r.out.find(title), std::string::npos) << title << " missing:\n" << r.out;
    EXPECT_NE(r.out.find("[ok]   cpu.isa: flash kernels: "), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("\nModel\n"), std::string::npos);  // only with --model
    EXPECT_EQ(r.rc, r.out.find("[fail]") == std::string::npos ? 0 : 1) << r.out;
}

TEST(DoctorCli, ThisMachineJson) {
    const CliRun r = doctor("--json");
    const nlohmann::json j = nlohmann::json::parse(r.out);  // throws, failing the test, if it is not JSON
    std::set<std::string> groups, ids;
    int fails = 0;
    for (const nlohmann::json& c : j.at("checks")) {
        groups.insert(c.at("group").get<std::string>());
        ids.insert(c.at("id").get<std::string>());
        const std::string status = c.at("status");
        EXPECT_TRUE(status == "ok" || status == "warn" || status == "fail" || status == "skip") << status;
        EXPECT_FALSE(c.at("found").get<std::string>().empty()) << c.dump();
        if (status == "ok") {
            EXPECT_TRUE(c.at("fix").get<std::string>().empty()) << c.dump();
        }
        fails += status == "fail";
    }
    EXPECT_EQ(groups, (std::set<std::string>{"gpu", "build", "rocm", "container", "nccl", "cpu"}));
    for (const char* id : {"gpu.visible", "gpu.driver", "build.arch", "rocm.kfd_access", "rocm.hsa_override",
                           "container.shm", "nccl.socket_ifname", "cpu.blas"})
        EXPECT_TRUE(ids.count(id)) << id;
    EXPECT_EQ(j.at("fail").get<int>(), fails);
    EXPECT_EQ(j.at("ok").get<int>() + j.at("warn").get<int>() + fails + j.at("skip").get<int>(),
              int(j.at("checks").size()));
    EXPECT_EQ(r.rc, fails ? 1 : 0);
}

// The MI50 of test_doctor_rocm, through the binary: a failed check is exit status 1.
TEST(DoctorCli, FakeMachineFailsWithStatusOne) {
    FakeMachine m;
    m.kfd({90006});
    m.amd_nodes(1, 0660);
    m.user(false, false);
    m.meminfo_kb(1 << 20);
    const CliRun r = doctor("--root " + m.root().string() + " --model " + FP_TINY_KJV_DIR);
    EXPECT_EQ(r.rc, 1) << r.out << r.err;
    EXPECT_NE(r.out.find("[fail] rocm.kfd_access: /dev/kfd cannot be opened read-write (mode 0660, group render"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("       fix: sudo usermod -aG render,video alice"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("[ok]   model.fit_cpu: "), std::string::npos) << r.out;
}

TEST(DoctorCli, Errors) {
    // A bad request is one `error:` line; usage errors exit 2, a bad folder or size 1.
    const auto one_line = [](const CliRun& r, int rc, const std::string& needle) {
        EXPECT_EQ(r.rc, rc) << r.err;
        EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
        EXPECT_TRUE(r.out.empty()) << r.out;
    };
    const std::string model = std::string(" --model ") + FP_TINY_KJV_DIR;
    one_line(doctor(model + " --ctx 9223372036854775807"), 1, "overflows int64");
    one_line(doctor(model + " --ctx 99999999999999999999"), 2, "--ctx must be an integer in [1, ");
    one_line(doctor(model + " --ctx -5"), 2, "got '-5'");
    one_line(doctor("--ctx 100"), 2, "--ctx needs --model");
    one_line(doctor("--model /no/such/folder"), 1, "/no/such/folder: not a model folder");
    one_line(doctor("--root /no/such/root"), 2, "--root /no/such/root is not a folder");
    one_line(doctor("--no-such-flag"), 2, "--no-such-flag");
}

}  // namespace
}  // namespace flashport::doctor::test
