import { randomInt } from 'node:crypto';

/** Job ids: UTC date, UTC time and a 4-digit suffix joined by underscores, e.g. 20261121_101530_0427.
 * Sortable by creation second; the caller retries on the (rare) collision. */
export function newJobId(now = new Date()): string {
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  const date = `${now.getUTCFullYear()}${p(now.getUTCMonth() + 1)}${p(now.getUTCDate())}`;
  const time = `${p(now.getUTCHours())}${p(now.getUTCMinutes())}${p(now.getUTCSeconds())}`;
  return `${date}_${time}_${p(randomInt(0, 10000), 4)}`;
}

export const JOB_ID_PATTERN = /^\d{8}_\d{6}_\d{4}$/;
