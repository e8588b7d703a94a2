// onnxpipe's public surface: an OpenAI-shaped engine over the in-browser runtime.
export { createEngine, Engine, type EngineOptions, type EngineStorage, type Model, type ModelLoadOptions, type Progress } from './engine';
export { AbortError, InputError, ModelNotFoundError, OnnxpipeError, type OnnxpipeErrorKind } from './errors';
export type { ChatParams, OnnxpipeChatExtras } from './chat-params';
export type { OnnxpipeChatCompletion, OnnxpipeChatCompletionChunk, OnnxpipeChatStats, RequestOptions } from './chat';
export type { SpeechAudioDelta, SpeechAudioDone, SpeechParams, SpeechStreamEvent, TranscriptionParams, TranscriptionStreamEvent, TranscriptTextDelta, TranscriptTextDone } from './audio';
export type { ListenEvent, ListenParams, Listening, SpeechStarted, SpeechStopped } from './listen';
