"""The dataset loader: Step Functions tasks (prepare, write_chunk, activate) and a local driver."""
