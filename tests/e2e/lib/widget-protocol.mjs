// The version tag of the widget's postMessage protocol (web/src/widget/protocol.ts, ProtocolTag),
// read from the source so the intruder test sends messages a real frame would recognise.
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './browser.mjs';

const source = fs.readFileSync(path.join(ROOT, 'web', 'src', 'widget', 'protocol.ts'), 'utf8');
const match = /export type ProtocolTag = '([^']+)'/.exec(source);
if (!match) throw new Error('web/src/widget/protocol.ts: no `export type ProtocolTag = \'...\'` found');
export const TAG_FOR_TESTS = match[1];
