import { randomInt } from 'node:crypto';

/** Job ids: UTC date, UTC time and a 4-digit suffix joined by underscores, e.g. 20261121_101530_0427.
 * Within a process the ids are unique and increasing: the suffix counts up within the second (from a random start,
 * so that another process on the same store rarely meets the same numbers; JobsService retries on the store's
 * unique constraint when it does). Past 9999 ids in one second the id borrows the next second, so an id is never
 * reused, even when the clock steps back. */
let lastSecond = 0;
let nextSuffix = 0;

export function newJobId(now = new Date()): string {
  const second = Math.floor(now.getTime() / 1000);
  if (second > lastSecond) {
    lastSecond = second;
    nextSuffix = randomInt(0, 5000);
  } else if (nextSuffix > 9999) {
    lastSecond++;
    nextSuffix = 0;
  }
  const at = new Date(lastSecond * 1000);
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  const date = `${at.getUTCFullYear()}${p(at.getUTCMonth() + 1)}${p(at.getUTCDate())}`;
  const time = `${p(at.getUTCHours())}${p(at.getUTCMinutes())}${p(at.getUTCSeconds())}`;
  return `${date}_${time}_${p(nextSuffix++, 4)}`;
}

export const JOB_ID_PATTERN = /^\d{8}_\d{6}_\d{4}$/;
