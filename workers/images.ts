// Images for vision-language bundles, decoded here so Python (which has no image codecs in
// Pyodide) gets plain RGB bytes: an encoded file goes through createImageBitmap and an
// OffscreenCanvas; the alpha channel is dropped (as PIL's convert("RGB") does).
import type { ImageInput } from '../web/src/protocol';

export interface RgbImage { rgb: Uint8Array; width: number; height: number }

export async function toRgb(image: ImageInput): Promise<RgbImage> {
  if (!(image instanceof Blob)) {
    const { rgb, width, height } = image;
    if (!(rgb instanceof Uint8Array) || rgb.length !== width * height * 3) {
      throw new Error(`expected ${width * height * 3} RGB bytes for ${width}x${height}, found ${rgb?.length}`);
    }
    return { rgb, width, height };
  }
  // no colour-space conversion or premultiplying: the file's own 8-bit values
  const bitmap = await createImageBitmap(image, { colorSpaceConversion: 'none', premultiplyAlpha: 'none' });
  const { width, height } = bitmap;
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
