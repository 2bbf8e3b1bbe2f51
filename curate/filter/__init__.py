"""Stage 2: remove the faults LLM-generated data is known for, recording why each drop happened."""
