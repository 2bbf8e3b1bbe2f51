"""The run the report's tests look at is `demo`, `make demo`'s pipeline made once per session.
It is defined in tests/conftest.py, a parent of this folder, so these tests get it from there
and share the one run with the docs' sample checks (tests/test_doc_samples.py); importing it
here as well would register it a second time, and run the pipeline twice in one session."""
