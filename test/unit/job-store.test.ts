// The job store opens a DATA_DIR an older build wrote (issue 48, one job shape): its records (flat public fields plus a
// `params` bag) are rewritten once into this build's (one typed task per kind), and read, shown and run as before.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { referencePrompt } from '../../src/catalog';
import { toJobObject, type JobRecord } from '../../src/jobs/job.model';
import { JOB_RECORD_FORMAT, JobStore } from '../../src/jobs/job.store';

/** A video reference job as the build before the typed task stored it (done, 2 pictures, 1 voice). */
const OLD_VIDEO = {
  id: '20261121_101530_0427', kind: 'video', status: 'done', prompt: 'a man in a red coat says hello', profile: 'fastvid', mode: 'i2v',
  aspect: '16:9', res: '480p', size: '864x480', seconds: 5, frames: 124, seed: 42, steps: 8, image_count: 2, created: 1763720130.5,
  started: 1763720131, finished: 1763720158, exec_s: 27, output: '20261121_101530_0427.mp4', callback_url: null, priority: 7,
  worker: 'gpu-a',
  params: {
    width: 864, height: 480, images: ['0.png', '1.png'], audios: ['0.wav'], image_mode: 'reference', audio_mode: 'voice',
    tts_text: '', tts_ref_text: '', tts_language: 'Auto',
  },
};

/** An image edit job of a build before priority and size_from_ref were stored (queued). */
const OLD_IMAGE = {
  id: '20261121_101600_0001', kind: 'image', status: 'queued', prompt: 'make it night', profile: 'imgmain', mode: 'edit', aspect: '1:1',
  res: '1K', size: '1024x1024', seed: 7, steps: 25, image_count: 1, created: 1763720160, negative: 'blur', cfg: 4, callback_url: 'http://x/cb',
  params: { width: 1024, height: 1024, images: ['0.png'], audios: [] },
};

function oldDatabase(dir: string, rows: Record<string, unknown>[]): void {
  // the schema and rows as the older build wrote them (user_version 0)
  const db = new Database(join(dir, 'jobs.sqlite'));
  db.exec(`CREATE TABLE jobs (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, status TEXT NOT NULL,
    created REAL NOT NULL, record TEXT NOT NULL); CREATE INDEX jobs_status ON jobs(status);`);
  const insert = db.prepare('INSERT INTO jobs (id, kind, status, created, record) VALUES (?, ?, ?, ?, ?)');
  for (const r of rows) insert.run(r.id, r.kind, r.status, r.created, JSON.stringify(r));
  db.close();
}

test('an older build\'s records open as typed tasks, show the same job objects and run the same task', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-store-'));
  try {
    oldDatabase(dir, [OLD_VIDEO, OLD_IMAGE]);
    const store = new JobStore(dir);
    const video = store.get(OLD_VIDEO.id)!;
    assert.equal(video.kind, 'video');
    assert.deepEqual(video.kind === 'video' && video.task, {
      prompt: 'a man in a red coat says hello', seed: 42, steps: 8, width: 864, height: 480, mode: 'i2v', frames: 124,
      image_mode: 'reference', audio_mode: 'voice', tts_text: '', tts_ref_text: '', tts_language: 'Auto',
    });
    assert.deepEqual(video.inputs, { images: ['0.png', '1.png'], audios: ['0.wav'] });
    assert.ok(!('params' in video) && !('prompt' in video) && !('image_count' in video), 'no flat field or params bag is left');
    // the job object the older build showed for these rows, field for field and in its order
    assert.deepEqual(Object.entries(toJobObject(video, {})), Object.entries({
      id: OLD_VIDEO.id, kind: 'video', status: 'done', prompt: OLD_VIDEO.prompt, profile: 'fastvid', mode: 'i2v', aspect: '16:9', res: '480p',
      size: '864x480', seconds: 5, frames: 124, model_prompt: referencePrompt(OLD_VIDEO.prompt, 2, 1, false), seed: 42, steps: 8,
      image_count: 2, created: 1763720130.5, exec_s: 27, video: `/out/${OLD_VIDEO.output}`, video_download: `/api/jobs/${OLD_VIDEO.id}/video`,
      finished: 1763720158, priority: 7, worker: 'gpu-a',
    }));
    const image = store.withStatus('queued')[0]!;
    assert.deepEqual(image.kind === 'image' && image.task, { prompt: 'make it night', seed: 7, steps: 25, width: 1024, height: 1024, mode: 'edit', negative: 'blur', cfg: 4, res: '1K' });
    assert.deepEqual(Object.entries(toJobObject(image, { position: 1 })), Object.entries({
      id: OLD_IMAGE.id, kind: 'image', status: 'queued', prompt: 'make it night', profile: 'imgmain', mode: 'edit', aspect: '1:1', res: '1K',
      size: '1024x1024', seed: 7, steps: 25, image_count: 1, created: 1763720160, position: 1, negative: 'blur', cfg: 4, size_from_ref: false,
      priority: 5,
    }));
    store.close();
    // rewritten once, on disk: the rows hold the typed task and the database says its format
    const db = new Database(join(dir, 'jobs.sqlite'), { readonly: true });
    assert.equal(db.pragma('user_version', { simple: true }), JOB_RECORD_FORMAT);
    for (const { record } of db.prepare('SELECT record FROM jobs').all() as { record: string }[]) {
      const r = JSON.parse(record) as JobRecord & { params?: unknown };
      assert.ok(r.task && r.inputs && r.params === undefined, record);
    }
    db.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a record an older process writes into a migrated store still reads as a typed task', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-store-'));
  try {
    new JobStore(dir).close(); // a fresh store, already in this build's format
    const db = new Database(join(dir, 'jobs.sqlite'));
    db.prepare('INSERT INTO jobs (id, kind, status, created, record) VALUES (?, ?, ?, ?, ?)').run(OLD_IMAGE.id, 'image', 'queued', OLD_IMAGE.created, JSON.stringify(OLD_IMAGE));
    db.close();
    const store = new JobStore(dir);
    const [job] = store.list({ limit: 10, offset: 0 }).jobs;
    assert.equal(job!.kind === 'image' && job!.task.negative, 'blur');
    assert.deepEqual(job!.inputs.images, ['0.png']);
    store.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
