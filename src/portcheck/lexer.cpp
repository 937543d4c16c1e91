// The C-family and Python lexer passes (lexer.h). Both are single forward scans; anything unterminated
// (a string at end of file, an open block comment) runs to the end, as a compiler would reject it anyway.
#include "portcheck/lexer.h"

#include <cstring>

namespace flashport::portcheck {

namespace {

bool is_ident(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Spaces over [begin, end), newlines kept so line numbers hold.
void blank(std::string& code, size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i)
        if (code[i] != '\n') code[i] = ' ';
}

// Whether the line starting at `i` is an #include directive (its header name is kept).
bool include_line(std::string_view s, size_t i) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    if (i >= s.size() || s[i] != '#') return false;
    ++i;
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    return s.substr(i, 7) == "include";
}

// A `'` after a token that starts with a digit is a digit separator (1'000'000), not a char literal.
bool digit_separator(std::string_view s, size_t quote) {
    size_t t = quote;
    while (t > 0 && is_ident(s[t - 1])) --t;
    return t < quote && s[t] >= '0' && s[t] <= '9';
}

// The first byte at or after `i` that is in `set`, or s.size() when there is none. strpbrk stops at
// a NUL: where the source holds one past `i`, `i` itself is returned and the caller steps over it.
size_t next_of(std::string_view s, size_t i, const char* set) {
    const size_t n = s.size();
    const char* p = std::strpbrk(s.data() + i, set);
    const size_t k = p ? static_cast<size_t>(p - s.data()) : n;
    if (k < n) return k;
    return std::memchr(s.data() + i, '\0', n - i) ? i : n;
}

// End (one past the closing quote) of a quoted literal starting at `open`; a backslash escapes the next byte.
size_t quoted_end(std::string_view s, size_t open) {
    const char quote = s[open];
    size_t j = open + 1;
    while (j < s.size() && s[j] != quote && s[j] != '\n') j += s[j] == '\\' ? 2 : 1;
    return j < s.size() ? j + 1 : s.size();
}

// End of a raw string R"delim( ... )delim" whose quote is at `open`.
size_t raw_string_end(std::string_view s, size_t open) {
    const size_t paren = s.find('(', open);
    if (paren == std::string_view::npos) return s.size();
    std::string close = ")";
    close.append(s.substr(open + 1, paren - open - 1));
    close.push_back('"');
    const size_t end = s.find(close, paren);
    return end == std::string_view::npos ? s.size() : end + close.size();
}

}  // namespace

void lex_c_family(std::string_view s, Lexed& out) {
    out.code.assign(s);
    out.code_with_strings.clear();
    out.comments.clear();
    const size_t n = s.size();
    bool include = include_line(s, 0);
    size_t i = 0;
    while (i < n) {
        // Jump to the next byte that can start a comment, a literal or a line.
        i = next_of(s, i, "/\"'\n");
        if (i == n) break;
        const char c = s[i];
        if (c == '\n') {
            include = include_line(s, ++i);
        } else if (c == '/' && i + 1 < n && s[i + 1] == '/') {
            size_t end = s.find('\n', i);
            end = end == std::string_view::npos ? n : end;
            out.comments.push_back({i + 2, end});
            blank(out.code, i, end);
            i = end;
        } else if (c == '/' && i + 1 < n && s[i + 1] == '*') {
            size_t end = s.find("*/", i + 2);
            const size_t text_end = end == std::string_view::npos ? n : end;
            end = end == std::string_view::npos ? n : end + 2;
            out.comments.push_back({i + 2, text_end});
            blank(out.code, i, end);
            i = end;
        } else if (c == '"' || (c == '\'' && !digit_separator(s, i))) {
            const bool raw = c == '"' && i > 0 && s[i - 1] == 'R' &&
                             (i < 2 || !is_ident(s[i - 2]) || s.substr(i - 2, 1) == "8" || s[i - 2] == 'L' ||
                              s[i - 2] == 'u' || s[i - 2] == 'U');
            const size_t end = raw ? raw_string_end(s, i) : quoted_end(s, i);
            if (!(include && c == '"')) blank(out.code, i, end);
            i = end;
        } else {
            ++i;
        }
    }
}

void lex_python(std::string_view s, Lexed& out) {
    out.code.assign(s);
    out.code_with_strings.assign(s);
    out.comments.clear();
    const size_t n = s.size();
    size_t i = 0;
    while (i < n) {
        i = next_of(s, i, "#\"'");
        if (i == n) break;
        const char c = s[i];
        if (c == '#') {
            size_t end = s.find('\n', i);
            end = end == std::string_view::npos ? n : end;
            out.comments.push_back({i + 1, end});
            blank(out.code, i, end);
            blank(out.code_with_strings, i, end);
            i = end;
        } else if (c == '"' || c == '\'') {
            size_t end = 0;
            if (s.substr(i, 3) == std::string(3, c)) {
                end = s.find(std::string(3, c), i + 3);
                end = end == std::string_view::npos ? n : end + 3;
            } else {
                end = quoted_end(s, i);
            }
            blank(out.code, i, end);
            i = end;
        } else {
            ++i;
        }
    }
}

}  // namespace flashport::portcheck
