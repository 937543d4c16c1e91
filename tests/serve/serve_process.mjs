// Starts `flashport serve` on a free loopback port for the JavaScript tests: resolves once it
// prints "ready", with the process, its port and a promise of its exit.
import { spawn } from 'node:child_process';

export const bin = process.env.FLASHPORT_BIN ?? 'build/cpu/bin/flashport';
export const modelDir = process.env.FP_TINY_KJV_DIR ?? 'models/tiny-kjv';

export function startServer(args = []) {
  const proc = spawn(bin, ['serve', '--model', modelDir, '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  return new Promise((resolve, reject) => {
    let out = '';
    let port = 0;
    const timer = setTimeout(() => reject(new Error('server not ready in 60 s: ' + out)), 60000);
    proc.stdout.on('data', (d) => {
      if (port && out.includes('ready')) return;  // later output (the lab's tables) is not needed
      out += d;
      const m = out.match(/listening on http:\/\/[\d.]+:(\d+)/);
      if (m) port = Number(m[1]);
      if (port && out.includes('ready')) {
        clearTimeout(timer);
        resolve({ proc, port, exited });
      }
    });
    proc.on('exit', (code) => reject(new Error('server exited early with ' + code + ': ' + out)));
  });
}

// Runs a test's main(): a failure prints FAIL and the error, and exits 1.
export function run(main) {
  main().catch((e) => {
    console.error('FAIL', e);
    process.exit(1);
  });
}
