// Which build this page is: the footer line "onnxpipe <build id>" (ONNXPIPE_BUILD_ID at build
// time, else the git commit and build time; tools/pwa.ts). Tells a reloaded page's version apart.

import { el } from '../ui/dom';

export const BUILD_ID: string = __ONNXPIPE_BUILD_ID__;

/** Append the footer to the page. */
export function mountBuildFooter(): void {
  document.body.append(el('footer', { class: 'site-footer' },
    'onnxpipe build ', el('span', { 'data-testid': 'build-id', text: BUILD_ID })));
}
