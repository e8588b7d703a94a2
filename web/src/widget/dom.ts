// A tiny element builder for the widget's shadow UI.

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K, props: Partial<Omit<HTMLElementTagNameMap[K], 'part'>> & { parts?: string } = {}, ...children: (Node | string)[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  const { parts, ...rest } = props;   // `part` names let a page style the widget with ::part()
  Object.assign(el, rest);
  if (parts) el.setAttribute('part', parts);
  el.append(...children);
  return el;
}

/** A progress line: label + bar (percent null: indeterminate). */
export class ProgressLine {
  readonly el = h('div', { className: 'progress', hidden: true, parts: 'progress' });
  private readonly label = h('span');
  private readonly fill = h('div');
  private readonly bar = h('div', { className: 'bar', role: 'progressbar' }, this.fill);

  constructor() {
    this.el.append(this.label, this.bar);
  }

  show(text: string | null, percent: number | null): void {
    this.el.hidden = text === null;
    if (text === null) return;
    this.label.textContent = text;
    this.bar.classList.toggle('indeterminate', percent === null);
    this.fill.style.width = percent === null ? '' : `${Math.min(100, Math.max(0, percent)).toFixed(1)}%`;
    if (percent === null) this.bar.removeAttribute('aria-valuenow');
    else this.bar.setAttribute('aria-valuenow', String(Math.round(percent)));
  }
}
