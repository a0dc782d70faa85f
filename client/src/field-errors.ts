// Where a server error belongs in a form: 422 entries name their field in loc; 400 reasons are sentences that
// name the field they are about ("size: width 100 must be ...", "unknown aspect ...", "images[1] (a.png): ...").
// Pure (no DOM): the e2e folder tests it directly.

export interface PlacedError {
  /** The form field the reason is about, or null for the form as a whole. */
  field: string | null;
  message: string;
}

interface Entry {
  loc?: unknown;
  msg?: unknown;
}

/** The field a 422 entry's loc names (["body", "seed"] -> "seed", ["body", "images", 2] -> "images"). */
export function fieldOfLoc(loc: unknown, fields: readonly string[]): string | null {
  if (!Array.isArray(loc)) return null;
  const names = loc.filter((p): p is string => typeof p === 'string' && p !== 'body' && p !== 'query');
  return names.find((n) => fields.includes(n)) ?? null;
}

/** The field a 400 reason names: the one mentioned first as a whole word (so "cfg must be 0 (profile default
 * ...)" is about cfg, not profile, and "size_from_ref ..." is not about size). */
export function fieldOfReason(reason: string, fields: readonly string[]): string | null {
  let best: { field: string; at: number } | null = null;
  for (const f of fields) {
    const re = new RegExp(`(^|[^A-Za-z0-9_])${f.replace(/[^A-Za-z0-9_]/g, '\\$&')}(?![A-Za-z0-9_])`);
    const m = re.exec(reason);
    if (!m) continue;
    const at = m.index + m[1].length;
    if (!best || at < best.at || (at === best.at && f.length > best.field.length)) best = { field: f, at };
  }
  return best?.field ?? null;
}

/** Places a failed request's reasons: 400 (a string detail) or 422 (a list of entries). */
export function placeErrors(status: number, detail: unknown, fields: readonly string[]): PlacedError[] {
  if (Array.isArray(detail)) {
    return detail.map((e: Entry) => {
      const field = fieldOfLoc(e?.loc, fields);
      const msg = typeof e?.msg === 'string' ? e.msg : JSON.stringify(e);
      return { field, message: field ? msg : `${Array.isArray(e?.loc) ? e.loc.join('.') + ': ' : ''}${msg}` };
    });
  }
  const message = typeof detail === 'string' ? detail : detail == null ? `HTTP ${status}` : JSON.stringify(detail);
  if (status !== 400) return [{ field: null, message }];
  // a 400 naming several problems gives a line each (a blank prompt and a bad size): each goes to its own field
  return message.split('\n').filter((m) => m.trim() !== '').map((m) => ({ field: fieldOfReason(m, fields), message: m }));
}
