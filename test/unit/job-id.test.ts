// Job ids (issue 47 item 1): the spec's form (date, time, numeric suffix joined by underscores), and never the same
// id twice, however many are made in one second and whichever way the clock moves.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { JOB_ID_PATTERN, newJobId } from '../../src/jobs/job-id';

test('20,000 ids in the same instant: all unique, in the spec\'s form, increasing', () => {
  const now = new Date('2031-05-06T07:08:09.500Z');
  const ids = Array.from({ length: 20_000 }, () => newJobId(now));
  assert.equal(new Set(ids).size, ids.length);
  for (const id of ids) assert.match(id, JOB_ID_PATTERN);
  assert.ok(ids[0]!.startsWith('20310506_070809_'), ids[0]);
  for (let i = 1; i < ids.length; i++) assert.ok(ids[i - 1]! < ids[i]!, `${ids[i - 1]} then ${ids[i]}`);
});

test('a clock that steps back never brings an id back', () => {
  const later = newJobId(new Date('2032-01-01T00:00:10Z'));
  const earlier = newJobId(new Date('2032-01-01T00:00:05Z'));
  assert.ok(earlier > later, `${later} then ${earlier}`);
  assert.match(earlier, JOB_ID_PATTERN);
});
