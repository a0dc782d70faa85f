// Which video a remix (POST /v1/videos/{id}/remix) was made from: OpenAI's video object says so
// (remixed_from_video_id), and Kiln's job record has no field for it. One JSON line per remix, appended to
// DATA_DIR/remixes.jsonl and synced before the answer, read back at start; a line torn by a crash is skipped (its
// job was never answered). Made at the first remix: a service that never remixes writes nothing.
import { Inject, Injectable } from '@nestjs/common';
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { SETTINGS, type Settings } from '../config/settings';

@Injectable()
export class RemixStore {
  private readonly file: string;
  private readonly from = new Map<string, string>();

  constructor(@Inject(SETTINGS) settings: Pick<Settings, 'dataDir'>) {
    this.file = join(settings.dataDir, 'remixes.jsonl');
    if (!existsSync(this.file)) return;
    for (const line of readFileSync(this.file, 'utf8').split('\n')) {
      try {
        const r = JSON.parse(line) as { id?: unknown; from?: unknown };
        if (typeof r.id === 'string' && typeof r.from === 'string') this.from.set(r.id, r.from);
      } catch {
        // an empty or torn line
      }
    }
  }

  /** The video `id` was remixed from, or null. */
  sourceOf(id: string): string | null {
    return this.from.get(id) ?? null;
  }

  add(id: string, from: string): void {
    const fd = openSync(this.file, 'a');
    try {
      writeSync(fd, `${JSON.stringify({ id, from })}\n`);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    this.from.set(id, from);
  }
}
