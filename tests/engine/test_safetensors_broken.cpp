// Every file of the broken corpus (tools/make_broken_safetensors.py) is refused with an Error that
// names the file and says what is wrong: the phrases in expected_errors.json.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>

#include "engine/safetensors.h"
#include "engine_test_util.h"

namespace flashport::engine {
namespace {

const std::filesystem::path BROKEN = test::DATA_DIR / "safetensors" / "broken";

nlohmann::json expected_errors() {
    std::ifstream in(BROKEN / "expected_errors.json");
    return nlohmann::json::parse(in);
}

TEST(SafetensorsBroken, EveryFileIsRefusedWithItsOwnMessage) {
    const nlohmann::json expected = expected_errors();
    ASSERT_GE(expected.size(), 30u);
    for (const auto& [file, phrases] : expected.items()) {
        SCOPED_TRACE(file);
        const auto path = BROKEN / file;
        ASSERT_TRUE(std::filesystem::exists(path));
        try {
            SafetensorsFile f(path);
            ADD_FAILURE() << file << " was accepted";
        } catch (const Error& e) {
            const std::string msg = e.what();
            EXPECT_NE(msg.find(file), std::string::npos) << "the message does not name the file: " << msg;
            for (const auto& p : phrases)
                EXPECT_NE(msg.find(p.get<std::string>()), std::string::npos)
                    << "missing '" << p.get<std::string>() << "' in: " << msg;
        }
    }
}

TEST(SafetensorsBroken, EveryFileInTheFolderHasAnExpectation) {
    const nlohmann::json expected = expected_errors();
    for (const auto& entry : std::filesystem::directory_iterator(BROKEN)) {
        if (entry.path().extension() == ".safetensors") {
            EXPECT_TRUE(expected.contains(entry.path().filename().string())) << entry.path();
        }
    }
}

// The same refusals through a model folder: the set names the file too.
TEST(SafetensorsBroken, AFolderWithABrokenFileNamesIt) {
    test::TempDir dir;
    std::filesystem::copy_file(BROKEN / "truncated_data.safetensors", dir / "model.safetensors");
    test::expect_error([&] { SafetensorsSet::open(dir.path()); },
                       {"model.safetensors", "tensor 'b'", "past the end of the data section"});
}

}  // namespace
}  // namespace flashport::engine
