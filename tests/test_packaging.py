"""An installed wheel works like a checkout: templates, specs and banks travel inside it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import REPO, read_jsonl


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp / "dist"), str(REPO)],
                   check=True, capture_output=True)
    wheels = list((tmp / "dist").glob("curate-*.whl"))
    assert len(wheels) == 1
    target = tmp / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheels[0])],
                   check=True, capture_output=True)
    env = dict(os.environ, PYTHONPATH=str(target))
    env.pop("OPENAI_BASE_URL", None)
    return target, env, tmp


def _py(code: str, env, cwd):
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True, check=True)


def test_wheel_carries_resources(installed):
    target, env, tmp = installed
    code = (
        "import curate, json; from curate.core.resources import resource_dir; from curate.llm.taskspec import list_families, load_spec;"
        "print(json.dumps({'pkg': curate.__file__, 'prompts': str(resource_dir('prompts')),"
        "'families': list_families(), 'banks': sorted(p.name for p in (resource_dir('data')/'banks').iterdir()),"
        "'languages': len(__import__('curate.generate.languages', fromlist=['x']).shipped_pool().codes)}))"
    )
    info = json.loads(_py(code, env, tmp).stdout)
    assert info["pkg"].startswith(str(target)), "the wheel's copy is the one imported"
    assert info["prompts"].startswith(str(target))
    assert {"short-long", "long-short", "short-short", "long-long", "sts", "bitext"} <= set(info["families"])
    assert {"topics.txt", "entities.txt"} <= set(info["banks"])
    assert info["languages"] == 93, "data/languages.tsv, the pool of generate --languages"


@pytest.mark.e2e
def test_installed_wheel_generates_with_the_bundled_model(installed):
    target, env, tmp = installed
    out = tmp / "run"
    proc = subprocess.run([sys.executable, "-m", "curate", "generate", "--task", "sts", "-n", "1", "--out", str(out)],
                          env=env, cwd=tmp, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    ended = read_jsonl(out / "generated.jsonl") + read_jsonl(out / "failed.jsonl")
    assert len(ended) == 1
    assert (target / "curate" / "_resources" / "prompts" / "generate" / "sts.j2").exists()
