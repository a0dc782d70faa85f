// Ending a process's engine with work still owed. conv1d.test's input-check test, run alone, records a weight
// preparation it never syncs and creates tensors it never frees; when the helpers' after() hook called
// engine.destroy(), that process aborted, segfaulted or hung at exit in 30 of 30 runs on lavapipe (and 6 of 30 full
// conv1d.test runs). engine.shutdown() waits for the work first: these runs must all exit 0.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { DeviceLostError, Engine, EngineHolder } from '../../src/engine/engine';
import { arith } from '../../src/engine/ops/elementwise';

const RUNS = 6;
const AT_ONCE = 3;

function runInputChecksAlone(): Promise<{ code: number | null; signal: NodeJS.Signals | null; tail: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--test-name-pattern=input checks', join(__dirname, 'conv1d.test.js')], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR ?? '/tmp' },
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000); // a hang at exit reads as SIGKILL
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, tail: out.slice(-600) });
    });
  });
}

test(`an engine shut down with unsynced work lets its process exit cleanly (${RUNS} runs, ${AT_ONCE} at once)`, { timeout: 600_000 }, async () => {
  const results = [];
  for (let i = 0; i < RUNS; i += AT_ONCE) {
    results.push(...(await Promise.all(Array.from({ length: Math.min(AT_ONCE, RUNS - i) }, runInputChecksAlone))));
  }
  for (const [i, r] of results.entries()) {
    assert.ok(r.code === 0 && r.signal === null, `run ${i + 1}: exit code ${r.code}, signal ${r.signal}\n${r.tail}`);
  }
});

test('shutdown() ends an engine with work recorded; a second call, or one after a device loss, only destroys', async () => {
  const e = await Engine.create({ debug: true, allowSoftware: true });
  const a = e.upload([1, 2, 3], [3]);
  arith(e, 'add', a, a); // recorded, never synced
  await e.shutdown();
  assert.ok(e.lost);
  assert.throws(() => arith(e, 'add', a, a), DeviceLostError);
  await e.shutdown();

  const holder = new EngineHolder({ allowSoftware: true });
  const lost = await holder.get();
  lost.device.destroy(); // a driver reset: nothing to wait for any more
  await lost.device.lost;
  await holder.shutdown();
  assert.equal(holder.peek(), null);
});
