// A tiny element builder: h('p', { class: 'hint' }, 'text', child). No framework: the page is small.

type Child = Node | string | number | null | undefined | false;
type AttrValue = string | number | boolean | null | undefined | ((ev: any) => void);

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs?: Record<string, AttrValue> | null, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (typeof value === 'function') el.addEventListener(key.replace(/^on/, '').toLowerCase(), value);
    else if (key === 'value' && 'value' in el) (el as HTMLInputElement).value = String(value);
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  append(el, ...children);
  return el;
}

export function append(parent: Node, ...children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    parent.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
}

/** Replaces all children of `parent`. */
export function replace(parent: Node, ...children: Child[]): void {
  while (parent.firstChild) parent.removeChild(parent.firstChild);
  append(parent, ...children);
}

export function $<T extends Element = HTMLElement>(selector: string, root: ParentNode = document): T {
  const el = root.querySelector<T>(selector);
  if (!el) throw new Error(`page: no element ${selector}`);
  return el;
}

/** A <select> with `values`, labelled by `label(value)`; `value` selected when present. */
export function select(name: string, values: readonly string[], value: string | undefined, label: (v: string) => string = (v) => v): HTMLSelectElement {
  const el = h('select', { name, id: `${name}-${Math.random().toString(36).slice(2, 7)}` });
  for (const v of values) el.appendChild(h('option', { value: v }, label(v)));
  if (value !== undefined && values.includes(value)) el.value = value;
  return el;
}
