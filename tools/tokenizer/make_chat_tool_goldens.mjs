// Writes tests/data/tokenizer/chat_tool_goldens.json: the tool-calling cases of chat_tool_cases.json
// rendered with Qwen3's and Qwen2.5's chat templates (tests/data/tokenizer/{qwen3,qwen2_5}) by
// @huggingface/jinja, the JavaScript Jinja of transformers.js, whose `tojson` writes Python's
// json.dumps form. The arguments of assistant calls, JSON strings in an OpenAI request, are parsed into
// objects first, as vLLM does before it applies a template. These goldens come from a renderer
// independent of flashport; make_chat_goldens.py checks the same cases with transformers itself.
//
//   npm install --prefix /tmp/jinja @huggingface/jinja@0.5.13
//   node tools/tokenizer/make_chat_tool_goldens.mjs /tmp/jinja > tests/data/tokenizer/chat_tool_goldens.json
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const prefix = process.argv[2];
if (!prefix) throw new Error('usage: node make_chat_tool_goldens.mjs NPM_PREFIX (where @huggingface/jinja is installed)');
const require = createRequire(path.join(path.resolve(prefix), 'noop.js'));
const { Template } = await import(require.resolve('@huggingface/jinja'));
const version = JSON.parse(readFileSync(path.join(path.resolve(prefix), 'node_modules/@huggingface/jinja/package.json'))).version;

const data = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../tests/data/tokenizer');
const cases = JSON.parse(readFileSync(path.join(data, 'chat_tool_cases.json'))).cases;
const out = { about: 'Made by tools/tokenizer/make_chat_tool_goldens.mjs from chat_tool_cases.json. Do not edit by hand.',
  renderer: `@huggingface/jinja ${version}`, goldens: [] };
for (const template of ['qwen3', 'qwen2_5']) {
  const config = JSON.parse(readFileSync(path.join(data, template, 'tokenizer_config.json')));
  const t = new Template(config.chat_template);
  for (const c of cases) {
    const messages = c.messages.map((m) => (m.tool_calls ? { ...m, content: m.content ?? '',
      tool_calls: m.tool_calls.map((tc) => ({ ...tc, function: { ...tc.function, arguments: JSON.parse(tc.function.arguments) } })) } : m));
    const text = t.render({ messages, tools: c.tools, add_generation_prompt: true, bos_token: '', eos_token: config.eos_token });
    out.goldens.push({ template, name: c.name, text });
  }
}
process.stdout.write(JSON.stringify(out, null, 1) + '\n');
