"""A tiny vision-language model with random weights, made offline for the real-vLLM image tests
(tests/backends/test_vllm_images.py): no vision model can be downloaded here, so one is built from configs
with transformers and saved as a model folder that vLLM loads like any other.

Architecture: ``Idefics3ForConditionalGeneration``, the one SmolVLM (the small vision models
for CPUs) uses. LLaVA, Qwen2-VL and most other vision models are no choice here: vLLM imports
torchvision for them, which scripts/setup.sh removes on CPU machines (PyPI's build does not import
against torch's +cpu build). A SigLIP-style vision tower sees 32x32 images in 4x4 patches (64
patches, merged 2x2 by the connector: 16 image tokens); the text model is a 2-layer Llama; the
tokenizer is a byte-level BPE trained here on a few sentences, with ChatML's special tokens and
Idefics3's image tokens. The chat template renders a string content or OpenAI content parts, an
image part as ``<image>``, which the processor expands to ``<fake_token_around_image><global-img>``
+ 16 x ``<image>`` + ``<fake_token_around_image>`` (no image splitting). About 2 MB; its texts are
noise, its token counts real.
"""

from __future__ import annotations

from pathlib import Path

IMAGE_SIZE = 32
PATCH = 4
SCALE = 2
IMAGE_SEQ_LEN = (IMAGE_SIZE // PATCH) ** 2 // SCALE**2  # <image> tokens per image: 16
IMAGE_TOKENS = IMAGE_SEQ_LEN + 3  # and the two <fake_token_around_image> and <global-img> around them

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string -%}{{ message['content'] }}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] in ('image', 'image_url') -%}{{ '<image>' }}"
    "{%- elif part['type'] == 'text' -%}{{ part['text'] }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{ '<|im_end|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)
SPECIAL = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<image>",
    "<fake_token_around_image>",
    "<global-img>",
    "<end_of_utterance>",
] + [f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)]
CORPUS = [
    "You are a helpful assistant. Answer the question about the image.",
    "How many apples are in the picture? Give your final answer as a number.",
    "These are the answers of the other agents. Using their reasoning, give an updated answer.",
    "What is 17 + 25? The answer is 42. Think step by step and explain your reasoning.",
]


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=448,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 4, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=None, eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token=None
    )


def _text_config(tokenizer, **sizes):
    from transformers import LlamaConfig

    shape = dict(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=2048,
    )
    shape.update(sizes)
    return LlamaConfig(
        **shape,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def build_tiny_text_model(folder: Path, seed: int = 0, dtype: str = "float32", **sizes) -> Path:
    """The text model alone (``LlamaForCausalLM``, same tokenizer and chat template): what a
    text-only model folder looks like to vLLM.

    ``sizes`` override the config's shape (``hidden_size``, ``num_hidden_layers``, ...); a
    ``vocab_size`` above the tokenizer's gives the model ids that decode to nothing, and the
    sampler a realistic vocabulary. ``dtype``: the weights' type on disk.
    """
    import torch
    from transformers import LlamaForCausalLM

    tokenizer = _tokenizer()
    tokenizer.chat_template = CHAT_TEMPLATE
    torch.manual_seed(seed)
    model = LlamaForCausalLM(_text_config(tokenizer, **sizes)).eval()
    model.to(getattr(torch, dtype)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return Path(folder)


def build_tiny_vlm(folder: Path, seed: int = 0) -> Path:
    """Write the tiny model folder (weights, config, tokenizer, processor) to ``folder``."""
    import torch
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration, Idefics3Processor, Idefics3VisionConfig
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    folder = Path(folder)
    tokenizer = _tokenizer()
    text = _text_config(tokenizer)
    vision = Idefics3VisionConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=IMAGE_SIZE,
        patch_size=PATCH,
    )
    config = Idefics3Config(
        vision_config=vision,
        text_config=text,
        scale_factor=SCALE,
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    Idefics3ForConditionalGeneration(config).eval().save_pretrained(folder)
    images = Idefics3ImageProcessorPil(
        do_image_splitting=False, size={"longest_edge": IMAGE_SIZE}, max_image_size={"longest_edge": IMAGE_SIZE}
    )
    processor = Idefics3Processor(
        image_processor=images, tokenizer=tokenizer, image_seq_len=IMAGE_SEQ_LEN, chat_template=CHAT_TEMPLATE
    )
    processor.save_pretrained(folder)
    return folder
