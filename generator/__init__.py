"""Valid-by-construction ONNX model generation (NNSmith-style graph growth)."""
