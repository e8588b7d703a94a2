"""Chatterbox-Turbo glue that pipeline.json can't declare (see README.md).

1. First language_model step: the voice's ``audio_features`` go before the text embeddings,
   and the step grows by that many positions, so KV cache, attention mask and position ids
   count them.
2. The repetition penalty covers [START] + the generated speech ids (START is never fed).
3. conditional_decoder gets ``audio_tokens`` ++ generated ids (START/STOP dropped) ++ silence.

Without speech_encoder (an optional session), its outputs are pipeline inputs the caller
gives (a precomputed voice), so they are read from the call's inputs instead.

Engine tensors only go through the plugin context: this runs in Pyodide too (no numpy).
"""

from onnxpipe.errors import InputError

VOICE = "speech_encoder"


class ChatterboxGlue:
    reads = (f"{VOICE}.audio_features", f"{VOICE}.audio_tokens")

    def __init__(self, context):
        tokens = context.spec.tokens
        self.ctx = context
        self.start = tokens.bos
        self.drop = {tokens.bos, *tokens.eos}
        self.tail = [int(tokens.extra["silence"])] * int(tokens.extra["silence_count"])
        lm = context.sessions["language_model"]
        self.embeds_dtype = lm.inputs["inputs_embeds"].dtype
        self.provider = lm.provider
        self.tokens_dtype = context.sessions["conditional_decoder"].inputs["speech_tokens"].dtype

    # ---- hooks ----------------------------------------------------------------------------

    def before_run(self, call):
        if call.session == "language_model" and call.context.past_length == 0:
            self._prepend_voice(call)
        elif call.session == "conditional_decoder":
            self._speech_tokens(call)

    def penalty_ids(self, history, generated):
        # history holds the text ids, which are no speech ids; the reference seeds with START
        return [self.start, *generated]

    # ---- glue -----------------------------------------------------------------------------

    def _prepend_voice(self, call):
        if self.ctx.has_session(VOICE):
            frames, made = self.ctx.output(VOICE, "audio_features"), False
        else:
            values, shape = self._given(call, "audio_features")
            frames, made = self.ctx.tensor(values, self.embeds_dtype, shape), True
        count = self.ctx.shape(frames)[1]
        text = call.feeds["inputs_embeds"]
        call.feeds["inputs_embeds"] = self.ctx.concat([frames, text], 1, self.embeds_dtype, self.provider)
        call.context.new_length += count
        if made:
            self.ctx.dispose(frames)

    def _speech_tokens(self, call):
        if self.ctx.has_session(VOICE):
            prompt = self.ctx.to_list(self.ctx.output(VOICE, "audio_tokens"))
        else:
            prompt = self._given(call, "audio_tokens")[0]
        generated = call.inputs["generated_ids"][0]   # the loop always gives them at final
        ids = [int(t) for t in prompt] + [int(t) for t in generated if t not in self.drop] + self.tail
        call.feeds["speech_tokens"] = self.ctx.tensor(ids, self.tokens_dtype, (1, len(ids)))

    @staticmethod
    def _given(call, name):
        if name not in call.inputs:
            raise InputError(f'no "{VOICE}" session in this bundle, so the voice comes from the caller: '
                             f'pass inputs={{"{name}": (values, shape)}} (with audio_features, '
                             "audio_tokens, speaker_embeddings and speaker_features)")
        return call.inputs[name]


def create(context):
    return ChatterboxGlue(context)
