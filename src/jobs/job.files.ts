// Where a job's files live: under DATA_DIR (STORAGE=local: inputs/<id>/, out/<file>) or in the S3-compatible object
// store (STORAGE=s3: jobs/<id>/inputs/<name>, jobs/<id>/<file>, tts/<id>/...), which GPU workers on other hosts reach.
// A task names each file as a local path or an s3:// URL; the API serves outputs at the same /out/<file> and
// download paths either way (streamed through from the store).
import { Inject, Injectable } from '@nestjs/common';
import { createReadStream } from 'node:fs';
import { mkdir, readdir, rm, rmdir, stat, writeFile } from 'node:fs/promises';
import { extname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { SETTINGS, Settings } from '../config/settings';
import { objectKeys, S3Store } from '../storage/s3-store';
import type { InputFile } from './input-probe';

const TYPES: Record<string, string> = { '.png': 'image/png', '.mp4': 'video/mp4', '.wav': 'audio/wav' };

export interface ServedFile {
  body: Readable;
  size?: number;
  type: string;
  /** Content-Range of a span. */
  range?: string;
}

@Injectable()
export class JobFiles {
  readonly outDir: string;
  readonly inputsDir: string;

  constructor(
    @Inject(SETTINGS) settings: Settings,
    @Inject(S3Store) private readonly store: S3Store | null,
  ) {
    this.outDir = join(settings.dataDir, 'out');
    this.inputsDir = join(settings.dataDir, 'inputs');
  }

  get remote(): boolean {
    return this.store !== null;
  }

  /** Saves a request's input files; resolves with their names (`<prefix>-<i><ext>`, in order). */
  async saveInputs(id: string, files: InputFile[], prefix: string): Promise<string[]> {
    if (!this.store) await mkdir(join(this.inputsDir, id), { recursive: true });
    return Promise.all(files.map(async (f, i) => {
      const ext = (extname(f.name?.split('?')[0] ?? '') || '.bin').slice(0, 8).replace(/[^.\w]/g, '');
      const name = `${prefix}-${i}${ext}`;
      if (this.store) await this.store.put(objectKeys.jobInput(id, name), f.data);
      else await writeFile(join(this.inputsDir, id, name), f.data);
      return name;
    }));
  }

  /** A saved input as a task names it. */
  inputRef(id: string, name: string): string {
    return this.store ? this.store.url(objectKeys.jobInput(id, name)) : join(this.inputsDir, id, name);
  }

  /** Where a job's output goes (`file`: <id>.png, <id>.mp4), as a task names it. */
  outputRef(id: string, file: string): string {
    return this.store ? this.store.url(objectKeys.jobOutput(id, file)) : join(this.outDir, file);
  }

  /** Some of a job's saved inputs, by name, and its local folder once empty (a create that lost its id to another
   * process takes back what it saved there). */
  async removeInputs(id: string, names: string[]): Promise<void> {
    await Promise.all(names.map((n) => (this.store ? this.store.deletePrefix(objectKeys.jobInput(id, n)) : rm(join(this.inputsDir, id, n), { force: true }))));
    if (!this.store) await rmdir(join(this.inputsDir, id)).catch(() => undefined);
  }

  /** A job's inputs, once it ended. */
  async clearInputs(id: string): Promise<void> {
    if (this.store) await this.store.deletePrefix(`${objectKeys.jobPrefix(id)}inputs/`);
    else await rm(join(this.inputsDir, id), { recursive: true, force: true });
  }

  /** Everything of a job: inputs and output (`file`). */
  async remove(id: string, file: string): Promise<void> {
    if (this.store) return this.store.deletePrefix(objectKeys.jobPrefix(id));
    await rm(join(this.inputsDir, id), { recursive: true, force: true });
    await rm(join(this.outDir, file), { force: true });
  }

  /** A failed job's output, if a partial one was left (local: the worker writes in place). */
  async removeOutput(file: string): Promise<void> {
    if (!this.store) await rm(join(this.outDir, file), { force: true });
  }

  /** A speech request's reference clip, saved; and the refs of it and of its wav. */
  async saveSpeech(id: string, ref: InputFile): Promise<{ clip: string; output: string }> {
    const name = `ref${extname(ref.name ?? '').slice(0, 8).replace(/[^.\w]/g, '') || '.bin'}`;
    if (this.store) {
      await this.store.put(objectKeys.speech(id, name), ref.data);
      return { clip: this.store.url(objectKeys.speech(id, name)), output: this.store.url(objectKeys.speech(id, `${id}.wav`)) };
    }
    const dir = join(this.inputsDir, id);
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, name), ref.data);
    return { clip: join(dir, name), output: join(this.outDir, `${id}.wav`) };
  }

  /** A speech request's clip, once it ended. */
  async clearSpeech(id: string, clip: string): Promise<void> {
    const key = this.store?.keyOf(clip);
    if (key) await this.store!.deletePrefix(key);
    else await rm(join(this.inputsDir, id), { recursive: true, force: true });
  }

  /** The file served at /out/<file>, or undefined. `range` (the object store only: locally express.static serves
   * ranges): one `bytes=a-b` span of it, or `{ unsatisfiable: size }`. */
  async open(file: string, range?: string): Promise<ServedFile | { unsatisfiable: number } | undefined> {
    const type = TYPES[extname(file)] ?? 'application/octet-stream';
    if (this.store) {
      const o = await this.store.open(objectKeys.ofOutFile(file), range);
      return o && ('unsatisfiable' in o ? o : { body: o.body, size: o.size, type, range: o.range });
    }
    const path = join(this.outDir, file);
    const s = await stat(path).catch(() => undefined);
    return s?.isFile() ? { body: createReadStream(path), size: s.size, type } : undefined;
  }

  /** Local inputs no job owns any more (at start); the object store's are removed as each job ends. */
  async sweepInputs(owned: Set<string>): Promise<number> {
    if (this.store) return 0;
    const orphans = (await readdir(this.inputsDir).catch(() => [] as string[])).filter((n) => !owned.has(n));
    for (const name of orphans) await rm(join(this.inputsDir, name), { recursive: true, force: true });
    return orphans.length;
  }
}
