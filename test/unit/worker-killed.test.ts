// A SIGKILL of the local GPU worker that Kiln did not send (issue 47 item 7): the signal is said, and memory is named
// only when the last heartbeat's figures point to it. The operator's kill -9 is covered end to end in
// test/api/worker-faults.test.ts; memory near a limit cannot be brought about safely on a shared test machine, so
// that case is judged here from heartbeat figures as the worker sends them (src/worker/main.ts hostMemory, the pool's
// stats).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { killedFromOutside, type MemorySeen } from '../../src/scheduler/local-worker';

const GiB = 2 ** 30;
const gpu = (inUse: number, budget = 8 * GiB) => ({ allocatedBytes: inUse, inUseBytes: inUse, cachedBytes: 0, peakAllocatedBytes: inUse, peakInUseBytes: inUse, buffersCreated: 10, budgetBytes: budget });

describe('killedFromOutside', () => {
  test('no heartbeat seen: the signal only', () => {
    assert.equal(killedFromOutside(undefined), 'SIGKILL, not sent by Kiln');
  });

  test('memory far from every limit (an operator kill -9): memory is not blamed', () => {
    const beat: MemorySeen = { host_memory: { rss: 1.5 * GiB, available: 12 * GiB, limit: 16 * GiB }, memory: gpu(2 * GiB) };
    const text = killedFromOutside(beat, 0.4);
    assert.equal(text, 'SIGKILL, not sent by Kiln; its memory was not near a limit when last seen');
    assert.doesNotMatch(text, /out-of-memory|GiB/);
  });

  test('the worker near the host limit: the out-of-memory killer is named, with the figures', () => {
    const beat: MemorySeen = { host_memory: { rss: 14.2 * GiB, available: 0.6 * GiB, limit: 16 * GiB }, memory: gpu(2 * GiB) };
    assert.equal(killedFromOutside(beat, 0.7), "SIGKILL, not sent by Kiln; likely the system's out-of-memory killer: 1 s before, the worker held 14.2 GiB of 16.0 GiB with 0.6 GiB available");
  });

  test('the host nearly out of memory though the worker is small (another process grew): named too', () => {
    const beat: MemorySeen = { host_memory: { rss: 2 * GiB, available: 0.5 * GiB, limit: 16 * GiB } };
    assert.match(killedFromOutside(beat), /out-of-memory killer: when last seen, the worker held 2\.0 GiB of 16\.0 GiB with 0\.5 GiB available$/);
  });

  test('GPU memory at its budget (a software GPU allocates host memory): named with the GPU figures', () => {
    const beat: MemorySeen = { host_memory: { rss: 3 * GiB, available: 9 * GiB, limit: 16 * GiB }, memory: gpu(7.9 * GiB) };
    assert.match(killedFromOutside(beat, 1), /out-of-memory killer: 1 s before, GPU memory 7\.9 GiB in use of its 8\.0 GiB budget$/);
  });
});
