#include "normalize.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "flashport/error.h"

namespace flashport::tokenizer {
namespace {

void parse_into(bool& nfc, const json_util::Json& j, std::string_view where) {
    if (j.is_null()) return;
    json_util::expect_object(j, where);
    const std::string type = json_util::require_string(j, "type", where);
    if (type == "NFC") {
        nfc = true;
    } else if (type == "Sequence") {
        const std::string list = json_util::path(where, "normalizers");
        const auto& items = json_util::require(j, "normalizers", where);
        FP_CHECK(items.is_array(), list, " must be an array, not ", json_util::type_name(items));
        for (std::size_t i = 0; i < items.size(); ++i) parse_into(nfc, items[i], json_util::path(list, i));
    } else {
        fail(where, ": normalizer type \"", excerpt(type),
             "\" is not supported (supported: NFC, a Sequence of NFC, or null)");
    }
}

}  // namespace

Normalizer Normalizer::from_json(const json_util::Json& j, std::string_view where) {
    Normalizer n;
    parse_into(n.nfc_, j, where);
    return n;
}

std::string Normalizer::apply(std::string_view text) const {
    return nfc_ ? nfc(text) : std::string(text);
}

std::string nfc(std::string_view text) {
    bool ascii = true;
    for (const char c : text) ascii &= static_cast<unsigned char>(c) < 0x80;
    if (ascii) return std::string(text);  // ASCII is always in NFC

    utf8proc_uint8_t* out = nullptr;
    // STABLE + COMPOSE is exactly utf8proc_NFC, but with an explicit length so embedded NULs survive.
    const utf8proc_ssize_t n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                     &out, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(out, &std::free);
    FP_CHECK(n >= 0, "NFC normalisation failed: ", utf8proc_errmsg(n));
    return std::string(reinterpret_cast<const char*>(out), static_cast<std::size_t>(n));
}

}  // namespace flashport::tokenizer
