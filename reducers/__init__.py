"""Delta-debugging reduction of failing models (to come: generic ddmin and ONNX passes)."""
