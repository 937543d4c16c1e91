// Writing the CLI's output files (--plot, --json): every writer goes through here, so each creates
// the folders above its file the same way. On a fresh clone `--plot out/sweep.svg` must work without
// the user making out/ first (README command 1).
#pragma once

#include <string>
#include <string_view>

namespace flashport::app {

// Creates the missing folders above `path` (nothing for a bare file name). Throws flashport::Error
// naming `what` (e.g. "--plot file") and the folder when one cannot be made.
void make_parent_dirs(const std::string& path, std::string_view what);

// make_parent_dirs, then writes `text` to `path`, replacing it; throws naming `what` on failure.
void write_output_file(const std::string& path, std::string_view text, std::string_view what);

}  // namespace flashport::app
