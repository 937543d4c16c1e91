// JSON mode (OpenAI's response_format {"type": "json_object"}): the reply is constrained, token by
// token, to be a prefix of one JSON object, and ends when the object closes.
//
// JsonPrefix is an incremental RFC 8259 recogniser over bytes: feed() says whether the bytes so far can
// still continue into a valid document, complete() whether the top-level value has closed. Strings are
// checked as UTF-8 (no overlong forms or surrogates) and their \u escapes as UTF-16 (a high surrogate
// must be followed by a low one: Python and JavaScript take a lone one, stricter parsers such as
// nlohmann's refuse it), numbers by JSON's grammar, literals byte by byte. Its state is a few dozen
// bytes, so testing a candidate token is a copy and a feed.
//
// Two guards keep a constrained model from running on forever inside the grammar: nesting deeper than
// MAX_DEPTH is refused, and so is whitespace past MAX_WHITESPACE bytes in a row outside strings (a model
// that only wants to stop can otherwise emit newlines until max_tokens; 32 is a newline and 31 spaces
// of indentation).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace flashport::tokenizer {
class Tokenizer;
}
namespace flashport::engine {
class Sampler;
}

namespace flashport::server {

class JsonPrefix {
public:
    static constexpr int MAX_DEPTH = 64;
    static constexpr int MAX_WHITESPACE = 32;

    // object_only: the top-level value must be an object (json_object mode); else any JSON value.
    explicit JsonPrefix(bool object_only = true) : object_only_(object_only) {}

    // Consumes bytes; false as soon as one cannot continue a valid document (the state is then spent).
    bool feed(std::string_view bytes);
    // Whether these bytes could follow what was fed so far (the state is left as it was).
    bool accepts(std::string_view bytes) const {
        JsonPrefix copy = *this;
        return copy.feed(bytes);
    }
    // The top-level value has closed (a number at the top level closes only with the next byte).
    bool complete() const { return state_ == State::DONE; }

private:
    enum class State : uint8_t {
        VALUE,           // a value starts here (top level, after ':', after ',' in an array)
        ARRAY_FIRST,     // after '[': a value or ']'
        OBJECT_FIRST,    // after '{': a key or '}'
        KEY,             // after ',' in an object: a key
        COLON,           // after a key
        AFTER_VALUE,     // after a value in a container: ',' or the container's close
        STRING,          // inside a string (key_ says whose)
        ESCAPE,          // after '\'
        UNICODE,         // \u's hex digits (pending_ left, code_ so far)
        LOW_BACKSLASH,   // after a high surrogate's escape: the low one's '\'
        LOW_U,           // ... and its 'u'
        UTF8,            // continuation bytes of a multi-byte character (pending_ left)
        LITERAL,         // true / false / null (literal_ and pending_: what is left of it)
        NUMBER,          // number_ says where in the number
        DONE,            // the top-level value has closed: only whitespace may follow
    };
    enum class Number : uint8_t { MINUS, ZERO, INT, DOT, FRAC, EXP_MARK, EXP_SIGN, EXP };

    bool byte(uint8_t c);
    bool start_value(uint8_t c);
    bool close_value();  // a value ended: back to its container (or DONE at the top level)
    bool number_byte(uint8_t c);
    bool space(uint8_t c);

    bool object_only_;
    State state_ = State::VALUE;
    Number number_ = Number::INT;
    bool key_ = false;       // the string being read is an object key
    uint8_t pending_ = 0;    // UNICODE / UTF8 / LITERAL: bytes still expected
    bool low_ = false;       // UNICODE: this escape must be a low surrogate
    uint16_t code_ = 0;      // UNICODE: the escape's value so far
    uint8_t utf8_lo_ = 0x80, utf8_hi_ = 0xBF;  // the next continuation byte's range (UTF8)
    const char* literal_ = nullptr;            // LITERAL: the rest of the literal
    uint8_t whitespace_ = 0;                   // whitespace bytes in a row outside strings
    int depth_ = 0;
    std::array<char, MAX_DEPTH> stack_{};  // '{' or '[' for each open container
};

// The token choice of one JSON-mode sequence: the sampler's pick among the tokens whose bytes continue
// the document. The sampler's pick is tried first (each refused one removed from the scores and the
// draw repeated: up to REJECTIONS greedy picks, one sampled), so an unconstrained pick that is valid
// costs one check; then every token is checked once and the invalid ones removed together, and the
// sampler draws from what is left: the model's distribution restricted to the valid tokens. Special
// tokens, ids past the tokenizer's vocabulary and tokens with no bytes never continue a document.
class JsonConstraint {
public:
    static constexpr int REJECTIONS = 16;

    explicit JsonConstraint(const tokenizer::Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}

    // scores: the sequence's logits (with its adjustments), changed in place. -1 when no token can
    // continue the document (every candidate refused).
    int32_t choose(engine::Sampler& sampler, std::span<float> scores, std::span<const int32_t> context);
    // Records the chosen token's bytes.
    void accept(int32_t token);
    bool complete() const { return prefix_.complete(); }
    bool allows(int32_t token) const;

private:
    // The token's bytes; empty for one that never continues a document (special, unknown, out of range).
    std::string_view token_bytes(int32_t token) const;

    const tokenizer::Tokenizer* tokenizer_;
    JsonPrefix prefix_;
};

}  // namespace flashport::server
