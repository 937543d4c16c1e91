// `flashport doctor`'s ROCm checks on fake machine trees (no AMD GPU exists here): KFD topology, access to
// /dev/kfd and /dev/dri/renderD*, the video and render groups, and HSA_OVERRIDE_GFX_VERSION.
#include <gtest/gtest.h>

#include "doctor/host.h"
#include "doctor_machine.h"

namespace flashport::doctor::test {
namespace {

TEST(DoctorRocm, GfxNames) {
    EXPECT_EQ(gfx_name(9, 0, 6), "gfx906");
    EXPECT_EQ(gfx_name(9, 0, 10), "gfx90a");  // LLVM's names: hexadecimal minor and stepping
    EXPECT_EQ(gfx_name(10, 3, 0), "gfx1030");
    EXPECT_EQ(gfx_of_override("9.0.6"), "gfx906");
    EXPECT_EQ(gfx_of_override("10.3.0"), "gfx1030");
    EXPECT_EQ(gfx_of_override("11.0.0"), "gfx1100");
    EXPECT_EQ(gfx_of_override("10.3"), std::nullopt);
    EXPECT_EQ(gfx_of_override("ten"), std::nullopt);
}

// (a) An MI50 whose nodes are 0660 to the render group, and a user in neither video nor render.
TEST(DoctorRocm, Mi50WithoutGroupsFailsWithUsermod) {
    FakeMachine m;
    m.kfd({90006});
    m.amd_nodes(1, 0660);
    m.user(false, false);
    const Report r = m.run();
    const Check driver = find_check(r, "rocm.driver");
    EXPECT_EQ(driver.status, Status::OK);
    EXPECT_NE(driver.found.find("gfx906 (node 1)"), std::string::npos) << driver.found;
    for (const char* id : {"rocm.kfd_access", "rocm.render_access", "rocm.groups"}) {
        const Check c = find_check(r, id);
        EXPECT_EQ(c.status, Status::FAIL) << id << ": " << c.found;
        EXPECT_EQ(c.fix, "sudo usermod -aG render,video alice, then log in again (or run newgrp render)") << id;
    }
    EXPECT_NE(find_check(r, "rocm.kfd_access").found.find("mode 0660, group render"), std::string::npos)
        << find_check(r, "rocm.kfd_access").found;
    EXPECT_NE(find_check(r, "rocm.render_access").found.find("renderD128"), std::string::npos);
    EXPECT_EQ(find_check(r, "rocm.groups").found, "member of: none; not of: video, render");
    EXPECT_EQ(r.exit_status(), 1);
}

// Mode bits decide, not the group: nodes a udev rule opened to all need no membership.
TEST(DoctorRocm, NodesOpenToAllNeedNoGroups) {
    FakeMachine m;
    m.kfd({90006});
    m.amd_nodes(1, 0666);
    m.user(false, false);
    const Report r = m.run();
    EXPECT_EQ(find_check(r, "rocm.kfd_access").status, Status::OK);
    EXPECT_EQ(find_check(r, "rocm.kfd_access").found, "/dev/kfd read-write open to all");
    const Check groups = find_check(r, "rocm.groups");
    EXPECT_EQ(groups.status, Status::OK);
    EXPECT_NE(groups.found.find("enough: the GPU nodes open"), std::string::npos) << groups.found;
}

// Owner-only nodes are closed to a group member, as the kernel decides; root may open anything.
TEST(DoctorRocm, OwnerBitsAndRoot) {
    FakeMachine m;
    m.kfd({90006});
    m.amd_nodes(1, 0600);
    m.user(true, true);
    const Check owner_only = find_check(m.run(), "rocm.kfd_access");
    EXPECT_EQ(owner_only.status, Status::FAIL);
    EXPECT_NE(owner_only.fix.find("udev rule"), std::string::npos) << owner_only.fix;  // groups cannot help
    m.user(true, false);
    m.amd_nodes(1, 0660);
    EXPECT_EQ(find_check(m.run(), "rocm.kfd_access").status, Status::OK);  // render is the nodes' group
    const Check groups = find_check(m.run(), "rocm.groups");
    EXPECT_EQ(groups.status, Status::OK);  // video is missing, but nothing needs it here
    EXPECT_EQ(groups.found, "member of: render; not of: video (enough: the GPU nodes open read-write)");
    m.root_user();
    const Report r = m.run();
    EXPECT_EQ(find_check(r, "rocm.kfd_access").found, "/dev/kfd read-write as root");
    EXPECT_EQ(find_check(r, "rocm.groups").status, Status::OK);
}

// (e) A healthy MI50 pair: every ROCm check passes.
TEST(DoctorRocm, HealthyMachineAllOk) {
    FakeMachine m;
    m.kfd({90006, 90006});
    m.amd_nodes(2, 0660);
    m.user(true, true);
    const Report r = m.run();
    int rocm = 0;
    for (const Check& c : r.checks)
        if (c.group == "rocm") {
            ++rocm;
            EXPECT_EQ(c.status, Status::OK) << c.id << ": " << c.found;
            EXPECT_TRUE(c.fix.empty()) << c.id;
        }
    EXPECT_EQ(rocm, 5);
    EXPECT_EQ(find_check(r, "rocm.render_access").found,
              "read-write: renderD128 (through group render), renderD129 (through group render)");
    EXPECT_EQ(find_check(r, "rocm.groups").found, "member of: video, render");
    EXPECT_EQ(r.count(Status::FAIL), 0) << report_text(r);
    EXPECT_EQ(r.exit_status(), 0);
}

TEST(DoctorRocm, TopologyWithoutGpuFails) {
    FakeMachine m;
    m.kfd({});
    const Check c = find_check(m.run(), "rocm.driver");
    EXPECT_EQ(c.status, Status::FAIL);
    EXPECT_NE(c.found.find("CPU nodes only"), std::string::npos);
    EXPECT_NE(c.fix.find("dmesg"), std::string::npos);
}

// (b) HSA_OVERRIDE_GFX_VERSION against the real chip.
TEST(DoctorRocm, HsaOverrideOtherFamilyFails) {
    FakeMachine m;
    m.kfd({90006});
    m.env()["HSA_OVERRIDE_GFX_VERSION"] = "10.3.0";
    const Check c = find_check(m.run(), "rocm.hsa_override");
    EXPECT_EQ(c.status, Status::FAIL);
    EXPECT_EQ(c.found,
              "HSA_OVERRIDE_GFX_VERSION=10.3.0: gfx906 is not in gfx1030's family: its code objects "
              "fault or hang there");
    EXPECT_NE(c.fix.find("unset HSA_OVERRIDE_GFX_VERSION"), std::string::npos);
}

TEST(DoctorRocm, HsaOverrideCases) {
    const auto status = [](int real, const std::string& value, const std::string& backend = "none") {
        FakeMachine m;
        m.kfd({real});
        m.env()["HSA_OVERRIDE_GFX_VERSION"] = value;
        m.runtime().backend = backend;
        m.runtime().build_archs = {"gfx906", "gfx1030"};
        return find_check(m.run(), "rocm.hsa_override");
    };
    EXPECT_EQ(status(90006, "9.0.6").status, Status::WARN);    // the chip itself: does nothing
    EXPECT_EQ(status(90006, "9.0.8").status, Status::FAIL);    // each gfx9 chip is its own ISA
    EXPECT_EQ(status(100301, "10.3.0").status, Status::OK);    // the usual RX 6700 XT override
    EXPECT_EQ(status(100300, "10.3.1").status, Status::WARN);  // gfx1030 has native code
    EXPECT_EQ(status(110001, "10.3.0").status, Status::FAIL);  // RDNA3 as RDNA2
    EXPECT_EQ(status(90006, "gfx906").status, Status::FAIL);   // not a version
    // A HIP build's own targets decide what is native (gfx1101 is not among them); elsewhere ROCm's do.
    EXPECT_EQ(status(110001, "11.0.0", "HIP").status, Status::OK);
    EXPECT_EQ(status(110001, "11.0.0").status, Status::WARN);
}

TEST(DoctorRocm, HsaOverrideWithoutAmdGpuWarns) {
    FakeMachine m;
    m.env()["HSA_OVERRIDE_GFX_VERSION"] = "10.3.0";
    const Check c = find_check(m.run(), "rocm.hsa_override");
    EXPECT_EQ(c.status, Status::WARN);
    EXPECT_NE(c.found.find("KFD lists no AMD GPU"), std::string::npos);
}

}  // namespace
}  // namespace flashport::doctor::test
