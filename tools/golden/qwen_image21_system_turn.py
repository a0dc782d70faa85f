"""Checks the system-turn drop of Qwen-Image-2.1's prompt encoding through the real Qwen3-VL processor config.

The pipeline (diffusers pipeline_qwenimage21.py at 0a1f3676, __init__) drops
len(processor.apply_chat_template([{"role": "system", "content": [{"type": "text", "text": SYS}]}], tokenize=True)[0])
leading tokens; Kiln counts the tokens of the raw system turn (src/models/qwen_image21/text-encoder.ts). This prints
both, on Qwen3VLProcessor loaded from the stock Qwen3-VL processor files (shared/upstream/minimax-h3/processor/ plus
the tokenizer's vocab.json + merges.txt; byte-identical to Qwen3-VL-4B-Instruct's), and fails unless they agree and
are 14. Run in the reference lab:

  cd /work/main && bash ../shared/tools/reflab/run.sh -u proc=/work/shared/upstream/minimax-h3/processor \\
      -u tok=/work/shared/upstream/minimax-h3/tokenizer -- python3 /project/tools/golden/qwen_image21_system_turn.py
"""
import argparse
import os
import shutil
import tempfile

from transformers import AutoProcessor

SYS_PROMPT = "Comprehend and analyze the provided prompt."


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--processor", default="/upstream/proc")
    ap.add_argument("--tokenizer", default="/upstream/tok", help="folder with vocab.json and merges.txt")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        for src in (a.processor, a.tokenizer):
            for f in os.listdir(src):
                shutil.copy(os.path.join(src, f), d)
        proc = AutoProcessor.from_pretrained(d)
    message = [{"role": "system", "content": [{"type": "text", "text": SYS_PROMPT}]}]
    chat = proc.apply_chat_template(message, tokenize=True, return_dict=False)[0]
    raw = proc.tokenizer(f"<|im_start|>system\n{SYS_PROMPT}<|im_end|>\n")["input_ids"]
    template = proc.tokenizer(f"<|im_start|>system\n{SYS_PROMPT}<|im_end|>\n<|im_start|>user\n"
                              "<image1><|vision_start|><|image_pad|><|vision_end|>a cat<|im_end|>\n"
                              "<|im_start|>assistant\n")["input_ids"]
    print(f"{type(proc).__name__} / {type(proc.tokenizer).__name__}")
    print(f"apply_chat_template(system message): {len(chat)} tokens {list(chat)}")
    print(f"raw system turn:                     {len(raw)} tokens {raw}")
    print(f"prefix of the whole template: {template[:len(raw)] == raw}; '<image1>' -> {proc.tokenizer.tokenize('<image1>')}")
    assert list(chat) == raw and len(raw) == 14 and template[:len(raw)] == raw


if __name__ == "__main__":
    main()
