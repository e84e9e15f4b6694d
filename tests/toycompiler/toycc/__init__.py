"""toycc: a toy ONNX compiler, the system under test of fuzzbot's bisection tests."""

from .compiler import LEVELS, Program, compile_graph
from .graph import Graph, Node, load_graph

__version__ = "0.1.0"

__all__ = ["LEVELS", "Graph", "Node", "Program", "__version__", "compile_graph", "load_graph"]
