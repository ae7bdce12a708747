"""Memory accounting: model states, activations, pipeline in-flight micro-batches, overheads."""
