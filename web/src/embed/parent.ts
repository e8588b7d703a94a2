// Which origin is the host page? The frame only ever talks to its parent window, and only
// to the origin found here (docs/widget.md, "Origins").

export class EmbedError extends Error {
  readonly kind = 'embed';
}

/**
 * The parent's origin. The element names it in the frame URL's hash (`#parent=<origin>`);
 * where the browser tells us our real ancestors (location.ancestorOrigins: Chromium, Safari)
 * the two must agree. Where it does not (Firefox) the named origin is still safe to use:
 * messages are accepted only from window.parent AND that origin, and replies are posted with
 * it as targetOrigin, so a page that names someone else's origin gets nothing either way.
 */
export function parentOrigin(loc: Location = location, win: Window = window): string {
  if (win.parent === win) throw new EmbedError('embed.html is not framed: include widget.js on your page instead');
  const named = new URLSearchParams(loc.hash.slice(1)).get('parent');
  const ancestors = loc.ancestorOrigins;
  const actual = ancestors && ancestors.length > 0 ? ancestors[0] : null;
  if (named !== null && !/^https?:\/\/[^/]+$/.test(named)) {
    throw new EmbedError(`embed.html: #parent=${named} is not an http(s) origin`);
  }
  if (actual !== null && named !== null && actual !== named) {
    throw new EmbedError(`embed.html: #parent=${named} but the frame's parent is ${actual}`);
  }
  const origin = actual ?? named;
  // 'null' (an opaque origin: sandboxed or file: pages) could be anyone: refuse it
  if (!origin || origin === 'null') throw new EmbedError('embed.html: the parent page\'s origin is unknown or opaque');
  return origin;
}
