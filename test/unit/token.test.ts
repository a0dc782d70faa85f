import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { presentedToken, resolveToken, tokenMatches } from '../../src/auth/token';

test('a token is generated once, stored with mode 600, and reused on the next start', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-token-'));
  const first = resolveToken(undefined, dir);
  assert.equal(first.generated, true);
  assert.ok(first.token.length >= 24);
  assert.equal(statSync(join(dir, 'token')).mode & 0o777, 0o600);
  assert.equal(readFileSync(join(dir, 'token'), 'utf8').trim(), first.token);
  const second = resolveToken(undefined, dir);
  assert.deepEqual([second.generated, second.token], [false, first.token]);
  assert.deepEqual(resolveToken('from-env-123', dir), { token: 'from-env-123', generated: false });
});

test('tokenMatches compares whole tokens of any length', () => {
  assert.equal(tokenMatches('abcdefgh', 'abcdefgh'), true);
  assert.equal(tokenMatches('abcdefg', 'abcdefgh'), false);
  assert.equal(tokenMatches('abcdefghi', 'abcdefgh'), false);
  assert.equal(tokenMatches('', 'abcdefgh'), false);
});

test('presentedToken reads Bearer, then x-token, then ?token=', () => {
  assert.equal(presentedToken({ authorization: 'Bearer a1' , 'x-token': 'b2' }, { token: 'c3' }), 'a1');
  assert.equal(presentedToken({ 'x-token': 'b2' }, { token: 'c3' }), 'b2');
  assert.equal(presentedToken({}, { token: 'c3' }), 'c3');
  assert.equal(presentedToken({ authorization: 'Basic zz' }, {}), undefined);
});
