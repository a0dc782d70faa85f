// A stand-in for the Hugging Face hub on two local ports, for the download tests (no real network):
//   hub:  HEAD/GET /<owner>/<name>/resolve/<rev>/<path>
//         LFS files: 302 to the CDN with X-Linked-Size, X-Linked-Etag (sha256) and X-Repo-Commit, like the hub;
//         small files: 200 with a git-sha1 ETag and X-Repo-Commit; 404 with X-Error-Code for unknown entries.
//         GET  /api/models/<owner>/<name>/revision/<rev>    the repo's info (sha: the commit, siblings)
//         GET  /api/models/<owner>/<name>/tree/<rev>        every file: path, size, oid (git sha1), lfs {oid: sha256}
//         POST /api/models/<owner>/<name>/paths-info/<rev>  the same for the paths asked, with lastCommit
//         (what @huggingface/hub's snapshotDownload asks, so tests fill a hub cache with the library itself)
//   cdn:  GET /blobs/<sha256> with Range support (bytes=a- and bytes=a-b).
// Per-file faults: cut the connection after N bytes (the first `times` GETs), serve other bytes than advertised,
// omit lengths, fail with 500.
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface HubFile {
  data: Buffer;
  /** Served through the CDN redirect, with X-Linked-* headers. Default: data.length > 1024. */
  lfs?: boolean;
  /** Cut the connection after this many body bytes, for the first `cutTimes` GETs (default 1). */
  cutAfter?: number;
  cutTimes?: number;
  /** Bytes actually sent (a corrupt or wrong-sized transfer); headers still describe `data`. */
  serve?: Buffer;
  /** Send no Content-Length / X-Linked-Size (chunked body). */
  noLength?: boolean;
  /** Answer this many GETs with 500 first. */
  fail500?: number;
  /** Answer range requests with the whole file (200), as some servers do. */
  ignoreRange?: boolean;
}

export interface Logged {
  server: 'hub' | 'cdn';
  method: string;
  url: string;
  range?: string;
  auth?: string;
}

export interface Hub {
  /** The HF_ENDPOINT to use. */
  endpoint: string;
  commit: string;
  /** Keyed by "owner/name/path". */
  files: Map<string, HubFile>;
  log: Logged[];
  close(): Promise<void>;
}

export const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
/** A file's git blob id: what the hub calls its oid, and the cache's blob name for a file not in LFS. */
export const gitBlobSha1 = (b: Buffer) => createHash('sha1').update(`blob ${b.length}\0`).update(b).digest('hex');

function listen(s: Server): Promise<string> {
  return new Promise((r) => s.listen(0, '127.0.0.1', () => r(`http://127.0.0.1:${(s.address() as AddressInfo).port}`)));
}

function sendBody(req: IncomingMessage, res: ServerResponse, f: HubFile, gets: Map<HubFile, number>): void {
  const body = f.serve ?? f.data;
  const n = (gets.get(f) ?? 0) + 1;
  gets.set(f, n);
  if (f.fail500 && n <= f.fail500) {
    res.writeHead(500).end('boom');
    return;
  }
  const m = f.ignoreRange ? null : /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
  const from = m ? Number(m[1]) : 0;
  if (m && from >= body.length) {
    res.writeHead(416, { 'Content-Range': `bytes */${body.length}` }).end();
    return;
  }
  const to = m?.[2] ? Math.min(Number(m[2]) + 1, body.length) : body.length;
  const slice = body.subarray(from, to);
  const headers: Record<string, string | number> = {};
  if (!f.noLength) headers['Content-Length'] = slice.length;
  if (m) headers['Content-Range'] = `bytes ${from}-${to - 1}/${f.noLength ? '*' : body.length}`;
  res.writeHead(m ? 206 : 200, headers);
  if (req.method === 'HEAD') {
    res.end();
    return;
  }
  const cut = f.cutAfter !== undefined && n <= (f.cutTimes ?? 1) + (f.fail500 ?? 0) ? f.cutAfter - from : undefined;
  if (cut !== undefined && cut >= 0 && cut < slice.length) {
    // Half the file, then the socket dies: the client sees a transfer shorter than its Content-Length.
    res.write(slice.subarray(0, cut), () => setTimeout(() => res.socket?.destroy(), 20));
    return;
  }
  res.end(slice);
}

export async function startHub(commit = 'c0ffee'.padEnd(40, '0')): Promise<Hub> {
  const files = new Map<string, HubFile>();
  const log: Logged[] = [];
  const gets = new Map<HubFile, number>();
  const blobs = new Map<string, HubFile>();
  let cdnBase = '';

  const cdn = createServer((req, res) => {
    log.push({ server: 'cdn', method: req.method!, url: req.url!, range: req.headers.range, auth: req.headers.authorization });
    const sha = req.url!.replace('/blobs/', '');
    const f = blobs.get(sha);
    if (!f) return void res.writeHead(404).end();
    res.setHeader('ETag', `"${sha}"`);
    sendBody(req, res, f, gets);
  });

  /** The tree entry of a file, as the hub's API gives it. */
  const entry = (path: string, f: HubFile) => {
    const lfs = f.lfs ?? f.data.length > 1024;
    if (lfs) blobs.set(sha256(f.data), f);
    return {
      type: 'file', path, size: f.data.length, oid: gitBlobSha1(f.data),
      ...(lfs ? { lfs: { oid: sha256(f.data), size: f.data.length, pointerSize: 134 } } : {}),
    };
  };
  const repoFiles = (owner: string, name: string) =>
    [...files].filter(([k]) => k.startsWith(`${owner}/${name}/`)).map(([k, f]) => [k.slice(owner.length + name.length + 2), f] as const);

  function api(req: IncomingMessage, res: ServerResponse): void {
    const m = /^\/api\/models\/([^/]+)\/([^/]+)\/(revision|tree|paths-info)\/([^/?]+)/.exec(req.url!);
    if (!m) return void res.writeHead(404, { 'X-Error-Code': 'RepoNotFound' }).end();
    const [, owner, name, what, rev] = m;
    if (decodeURIComponent(rev!) !== 'main' && rev !== commit) return void res.writeHead(404, { 'X-Error-Code': 'RevisionNotFound' }).end();
    const listed = repoFiles(owner!, name!);
    if (listed.length === 0) return void res.writeHead(404, { 'X-Error-Code': 'RepoNotFound' }).end();
    const json = (body: unknown) => res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(body));
    if (what === 'revision') return void json({ _id: `id-${owner}-${name}`, id: `${owner}/${name}`, sha: commit, private: false, siblings: listed.map(([p]) => ({ rfilename: p })) });
    if (what === 'tree') return void json(listed.map(([p, f]) => entry(p, f)));
    let raw = '';
    req.on('data', (d: Buffer) => (raw += d.toString()));
    req.on('end', () => {
      const asked = new Set((JSON.parse(raw) as { paths: string[] }).paths);
      json(listed.filter(([p]) => asked.has(p)).map(([p, f]) => ({ ...entry(p, f), lastCommit: { id: commit, title: 'upload', date: '2026-11-01T00:00:00.000Z' } })));
    });
  }

  const hub = createServer((req, res) => {
    log.push({ server: 'hub', method: req.method!, url: req.url!, range: req.headers.range, auth: req.headers.authorization });
    if (req.url!.startsWith('/api/')) return api(req, res);
    const m = /^\/([^/]+)\/([^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(req.url!);
    if (!m) return void res.writeHead(404, { 'X-Error-Code': 'RepoNotFound' }).end();
    const [, owner, name, rev, rawPath] = m;
    const path = rawPath!.split('/').map(decodeURIComponent).join('/');
    if (decodeURIComponent(rev!) !== 'main' && rev !== commit) return void res.writeHead(404, { 'X-Error-Code': 'RevisionNotFound' }).end();
    const f = files.get(`${owner}/${name}/${path}`);
    if (!f) return void res.writeHead(404, { 'X-Error-Code': 'EntryNotFound', 'X-Error-Message': 'Entry not found' }).end();
    const lfs = f.lfs ?? f.data.length > 1024;
    if (lfs) {
      const sha = sha256(f.data);
      blobs.set(sha, f);
      const h: Record<string, string | number> = { Location: `${cdnBase}/blobs/${sha}`, 'X-Repo-Commit': commit, 'X-Linked-Etag': `"${sha}"`, ETag: `"${sha}"` };
      if (!f.noLength) h['X-Linked-Size'] = f.data.length;
      res.writeHead(302, h).end();
      return;
    }
    res.setHeader('X-Repo-Commit', commit);
    res.setHeader('ETag', `"${createHash('sha1').update(f.data).digest('hex')}"`);
    if (req.method === 'HEAD') {
      if (!f.noLength) res.setHeader('Content-Length', f.data.length);
      res.writeHead(200).end();
      return;
    }
    sendBody(req, res, f, gets);
  });

  cdnBase = await listen(cdn);
  const endpoint = await listen(hub);
  return {
    endpoint,
    commit,
    files,
    log,
    close: async () => {
      for (const s of [hub, cdn]) {
        s.closeAllConnections();
        await new Promise((r) => s.close(r));
      }
    },
  };
}
