// Before anything is downloaded for a page that needs the microphone: is there one, and may the
// page use it? Asking now puts the browser's permission prompt at the user's click, not minutes
// later when the models are in.

import { MIC_REFUSED, NO_MICROPHONE, micError, unsupportedMicrophone, type MicError } from './mic';

type Permission = PermissionState | 'unknown';

/** The microphone permission without asking (Firefox before 131 cannot tell: unknown). */
async function microphonePermission(): Promise<Permission> {
  try {
    return (await navigator.permissions.query({ name: 'microphone' as PermissionName })).state;
  } catch {
    return 'unknown';
  }
}

/** Does the browser list any audio input? (Before permission it lists one per kind at most, but
 * never one that does not exist.) null: it cannot tell. */
async function hasAudioInput(): Promise<boolean | null> {
  try {
    return (await navigator.mediaDevices.enumerateDevices()).some((d) => d.kind === 'audioinput');
  } catch {
    return null;
  }
}

/** Null when the microphone can be opened, else why not. Unless the permission is already
 * granted, it is asked for by opening the microphone once and closing it at once. */
export async function checkMicrophone(): Promise<MicError | null> {
  const unsupported = unsupportedMicrophone();
  if (unsupported) return unsupported;
  const permission = await microphonePermission();
  if (permission === 'denied') return MIC_REFUSED();
  if ((await hasAudioInput()) === false) return NO_MICROPHONE();
  if (permission === 'granted') return null;
  try {
    const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
    for (const track of stream.getTracks()) track.stop();
    return null;
  } catch (error) {
    return micError(error);
  }
}
