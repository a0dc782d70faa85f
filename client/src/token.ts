// The API token: typed once, kept in localStorage, sent as Authorization: Bearer on every /api call.

import { h } from './dom';

const KEY = 'kiln.token';

export class TokenPanel {
  readonly el: HTMLElement;
  private readonly input: HTMLInputElement;
  private readonly message: HTMLElement;

  constructor(onSave: (token: string) => void) {
    this.input = h('input', { id: 'token', name: 'token', type: 'password', autocomplete: 'current-password', spellcheck: 'false', placeholder: 'API token', value: TokenPanel.stored() });
    this.message = h('p', { class: 'token-message', role: 'alert', hidden: true });
    const form = h('form', { id: 'token-form', class: 'token-form' },
      h('label', { for: 'token' }, 'API token'),
      h('div', { class: 'token-row' }, this.input, h('button', { type: 'submit', class: 'primary' }, 'Connect')),
      this.message,
      h('p', { class: 'hint' }, 'Printed once at the service\'s first start and kept in DATA_DIR/token (or the API_TOKEN setting). Remembered in this browser.'));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const token = this.input.value.trim();
      if (!token) return this.show('Enter the token first.');
      localStorage.setItem(KEY, token);
      onSave(token);
    });
    this.el = h('section', { id: 'token-panel', class: 'panel', 'aria-label': 'API token' }, form);
  }

  static stored(): string {
    return localStorage.getItem(KEY) ?? '';
  }

  /** Opens the panel with `message` (a 401, say) and focuses the input. */
  show(message = ''): void {
    this.el.hidden = false;
    this.message.textContent = message;
    this.message.hidden = !message;
    this.input.focus();
  }

  hide(): void {
    this.el.hidden = true;
    this.message.hidden = true;
  }

  toggle(): void {
    if (this.el.hidden) this.show();
    else this.hide();
  }
}
