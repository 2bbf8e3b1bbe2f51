"""Turn a GGUF file into a Hugging Face model folder that vLLM can serve.

vLLM's CPU build loads Hugging Face folders; the bundled model ships as GGUF. This script
runs under vLLM's own Python (it needs transformers, gguf and safetensors, which curate's
environment does not), so it imports nothing from curate:

    VLLM_PYTHON gguf_to_hf.py MODEL.gguf OUT_DIR

The weights are saved de-quantised (bfloat16 safetensors, what vLLM's CPU build computes in). The folder is written beside
``OUT_DIR`` first and renamed into place, so a killed conversion never leaves half a model.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path


def convert(gguf: Path, out: Path) -> None:
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.bfloat16)
    # transformers refuses to save a model it loaded from GGUF; its weights are already
    # de-quantised in memory, so write them and a config without the quantisation note.
    tied = bool(getattr(model.config, "tie_word_embeddings", False))
    weights = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()
               if not (tied and k == "lm_head.weight")}
    save_file(weights, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    tokenizer.save_pretrained(str(tmp))
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    config["architectures"] = [type(model).__name__]
    config["torch_dtype"] = "bfloat16"
    (tmp / "config.json").write_text(json.dumps(config, indent=1))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: gguf_to_hf.py MODEL.gguf OUT_DIR")
    convert(Path(sys.argv[1]), Path(sys.argv[2]))
