// The size an encoded image claims in its header, read before anything is decoded, so a file
// claiming 100000x100000 pixels is refused without allocating them: PNG, JPEG, GIF, WebP and
// BMP; null for another format (the decoded bitmap's size is then checked before any canvas).

export interface Size { width: number; height: number }

/** The most pixels an image may have: onnxpipe.image.processor.MAX_PIXELS (Pillow's limit). */
export const MAX_PIXELS = Math.floor(1024 * 1024 * 1024 / 4 / 3);

/** How many leading bytes claimedSize reads (a JPEG's frame header follows its metadata). */
export const HEADER_BYTES = 1 << 20;

export function claimedSize(bytes: Uint8Array): Size | null {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const is = (text: string, at = 0): boolean => [...text].every((c, i) => bytes[at + i] === c.charCodeAt(0));
  if (bytes.length >= 24 && bytes[0] === 0x89 && is('PNG', 1)) return { width: view.getUint32(16), height: view.getUint32(20) };
  if (bytes.length >= 10 && is('GIF8')) return { width: view.getUint16(6, true), height: view.getUint16(8, true) };
  if (bytes.length >= 26 && is('BM')) return { width: Math.abs(view.getInt32(18, true)), height: Math.abs(view.getInt32(22, true)) };
  if (bytes.length >= 30 && is('RIFF') && is('WEBP', 8)) return webpSize(view, is);
  if (bytes.length >= 4 && bytes[0] === 0xff && bytes[1] === 0xd8) return jpegSize(view);
  return null;
}

function webpSize(view: DataView, is: (text: string, at?: number) => boolean): Size | null {
  if (is('VP8X', 12)) {
    const u24 = (at: number): number => view.getUint16(at, true) + (view.getUint8(at + 2) << 16);
    return { width: 1 + u24(24), height: 1 + u24(27) };
  }
  if (is('VP8L', 12)) {
    const bits = view.getUint32(21, true);
    return { width: 1 + (bits & 0x3fff), height: 1 + ((bits >>> 14) & 0x3fff) };
  }
  if (is('VP8 ', 12)) return { width: view.getUint16(26, true) & 0x3fff, height: view.getUint16(28, true) & 0x3fff };
  return null;
}

/** The frame header (SOF0-SOF15 but DHT/JPG/DAC) after the segments before it. */
function jpegSize(view: DataView): Size | null {
  let at = 2;
  while (at + 9 <= view.byteLength) {
    if (view.getUint8(at) !== 0xff) return null;
    const marker = view.getUint8(at + 1);
    if (marker === 0xff) { at += 1; continue; }   // fill byte
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      return { width: view.getUint16(at + 7), height: view.getUint16(at + 5) };
    }
    if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd9)) { at += 2; continue; }   // no length
    at += 2 + view.getUint16(at + 2);
  }
  return null;
}
