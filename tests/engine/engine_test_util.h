// Helpers for the engine tests: a tiny safetensors writer (tests only: the engine never writes the
// format), a temporary folder, and error-message assertions.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "flashport/error.h"

namespace flashport::engine::test {

inline const std::filesystem::path DATA_DIR = FP_ENGINE_DATA_DIR;

struct StTensor {
    std::string name;
    std::string dtype;  // safetensors name: "F32", "BF16", "U8"...
    std::vector<int64_t> shape;
    std::string data;  // raw little-endian bytes
};

inline std::string le_u64(uint64_t v) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) s[size_t(i)] = char((v >> (8 * i)) & 0xff);
    return s;
}

// 8-byte length + header text + data, with the length of `header` unless `length` is given.
inline std::string raw_file(const std::string& header, const std::string& data = {}, int64_t length = -1) {
    return le_u64(length < 0 ? header.size() : uint64_t(length)) + header + data;
}

// A valid file: tensors laid out in the given order; the header is padded with spaces to a multiple
// of `header_align` (the reference writer uses 8; 1 leaves it as is, to test misaligned data).
inline std::string make_safetensors(const std::vector<StTensor>& tensors,
                                    const std::map<std::string, std::string>& metadata = {}, size_t header_align = 8) {
    // ostringstream rather than string +: GCC 12 raises a false -Wrestrict on the latter.
    std::ostringstream header;
    std::string data;
    const char* sep = "";
    header << "{";
    if (!metadata.empty()) {
        header << "\"__metadata__\":{";
        for (const auto& [k, v] : metadata) {
            header << sep << "\"" << k << "\":\"" << v << "\"";
            sep = ",";
        }
        header << "}";
    }
    sep = metadata.empty() ? "" : ",";
    for (const StTensor& t : tensors) {
        header << sep << "\"" << t.name << "\":{\"dtype\":\"" << t.dtype << "\",\"shape\":[";
        for (size_t i = 0; i < t.shape.size(); ++i) header << (i ? "," : "") << t.shape[i];
        header << "],\"data_offsets\":[" << data.size() << "," << data.size() + t.data.size() << "]}";
        data += t.data;
        sep = ",";
    }
    header << "}";
    std::string text = header.str();
    while (text.size() % header_align) text += ' ';
    return raw_file(text, data);
}

template <typename T>
std::string bytes_of(const std::vector<T>& values) {
    std::string s(values.size() * sizeof(T), '\0');
    if (!values.empty()) std::memcpy(s.data(), values.data(), s.size());
    return s;
}

inline void write_file(const std::filesystem::path& path, const std::string& content) {
    std::ofstream out(path, std::ios::binary);
    out.write(content.data(), std::streamsize(content.size()));
    ASSERT_TRUE(out.good()) << path;
}

// A fresh folder under the system temp dir, removed with everything in it.
class TempDir {
public:
    TempDir() {
        std::random_device rd;
        std::ostringstream name;
        name << "flashport_engine_" << rd() << "_" << rd();
        path_ = std::filesystem::temp_directory_path() / name.str();
        std::filesystem::create_directories(path_);
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    const std::filesystem::path& path() const { return path_; }
    std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
    std::filesystem::path write(const std::string& name, const std::string& content) const {
        write_file(path_ / name, content);
        return path_ / name;
    }

private:
    std::filesystem::path path_;
};

// Runs `fn`, expects a flashport::Error whose message contains every phrase; returns the message.
inline std::string expect_error(const std::function<void()>& fn, std::initializer_list<std::string> phrases) {
    try {
        fn();
    } catch (const flashport::Error& e) {
        const std::string msg = e.what();
        for (const std::string& p : phrases)
            EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "' in: " << msg;
        return msg;
    } catch (const std::exception& e) {
        ADD_FAILURE() << "expected flashport::Error, got another exception: " << e.what();
        return {};
    }
    ADD_FAILURE() << "expected an error containing '" << *phrases.begin() << "', but nothing was thrown";
    return {};
}

}  // namespace flashport::engine::test
