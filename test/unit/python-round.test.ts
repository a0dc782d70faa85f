import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pythonRound } from '../../src/common/python-round';

test("pythonRound is Python's round(): halves to the even neighbour, others to the nearest", () => {
  // values from python3: [round(v) for v in (0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, 2.4999, 2.5001, 7, -7.2)]
  const cases: [number, number][] = [[0.5, 0], [1.5, 2], [2.5, 2], [3.5, 4], [-0.5, 0], [-1.5, -2], [-2.5, -2], [2.4999, 2], [2.5001, 3], [7, 7], [-7.2, -7]];
  for (const [v, want] of cases) assert.equal(pythonRound(v) + 0, want, `round(${v})`);
});
