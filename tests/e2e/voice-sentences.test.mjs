// The voice page's sentence splitter (web/src/voice/sentences.ts): streamed reply text comes
// out as whole sentences, the same however the stream is cut, each as soon as it is complete.
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { runnerImport } from 'vite';
import { ROOT } from './lib/browser.mjs';

const { module: m } = await runnerImport(path.join(ROOT, 'web', 'src', 'voice', 'sentences.ts'));

const TEXT = 'The capital of France is Paris. It has 2.1 million people, e.g. in the city itself! '
  + 'Dr. Smith said "it is lovely." Is it? Yes…\nThings to see:\n1. The Louvre\n2. The Eiffel Tower\nEnjoy';
const SENTENCES = [
  'The capital of France is Paris.', 'It has 2.1 million people, e.g. in the city itself!',
  'Dr. Smith said "it is lovely."', 'Is it?', 'Yes…', 'Things to see:', '1. The Louvre', '2. The Eiffel Tower', 'Enjoy',
];

/** Push ``text`` in pieces of ``step`` characters; each sentence with the length pushed when it came out. */
function split(text, step, options) {
  const s = new m.SentenceSplitter(options);
  const out = [];
  for (let i = 0; i < text.length; i += step) {
    for (const sentence of s.push(text.slice(i, i + step))) out.push({ sentence, pushed: Math.min(text.length, i + step) });
  }
  for (const sentence of s.flush()) out.push({ sentence, pushed: text.length });
  return out;
}

test('the same sentences whatever the stream pieces', () => {
  for (const step of [1, 2, 3, 7, 1000]) assert.deepEqual(split(TEXT, step).map((x) => x.sentence), SENTENCES, `step ${step}`);
});

test('a sentence comes out as soon as the character after its end arrives', () => {
  const out = split(TEXT, 1);
  const first = out[0];
  // "The capital of France is Paris." + the space that confirms the end
  assert.equal(first.pushed, 'The capital of France is Paris. '.length);
  assert.equal(out[1].pushed, TEXT.indexOf('Dr.'));
});

test('an unfinished sentence waits for the stream end', () => {
  const s = new m.SentenceSplitter();
  assert.deepEqual(s.push('Paris is the capital'), []);
  assert.deepEqual(s.push('.'), [], 'a full stop alone does not decide: "3.14" or "etc.," may follow');
  assert.deepEqual(s.flush(), ['Paris is the capital.']);
  assert.deepEqual(s.flush(), []);
});

test('a run-on sentence is cut at its last clause break past maxChars', () => {
  const long = 'First part of a long list of things, second part of it, third part that goes on and on; and more words follow here';
  const out = split(long, 1, { maxChars: 60 }).map((x) => x.sentence);
  assert.ok(out.length >= 2, JSON.stringify(out));
  assert.ok(out.slice(0, -1).every((s) => /[,;:]$/.test(s)), JSON.stringify(out));
  assert.equal(out.join(' '), long);
});

test('the first piece may be cut sooner (firstMaxChars), the later ones are not', () => {
  const text = 'The capital of friends is often misunderstood as "Awesome" or "Friend\'s City," but in reality, it is the city itself. '
    + 'In many languages, such as English and Spanish, the capital can be translated literally. Done.';
  const out = split(text, 1, { firstMaxChars: 40 }).map((x) => x.sentence);
  assert.equal(out[0], 'The capital of friends is often misunderstood as "Awesome" or "Friend\'s City,"');
  assert.equal(out[1], 'but in reality, it is the city itself.');
  assert.equal(out[2], 'In many languages, such as English and Spanish, the capital can be translated literally.');
  assert.equal(out.join(' '), text.trim());
});

test('the first piece goes out at its first clause break past firstClauseMinChars', () => {
  const text = 'Sure, the capital of France is Paris, a city of light, art and food. It is big, and old.';
  for (const step of [1, 3, 7]) {
    const out = split(text, step, { firstMaxChars: 40, firstClauseMinChars: 20 });
    // "Sure," is too short to say alone; the clause after it is not
    assert.deepEqual(out.map((x) => x.sentence), ['Sure, the capital of France is Paris,', 'a city of light, art and food.', 'It is big, and old.'], `step ${step}`);
    if (step === 1) assert.equal(out[0].pushed, 'Sure, the capital of France is Paris, '.length, 'out as soon as the break is confirmed');
  }
  // text that arrives with its sentence already complete goes out as that sentence
  assert.equal(split(text, 1000, { firstClauseMinChars: 20 })[0].sentence, 'Sure, the capital of France is Paris, a city of light, art and food.');
  // a sentence that ends before any long-enough clause goes out whole, as before
  assert.deepEqual(split('Yes, it is. Then more.', 1, { firstClauseMinChars: 20 }).map((x) => x.sentence), ['Yes, it is.', 'Then more.']);
});

test('a first piece with no break within firstWordCutChars is cut at a word, never inside one', () => {
  const options = { firstMaxChars: 40, firstClauseMinChars: 20, firstWordCutChars: 40 };
  const text = 'The sky appears blue because of a process called Rayleigh scattering. It scatters blue light, mostly.';
  for (const step of [1, 2, 3, 7, 1000]) {
    const out = split(text, step, options);
    assert.deepEqual(out.map((x) => x.sentence), ['The sky appears blue because of a', 'process called Rayleigh scattering.', 'It scatters blue light, mostly.'], `step ${step}`);
    if (step === 1) assert.equal(out[0].pushed, 41, 'out once the 41st character shows no break came within 40');
  }
  // leading spaces (a streamed reply's first token) do not count
  assert.equal(split(`  ${text}`, 1, options)[0].sentence, 'The sky appears blue because of a');
  // a sentence or clause that ends within the bound goes out as before; the later pieces are not cut at words
  const short = 'Sure, the capital of France is Paris, a city of light, art and food and of a great many old bridges over its river.';
  assert.deepEqual(split(short, 1, options).map((x) => x.sentence),
    ['Sure, the capital of France is Paris,', 'a city of light, art and food and of a great many old bridges over its river.']);
  assert.deepEqual(split('Yes, it is. Then more.', 1, options).map((x) => x.sentence), ['Yes, it is.', 'Then more.']);
  // a clause break past the bound loses to the word cut
  const late = 'Photosynthesis converts the energy of sunlight, water and carbon dioxide into sugar.';
  assert.equal(split(late, 1, options)[0].sentence, 'Photosynthesis converts the energy of');
  assert.equal(split(late, 1000, options)[0].sentence, 'Photosynthesis converts the energy of');
});

test('a word cut leaves at least three words before it', () => {
  const options = { firstWordCutChars: 20 };
  const text = 'Pneumonoultramicroscopicsilicovolcanoconiosis disease, caused by silica dust inhalation over years.';
  for (const step of [1, 5, 1000]) {
    const out = split(text, step, options).map((x) => x.sentence);
    assert.equal(out[0], 'Pneumonoultramicroscopicsilicovolcanoconiosis disease, caused', `step ${step}`);
    assert.equal(out.join(' '), text);
  }
  // without a space after the third word yet, nothing goes out
  const s = new m.SentenceSplitter(options);
  assert.deepEqual(s.push('Antidisestablishmentarianism is verylongwordthatgoeson'), []);
  assert.deepEqual(s.push(' and'), ['Antidisestablishmentarianism is verylongwordthatgoeson']);
});

test('speakable drops markdown a voice should not read', () => {
  assert.equal(m.speakable('**Paris** is the `capital`.'), 'Paris is the capital.');
  assert.equal(m.speakable('- a [link](http://x.y) here'), 'a link here');
  assert.equal(m.speakable('## Heading'), 'Heading');
  assert.equal(m.speakable('2. The Eiffel Tower'), 'The Eiffel Tower');
});
