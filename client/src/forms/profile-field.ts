// The profile <select>: each option says whether its model is built, and the hint gives the description.

import { h, replace, select } from '../dom';
import { sentence, weightsLabel } from '../format';
import type { Profile } from '../types';

export function profileSelect(profiles: Profile[]): HTMLSelectElement {
  const byName = new Map(profiles.map((p) => [p.profile, p]));
  const def = profiles.find((p) => p.default)?.profile ?? profiles[0]?.profile;
  return select('profile', profiles.map((p) => p.profile), def, (name) => {
    const p = byName.get(name)!;
    return `${name}${p.default ? ' (default)' : ''} · ${weightsLabel(p.weights)}`;
  });
}

/** Fills `hint` with the profile's description, default steps and weights note. */
export function describeProfile(hint: HTMLElement, p: Profile | undefined): void {
  if (!p) return replace(hint, '');
  // a missing model's note lists the files it lacks (many lines on a phone): one line, the list on demand
  const note = p.weights === 'missing' && p.note
    ? h('details', { class: 'weights-note missing' }, h('summary', null, 'Not built yet · details'), h('div', { class: 'weights-detail' }, weightsNote(p)))
    : h('span', { class: `weights-note ${p.weights}` }, weightsNote(p));
  replace(hint, h('span', null, `${sentence(p.description)} Model: ${p.model}. `), note);
}

/** "Demo weights: <note>." or, for a missing model, the note alone (it already says the model is not built). */
export function weightsNote(p: { weights: Profile['weights']; note?: string }): string {
  if (p.weights === 'missing' && p.note) return sentence(p.note);
  const label = sentence(weightsLabel(p.weights)).slice(0, -1);
  // the server's demo note starts "demo: ...": the label says it already
  const note = p.note?.replace(/^demo: /i, '');
  return note ? `${label}: ${sentence(note)}` : `${label}.`;
}
