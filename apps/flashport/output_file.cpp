#include "output_file.h"

#include <filesystem>
#include <fstream>
#include <system_error>

#include "flashport/error.h"

namespace flashport::app {

void make_parent_dirs(const std::string& path, std::string_view what) {
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (parent.empty()) return;
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);  // no error when it already exists as a folder
    FP_CHECK(!ec && std::filesystem::is_directory(parent), "cannot write ", what, " '", path,
             "': cannot create folder '", parent.string(), "'",
             ec ? " (" + ec.message() + ")" : std::string(" (a file is in the way)"));
}

void write_output_file(const std::string& path, std::string_view text, std::string_view what) {
    make_parent_dirs(path, what);
    std::ofstream f(path, std::ios::binary);
    f.write(text.data(), std::streamsize(text.size()));
    f.close();
    FP_CHECK(f, "cannot write ", what, " '", path, "': check that it is writable");
}

}  // namespace flashport::app
