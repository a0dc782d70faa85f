import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The repository root (the folder holding package.json), found from this file wherever it was compiled to
 * (dist/, build/run-N/src/, ...), so shaders/, weights/ and client/dist/ resolve the same in tests and in production. */
export function projectRoot(): string {
  let dir = __dirname;
  for (;;) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'shaders'))) return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error(`projectRoot: no package.json with a shaders/ folder above ${__dirname}`);
    dir = up;
  }
}
