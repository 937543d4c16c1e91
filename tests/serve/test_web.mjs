// The page at / in a real browser: Playwright (playwright-core) driving Debian's chromium. It types
// into the chat and sees streamed text, presses stop during a slow stream, checks the figures and the
// history, then runs the attention lab and sees its table and plots. Run through run_node.sh.
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { run, startServer } from './serve_process.mjs';

const executablePath = process.env.FP_CHROMIUM ?? '/usr/lib/chromium/chromium';

// Clients that keep sending 240-token prompts: every engine step then carries a prefill chunk, so
// the page's stream slows to one token per chunk (the latency bound docs/serve.md states) and stop
// lands mid-stream.
function prefillLoad(port, clients) {
  let running = true;
  const prompt = Array.from({ length: 240 }, (_, i) => 1000 + (i % 900));
  const loops = Array.from({ length: clients }, async () => {
    while (running) {
      await fetch(`http://127.0.0.1:${port}/v1/completions`, {
        method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ prompt, max_tokens: 1 }),
      }).then((r) => r.text());
    }
  });
  return async () => { running = false; await Promise.all(loops); };
}

async function metrics(port) {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const get = (name) => Number(text.match(new RegExp('^' + name + ' (\\S+)$', 'm'))[1]);
  return { running: get('flashport_running_sequences'), used: get('flashport_kv_blocks_used') };
}

async function main() {
  const { proc, port, exited } = await startServer(['--parallel', '4', '--max-step-tokens', '256']);
  const browser = await chromium.launch({ executablePath, headless: true, args: ['--no-sandbox'] });
  try {
    const page = await browser.newPage();
    const pageErrors = [];
    page.on('pageerror', (e) => pageErrors.push(e));
    await page.goto(`http://127.0.0.1:${port}/`);
    await page.waitForFunction(() => document.getElementById('model').textContent === 'tiny-kjv');

    // A whole reply, streamed.
    await page.fill('#system', 'You are the King James Bible.');
    await page.fill('#max_tokens', '16');
    await page.fill('#seed', '1');
    await page.fill('#prompt', 'In the beginning');
    await page.press('#prompt', 'Enter');
    await page.waitForFunction(() => /TTFT \d+ ms \| [\d.]+ tok\/s \| \d+ tokens \| (stop|length)/.test(
      document.getElementById('figures').textContent), null, { timeout: 30000 });
    const first = await page.textContent('.msg.assistant');
    assert.ok(first.length > 0, 'streamed text appeared');

    const firstChat = await page.$$eval('.msg', (els) => els.map((e) => e.className));
    assert.deepEqual(firstChat, ['msg user', 'msg assistant'], 'the reply is kept in the history');

    // Stop during a slow stream. Each attempt starts from a cleared history: the model's context is
    // 256 tokens, so a history grown by earlier attempts would cut the stream short. The page clicks
    // stop itself in the poll that sees the first text, so no round trip to Playwright separates the
    // two (on a loaded machine that gap alone could outlast the stream).
    let stopped = false;
    for (let attempt = 0; attempt < 5 && !stopped; ++attempt) {
      await page.click('#clear');
      const stopLoad = prefillLoad(port, 3);
      await page.fill('#max_tokens', '200');
      await page.fill('#prompt', 'And God said');
      await page.press('#prompt', 'Enter');
      const last = page.locator('.msg.assistant').last();
      const clicked = await (await page.waitForFunction(() => {
        const all = document.querySelectorAll('.msg.assistant');
        if (all.length === 0 || all[all.length - 1].textContent.length === 0) return false;
        const stop = document.getElementById('stop');
        if (stop.disabled) return 'ended';
        stop.click();
        return 'clicked';
      }, null, { timeout: 30000, polling: 10 })).jsonValue();
      await page.waitForFunction(() => document.getElementById('figures').textContent !== '' &&
        document.getElementById('stop').disabled, null, { timeout: 30000 });
      const figures = await page.textContent('#figures');
      stopped = clicked === 'clicked' && figures.includes('stopped');
      // The stream may have ended on its own before the page saw its first text (a fast machine, or
      // the load arrived late): then this attempt does not count.
      if (!stopped) console.error(`attempt ${attempt}: ${clicked}, figures: ${figures}`);
      const text = await last.textContent();
      await page.waitForTimeout(300);
      assert.equal(await last.textContent(), text, 'no text after stop');
      await stopLoad();
    }
    assert.ok(stopped, 'stop ended a running stream');
    // The server cancels the aborted stream and frees its KV blocks.
    for (let i = 0; ; ++i) {
      const m = await metrics(port);
      if (m.running === 0 && m.used === 0) break;
      assert.ok(i < 300, 'the stopped stream still holds the server: ' + JSON.stringify(m));
      await new Promise((r) => setTimeout(r, 50));
    }
    const messages = await page.$$eval('.msg', (els) => els.map((e) => e.className));
    assert.deepEqual(messages, ['msg user', 'msg assistant'], 'the stopped reply is kept in the history');

    // The attention lab.
    await page.click('#tab-lab');
    await page.fill('#lens', '64,128');
    await page.click('#run');
    await page.waitForFunction(() => document.querySelectorAll('#lab-table tr').length === 5, null, { timeout: 60000 });
    assert.equal(await page.locator('#lab-plots svg').count(), 2);
    assert.equal(await page.locator('#lab-plots polyline').count(), 4);
    assert.match(await page.textContent('#lab-status'), /cpu: batch 1, 4 heads, head dim 64, fp32/);
    // A bad request is shown, not thrown.
    await page.fill('#lens', '99999');
    await page.click('#run');
    await page.waitForFunction(() => /error: .*4096/.test(document.getElementById('lab-status').textContent));
    assert.deepEqual(pageErrors, []);
    console.log('PASS web page: chat streamed, stopped mid-stream (KV freed), history kept, attention lab table and plots');
  } finally {
    await browser.close();
    proc.kill('SIGTERM');
  }
  const { code } = await exited;
  assert.equal(code, 0, 'the server exits 0 after SIGTERM');
}

run(main);
