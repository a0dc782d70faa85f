import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { profileChecker } from '../../src/weights';

test('profileChecker: one folder check serves repeated asks within its age, a fresh one after', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-checker-'));
  try {
    const cached = profileChecker('tts', dir, 60_000);
    const first = cached();
    assert.equal(first.state, 'missing');
    assert.equal(cached(), first, 'the same answer object within the age');
    const fresh = profileChecker('tts', dir, 0);
    const a = fresh();
    await new Promise((r) => setTimeout(r, 2));
    assert.notEqual(fresh(), a, 'checked again once the age has passed');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
