// A tiny element builder: the chat UI is built from main.ts, not from index.html markup.

type AttrValue = string | number | boolean | undefined;
export type Attrs = Record<string, AttrValue>;
export type Child = Node | string | null | undefined | false;

/** Create an element; `text` sets textContent, booleans toggle attributes, undefined is skipped. */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K, attrs: Attrs = {}, ...children: Child[]
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (key === 'text') node.textContent = String(value);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child);
  }
  return node;
}

/** A <label> wrapping a caption and a control, so the control needs no id. */
export function labelled(caption: string, control: HTMLElement, hint?: string): HTMLLabelElement {
  return el('label', { class: 'field' },
    el('span', { class: 'field-caption', text: caption }),
    control,
    hint ? el('span', { class: 'field-hint', text: hint }) : null);
}
