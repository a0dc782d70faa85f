// The dry run's planner as the app closes (src/plan/planner.ts): a plan in flight is stopped with a 503's error
// (UnavailableError, "shutting down"), as is one asked for afterwards; never a plain Error, which the API would answer
// 500 (the page's e2e test closed its app while the Plan line's request ran, and the OpenAPI audit saw that 500).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { UnavailableError } from '../../src/common/errors';
import { Planner } from '../../src/plan/planner';
import type { PlanRequest } from '../../src/plan/plan';

test('close(): the plan in flight and a later one are UnavailableError (503), not a 500', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-planner-'));
  try {
    // a child that reads its request and never answers (a long plan)
    const script = join(dir, 'slow-child.js');
    writeFileSync(script, "process.stdin.resume(); setTimeout(() => {}, 60_000);\n");
    const planner = new Planner({ gpu: async () => undefined, script });
    const request = { kind: 'image', prompt: 'a kiln' } as PlanRequest;
    const inFlight = planner.plan(request);
    await new Promise((r) => setTimeout(r, 300));
    planner.close();
    await assert.rejects(inFlight, (e: Error) => e instanceof UnavailableError && /shutting down/.test(e.message));
    await assert.rejects(planner.plan({ ...request, prompt: 'another' } as PlanRequest), (e: Error) => e instanceof UnavailableError && /shutting down/.test(e.message));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
