"""Identity nodes between two other nodes are dropped: their reader reads the source."""

from __future__ import annotations

import onnx


def drop_identity(graph: onnx.GraphProto) -> int:
    outputs = {o.name for o in graph.output}
    dropped = 0
    for node in list(graph.node):
        if node.op_type != "Identity" or node.output[0] in outputs:
            continue
        source, target = node.input[0], node.output[0]
        for reader in graph.node:
            for i, name in enumerate(reader.input):
                if name == target:
                    reader.input[i] = source
        graph.node.remove(node)
        dropped += 1
    return dropped
