// The widget's CSS, inside each element's shadow root. Host-page rules never reach the
// shadow tree, but two things do: rules on the host element itself, and inherited properties.
// So :host pins the few box properties with !important (important :host declarations beat
// the page's normal ones, e.g. `* { all: unset }`), and .root resets inheritance with
// `all: initial`. Custom properties pass through both: they are the theming API.
//
//   --onnxpipe-accent   buttons, progress, the user's bubbles   (#2563eb)
//   --onnxpipe-font     font family                              (system-ui, sans-serif)
//   --onnxpipe-font-size                                         (14px)
//   --onnxpipe-bg       widget background                        (#ffffff)
//   --onnxpipe-fg       text colour                              (#1f2937)
//   --onnxpipe-muted    secondary text, borders                  (#6b7280)
//   --onnxpipe-radius   corner radius                            (10px)
//   --onnxpipe-height   height of the chat's message list        (260px)

export const STYLES = `
:host {
  display: block !important;
  box-sizing: border-box !important;
  min-width: 240px !important;
  max-width: 100% !important;
  visibility: visible !important;
  contain: content !important;
}
:host([hidden]) { display: none !important; }
.root {
  all: initial;
  display: flex; flex-direction: column; gap: 8px;
  box-sizing: border-box; width: 100%; padding: 10px;
  font-family: var(--onnxpipe-font, system-ui, sans-serif);
  font-size: var(--onnxpipe-font-size, 14px); line-height: 1.4;
  color: var(--onnxpipe-fg, #1f2937); background: var(--onnxpipe-bg, #ffffff);
  border: 1px solid color-mix(in srgb, var(--onnxpipe-muted, #6b7280) 40%, transparent);
  border-radius: var(--onnxpipe-radius, 10px);
}
/* form controls take the widget's font, not the UA's; colours are set per part below */
.root * { box-sizing: border-box; font: inherit; }
.runtime-frame { position: absolute; width: 0; height: 0; border: 0; visibility: hidden; }
.log {
  display: flex; flex-direction: column; gap: 6px; overflow-y: auto;
  height: var(--onnxpipe-height, 260px); padding: 4px;
}
.msg { max-width: 85%; padding: 6px 10px; border-radius: var(--onnxpipe-radius, 10px); white-space: pre-wrap; overflow-wrap: anywhere; }
.msg.user { align-self: flex-end; background: var(--onnxpipe-accent, #2563eb); color: #fff; }
.msg.assistant { align-self: flex-start; background: color-mix(in srgb, var(--onnxpipe-muted, #6b7280) 15%, transparent); }
.msg.streaming::after { content: '▍'; opacity: .6; }
.row { display: flex; gap: 6px; align-items: stretch; }
.root textarea {
  flex: 1; color: var(--onnxpipe-fg, #1f2937); min-height: 2.4em; resize: vertical; padding: 6px 8px; background: var(--onnxpipe-bg, #fff);
  border: 1px solid color-mix(in srgb, var(--onnxpipe-muted, #6b7280) 60%, transparent);
  border-radius: calc(var(--onnxpipe-radius, 10px) * .6);
}
.root button {
  cursor: pointer; padding: 6px 12px; border: 0; border-radius: calc(var(--onnxpipe-radius, 10px) * .6);
  background: var(--onnxpipe-accent, #2563eb); color: #fff; font-weight: 600;
}
.root button.secondary { background: transparent; color: var(--onnxpipe-fg, #1f2937); border: 1px solid var(--onnxpipe-muted, #6b7280); }
.root button:disabled { opacity: .45; cursor: default; }
.progress { display: flex; flex-direction: column; gap: 2px; font-size: .85em; color: var(--onnxpipe-muted, #6b7280); }
.progress[hidden], audio[hidden] { display: none; }
.bar { height: 6px; border-radius: 3px; background: color-mix(in srgb, var(--onnxpipe-muted, #6b7280) 25%, transparent); overflow: hidden; }
.bar > div { height: 100%; width: 0; background: var(--onnxpipe-accent, #2563eb); transition: width .2s; }
.bar.indeterminate > div { width: 30%; animation: slide 1.2s infinite linear; }
@keyframes slide { from { transform: translateX(-100%); } to { transform: translateX(340%); } }
.status { font-size: .85em; color: var(--onnxpipe-muted, #6b7280); }
.status.error { color: #b91c1c; }
audio { display: block; width: 100%; }
`;
