// Tool calling in `flashport serve` (src/server/tool_calls.h): a chat request with tools becomes the
// prompt Qwen's templates render (against goldens from @huggingface/jinja, tests/data/tokenizer/
// chat_tool_goldens.json, for Qwen3's and Qwen2.5's templates), Python's json.dumps form, and the
// reply's <tool_call> blocks read back as OpenAI's tool_calls, whole and streamed.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "flashport/tokenizer.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/tool_calls.h"

namespace flashport::server {
namespace {

const std::filesystem::path kData = FP_TOKENIZER_DATA_DIR;

std::string read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Qwen3's tokenizer with the named folder's tokenizer_config.json (qwen3, or qwen2_5: the two share
// the vocabulary and the tool tokens).
const tokenizer::Tokenizer& qwen(const std::string& config) {
    static const std::string vocab = read_file(kData / "qwen3" / "tokenizer.json");
    static tokenizer::Tokenizer qwen3 = tokenizer::Tokenizer::from_json(vocab, read_file(kData / "qwen3" / "tokenizer_config.json"));
    static tokenizer::Tokenizer qwen2_5 =
        tokenizer::Tokenizer::from_json(vocab, read_file(kData / "qwen2_5" / "tokenizer_config.json"));
    return config == "qwen3" ? qwen3 : qwen2_5;
}

ServedModel served(const tokenizer::Tokenizer& tok) {
    ServedModel m;
    m.id = "qwen";
    m.tokenizer = &tok;
    m.context = 32768;
    m.vocab_size = int64_t(tok.vocab_size());
    m.defaults.stop.max_new_tokens = 16;
    return m;
}

TEST(ToolCalls, PromptsMatchTheTemplates) {
    // Ordered: the client's key order is what the prompt keeps.
    const auto cases = nlohmann::ordered_json::parse(read_file(kData / "chat_tool_cases.json"))["cases"];
    const auto goldens = nlohmann::json::parse(read_file(kData / "chat_tool_goldens.json"))["goldens"];
    ASSERT_EQ(goldens.size(), 2 * cases.size());
    for (const auto& g : goldens) {
        const std::string name = g["template"].get<std::string>() + "/" + g["name"].get<std::string>();
        const nlohmann::ordered_json* c = nullptr;
        for (const auto& x : cases)
            if (x["name"] == g["name"]) c = &x;
        ASSERT_NE(c, nullptr) << name;
        // The body as a client sends it (calls' arguments are JSON strings in the cases).
        const nlohmann::ordered_json body = {{"messages", (*c)["messages"]}, {"tools", (*c)["tools"]}};
        const tokenizer::Tokenizer& tok = qwen(g["template"].get<std::string>());
        const CompletionRequest r = parse_completion_request(body.dump(), /*chat=*/true, served(tok));
        ASSERT_EQ(r.prompts.size(), 1u);
        EXPECT_TRUE(r.tool_calls) << name;
        const std::vector<int32_t> want = tok.encode(g["text"].get<std::string>(), /*allow_special=*/true);
        EXPECT_EQ(r.prompts[0], want) << name << "\nflashport:\n"
                                      << tok.decode(r.prompts[0]) << "\ngolden:\n"
                                      << g["text"].get<std::string>();
    }
}

TEST(ToolCalls, RequestsTheTemplateCannotWriteAreRefused) {
    const ServedModel m = served(qwen("qwen3"));
    const auto refused = [&](const std::string& body, const std::string& fragment) {
        try {
            parse_completion_request(body, true, m);
            ADD_FAILURE() << "accepted: " << body;
        } catch (const ApiError& e) {
            EXPECT_EQ(e.status, 400) << body;
            EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
        }
    };
    const std::string user = R"("messages": [{"role": "user", "content": "hi"}])";
    const std::string tool = R"({"type": "function", "function": {"name": "f"}})";
    refused("{" + user + R"(, "tools": [{"type": "retrieval"}]})", "tools[0]");
    refused("{" + user + R"(, "tools": [{"type": "function", "function": {"name": ""}}]})", "tools[0]");
    refused("{" + user + R"(, "tools": {}})", "array");
    refused("{" + user + R"(, "tools": [)" + tool + R"(], "tool_choice": "required"})", "tool_choice");
    refused("{" + user + R"(, "tools": [)" + tool + R"(], "tool_choice": {"type": "function"}})", "tool_choice");
    refused(R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"type": "function",
        "function": {"name": "f", "arguments": "{not json"}}]}]})",
            "arguments");
    refused(R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "f",
        "arguments": ")" + std::string(200, '[') + R"("}}]}]})",
            "deeper");
    refused(R"({"messages": [{"role": "assistant", "content": null}]})", "content");
    refused(R"({"messages": [{"role": "user", "content": "x", "tool_calls": []}]})", "unrecognized field");
    // A template without Qwen's tool prompt (the tiny tokenizer's own has none): refused, not guessed.
    const nlohmann::json cfg = {{"chat_template", "<|im_start|>{{ messages[0].content }}<|im_end|>"}};
    const tokenizer::Tokenizer plain =
        tokenizer::Tokenizer::from_json(read_file(kData / "tiny" / "tokenizer.json"), cfg.dump());
    try {
        parse_completion_request("{" + user + ", \"tools\": [" + tool + "]}", true, served(plain));
        ADD_FAILURE() << "tools accepted for a template that cannot write them";
    } catch (const ApiError& e) {
        EXPECT_NE(std::string(e.what()).find("tool prompt"), std::string::npos) << e.what();
    }
    // tool_choice "none": no tools in the prompt, no calls read back.
    const CompletionRequest none =
        parse_completion_request("{" + user + ", \"tools\": [" + tool + "], \"tool_choice\": \"none\"}", true, m);
    const CompletionRequest plain_chat = parse_completion_request("{" + user + "}", true, m);
    EXPECT_FALSE(none.tool_calls);
    EXPECT_EQ(none.prompts, plain_chat.prompts);
    refused("{" + user + R"(, "tools": [{"type": "retrieval"}], "tool_choice": "none"})", "tools[0]");
}

TEST(ToolCalls, PythonJson) {
    const auto j = nlohmann::ordered_json::parse(
        R"({"z": 1, "a": [true, false, null, 2.5, -3, "é\"\\\n\t\u0001"], "m": {}, "e": []})");
    EXPECT_EQ(python_json(j), "{\"z\": 1, \"a\": [true, false, null, 2.5, -3, \"é\\\"\\\\\\n\\t\\u0001\"], \"m\": {}, \"e\": []}");
}

TEST(ToolCalls, RepliesSplitIntoContentAndCalls) {
    ParsedReply r = parse_tool_calls("Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                                     "{\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"f\"}\n</tool_call>");
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.content, "Let me check.");
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(r.calls[0].arguments, "{\"city\": \"Paris\"}");
    EXPECT_EQ(r.calls[1].arguments, "{}");
    EXPECT_EQ(r.calls[0].id.rfind("call_", 0), 0u);
    EXPECT_NE(r.calls[0].id, r.calls[1].id);
    // Only calls: null content. An unclosed last block (the reply hit max_tokens after it) still reads.
    r = parse_tool_calls("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": [1]}}");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_FALSE(r.content.has_value());
    EXPECT_EQ(r.calls[0].arguments, "{\"x\": [1]}");
    // No call, or not a call after all: the whole reply is content.
    for (const std::string& text : {std::string("Just text."), std::string("a <tool_call>\nnot json\n</tool_call>"),
                                   std::string("<tool_call>{\"arguments\": {}}</tool_call>"),
                                   std::string("<tool_call>") + std::string(5000, '[') + "</tool_call>"}) {
        r = parse_tool_calls(text);
        EXPECT_TRUE(r.calls.empty()) << text;
        EXPECT_EQ(r.content, text);
    }
}

TEST(ToolCalls, StreamsHoldBackOnlyWhatMayBeACall) {
    ToolCallStream s;
    std::string out;
    for (const char* piece : {"Hel", "lo", " <", "b>", " and\n", "<tool", "_call>\n{\"na", "me\": \"f\"}", "\n</tool_call>"})
        out += s.push(piece);
    EXPECT_EQ(out, "Hello <b> and");  // the line break before the call is held, then dropped with it
    EXPECT_TRUE(s.in_call());
    EXPECT_EQ(parse_tool_calls(s.held()).calls.size(), 1u);
    ToolCallStream t;
    EXPECT_EQ(t.push("a <tool"), "a");
    EXPECT_EQ(t.push("box>"), " <toolbox>");
    EXPECT_EQ(t.push(" \n"), "");
    EXPECT_FALSE(t.in_call());
    EXPECT_EQ(t.held(), " \n");  // the caller sends what is held at the end
}

}  // namespace
}  // namespace flashport::server
