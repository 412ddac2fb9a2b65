"""Tiny-config model testers for transformers' own ModelTesterMixin.

bench_client_suite.py copies this file into the `tests/models/` folder of the
transformers source distribution (which ships `test_modeling_common.py` but not
the per-model test files) and runs it with pytest, once on npu and once on cpu.
The testers follow the shape of transformers' `tests/models/*/test_modeling_*.py`:
a ModelTester that builds a tiny random config and inputs, and a TestCase that
mixes in ModelTesterMixin. Nothing is downloaded: every model is built from its
config with random weights.
"""

import unittest

from transformers import (
    BertConfig,
    GPT2Config,
    LlamaConfig,
    MistralConfig,
    Qwen2Config,
    T5Config,
    is_torch_available,
)
from transformers.testing_utils import require_torch, torch_device

from ..generation.test_utils import GenerationTesterMixin
from ..test_modeling_common import ModelTesterMixin, ids_tensor, random_attention_mask

if is_torch_available():
    import torch
    import transformers


def _classes(*names):
    """The model classes of this transformers build that exist (names vary a little between versions)."""
    return tuple(getattr(transformers, n) for n in names if hasattr(transformers, n))


class TinyModelTester:
    """Builds a tiny config and random inputs; `config_kwargs` maps the family's own argument names."""

    def __init__(self, parent, config_class, config_kwargs, batch_size=2, seq_length=7, vocab_size=99,
                 hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_labels=3, num_choices=4,
                 use_token_type_ids=False, type_vocab_size=16):
        self.parent = parent
        self.config_class = config_class
        self.config_kwargs = config_kwargs
        self.batch_size = batch_size
        self.seq_length = seq_length
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_labels = num_labels
        self.num_choices = num_choices
        self.use_token_type_ids = use_token_type_ids
        self.type_vocab_size = type_vocab_size
        self.is_training = True

    def get_config(self):
        return self.config_class(**self.config_kwargs)

    def prepare_config_and_inputs_for_common(self):
        input_ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size)
        inputs = {"input_ids": input_ids,
                  "attention_mask": random_attention_mask([self.batch_size, self.seq_length])}
        if self.use_token_type_ids:
            inputs["token_type_ids"] = ids_tensor([self.batch_size, self.seq_length], self.type_vocab_size)
        return self.get_config(), inputs


def _decoder_kwargs():
    # One config for the Llama family (Llama, Mistral, Qwen2): GQA with 2 key/value heads.
    return dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, intermediate_size=37, max_position_embeddings=512,
                pad_token_id=0, bos_token_id=1, eos_token_id=2)


class _DecoderFamilyTest(ModelTesterMixin, GenerationTesterMixin):
    config_class = None

    def setUp(self):
        self.model_tester = TinyModelTester(self, self.config_class, _decoder_kwargs())


def _decoder_classes(prefix):
    heads = ("Model", "ForCausalLM", "ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering")
    return _classes(*(prefix + head for head in heads))


@require_torch
class LlamaTinyTest(_DecoderFamilyTest, unittest.TestCase):
    config_class = LlamaConfig
    all_model_classes = _decoder_classes("Llama")


@require_torch
class MistralTinyTest(_DecoderFamilyTest, unittest.TestCase):
    config_class = MistralConfig
    all_model_classes = _decoder_classes("Mistral")


@require_torch
class Qwen2TinyTest(_DecoderFamilyTest, unittest.TestCase):
    config_class = Qwen2Config
    all_model_classes = _decoder_classes("Qwen2")


@require_torch
class GPT2TinyTest(ModelTesterMixin, GenerationTesterMixin, unittest.TestCase):
    # GPT2DoubleHeadsModel needs multiple-choice inputs the common tester does not build; left out.
    all_model_classes = _classes("GPT2Model", "GPT2LMHeadModel", "GPT2ForSequenceClassification",
                                 "GPT2ForTokenClassification", "GPT2ForQuestionAnswering")

    def setUp(self):
        kwargs = dict(vocab_size=99, n_embd=32, n_layer=2, n_head=4, n_inner=37, n_positions=512,
                      pad_token_id=98, bos_token_id=98, eos_token_id=98)
        self.model_tester = TinyModelTester(self, GPT2Config, kwargs, use_token_type_ids=True)



@require_torch
class BertTinyTest(ModelTesterMixin, GenerationTesterMixin, unittest.TestCase):
    all_model_classes = _classes("BertModel", "BertForMaskedLM", "BertForMultipleChoice",
                                 "BertForNextSentencePrediction", "BertForPreTraining",
                                 "BertForQuestionAnswering", "BertForSequenceClassification",
                                 "BertForTokenClassification", "BertLMHeadModel")

    def setUp(self):
        kwargs = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=37, max_position_embeddings=64, type_vocab_size=16,
                      is_decoder=False)
        self.model_tester = TinyModelTester(self, BertConfig, kwargs, use_token_type_ids=True)

    def _prepare_for_class(self, inputs_dict, model_class, return_labels=False):
        # Like transformers' own Bert tester: pre-training takes both of its heads' labels.
        inputs_dict = super()._prepare_for_class(inputs_dict, model_class, return_labels=return_labels)
        if return_labels and model_class.__name__ == "BertForPreTraining":
            tester = self.model_tester
            inputs_dict["labels"] = torch.zeros((tester.batch_size, tester.seq_length), dtype=torch.long,
                                                device=torch_device)
            inputs_dict["next_sentence_label"] = torch.zeros(tester.batch_size, dtype=torch.long,
                                                             device=torch_device)
        return inputs_dict



class TinySeq2SeqTester(TinyModelTester):
    """Encoder and decoder inputs of the same length, as transformers' T5 tester builds them."""

    def __init__(self, parent, config_class, config_kwargs, decoder_seq_length=7, **kwargs):
        super().__init__(parent, config_class, config_kwargs, **kwargs)
        self.encoder_seq_length = self.seq_length
        self.decoder_seq_length = decoder_seq_length

    def prepare_config_and_inputs_for_common(self):
        config, inputs = super().prepare_config_and_inputs_for_common()
        # Every example ends with </s> (id 1) and holds no other, as T5's tester makes them.
        inputs["input_ids"] = inputs["input_ids"].clamp(2)
        inputs["input_ids"][:, -1] = 1
        inputs["decoder_input_ids"] = ids_tensor([self.batch_size, self.decoder_seq_length], self.vocab_size)
        inputs["decoder_attention_mask"] = random_attention_mask([self.batch_size, self.decoder_seq_length])
        return config, inputs


@require_torch
class T5TinyTest(ModelTesterMixin, GenerationTesterMixin, unittest.TestCase):
    is_encoder_decoder = True
    # T5EncoderModel takes no decoder inputs and T5ForQuestionAnswering its own; the common tester
    # builds neither. T5ForSequenceClassification refuses inputs_embeds, which the common tests pass.
    all_model_classes = _classes("T5Model", "T5ForConditionalGeneration")

    def setUp(self):
        kwargs = dict(vocab_size=99, d_model=32, d_ff=37, d_kv=8, num_layers=2, num_heads=4,
                      relative_attention_num_buckets=8, dropout_rate=0.1, initializer_factor=0.002,
                      eos_token_id=1, pad_token_id=0, decoder_start_token_id=0)
        self.model_tester = TinySeq2SeqTester(self, T5Config, kwargs)
