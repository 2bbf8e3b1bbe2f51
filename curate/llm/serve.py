"""``curate serve``: start vLLM with settings that suit batch generation, and stop it cleanly.

Generation sends thousands of prompts that share long prefixes (the same template) and
ask for JSON: prefix caching, a grammar backend for structured output, and a large
number of concurrent sequences keep the GPU busy.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys

from curate.errors import CurateError
from curate.llm.readiness import wait_until_up


def vllm_command(model: str, port: int, max_num_seqs: int, tensor_parallel: int,
                 max_model_len: int | None, extra: tuple[str, ...]) -> list[str]:
    exe = shutil.which("vllm")
    if exe is None:
        raise CurateError("vLLM is not installed here: `pip install vllm` on a machine with a GPU, "
                          "or run without --base-url to use the embedded CPU model")
    cmd = [
        exe, "serve", model,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--enable-prefix-caching",
        "--structured-outputs-config", '{"backend": "xgrammar"}',
        "--max-num-seqs", str(max_num_seqs),
        "--tensor-parallel-size", str(tensor_parallel),
        "--generation-config", "vllm",  # sampling defaults come from curate's requests, not the model card
    ]
    if max_model_len:
        cmd += ["--max-model-len", str(max_model_len)]
    return cmd + list(extra)


def gpu_present() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def serve(model: str, port: int, max_num_seqs: int, tensor_parallel: int,
          max_model_len: int | None, extra: tuple[str, ...], start_timeout: float) -> None:
    cmd = vllm_command(model, port, max_num_seqs, tensor_parallel, max_model_len, extra)
    if not gpu_present():
        raise CurateError("no NVIDIA GPU found (nvidia-smi lists none): vLLM needs one; "
                          "without --base-url curate uses the embedded CPU model instead")
    base_url = f"http://127.0.0.1:{port}/v1"
    proc = subprocess.Popen(cmd)
    try:
        wait_until_up(f"{base_url}/models", proc, start_timeout, "vLLM", interval=2.0)
        print(base_url, flush=True)
        print(f"serving {model}; generate with --base-url {base_url} --model {model}; Ctrl-C stops it",
              file=sys.stderr, flush=True)
        proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
