// A job's live previews as a client sees them (issue 46): its event stream followed to the end, each `preview` event's
// URL fetched at once (while the job still runs). Shared by the API's and the Redis cluster's preview tests.
import sharp from 'sharp';
import { auth, TOKEN, type TestApp } from './harness';
import { readEvents, type Sse } from './sse';

/** What a preview URL answered: its status, and for a 200 the step header, type and webp geometry (a video's pages). */
export interface Fetched { status: number; step?: string; type?: string; width?: number; height?: number; pages?: number }

/** Follows a job's event stream to its end, fetching each preview at once (while the job still runs). */
export async function followPreviews(t: TestApp, id: string): Promise<{ events: Sse[]; previews: any[]; fetched: Fetched[] }> {
  const fetched: Promise<Fetched>[] = [];
  let seen = 0;
  const stream = await readEvents(`${t.url}/api/jobs/${id}/events?token=${TOKEN}`, {
    timeoutMs: 300_000,
    stop: (evs) => {
      for (const ev of evs.filter((e) => e.event === 'preview').slice(seen)) {
        seen++;
        fetched.push(
          fetch(`${t.url}${ev.data.url}`, { headers: auth }).then(async (r): Promise<Fetched> => {
            if (r.status !== 200) return { status: r.status };
            const meta = await sharp(Buffer.from(await r.arrayBuffer()), { animated: true }).metadata();
            return { status: 200, step: r.headers.get('x-preview-step') ?? undefined, type: r.headers.get('content-type') ?? undefined, width: meta.width, height: meta.pageHeight ?? meta.height, pages: meta.pages };
          }),
        );
      }
      return false;
    },
  });
  return { events: stream.events, previews: stream.events.filter((e) => e.event === 'preview').map((e) => e.data), fetched: await Promise.all(fetched) };
}

