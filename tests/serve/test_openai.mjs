// `flashport serve` through the official OpenAI JavaScript client (npm `openai`): models, chat and
// text completions, streamed and not, usage, an error mapped to the client's BadRequestError, and
// the API key. Starts its own server on a free loopback port; run through run_node.sh.
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { run, startServer } from './serve_process.mjs';

const key = 'test-key';

async function main() {
  const { proc, port, exited } = await startServer(['--api-key', key]);
  try {
    const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: key, maxRetries: 0, timeout: 60000 });

    const models = await client.models.list();
    assert.equal(models.data[0].id, 'tiny-kjv');

    const chat = await client.chat.completions.create({
      model: 'tiny-kjv', messages: [{ role: 'user', content: 'And God said' }], max_tokens: 10, temperature: 0,
    });
    assert.equal(chat.object, 'chat.completion');
    assert.ok(chat.choices[0].message.content.length > 0);
    assert.ok(['stop', 'length'].includes(chat.choices[0].finish_reason));
    assert.equal(chat.usage.total_tokens, chat.usage.prompt_tokens + chat.usage.completion_tokens);

    const stream = await client.chat.completions.create({
      model: 'tiny-kjv', messages: [{ role: 'user', content: 'And God said' }], max_tokens: 10, temperature: 0,
      stream: true, stream_options: { include_usage: true },
    });
    let text = '';
    let usage = null;
    let finish = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        text += c.delta?.content ?? '';
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    assert.equal(text, chat.choices[0].message.content, 'streamed greedy text equals the whole reply');
    assert.equal(finish, chat.choices[0].finish_reason);
    assert.deepEqual(usage, chat.usage);

    const comp = await client.completions.create({ model: 'tiny-kjv', prompt: 'In the beginning', max_tokens: 8, temperature: 0 });
    assert.equal(comp.usage.completion_tokens, 8);
    const compStream = await client.completions.create({
      model: 'tiny-kjv', prompt: 'In the beginning', max_tokens: 8, temperature: 0, stream: true,
    });
    let compText = '';
    for await (const chunk of compStream) compText += chunk.choices[0]?.text ?? '';
    assert.equal(compText, comp.choices[0].text);

    // Scoring as evaluation harnesses do it: a batch of prompts, echoed with their logprobs.
    const scored = await client.completions.create({
      model: 'tiny-kjv', prompt: ['In the beginning', 'And God said'], max_tokens: 1, temperature: 0, echo: true, logprobs: 1 });
    assert.deepEqual(scored.choices.map((c) => c.index), [0, 1]);
    assert.ok(scored.choices[0].text.startsWith('In the beginning') && scored.choices[1].text.startsWith('And God said'));
    assert.equal(scored.choices[0].logprobs.token_logprobs[0], null);
    assert.ok(scored.choices[0].logprobs.token_logprobs.slice(1).every((v) => v <= 0));

    // JSON mode as the client sends it, steered to a closed object by logit_bias on '{' and '}'.
    const ids = {};
    for (const t of ['{', '}']) {
      const r = await fetch(`http://127.0.0.1:${port}/tokenize`, {
        method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` },
        body: JSON.stringify({ prompt: t }) });
      ids[t] = (await r.json()).tokens[0];
    }
    const json = await client.chat.completions.create({
      model: 'tiny-kjv', messages: [{ role: 'user', content: 'And God said' }], max_tokens: 20, temperature: 0,
      response_format: { type: 'json_object' }, logit_bias: { [ids['{']]: 100, [ids['}']]: 100 } });
    assert.deepEqual(JSON.parse(json.choices[0].message.content), {});
    assert.equal(json.choices[0].finish_reason, 'stop');

    await assert.rejects(
      client.chat.completions.create({ model: 'tiny-kjv', messages: [{ role: 'user', content: 'x' }], max_tokens: -1 }),
      (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && /max_tokens/.test(e.message));
    await assert.rejects(
      client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] }),
      (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
    const wrong = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'wrong', maxRetries: 0 });
    await assert.rejects(wrong.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
    console.log('PASS openai js client: models, chat and completions (streamed and whole), JSON mode, errors, api key');
  } finally {
    proc.kill('SIGTERM');
  }
  const { code } = await exited;
  assert.equal(code, 0, 'the server exits 0 after SIGTERM');
}

run(main);
