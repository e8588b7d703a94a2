// widget.js: the one script a site includes. It defines <onnxpipe-chat> and <onnxpipe-speak>;
// everything heavy (Pyodide, onnxruntime-web, the model) runs in each element's frame on
// onnxpipe's own origin (docs/widget.md). Keep this bundle small: no imports from the runtime.

import { OnnxpipeChat } from './chat';
import { OnnxpipeSpeak } from './speak';

export { OnnxpipeChat, OnnxpipeSpeak };
export { WidgetError } from './element';

// a page may include widget.js twice (or two builds): the first definition wins
if (!customElements.get('onnxpipe-chat')) customElements.define('onnxpipe-chat', OnnxpipeChat);
if (!customElements.get('onnxpipe-speak')) customElements.define('onnxpipe-speak', OnnxpipeSpeak);
