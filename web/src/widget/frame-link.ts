// One element's frame: an <iframe> of onnxpipe's embed.html, the hello handshake, and
// origin-checked messages both ways. The frame's URL names the host page's origin; the frame
// checks it against its real ancestors (web/src/embed/parent.ts).

import { fromFrame } from './messages';
import type { FrameMessage, HostMessage, WidgetKind } from './protocol';

// a variable, not a literal: Vite would turn new URL('literal', import.meta.url) into an asset
const EMBED_PAGE = 'embed.html';
/** embed.html next to widget.js, on onnxpipe's origin (the script's own URL decides it; the dev
 * server serves this module from /src/widget/, the page from its root). */
export const EMBED_URL = new URL(import.meta.env.DEV ? `/${EMBED_PAGE}` : EMBED_PAGE, import.meta.url);

/** The frame must say hello this long after its document loaded, or it was blocked. */
const HELLO_AFTER_LOAD_MS = 3000;
/** ... and at most this long after the frame was added (server down, slow network). */
const HELLO_TIMEOUT_MS = 30000;

export interface LinkEvents {
  hello(message: Extract<FrameMessage, { type: 'hello' }>): void;
  message(message: FrameMessage): void;
  failed(message: string): void;
}

export class FrameLink {
  readonly iframe: HTMLIFrameElement;
  private helloed = false;
  private closed = false;
  private readonly queue: HostMessage[] = [];
  private readonly timers: number[] = [];
  private readonly listener = (event: MessageEvent) => this.receive(event);

  constructor(kind: WidgetKind, private readonly on: LinkEvents) {
    const url = new URL(EMBED_URL);
    url.searchParams.set('kind', kind);
    url.hash = new URLSearchParams({ parent: location.origin }).toString();
    this.iframe = document.createElement('iframe');
    this.iframe.src = url.href;
    this.iframe.title = `onnxpipe ${kind} runtime`;
    // lets the frame be cross-origin isolated (threads) when the host page is
    this.iframe.allow = 'cross-origin-isolated';
    this.iframe.tabIndex = -1;
    this.iframe.setAttribute('aria-hidden', 'true');
    this.iframe.className = 'runtime-frame';
  }

  /** Put the frame in ``parent`` and start waiting for its hello. */
  attach(parent: Node): void {
    window.addEventListener('message', this.listener);
    this.iframe.addEventListener('load', () => {
      if (!this.helloed) this.timers.push(window.setTimeout(() => this.fail('loaded but never said hello'), HELLO_AFTER_LOAD_MS));
    });
    this.timers.push(window.setTimeout(() => this.fail(`did not answer within ${HELLO_TIMEOUT_MS / 1000} s`), HELLO_TIMEOUT_MS));
    parent.appendChild(this.iframe);
  }

  /** Send to the frame (queued until its hello), only ever to onnxpipe's origin. */
  post(message: HostMessage): void {
    if (this.closed) return;
    if (!this.helloed) this.queue.push(message);
    else this.iframe.contentWindow?.postMessage(message, EMBED_URL.origin);
  }

  close(): void {
    this.closed = true;
    window.removeEventListener('message', this.listener);
    for (const t of this.timers) clearTimeout(t);
    this.iframe.remove();
  }

  private receive(event: MessageEvent): void {
    const message = fromFrame(event, this.iframe.contentWindow, EMBED_URL.origin);
    if (!message || this.closed) return;
    if (message.type === 'hello') {
      if (this.helloed) return;
      this.helloed = true;
      for (const t of this.timers.splice(0)) clearTimeout(t);
      this.on.hello(message);
      for (const queued of this.queue.splice(0)) this.post(queued);
      return;
    }
    if (this.helloed) this.on.message(message);
  }

  private fail(why: string): void {
    if (this.helloed || this.closed) return;
    for (const t of this.timers.splice(0)) clearTimeout(t);
    this.on.failed(
      `the onnxpipe frame ${EMBED_URL.href} ${why}: the onnxpipe server may be down, or it does not allow ` +
      `${location.origin} to embed it (its Content-Security-Policy frame-ancestors list)`,
    );
  }
}
