// Human-readable numbers for the page.

export function bytes(n: number): string {
  if (n >= 1024 * 1024) return `${(n / 1048576).toFixed(1)} MB`;
  if (n >= 1024) return `${Math.round(n / 1024)} KB`;
  return `${n} B`;
}

/** 4.2 s, 1 min 05 s, 1 h 02 min. */
export function duration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '–';
  if (seconds < 60) return `${seconds < 10 ? seconds.toFixed(1) : Math.round(seconds)} s`;
  const s = Math.round(seconds);
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`;
}

/** Local date and time of a Unix-seconds stamp: today's show only the time. */
export function when(unixSeconds: number): string {
  const d = new Date(unixSeconds * 1000);
  const today = new Date().toDateString() === d.toDateString();
  const time = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
  return today ? time : `${d.toLocaleDateString()} ${time}`;
}

/** The spec's stage strings (the service's own language) with their English meaning. */
const STAGES: Record<string, string> = {
  加载模型: 'loading model',
  加载文本编码器: 'loading text encoder',
  '编码提示词/图片': 'encoding prompt and images',
  采样: 'sampling',
  视频解码: 'video decoding',
  音频解码: 'audio decoding',
  封装: 'packaging',
  保存: 'saving',
};

/** The English name of a stage ('starting' before the first one is reported). */
export function stage(s: string | undefined): string {
  if (!s) return 'starting';
  return STAGES[s] ?? s;
}

/** "Note text" with its first letter capitalised and a full stop at the end. */
export function sentence(s: string): string {
  const t = s.trim();
  if (!t) return '';
  return `${t[0].toUpperCase()}${t.slice(1)}${/[.!?]$/.test(t) ? '' : '.'}`;
}

export function weightsLabel(w: string): string {
  return w === 'real' ? 'real weights' : w === 'demo' ? 'demo weights' : 'not built yet';
}
