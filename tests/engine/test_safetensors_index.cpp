// Sharded checkpoints through model.safetensors.index.json, and how a folder is resolved.
#include <gtest/gtest.h>

#include "engine/safetensors.h"
#include "engine_test_util.h"

namespace flashport::engine {
namespace {

using test::bytes_of;
using test::expect_error;
using test::make_safetensors;
using test::TempDir;

std::string f32_file(const std::vector<std::pair<std::string, float>>& tensors) {
    std::vector<test::StTensor> ts;
    for (const auto& [name, v] : tensors) ts.push_back({name, "F32", {1}, bytes_of(std::vector<float>{v})});
    return make_safetensors(ts);
}

// Two shards and an index mapping a->1, b->1, c->2.
void write_sharded(const TempDir& dir) {
    dir.write("model-00001-of-00002.safetensors", f32_file({{"a", 1.0f}, {"b", 2.0f}}));
    dir.write("model-00002-of-00002.safetensors", f32_file({{"c", 3.0f}}));
    dir.write("model.safetensors.index.json", R"({"metadata": {"total_size": 12}, "weight_map": {
        "a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
        "c": "model-00002-of-00002.safetensors"}})");
}

float value(const SafetensorsSet& set, const std::string& name) {
    return *static_cast<const float*>(set.view(name).data);
}

TEST(SafetensorsIndex, OpensShardsThroughTheIndex) {
    TempDir dir;
    write_sharded(dir);
    for (const auto& path : {dir.path(), dir / "model.safetensors.index.json"}) {
        const SafetensorsSet set = SafetensorsSet::open(path);
        EXPECT_EQ(set.files().size(), 2u);
        EXPECT_EQ(set.size(), 3u);
        EXPECT_EQ(set.names(), (std::vector<std::string>{"a", "b", "c"}));
        EXPECT_EQ(value(set, "a"), 1.0f);
        EXPECT_EQ(value(set, "c"), 3.0f);
        EXPECT_EQ(set.info("b").dtype, StDType::F32);
        EXPECT_NE(set.source().find("2 shards"), std::string::npos) << set.source();
    }
}

TEST(SafetensorsIndex, TheIndexWinsOverASingleFileInTheSameFolder) {
    TempDir dir;
    write_sharded(dir);
    dir.write("model.safetensors", f32_file({{"z", 9.0f}}));
    EXPECT_FALSE(SafetensorsSet::open(dir.path()).contains("z"));
    EXPECT_TRUE(SafetensorsSet::open(dir / "model.safetensors").contains("z"));
}

TEST(SafetensorsIndex, MissingTensorListsWhatWasSearched) {
    TempDir dir;
    write_sharded(dir);
    const SafetensorsSet set = SafetensorsSet::open(dir.path());
    expect_error([&] { set.view("d"); }, {"tensor 'd' not found in", "model.safetensors.index.json",
                                          "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"});
    dir.write("single.safetensors", f32_file({{"a", 1.0f}}));
    const SafetensorsSet single = SafetensorsSet::open(dir / "single.safetensors");
    expect_error([&] { single.info("d"); }, {"tensor 'd' not found in", "single.safetensors"});
}

TEST(SafetensorsIndex, TensorsAShardHoldsButTheMapOmitsAreNotReachable) {
    TempDir dir;
    dir.write("s1.safetensors", f32_file({{"a", 1.0f}, {"stray", 5.0f}}));
    dir.write("model.safetensors.index.json", R"({"weight_map": {"a": "s1.safetensors"}})");
    EXPECT_FALSE(SafetensorsSet::open(dir.path()).contains("stray"));
}

struct BadIndex {
    const char* name;
    const char* index;
    std::vector<std::string> phrases;
};

TEST(SafetensorsIndex, BadIndexesAreRefusedNamingTheProblem) {
    const BadIndex cases[] = {
        {"not json", R"({"weight_map": )", {"invalid JSON"}},
        {"not an object", R"([1])", {"expected a JSON object"}},
        {"no weight_map", R"({"metadata": {}})", {"missing \"weight_map\""}},
        {"weight_map not object", R"({"weight_map": ["a"]})", {"weight_map must be an object"}},
        {"empty weight_map", R"({"weight_map": {}})", {"weight_map is empty"}},
        {"metadata not object",
         R"({"metadata": 3, "weight_map": {"a": "model-00001-of-00002.safetensors"}})",
         {"metadata must be an object"}},
        {"file not string", R"({"weight_map": {"a": 1}})", {"weight_map[\"a\"] must be a file name"}},
        {"duplicate tensor",
         R"({"weight_map": {"a": "model-00001-of-00002.safetensors",
                                                "a": "model-00002-of-00002.safetensors"}})",
         {"duplicate key \"a\""}},
        {"missing shard",
         R"({"weight_map": {"a": "model-00009-of-00009.safetensors"}})",
         {"maps 'a' to model-00009-of-00009.safetensors", "does not exist"}},
        {"tensor not in shard",
         R"({"weight_map": {"c": "model-00001-of-00002.safetensors"}})",
         {"maps 'c' to model-00001-of-00002.safetensors", "does not hold it"}},
        {"absolute path", R"({"weight_map": {"a": "/etc/passwd"}})", {"relative to the model folder"}},
        {"parent path", R"({"weight_map": {"a": "../x.safetensors"}})", {"leaves the model folder"}},
        {"empty name", R"({"weight_map": {"a": ""}})", {"relative to the model folder"}},
    };
    for (const BadIndex& c : cases) {
        SCOPED_TRACE(c.name);
        TempDir dir;
        write_sharded(dir);
        dir.write("model.safetensors.index.json", c.index);
        try {
            SafetensorsSet::open(dir.path());
            ADD_FAILURE() << "accepted";
        } catch (const Error& e) {
            const std::string msg = e.what();
            EXPECT_NE(msg.find("model.safetensors.index.json"), std::string::npos) << msg;
            for (const auto& p : c.phrases)
                EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "': " << msg;
        }
    }
}

TEST(SafetensorsIndex, ABrokenShardIsNamed) {
    TempDir dir;
    write_sharded(dir);
    dir.write("model-00002-of-00002.safetensors", test::raw_file("{", ""));
    expect_error([&] { SafetensorsSet::open(dir.path()); }, {"model-00002-of-00002.safetensors", "invalid JSON"});
}

TEST(SafetensorsIndex, FolderWithoutWeights) {
    TempDir dir;
    expect_error([&] { SafetensorsSet::open(dir.path()); }, {"no model.safetensors or model.safetensors.index.json"});
    expect_error([&] { SafetensorsSet::open(dir / "nothing.safetensors"); }, {"nothing.safetensors", "no such file"});
}

}  // namespace
}  // namespace flashport::engine
