// The lexer pass: a copy of the source in which the rules cannot match text that is not code.
//
// Every byte keeps its offset and every newline stays, so a match's offset gives the original line
// and column. C family: comments and string/char literals become spaces, except the header name of an
// #include (the header rules read it). Python: comments and strings become spaces in `code`; a second
// copy keeps the strings, since `subprocess.run(["nvidia-smi"])` is what the nvidia-smi rule looks for.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace flashport::portcheck {

struct Comment {
    size_t begin = 0;  // offset of the comment's text (after `//`, `/*` or `#`)
    size_t end = 0;
};

struct Lexed {
    std::string code;               // same length as the source
    std::string code_with_strings;  // Python only: comments blanked, strings kept
    std::vector<Comment> comments;  // in order; suppressions are read from these
};

// The source must be followed by a NUL byte (a std::string's data() is): the scans use strpbrk.
// Both fill `out`, reusing its buffers: a scan of many files then allocates (and page-faults) once.
void lex_c_family(std::string_view source, Lexed& out);
void lex_python(std::string_view source, Lexed& out);

}  // namespace flashport::portcheck
