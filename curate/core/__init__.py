"""What every stage stands on: the record schema, JSONL I/O, the run folder (staging, lock,
run.json, rejections), and user-facing errors."""
