// The container's health check (src/healthcheck.ts; deploy/Dockerfile's HEALTHCHECK, the compose files' worker
// healthcheck), run as the container runs it: a node process with the service's environment. `api`: the running API
// answers /api/status with its token (exit 0), a port nothing listens on or no token yet is unhealthy (exit 1);
// `gpu`: the adapter and a device open as the worker's engine opens them (here lavapipe, which this machine is allowed:
// it has no GPU device nodes), printed as JSON.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startApp, TOKEN, type TestApp } from './harness';

const SCRIPT = join(__dirname, '../../src/healthcheck.js');

/** Runs the check in its own process, as the container does (asynchronously: the API under test is in this process). */
function check(role: string, env: Record<string, string>): Promise<{ code: number | null; out: string; err: string }> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !['API_TOKEN', 'HOST', 'PORT', 'DATA_DIR'].includes(k))) as Record<string, string>;
  return new Promise((resolve) => {
    execFile(process.execPath, [SCRIPT, role], { env: { ...base, ...env }, encoding: 'utf8', timeout: 60_000 }, (e, stdout, stderr) => {
      resolve({ code: e ? (typeof e.code === 'number' ? e.code : null) : 0, out: stdout, err: stderr });
    });
  });
}

describe('node dist/healthcheck.js', () => {
  let t: TestApp;
  let empty: string;
  before(async () => {
    t = await startApp();
    empty = mkdtempSync(join(tmpdir(), 'kiln-hc-'));
  });
  after(async () => {
    await t.close(true);
    rmSync(empty, { recursive: true, force: true });
  });

  test('api: healthy while the API answers with its token; unhealthy when nothing listens or there is no token yet', async () => {
    const port = new URL(t.url).port;
    const ok = await check('api', { API_TOKEN: TOKEN, HOST: '0.0.0.0', PORT: port, DATA_DIR: t.dataDir });
    assert.equal(ok.code, 0, ok.out);
    assert.match(ok.out, /^api ok: \{"online":/);
    const wrongToken = await check('api', { API_TOKEN: 'not-the-token', HOST: '127.0.0.1', PORT: port, DATA_DIR: t.dataDir });
    assert.equal(wrongToken.code, 1, wrongToken.out);
    assert.match(wrongToken.out, /^unhealthy \(api\): GET http:\/\/127\.0\.0\.1:\d+\/api\/status: 401/);
    const nothing = await check('api', { API_TOKEN: TOKEN, PORT: '1', DATA_DIR: t.dataDir });
    assert.equal(nothing.code, 1, nothing.out);
    assert.match(nothing.out, /^unhealthy \(api\): /);
    // API_TOKEN unset and no token written yet: the API has not started (the check makes none of its own)
    const none = await check('api', { PORT: port, DATA_DIR: empty });
    assert.equal(none.code, 1, none.out);
    assert.match(none.out, /^unhealthy \(api\): no API token yet: the API writes .*\/token at its first start/);
    assert.equal((await check('nonsense', {})).code, 2);
  });

  test('gpu: the adapter and a device open as the engine opens them', async () => {
    const r = await check('gpu', {});
    assert.equal(r.code, 0, r.out + r.err);
    const adapter = JSON.parse(r.out.trim().split('\n')[0]!) as { name: string; software: boolean };
    assert.equal(typeof adapter.name, 'string');
    assert.equal(adapter.software, true, 'lavapipe on this machine');
  });
});
