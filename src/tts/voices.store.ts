// Saved voices (POST /v1/audio/voices): a reference clip kept once and named, so a speech request names the voice
// instead of uploading the clip every time: OpenAI's speech (`voice`) and, as an extension, Kiln's own /api/v1/tts,
// /api/tts and a video's tts_text (`voice` in place of the clip). Kept durably in DATA_DIR/voices/: the clip, then
// <id>.json beside it (written through a temp file and a rename, so a crash never leaves half a record; a clip without
// a record is not a voice and is removed at the next start). A crash between the two leaves a clip and no voice:
// nothing lost that the client was told it had.
import { Inject, Injectable } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { SETTINGS, type Settings } from '../config/settings';
import { BadInputError } from '../common/errors';
import type { InputFile } from '../jobs/input-probe';

export interface SavedVoice {
  id: string;
  name: string;
  /** Unix seconds. */
  created_at: number;
  /** Unix milliseconds, increasing within a process: the order of voices saved in the same second (absent in
   * records written before it was kept; those order by created_at). */
  created_ms?: number;
  /** The clip's file name in the voices folder. */
  file: string;
  /** What the SDK sends as `consent` (OpenAI: a consent recording's id), kept as given. */
  consent: string;
  /** Kiln extension: the clip's transcript, which Qwen3-TTS uses when given. */
  ref_text?: string;
}

@Injectable()
export class VoiceStore {
  private readonly dir: string;
  private lastMs = 0;

  /** The folder is made at the first saved voice: a service that never saves one has none. */
  constructor(@Inject(SETTINGS) settings: Pick<Settings, 'dataDir'>) {
    this.dir = join(settings.dataDir, 'voices');
    if (!existsSync(this.dir)) return;
    const records = new Set(readdirSync(this.dir).filter((f) => f.endsWith('.json')).map((f) => f.slice(0, -5)));
    for (const f of readdirSync(this.dir)) {
      if (!f.endsWith('.json') && !records.has(f.slice(0, f.length - extname(f).length))) rmSync(join(this.dir, f), { force: true });
    }
  }

  /** Every saved voice, oldest first. */
  list(): SavedVoice[] {
    if (!existsSync(this.dir)) return [];
    return readdirSync(this.dir)
      .filter((f) => f.endsWith('.json'))
      .map((f) => JSON.parse(readFileSync(join(this.dir, f), 'utf8')) as SavedVoice)
      .sort((a, b) => (a.created_ms ?? a.created_at * 1000) - (b.created_ms ?? b.created_at * 1000) || (a.id < b.id ? -1 : 1));
  }

  add(name: string, consent: string, clip: InputFile, refText?: string): SavedVoice {
    mkdirSync(this.dir, { recursive: true });
    const id = `voice_${randomBytes(12).toString('hex')}`;
    const file = `${id}${extname(clip.name ?? '').toLowerCase().replace(/[^.\w]/g, '').slice(0, 8) || '.bin'}`;
    writeFileSync(join(this.dir, file), clip.data);
    const ms = (this.lastMs = Math.max(Date.now(), this.lastMs + 1));
    const v: SavedVoice = { id, name, created_at: Math.floor(ms / 1000), created_ms: ms, file, consent, ...(refText ? { ref_text: refText } : {}) };
    const tmp = join(this.dir, `${id}.json.tmp`);
    writeFileSync(tmp, JSON.stringify(v));
    renameSync(tmp, join(this.dir, `${id}.json`));
    return v;
  }

  /** The voice `idOrName` names: by id, else the newest of that name. */
  find(idOrName: string): SavedVoice | undefined {
    const all = this.list();
    return all.find((v) => v.id === idOrName) ?? all.filter((v) => v.name === idOrName).pop();
  }

  /** The voice a request of Kiln's own API names in `voice`, or a 400 that says how to list and save voices. */
  named(idOrName: string): SavedVoice {
    const found = this.find(idOrName);
    if (found) return found;
    const all = this.list();
    const saved = all.slice(-20).map((v) => `${v.name} (${v.id})`).join(', ') + (all.length > 20 ? ` and ${all.length - 20} older` : '');
    throw new BadInputError(`voice ${JSON.stringify(idOrName)}: no saved voice has that id or name; saved voices: ${saved || 'none'} (GET /v1/audio/voices lists them; POST /v1/audio/voices, multipart audio_sample, name and consent, saves one)`);
  }

  remove(id: string): boolean {
    const v = this.list().find((x) => x.id === id);
    if (!v) return false;
    rmSync(join(this.dir, `${id}.json`), { force: true });
    rmSync(join(this.dir, v.file), { force: true });
    return true;
  }

  clip(v: SavedVoice): InputFile {
    return { label: `voice ${JSON.stringify(v.name)} (${v.id})`, name: v.file, data: readFileSync(join(this.dir, v.file)) };
  }
}
