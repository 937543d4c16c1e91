#include "server/tool_calls.h"

#include <algorithm>
#include <cstdio>
#include <random>

#include "engine/json_strict.h"

namespace flashport::server {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

void write(std::string& out, const nlohmann::ordered_json& j) {
    if (j.is_object()) {
        out.push_back('{');
        bool first = true;
        for (const auto& [key, value] : j.items()) {
            if (!first) out += ", ";
            first = false;
            out += nlohmann::ordered_json(key).dump();
            out += ": ";
            write(out, value);
        }
        out.push_back('}');
    } else if (j.is_array()) {
        out.push_back('[');
        for (size_t i = 0; i < j.size(); ++i) {
            if (i) out += ", ";
            write(out, j[i]);
        }
        out.push_back(']');
    } else {
        // Scalars as nlohmann writes them, which is Python's text: strings with only the quote, the
        // backslash and control characters escaped (\n, \t, ..., else \u00xx), non-ASCII as is; numbers,
        // true, false and null (floats in shortest form).
        out += j.dump();
    }
}

std::string_view trim(std::string_view s) {
    const char* ws = " \t\r\n";
    const size_t b = s.find_first_not_of(ws);
    if (b == std::string_view::npos) return {};
    return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

std::string call_id() {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    char buf[32];
    std::snprintf(buf, sizeof buf, "call_%016llx", static_cast<unsigned long long>(rng()));
    return buf;
}

}  // namespace

std::string python_json(const nlohmann::ordered_json& j) {
    std::string out;
    write(out, j);
    return out;
}

ParsedReply parse_tool_calls(std::string_view text) {
    ParsedReply r;
    const size_t first = text.find(kOpen);
    if (first == std::string_view::npos) {
        r.content = std::string(text);
        return r;
    }
    for (size_t at = first; at != std::string_view::npos; at = text.find(kOpen, at)) {
        const size_t body = at + kOpen.size();
        const size_t end = text.find(kClose, body);
        const std::string_view block = trim(text.substr(body, end == std::string_view::npos ? text.npos : end - body));
        // The model's JSON through the strict reader first (its depth limit: a reply of 10k "[" must not
        // recurse), then in its own key order.
        bool valid = true;
        try {
            engine::parse_json_strict(block, "a tool call");
        } catch (const std::exception&) {
            valid = false;
        }
        const nlohmann::ordered_json call =
            valid ? nlohmann::ordered_json::parse(block, nullptr, /*allow_exceptions=*/false) : nlohmann::ordered_json();
        if (!call.is_object() || !call.contains("name") || !call["name"].is_string()) {
            r.calls.clear();  // not a call after all: everything is content
            r.content = std::string(text);
            return r;
        }
        const auto args = call.find("arguments");
        r.calls.push_back({call_id(), call["name"].get<std::string>(),
                           args == call.end() ? std::string("{}") : python_json(*args)});
        if (end == std::string_view::npos) break;
        at = end + kClose.size();
    }
    const std::string_view before = trim(text.substr(0, first));
    if (!before.empty()) r.content = std::string(text.substr(0, text.find_last_not_of(" \t\r\n", first - 1) + 1));
    return r;
}

std::string ToolCallStream::push(std::string_view text) {
    if (in_call_) {
        held_ += text;
        return {};
    }
    held_ += text;
    const size_t at = held_.find(kOpen);
    if (at != std::string::npos) {  // the text before the call, less the line break that leads into it
        const size_t end = held_.find_last_not_of(" \t\r\n", at == 0 ? 0 : at - 1);
        std::string out = at == 0 || end == std::string::npos ? std::string() : held_.substr(0, end + 1);
        held_.erase(0, at);
        in_call_ = true;
        return out;
    }
    // Keep the longest tail that could still grow into "<tool_call>", and the whitespace before it
    // (the line break before a call is not content).
    size_t keep = 0;
    for (size_t n = std::min(held_.size(), kOpen.size() - 1); n > 0; --n)
        if (held_.compare(held_.size() - n, n, kOpen, 0, n) == 0) {
            keep = n;
            break;
        }
    while (keep < held_.size() && std::string_view(" \t\r\n").find(held_[held_.size() - keep - 1]) != std::string_view::npos)
        ++keep;
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
}

}  // namespace flashport::server
