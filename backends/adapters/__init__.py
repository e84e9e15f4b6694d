"""Worker-side adapters: each wraps one system under test behind compile and run."""
