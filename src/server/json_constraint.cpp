#include "server/json_constraint.h"

#include <cmath>

#include "engine/sampler.h"
#include "flashport/error.h"
#include "flashport/tokenizer.h"

namespace flashport::server {

namespace {

bool is_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool is_hex(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

}  // namespace

bool JsonPrefix::feed(std::string_view bytes) {
    for (const char ch : bytes)
        if (!byte(uint8_t(ch))) return false;
    return true;
}

bool JsonPrefix::byte(uint8_t c) {
    switch (state_) {
        case State::STRING:
            if (c == '"') {
                if (!key_) return close_value();
                state_ = State::COLON;
                return true;
            }
            if (c == '\\') {
                state_ = State::ESCAPE;
                return true;
            }
            if (c < 0x20) return false;  // control characters must be escaped
            if (c < 0x80) return true;
            // A UTF-8 lead byte, and the range its first continuation byte may take (RFC 3629's table:
            // no overlong forms, no surrogates, nothing past U+10FFFF).
            utf8_lo_ = 0x80, utf8_hi_ = 0xBF;
            if (c >= 0xC2 && c <= 0xDF) {
                pending_ = 1;
            } else if (c >= 0xE0 && c <= 0xEF) {
                pending_ = 2;
                if (c == 0xE0) utf8_lo_ = 0xA0;
                if (c == 0xED) utf8_hi_ = 0x9F;
            } else if (c >= 0xF0 && c <= 0xF4) {
                pending_ = 3;
                if (c == 0xF0) utf8_lo_ = 0x90;
                if (c == 0xF4) utf8_hi_ = 0x8F;
            } else {
                return false;
            }
            state_ = State::UTF8;
            return true;
        case State::UTF8:
            if (c < utf8_lo_ || c > utf8_hi_) return false;
            utf8_lo_ = 0x80, utf8_hi_ = 0xBF;
            if (--pending_ == 0) state_ = State::STRING;
            return true;
        case State::ESCAPE:
            if (c == 'u') {
                state_ = State::UNICODE, pending_ = 4, code_ = 0, low_ = false;
                return true;
            }
            state_ = State::STRING;
            return c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't';
        case State::UNICODE: {
            if (!is_hex(c)) return false;
            code_ = uint16_t(code_ * 16 + (is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10));
            if (--pending_ > 0) return true;
            const bool high = code_ >= 0xD800 && code_ <= 0xDBFF, low = code_ >= 0xDC00 && code_ <= 0xDFFF;
            if (low != low_) return false;  // a low surrogate exactly where one must follow a high one
            state_ = high ? State::LOW_BACKSLASH : State::STRING;
            return true;
        }
        case State::LOW_BACKSLASH:
            state_ = State::LOW_U;
            return c == '\\';
        case State::LOW_U:
            state_ = State::UNICODE, pending_ = 4, code_ = 0, low_ = true;
            return c == 'u';
        case State::LITERAL:
            if (c != uint8_t(*literal_)) return false;
            ++literal_;
            return --pending_ == 0 ? close_value() : true;
        case State::NUMBER:
            return number_byte(c);
        default:
            break;
    }
    // Between tokens: whitespace (bounded), or the byte the state expects.
    if (is_space(c)) return ++whitespace_ <= MAX_WHITESPACE;
    whitespace_ = 0;
    switch (state_) {
        case State::VALUE:
            return start_value(c);
        case State::ARRAY_FIRST:
            if (c == ']') {
                --depth_;
                return close_value();
            }
            return start_value(c);
        case State::OBJECT_FIRST:
        case State::KEY:
            if (c == '}' && state_ == State::OBJECT_FIRST) {
                --depth_;
                return close_value();
            }
            if (c != '"') return false;
            state_ = State::STRING, key_ = true;
            return true;
        case State::COLON:
            if (c != ':') return false;
            state_ = State::VALUE;
            return true;
        case State::AFTER_VALUE: {
            const char open = stack_[size_t(depth_ - 1)];
            if (c == ',') {
                state_ = open == '{' ? State::KEY : State::VALUE;
                return true;
            }
            if ((c == '}' && open == '{') || (c == ']' && open == '[')) {
                --depth_;
                return close_value();
            }
            return false;
        }
        default:  // DONE: only whitespace may follow the document
            return false;
    }
}

bool JsonPrefix::start_value(uint8_t c) {
    if (depth_ == 0 && object_only_ && c != '{') return false;
    switch (c) {
        case '{':
        case '[':
            if (depth_ == MAX_DEPTH) return false;
            stack_[size_t(depth_++)] = char(c);
            state_ = c == '{' ? State::OBJECT_FIRST : State::ARRAY_FIRST;
            return true;
        case '"':
            state_ = State::STRING, key_ = false;
            return true;
        case 't':
            state_ = State::LITERAL, literal_ = "rue", pending_ = 3;
            return true;
        case 'f':
            state_ = State::LITERAL, literal_ = "alse", pending_ = 4;
            return true;
        case 'n':
            state_ = State::LITERAL, literal_ = "ull", pending_ = 3;
            return true;
        case '-':
            state_ = State::NUMBER, number_ = Number::MINUS;
            return true;
        default:
            if (!is_digit(c)) return false;
            state_ = State::NUMBER, number_ = c == '0' ? Number::ZERO : Number::INT;
            return true;
    }
}

bool JsonPrefix::close_value() {
    state_ = depth_ == 0 ? State::DONE : State::AFTER_VALUE;
    return true;
}

// JSON's number: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?. A byte that cannot extend it
// ends it where the grammar allows an end, and is then read as what follows the value.
bool JsonPrefix::number_byte(uint8_t c) {
    const bool digit = is_digit(c), exp = c == 'e' || c == 'E';
    switch (number_) {
        case Number::MINUS:
            if (!digit) return false;
            number_ = c == '0' ? Number::ZERO : Number::INT;
            return true;
        case Number::ZERO:
        case Number::INT:
            if (digit && number_ == Number::INT) return true;
            if (digit) return false;  // no leading zeros
            if (c == '.') return number_ = Number::DOT, true;
            if (exp) return number_ = Number::EXP_MARK, true;
            break;
        case Number::DOT:
            if (!digit) return false;
            number_ = Number::FRAC;
            return true;
        case Number::FRAC:
            if (digit) return true;
            if (exp) return number_ = Number::EXP_MARK, true;
            break;
        case Number::EXP_MARK:
            if (c == '+' || c == '-') return number_ = Number::EXP_SIGN, true;
            if (!digit) return false;
            number_ = Number::EXP;
            return true;
        case Number::EXP_SIGN:
            if (!digit) return false;
            number_ = Number::EXP;
            return true;
        case Number::EXP:
            if (digit) return true;
            break;
    }
    close_value();
    return byte(c);
}

std::string_view JsonConstraint::token_bytes(int32_t token) const {
    if (token < 0 || size_t(token) >= tokenizer_->vocab_size() || tokenizer_->is_special(token)) return {};
    try {
        return tokenizer_->token_bytes(token);
    } catch (const Error&) {  // an id the vocabulary skips
        return {};
    }
}

bool JsonConstraint::allows(int32_t token) const {
    const std::string_view bytes = token_bytes(token);
    return !bytes.empty() && prefix_.accepts(bytes);
}

int32_t JsonConstraint::choose(engine::Sampler& sampler, std::span<float> scores, std::span<const int32_t> context) {
    size_t finite = 0;  // the sampler refuses scores that are all -inf
    for (const float s : scores) finite += s != -INFINITY;
    // A greedy pick is a max over the scores; a sampled one also sorts them (top-p): one refusal, then the
    // scan, which costs a few sampled picks.
    const int rejections = sampler.params().greedy() ? REJECTIONS : 1;
    for (int tries = 0; tries < rejections; ++tries) {
        if (finite == 0) return -1;
        const int32_t token = sampler.sample(scores, context);
        if (allows(token)) return token;
        scores[size_t(token)] = -INFINITY;
        --finite;
    }
    // The scan: a token whose first byte cannot come next is refused without a copy of the state (between
    // values only a few bytes can: most of the vocabulary goes here).
    std::array<bool, 256> first{};
    for (int b = 0; b < 256; ++b) {
        const char byte = char(b);
        first[size_t(b)] = prefix_.accepts(std::string_view(&byte, 1));
    }
    bool any = false;
    for (size_t id = 0; id < scores.size(); ++id) {
        if (scores[id] == -INFINITY) continue;
        const std::string_view bytes = token_bytes(int32_t(id));
        if (!bytes.empty() && first[uint8_t(bytes[0])] && prefix_.accepts(bytes))
            any = true;
        else
            scores[id] = -INFINITY;
    }
    if (!any) return -1;
    const int32_t token = sampler.sample(scores, context);
    return allows(token) ? token : -1;
}

void JsonConstraint::accept(int32_t token) {
    prefix_.feed(tokenizer_->token_bytes(token));
}

}  // namespace flashport::server
