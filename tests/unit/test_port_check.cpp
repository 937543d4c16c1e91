// port-check (src/portcheck): each rule on a snippet written for it, the negatives it must leave alone,
// suppressions, the JSON and SARIF outputs, the exit statuses, and flashport's own source kept clean.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <unistd.h>

#include "portcheck/output.h"
#include "portcheck/rules.h"
#include "portcheck/run.h"
#include "portcheck/scanner.h"

namespace pc = flashport::portcheck;

namespace {

std::vector<pc::Finding> scan(const std::string& text, const std::string& path = "k.cu") {
    static const pc::Scanner scanner;
    return scanner.scan(path, text, pc::language_of(path));
}

std::string where(const std::vector<pc::Finding>& fs) {
    std::string s;
    for (const auto& f : fs) s += f.rule + "@" + std::to_string(f.line) + ":" + std::to_string(f.column) + " ";
    return s;
}

struct Positive {
    const char* rule;
    const char* path;
    const char* snippet;
    int line, column;
};

// One snippet per rule; the finding must come at this line:col (of the snippet, 1-based).
const Positive kPositives[] = {
    {"warp-size-32", "k.cu", "__device__ void f() {\n  if (warpSize == 32) g();\n}\n", 2, 7},
    {"warp-size-define", "k.cuh", "#define WARP_SIZE 32\n", 1, 9},
    {"warp-size-constant", "k.cu", "constexpr int kWarp = 32;\n", 1, 15},
    {"full-mask-32", "k.cu", "v += __shfl_xor_sync(0xffffffff, v, 1);\n", 1, 6},
    {"full-mask-32", "k.hip", "unsigned b = __ballot_sync(0xFFFFFFFFu, p);\n", 1, 14},
    {"activemask", "k.cu", "unsigned m = __activemask();\n", 1, 14},
    {"lane-arithmetic-32", "k.cu", "int lane = threadIdx.x & 31;\n", 1, 12},
    {"lane-arithmetic-32", "k.cu", "int w = threadIdx.x / 32;\n", 1, 9},
    {"lane-arithmetic-32", "k.cu", "int l = threadIdx.x % 32;\n", 1, 9},
    {"lane-arithmetic-32", "k.cu", "int w = threadIdx.x >> 5;\n", 1, 9},
    {"inline-ptx", "k.cu", "  asm volatile(\"cp.async.commit_group;\\n\" ::);\n", 1, 3},
    {"nvidia-header-cublaslt", "k.cpp", "#include <cublasLt.h>\n", 1, 11},
    {"nvidia-header-cudnn", "k.cpp", "#include <cudnn.h>\n", 1, 11},
    {"nvidia-header-cutlass", "k.cu", "#include \"cutlass/gemm/device/gemm.h\"\n", 1, 11},
    {"nvidia-header-nvml", "k.cpp", "#include <nvml.h>\n", 1, 11},
    {"nvidia-header-cupti", "k.cpp", "#include <cupti.h>\n", 1, 11},
    {"nvidia-header-nvtx", "k.cpp", "#include <nvtx3/nvToolsExt.h>\n", 1, 11},
    {"nvidia-header-bf16", "k.cu", "#include <cuda_bf16.h>\n", 1, 11},
    {"nvidia-header-fp8", "k.cu", "#include <cuda_fp8.h>\n", 1, 11},
    {"nvidia-type-bf16", "k.cu", "__nv_bfloat16 x;\n", 1, 1},
    {"hw-bf16", "k.hip", "__hip_bfloat16 x;\n", 1, 1},
    {"hw-fp8", "k.cu", "__nv_fp8_e4m3 x;\n", 1, 1},
    {"torch-version-cuda", "t.py", "import torch\nif torch.version.cuda:\n    pass\n", 2, 4},
    {"nvidia-smi", "t.py", "subprocess.run([\"nvidia-smi\", \"-L\"])\n", 1, 18},
    {"import-xformers", "t.py", "import xformers.ops\n", 1, 8},
    {"import-flash-attn", "t.py", "from flash_attn import flash_attn_func\n", 1, 6},
    {"import-bitsandbytes", "t.py", "import bitsandbytes as bnb\n", 1, 8},
    {"import-apex", "t.py", "  from apex import amp\n", 1, 8},
    {"hw-bf16-torch", "t.py", "x = y.to(torch.bfloat16)\n", 1, 10},
    {"hw-fp8-torch", "t.py", "x = y.to(torch.float8_e4m3fn)\n", 1, 10},
};

}  // namespace

TEST(PortCheck, EachRuleFiresOnItsSnippetAtItsPosition) {
    for (const Positive& p : kPositives) {
        const auto fs = scan(p.snippet, p.path);
        bool hit = false;
        for (const auto& f : fs) hit |= f.rule == p.rule && f.line == p.line && f.column == p.column;
        EXPECT_TRUE(hit) << p.rule << " in " << p.path << ": want @" << p.line << ":" << p.column << ", got "
                         << where(fs);
    }
}

TEST(PortCheck, EveryPatternRuleHasAPositiveSnippet) {
    for (const pc::Rule& r : pc::rules()) {
        if (r.pattern == nullptr) continue;
        bool covered = false;
        for (const Positive& p : kPositives) covered |= std::string(p.rule) == r.id;
        EXPECT_TRUE(covered) << r.id;
    }
}

TEST(PortCheck, LeavesCommentsStringsAndPortableCodeAlone) {
    const char* negatives[] = {
        "// if (warpSize == 32) with __shfl_xor_sync(0xffffffff, v, 1)\n",
        "/* #define WARP_SIZE 32\n   threadIdx.x & 31 */ int x;\n",
        "const char* s = \"threadIdx.x & 31 and __activemask() and asm(\";\n",
        "int lane = threadIdx.x & (warpSize - 1);\nint w = threadIdx.x / warpSize;\n",
        "if (warpSize == 64) g();\nconstexpr int kBlock = 32;\n",
        "int n = 1'000'000; char c = 'a'; int y = threadIdx.x & 63;\n",
        "auto r = R\"x(asm( threadIdx.x % 32 )x\";\n",
        "#include <hip/hip_bf16.h>\n#include \"common.cuh\"\n",
    };
    for (const char* n : negatives) EXPECT_EQ(where(scan(n, "k.cu")), "") << n;
    // asm in host C++ is host assembly, which ROCm builds too.
    EXPECT_EQ(where(scan("asm(\"\" : \"+v\"(v));\n", "k.cpp")), "");
    // Python: comments are skipped; torch.version.cuda in a docstring is prose.
    EXPECT_EQ(where(scan("# import flash_attn; torch.version.cuda; nvidia-smi\nx = 1\n", "t.py")), "");
    EXPECT_EQ(where(scan("\"\"\"Builds CUDA when torch.version.cuda is set.\"\"\"\n", "t.py")), "");
    EXPECT_EQ(where(scan("s = '#'  # import apex\nimport os\n", "t.py")), "");
}

TEST(PortCheck, SuppressionWithReasonApplies) {
    EXPECT_EQ(where(scan("// port-check: ignore warp-size-define -- the NVIDIA branch\n#define WARP_SIZE 32\n")), "");
    EXPECT_EQ(where(scan("int l = threadIdx.x & 31;  // port-check: ignore lane-arithmetic-32 -- wave32 only\n")), "");
    EXPECT_EQ(where(scan("# port-check: ignore import-apex, hw-bf16-torch -- CUDA bench\nimport apex\n", "t.py")), "");
    // ignore-file covers every line; a plain ignore covers only its line and the next.
    EXPECT_EQ(where(scan("// port-check: ignore-file inline-ptx -- CUDA-only file\n\n\nasm(\"x\");\n")), "");
    EXPECT_EQ(where(scan("// port-check: ignore inline-ptx -- here only\n\n\nasm(\"x\");\n")), "inline-ptx@4:1 ");
    // Another rule on the suppressed line still fires.
    EXPECT_EQ(where(scan("// port-check: ignore activemask -- 64-bit mask\nint l = threadIdx.x % 32;\n")),
              "lane-arithmetic-32@2:9 ");
}

TEST(PortCheck, UnjustifiedOrUnknownSuppressionIsAFinding) {
    EXPECT_EQ(where(scan("// port-check: ignore warp-size-define\n#define WARP_SIZE 32\n")),
              "suppression-without-reason@1:4 warp-size-define@2:9 ");
    EXPECT_EQ(where(scan("// port-check: ignore warp-size-define --   \n#define WARP_SIZE 32\n")),
              "suppression-without-reason@1:4 warp-size-define@2:9 ");
    EXPECT_EQ(where(scan("# port-check: ignore no-such-rule -- why\nx = 1\n", "t.py")),
              "suppression-unknown-rule@1:3 ");
    // Prose that mentions the tool mid-comment is not a suppression.
    EXPECT_EQ(where(scan("// run port-check: ignore nothing\nint x;\n")), "");
}

TEST(PortCheck, JsonAndSarifParseWithTheRequiredFields) {
    const auto fs = scan("int lane = threadIdx.x & 31;\n__nv_bfloat16 x;\n");
    ASSERT_EQ(fs.size(), 3u) << where(fs);

    const auto json = nlohmann::json::parse(pc::to_json(fs));
    ASSERT_TRUE(json.is_array());
    ASSERT_EQ(json.size(), 3u);
    for (const char* key : {"file", "line", "column", "rule", "severity", "message", "fix"})
        EXPECT_TRUE(json[0].contains(key)) << key;
    EXPECT_EQ(json[0]["rule"], "lane-arithmetic-32");
    EXPECT_EQ(json[0]["severity"], "error");
    EXPECT_EQ(json[0]["column"], 12);

    const auto sarif = nlohmann::json::parse(pc::to_sarif(fs, "0.1.0"));
    EXPECT_EQ(sarif["version"], "2.1.0");
    EXPECT_TRUE(sarif.contains("$schema"));
    const auto& run = sarif["runs"].at(0);
    const auto& driver = run["tool"]["driver"];
    EXPECT_EQ(driver["name"], "flashport port-check");
    EXPECT_EQ(driver["version"], "0.1.0");
    EXPECT_EQ(driver["rules"].size(), pc::rules().size());
    for (const auto& r : driver["rules"]) {
        EXPECT_TRUE(r["id"].is_string());
        EXPECT_TRUE(r["shortDescription"]["text"].is_string());
        EXPECT_TRUE(r["help"]["text"].is_string());
    }
    ASSERT_EQ(run["results"].size(), 3u);
    const auto& res = run["results"][1];
    EXPECT_EQ(res["ruleId"], "nvidia-type-bf16");
    EXPECT_EQ(res["level"], "warning");
    EXPECT_TRUE(res["message"]["text"].is_string());
    const auto& loc = res["locations"].at(0)["physicalLocation"];
    EXPECT_EQ(loc["artifactLocation"]["uri"], "k.cu");
    EXPECT_EQ(loc["region"]["startLine"], 2);
    EXPECT_EQ(loc["region"]["startColumn"], 1);

    const std::string text = pc::to_text(fs, 1);
    EXPECT_NE(text.find("k.cu:1:12: error: "), std::string::npos) << text;
    EXPECT_NE(text.find("port-check: 1 files, 1 errors, 1 warnings, 1 notes\n"), std::string::npos) << text;
}

namespace {

// A temporary folder with the given files, removed at the end of the test.
struct TempTree {
    std::filesystem::path root;
    TempTree(const std::string& tag, const std::vector<std::pair<std::string, std::string>>& files) {
        root = std::filesystem::temp_directory_path() / ("port_check_" + std::to_string(::getpid()) + "_" + tag);
        std::filesystem::remove_all(root);
        for (const auto& [name, text] : files) {
            std::filesystem::create_directories((root / name).parent_path());
            std::ofstream(root / name) << text;
        }
    }
    ~TempTree() { std::filesystem::remove_all(root); }
};

}  // namespace

TEST(PortCheck, ExitStatuses) {
    TempTree clean("clean", {{"a/ok.cu", "int l = threadIdx.x % warpSize;\n"}, {"a/notes.py", "t = torch.bfloat16\n"}});
    TempTree dirty("dirty", {{"x/k.cuh", "#define WARP_SIZE 32\n"},
                             {"x/.git/hidden.cu", "#define WARP_SIZE 32\n"},
                             {"x/README.md", "#define WARP_SIZE 32\n"}});
    // Notes and warnings alone leave the status at 0.
    const auto ok = pc::run({clean.root.string()}, pc::Format::text);
    EXPECT_EQ(ok.status, pc::kExitClean);
    EXPECT_EQ(ok.files, 2u);
    EXPECT_EQ(ok.findings.size(), 1u);
    // Hidden folders and unknown extensions are not scanned.
    const auto bad = pc::run({dirty.root.string()}, pc::Format::json);
    EXPECT_EQ(bad.status, pc::kExitFindings);
    EXPECT_EQ(bad.files, 1u);
    const auto missing = pc::run({"/no/such/path"}, pc::Format::text);
    EXPECT_EQ(missing.status, pc::kExitUsage);
    EXPECT_EQ(missing.error, "error: port-check: cannot read /no/such/path: no such file or folder");

#ifdef FLASHPORT_CLI_PATH
    // The CLI returns the same statuses.
    const std::string cli = FLASHPORT_CLI_PATH;
    EXPECT_EQ(WEXITSTATUS(std::system((cli + " port-check " + clean.root.string() + " >/dev/null").c_str())), 0);
    EXPECT_EQ(WEXITSTATUS(std::system((cli + " port-check --sarif " + dirty.root.string() + " >/dev/null").c_str())),
              1);
    EXPECT_EQ(WEXITSTATUS(std::system((cli + " port-check /no/such/path 2>/dev/null").c_str())), 2);
    EXPECT_EQ(WEXITSTATUS(std::system((cli + " port-check --json --sarif x 2>/dev/null").c_str())), 2);
    EXPECT_EQ(WEXITSTATUS(std::system((cli + " port-check 2>/dev/null").c_str())), 2);
#endif
}

TEST(PortCheck, FlashportsOwnSourceIsClean) {
    const std::string root = FLASHPORT_SOURCE_DIR;
    const auto r = pc::run({root + "/src", root + "/python"}, pc::Format::text);
    EXPECT_EQ(r.status, pc::kExitClean);
    EXPECT_TRUE(r.findings.empty()) << r.output;
    EXPECT_GT(r.files, 100u);
}
