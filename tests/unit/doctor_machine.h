// Fake machines for `flashport doctor`'s tests: a folder standing in for "/", with the /proc, /sys, /dev and
// /etc files the checks read, and Inputs pointing at it. Device nodes are plain files with the node's mode.
//
// The files belong to whoever runs the test (root in CI), so the fake identity is chosen apart from them:
// a uid that owns nothing, and groups named after the files' real gid when the identity should have
// access through them. The answers are then the same for every user running the test.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "doctor/doctor.h"

namespace flashport::doctor::test {

namespace fs = std::filesystem;

class FakeMachine {
public:
    FakeMachine() {
        static int counter = 0;
        root_ = fs::temp_directory_path() /
                ("flashport_doctor_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
        fs::remove_all(root_);
        fs::create_directories(root_);
        struct stat st {};
        ::stat(root_.c_str(), &st);
        file_uid_ = st.st_uid;
        file_gid_ = st.st_gid;
        user_uid_ = apart(4242);
        user_gid_ = apart(4343);
        video_gid_ = apart(4444);
        // A CPU machine with nothing set: each test adds what it is about.
        in_.root = root_;
        in_.runtime.cpu_isa = "avx2";
        in_.runtime.cpu_threads = 2;
        in_.runtime.blas = "OpenBLAS (fake)";
    }
    ~FakeMachine() { fs::remove_all(root_); }
    FakeMachine(const FakeMachine&) = delete;
    FakeMachine& operator=(const FakeMachine&) = delete;

    const fs::path& root() const { return root_; }
    Inputs& inputs() { return in_; }
    Env& env() { return in_.env; }
    RuntimeFacts& runtime() { return in_.runtime; }

    void file(const std::string& rel, const std::string& text, mode_t mode = 0644) {
        const fs::path p = root_ / rel;
        fs::create_directories(p.parent_path());
        std::ofstream(p) << text;
        ::chmod(p.c_str(), mode);
    }

    // A user `alice` (uid apart from the files' owner); in_render / in_video: her groups include the ones
    // the device nodes belong to. /etc/group names the files' gid "render".
    void user(bool in_render, bool in_video) {
        std::string groups;
        if (in_render) groups += std::to_string(file_gid_) + " ";
        if (in_video) groups += std::to_string(video_gid_);
        file("proc/self/status",
             "Name:\tflashport\nUid:\t" + ids(user_uid_) + "\nGid:\t" + ids(user_gid_) + "\nGroups:\t" + groups + "\n");
        // No root line: when root runs the test, the files' gid 0 is "render" here.
        file("etc/group", "video:x:" + std::to_string(video_gid_) + ":\nrender:x:" + std::to_string(file_gid_) +
                              ":\nalice:x:" + std::to_string(user_gid_) + ":\n");
        file("etc/passwd",
             "alice:x:" + std::to_string(user_uid_) + ":" + std::to_string(user_gid_) + "::/home/alice:/bin/bash\n");
    }
    void root_user() {
        file("proc/self/status", "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t\n");
        file("etc/group", "root:x:0:\nvideo:x:44:\nrender:x:109:\n");
    }

    // KFD topology: node 0 the CPU, then one node per gfx_target_version (90006 = gfx906).
    void kfd(const std::vector<int>& gfx_target_versions) {
        file("sys/class/kfd/kfd/topology/nodes/0/properties", "cpu_cores_count 16\ngfx_target_version 0\n");
        for (size_t i = 0; i < gfx_target_versions.size(); ++i)
            file("sys/class/kfd/kfd/topology/nodes/" + std::to_string(i + 1) + "/properties",
                 "simd_count 240\ngfx_target_version " + std::to_string(gfx_target_versions[i]) + "\n");
    }
    // /dev/kfd and /dev/dri/renderD128.. with `mode`, owned by the files' gid ("render").
    void amd_nodes(int gpus, mode_t mode) {
        file("dev/kfd", "", mode);
        for (int i = 0; i < gpus; ++i) file("dev/dri/renderD" + std::to_string(128 + i), "", mode);
    }
    void docker() { file(".dockerenv", ""); }
    void shm(const std::string& size_option) {
        file("proc/self/mountinfo", "25 24 0:23 / /dev/shm rw,nosuid,nodev - tmpfs shm rw," + size_option + "\n");
    }
    void meminfo_kb(long long available_kb) {
        file("proc/meminfo", "MemTotal:       99999999 kB\nMemFree:        1000 kB\nMemAvailable:   " +
                                 std::to_string(available_kb) + " kB\n");
    }

    Report run() const { return run_checks(in_); }

private:
    // An id that is not the files' owner or group, so access is decided by the mode bits alone.
    uint32_t apart(uint32_t id) const {
        while (id == file_uid_ || id == file_gid_) ++id;
        return id;
    }
    static std::string ids(uint32_t id) {
        const std::string s = std::to_string(id);
        return s + "\t" + s + "\t" + s + "\t" + s;
    }

    fs::path root_;
    uint32_t file_uid_ = 0, file_gid_ = 0, user_uid_ = 0, user_gid_ = 0, video_gid_ = 0;
    Inputs in_;
};

// The check with `id`; fails the test (and returns a blank one) when absent.
inline Check find_check(const Report& r, const std::string& id) {
    for (const Check& c : r.checks)
        if (c.id == id) return c;
    ADD_FAILURE() << "no check " << id << " in:\n" << report_text(r);
    return {};
}

}  // namespace flashport::doctor::test
