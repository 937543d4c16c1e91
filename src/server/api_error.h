// An error a client caused (or a limit it hit), carried from wherever it is found to the HTTP layer,
// which answers it in OpenAI's format: {"error": {"message", "type", "param", "code"}}. Clients
// (the openai package, curl scripts) read `message`, so it says what was wrong and what is allowed.
#pragma once

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

namespace flashport::server {

class ApiError : public std::runtime_error {
public:
    ApiError(int status_, const std::string& message, std::string type_ = "invalid_request_error",
             std::string param_ = "", std::string code_ = "")
        : std::runtime_error(message),
          status(status_),
          type(std::move(type_)),
          param(std::move(param_)),
          code(std::move(code_)) {}

    nlohmann::json to_json() const {
        const auto or_null = [](const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); };
        return {{"error", {{"message", what()}, {"type", type}, {"param", or_null(param)}, {"code", or_null(code)}}}};
    }

    int status;
    std::string type, param, code;
};

// 400 naming the field: the common case.
inline ApiError bad_field(const std::string& param, const std::string& message) {
    return ApiError(400, message, "invalid_request_error", param);
}

}  // namespace flashport::server
