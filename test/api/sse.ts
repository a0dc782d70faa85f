// Server-sent events as a client reads them (fetch, the stream parsed into events), for the event tests.

export interface Sse {
  id?: number;
  event: string;
  data: any;
}

/** Reads an event stream with fetch: events as they come, comments counted, until `stop` says so or it ends. */
export async function readEvents(url: string, o: { headers?: Record<string, string>; stop?: (evs: Sse[]) => boolean; timeoutMs?: number; onOpen?: () => void } = {}): Promise<{ status: number; events: Sse[]; comments: number; ended: boolean; body?: any }> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), o.timeoutMs ?? 10_000);
  const res = await fetch(url, { headers: o.headers, signal: ac.signal });
  if (!res.headers.get('content-type')?.startsWith('text/event-stream')) {
    clearTimeout(timer);
    return { status: res.status, events: [], comments: 0, ended: true, body: await res.json() };
  }
  o.onOpen?.();
  const events: Sse[] = [];
  let comments = 0;
  let ended = false;
  let buf = '';
  const decoder = new TextDecoder();
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buf += decoder.decode(chunk, { stream: true });
      let cut: number;
      while ((cut = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        const ev: Partial<Sse> = {};
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) comments++;
          else if (line.startsWith('id: ')) ev.id = Number(line.slice(4));
          else if (line.startsWith('event: ')) ev.event = line.slice(7);
          else if (line.startsWith('data: ')) ev.data = JSON.parse(line.slice(6));
        }
        if (ev.event) events.push(ev as Sse);
      }
      if (o.stop?.(events)) break;
    }
    ended = !o.stop?.(events);
  } catch (err) {
    if (!ac.signal.aborted) throw err;
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
  return { status: res.status, events, comments, ended };
}
