"""Child process of ``EmbeddedServer``: serve one GGUF model until stdin closes."""

from __future__ import annotations

import argparse
import json
import sys


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-path", required=True)
    ap.add_argument("--alias", default="local")
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=16384)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model_path
    params.model_alias = args.alias
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # the OS picks a free port; we report what it chose
    params.n_parallel = args.parallel
    params.n_ctx = args.ctx
    params.cont_batching = True
    params.cache_prompt = True
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    server = xllamacpp.Server(params)
    address = server.listening_address.rstrip("/")
    sys.stdout.write(json.dumps({"base_url": f"{address}/v1"}) + "\n")
    sys.stdout.flush()
    try:
        sys.stdin.read()  # blocks until the parent closes the pipe or dies
    except KeyboardInterrupt:
        pass
    del server


if __name__ == "__main__":
    main()
