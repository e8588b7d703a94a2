// Images for vision-language bundles, decoded here so Python (which has no image codecs in
// Pyodide) gets plain RGB bytes: an encoded file goes through createImageBitmap and an
// OffscreenCanvas; the alpha channel is dropped (as PIL's convert("RGB") does). The size is
// checked before anything that size is allocated (image-size.ts).
import type { ImageInput } from '../web/src/protocol';
import { HEADER_BYTES, MAX_PIXELS, type Size, claimedSize } from './image-size';

export interface RgbImage { rgb: Uint8Array; width: number; height: number }

/** The request's ``images``: a list, each decoded; an error names the image (images[i]). */
export async function toRgbImages(images: unknown): Promise<RgbImage[]> {
  if (!Array.isArray(images)) throw new Error(`images: expected a list of images (Blob or {rgb, width, height}), found ${describe(images)}`);
  const out: RgbImage[] = [];
  for (const [i, image] of images.entries()) {
    try {
      out.push(await toRgb(image as ImageInput));
    } catch (err) {
      throw new Error(`images[${i}]: ${(err as Error).message ?? err}`);
    }
  }
  return out;
}

async function toRgb(image: ImageInput): Promise<RgbImage> {
  if (!(image instanceof Blob)) {
    if (typeof image !== 'object' || image === null) throw new Error(`expected a Blob or {rgb, width, height}, found ${describe(image)}`);
    const { rgb, width, height } = image;
    checkSize({ width, height });
    if (!(rgb instanceof Uint8Array) || rgb.length !== width * height * 3) {
      throw new Error(`expected ${width * height * 3} RGB bytes (a Uint8Array) for ${width}x${height}, found ${rgb instanceof Uint8Array ? rgb.length : describe(rgb)}`);
    }
    return { rgb, width, height };
  }
  const claimed = claimedSize(new Uint8Array(await image.slice(0, HEADER_BYTES).arrayBuffer()));
  if (claimed) checkSize(claimed, 'the file\'s header: ');
  // no colour-space conversion or premultiplying: the file's own 8-bit values
  let bitmap: ImageBitmap;
  try {
    bitmap = await createImageBitmap(image, { colorSpaceConversion: 'none', premultiplyAlpha: 'none' });
  } catch (err) {
    throw new Error(`cannot decode the image (${image.size} bytes, type "${image.type}"): ${(err as Error).message ?? err}`);
  }
  const { width, height } = bitmap;
  try {
    checkSize({ width, height });
  } catch (err) {
    bitmap.close();
    throw err;
  }
  const context = new OffscreenCanvas(width, height).getContext('2d', { willReadFrequently: true });
  if (!context) throw new Error('no 2D context to decode the image');
  context.drawImage(bitmap, 0, 0);
  bitmap.close();
  const rgba = context.getImageData(0, 0, width, height).data;
  const rgb = new Uint8Array(width * height * 3);
  for (let i = 0, j = 0; i < rgba.length; i += 4, j += 3) {
    rgb[j] = rgba[i];
    rgb[j + 1] = rgba[i + 1];
    rgb[j + 2] = rgba[i + 2];
  }
  return { rgb, width, height };
}

function checkSize({ width, height }: Size, what = ''): void {
  for (const [key, value] of [['width', width], ['height', height]] as const) {
    if (!Number.isSafeInteger(value) || value <= 0) throw new Error(`${what}${key}: expected a positive integer, found ${describe(value)}`);
  }
  if (width * height > MAX_PIXELS) throw new Error(`${what}${width}x${height} pixels: too large, expected at most ${MAX_PIXELS} pixels`);
}

function describe(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (typeof value === 'object') return value.constructor?.name ?? 'object';
  return `${typeof value} ${typeof value === 'string' ? JSON.stringify(value) : String(value)}`;
}
